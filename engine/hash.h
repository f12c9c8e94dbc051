// FNV-1a, 64 bits: the hash of the UCI sentiment and CMUdict splits, and the checksum of older
// safetensors files (DESIGN.md "Real data"). Small, and any single flipped bit changes it. mix64: a
// finaliser for the splits of a user's data.
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

// MurmurHash3's 64-bit finaliser: every bit of `hash` moves every bit of the result. A hash taken
// modulo a small even number (a split's % 10) needs it after FNV-1a, whose low bits are weak: its
// lowest is only the parity of the bytes' lowest bits.
inline uint64_t mix64(uint64_t hash) {
  hash ^= hash >> 33;
  hash *= 0xff51afd7ed558ccdULL;
  hash ^= hash >> 33;
  hash *= 0xc4ceb9fe1a85ec53ULL;
  return hash ^ (hash >> 33);
}

}  // namespace ag
