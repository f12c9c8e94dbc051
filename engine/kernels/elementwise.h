// The elementwise toolkit: one element in, one element out (or two in, numpy-broadcast), for any
// op family. f is a generic lambda called with T = float or double.
#pragma once

#include <string_view>

#include "engine/kernels/broadcast.h"
#include "engine/kernels/check.h"
#include "engine/kernels/parallel.h"
#include "engine/tensor.h"

namespace ag {

// out[i] = f(x[i]), same dtype.
template <typename F>
Tensor unary_kernel(std::string_view op, const Tensor& x, F f) {
  check_floating(op, "input", x);
  Tensor out = empty(x.shape(), x.dtype());
  dispatch_floating(x.dtype(), op, [&]<typename T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    parallel_for(x.numel(), 8, [&](int64_t i) { po[i] = f(px[i]); });
  });
  return out;
}

// out[i] = f(a[i'], b[i'']) over the broadcast shape.
template <typename F>
Tensor binary_kernel(std::string_view op, const Tensor& a, const Tensor& b, F f) {
  check_floating(op, "input", a);
  check_floating(op, "input", b);
  check_same_dtype(op, a, b);
  Tensor out = empty(broadcast_shapes(op, a.shape(), b.shape()), a.dtype());
  dispatch_floating(a.dtype(), op, [&]<typename T>() {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out.data<T>();
    if (a.shape() == b.shape()) {  // the common case, in a loop the compiler vectorises
      parallel_for_ranges(out.numel(), 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) po[i] = f(pa[i], pb[i]);
      });
      return;
    }
    // One operand repeating along the leading dims of the other (a bias): rows, vectorised.
    if (const int64_t n = a.shape() == out.shape() ? trailing_block(b.shape(), out.shape()) : 0; n > 0) {
      parallel_for_ranges(out.numel() / n, n, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r)
          for (int64_t j = 0; j < n; ++j) po[r * n + j] = f(pa[r * n + j], pb[j]);
      });
      return;
    }
    if (const int64_t n = b.shape() == out.shape() ? trailing_block(a.shape(), out.shape()) : 0; n > 0) {
      parallel_for_ranges(out.numel() / n, n, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r)
          for (int64_t j = 0; j < n; ++j) po[r * n + j] = f(pa[j], pb[r * n + j]);
      });
      return;
    }
    for_each_broadcast<2>(out.shape(), {a.shape(), b.shape()},
                          [&](int64_t i, const std::array<int64_t, 2>& at) { po[i] = f(pa[at[0]], pb[at[1]]); });
  });
  return out;
}

// out[i] = predicate(x[i]) as b8.
template <typename F>
Tensor compare_kernel(std::string_view op, const Tensor& x, F predicate) {
  check_floating(op, "input", x);
  Tensor out = empty(x.shape(), DType::b8);
  dispatch_floating(x.dtype(), op, [&]<typename T>() {
    const T* px = x.data<T>();
    bool* po = out.data<bool>();
    parallel_for(x.numel(), 1, [&](int64_t i) { po[i] = predicate(px[i]); });
  });
  return out;
}

}  // namespace ag
