// The input checks every op shares, each message naming the op, the input and what was expected.
#pragma once

#include <string_view>

#include "engine/error.h"
#include "engine/tensor.h"

namespace ag {

// t must be defined; `what` names it in the message ("input", "weight", "q").
inline void check_defined(std::string_view op, std::string_view what, const Tensor& t) {
  AG_CHECK(t.defined(), "{}: the {} is undefined", op, what);
}

// t must be a defined f32 or f64 tensor.
inline void check_floating(std::string_view op, std::string_view what, const Tensor& t) {
  check_defined(op, what, t);
  AG_CHECK(is_floating(t.dtype()), "{}: expected a floating {} (f32 or f64), got {} of shape {}", op, what,
           dtype_name(t.dtype()), shape_str(t.shape()));
}

// a and b must have the same dtype (no implicit promotion).
inline void check_same_dtype(std::string_view op, const Tensor& a, const Tensor& b) {
  AG_CHECK(a.dtype() == b.dtype(), "{}: dtypes differ: {} {} and {} {} (convert one with ag::to)", op,
           dtype_name(a.dtype()), shape_str(a.shape()), dtype_name(b.dtype()), shape_str(b.shape()));
}

}  // namespace ag
