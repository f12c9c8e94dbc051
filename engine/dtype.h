// Element types. f32 and f64 are differentiable; i64 (indices) and b8 (masks) are not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/error.h"

namespace ag {

enum class DType : uint8_t { f32, f64, i64, b8 };

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
  }
}

}  // namespace ag
