// The masking ops' kernels: a fill or a choice under a broadcast b8 mask, and a triangle.
#include "engine/kernels/mask.h"

#include "engine/kernels/broadcast.h"

namespace ag {

Tensor masked_fill_kernel(const Tensor& x, const Tensor& mask, double value) {
  Tensor out = empty(x.shape(), x.dtype());
  dispatch_floating(x.dtype(), "masked_fill", [&]<typename T>() {
    const T* px = x.data<T>();
    const bool* pm = mask.data<bool>();
    T* po = out.data<T>();
    const T fill = static_cast<T>(value);
    for_each_broadcast<2>(out.shape(), {x.shape(), mask.shape()},
                          [&](int64_t i, const std::array<int64_t, 2>& at) { po[i] = pm[at[1]] ? fill : px[at[0]]; });
  });
  return out;
}

Tensor where_kernel(const Tensor& condition, const Tensor& a, const Tensor& b, const Shape& shape) {
  Tensor out = empty(shape, a.dtype());
  dispatch_floating(a.dtype(), "where", [&]<typename T>() {
    const bool* pc = condition.data<bool>();
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out.data<T>();
    for_each_broadcast<3>(
        shape, {condition.shape(), a.shape(), b.shape()},
        [&](int64_t i, const std::array<int64_t, 3>& at) { po[i] = pc[at[0]] ? pa[at[1]] : pb[at[2]]; });
  });
  return out;
}

Tensor triangle_kernel(const Tensor& x, int64_t diagonal, bool upper) {
  const int64_t rows = x.size(-2);
  const int64_t cols = x.size(-1);
  Tensor out = empty(x.shape(), x.dtype());
  dispatch_any(x.dtype(), [&]<typename T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    const int64_t total_rows = cols == 0 ? 0 : x.numel() / cols;
    parallel_for(total_rows, cols, [&](int64_t r) {
      const int64_t i = r % rows;  // row within its matrix
      for (int64_t j = 0; j < cols; ++j)
        po[r * cols + j] = (upper ? j - i >= diagonal : j - i <= diagonal) ? px[r * cols + j] : T(0);
    });
  });
  return out;
}

}  // namespace ag
