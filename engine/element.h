// One element of a tensor of any dtype, read or written as a double: for element access, printing and
// the factories that fill from values (not for kernels: they dispatch on the type once).
#pragma once

#include <cstdint>

#include "engine/tensor.h"

namespace ag {

inline double read_element(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::f32:
      return t.data<float>()[i];
    case DType::f64:
      return t.data<double>()[i];
    case DType::i64:
      return static_cast<double>(t.data<int64_t>()[i]);
    case DType::b8:
      return t.data<bool>()[i] ? 1.0 : 0.0;
    case DType::bf16:
      return static_cast<double>(t.data<BFloat16>()[i]);
  }
  return 0;
}

inline void write_element(const Tensor& t, int64_t i, double value) {
  switch (t.dtype()) {
    case DType::f32:
      t.data<float>()[i] = static_cast<float>(value);
      break;
    case DType::f64:
      t.data<double>()[i] = value;
      break;
    case DType::i64:
      t.data<int64_t>()[i] = static_cast<int64_t>(value);
      break;
    case DType::b8:
      t.data<bool>()[i] = value != 0;
      break;
    case DType::bf16:
      t.data<BFloat16>()[i] = BFloat16(value);
      break;
  }
}

}  // namespace ag
