// Element types. f32 and f64 are differentiable; i64 (indices) and b8 (masks) are not; bf16 is
// storage for mixed precision (the products' operands under AutocastGuard, engine/autocast.h).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "engine/error.h"

namespace ag {

enum class DType : uint8_t { f32, f64, i64, b8, bf16 };

// f32's top 16 bits rounded to nearest, ties to even, bit-exact with PyTorch 1.13's
// .to(torch.bfloat16) of a contiguous tensor: ±inf and subnormals round like any other value (a
// subnormal stays subnormal), and every NaN becomes 0xFFFF, as its vectorised kernel writes (its
// scalar path, for strided tensors, writes 0x7FC0).
constexpr uint16_t bf16_bits_from_f32(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if (value != value) return 0xFFFF;
  return static_cast<uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
}
constexpr float f32_from_bf16_bits(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

// One bf16 element: the top half of an f32 (8 exponent bits, 7 mantissa bits). Converts to and
// from arithmetic types through f32 (from f32 by round-to-nearest-even).
struct BFloat16 {
  uint16_t bits = 0;
  constexpr BFloat16() = default;
  template <typename T>
  requires std::is_arithmetic_v<T>
  constexpr explicit BFloat16(T value) : bits(bf16_bits_from_f32(static_cast<float>(value))) {}
  template <typename T>
  requires std::is_arithmetic_v<T>
  constexpr explicit operator T() const { return static_cast<T>(f32_from_bf16_bits(bits)); }
};
static_assert(sizeof(BFloat16) == 2);

constexpr std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::i64:
      return "i64";
    case DType::b8:
      return "b8";
    case DType::bf16:
      return "bf16";
  }
  return "?";
}

constexpr size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return 4;
    case DType::f64:
      return 8;
    case DType::i64:
      return 8;
    case DType::b8:
      return 1;
    case DType::bf16:
      return 2;
  }
  return 0;
}

constexpr bool is_floating(DType dtype) { return dtype == DType::f32 || dtype == DType::f64; }

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::i64;
}
template <>
constexpr DType dtype_of<bool>() {
  return DType::b8;
}
template <>
constexpr DType dtype_of<BFloat16>() {
  return DType::bf16;
}

// Calls f.template operator()<T>() with T the C++ type of a floating dtype:
//   dispatch_floating(x.dtype(), "exp", [&]<typename T>() { ... });
template <typename F>
decltype(auto) dispatch_floating(DType dtype, std::string_view op, F&& f) {
  switch (dtype) {
    case DType::f32:
      return f.template operator()<float>();
    case DType::f64:
      return f.template operator()<double>();
    default:
      fail("{}: expected a floating dtype (f32 or f64), got {}", op, dtype_name(dtype));
  }
}

// Calls f.template operator()<T>() with T the C++ type of any dtype.
template <typename F>
void dispatch_any(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32:
      return f.template operator()<float>();
    case DType::f64:
      return f.template operator()<double>();
    case DType::i64:
      return f.template operator()<int64_t>();
    case DType::b8:
      return f.template operator()<bool>();
    case DType::bf16:
      return f.template operator()<BFloat16>();
  }
}

}  // namespace ag
