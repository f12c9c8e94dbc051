// FNV-1a, 64 bits: the hash of the UCI sentiment split, and the checksum of older safetensors files
// (DESIGN.md "Real data"). Small, and any single flipped bit changes it.
#pragma once

#include <cstdint>
#include <string_view>

namespace ag {

inline constexpr uint64_t kFnv1a64OffsetBasis = 14695981039346656037ULL;

// Continues `hash` over `bytes`: fnv1a64(b, fnv1a64(a)) is the hash of a followed by b.
inline uint64_t fnv1a64(std::string_view bytes, uint64_t hash = kFnv1a64OffsetBasis) {
  for (char c : bytes) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return hash;
}

}  // namespace ag
