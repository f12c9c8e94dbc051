// The losses' kernels: an elementwise loss over two same-shape tensors, and cross-entropy's
// rows. Accumulation in double, in fixed chunks where it sums (the same bits at any thread count).
#pragma once

#include <cstdint>
#include <string_view>

#include "engine/kernels/parallel.h"
#include "engine/kernels/reduce.h"
#include "engine/options.h"
#include "engine/tensor.h"

namespace ag {

// out = reduce_i f(a[i], b[i]): the elementwise losses for Reduction::none, else their sum
// (scaled by 1/count for mean; 0 elements give NaN, as in PyTorch) as a 0-d tensor.
template <typename F>
Tensor elementwise_loss_kernel(std::string_view op, const Tensor& a, const Tensor& b, Reduction reduction, F f) {
  const int64_t n = a.numel();
  Tensor out = empty(reduction == Reduction::none ? a.shape() : Shape{}, a.dtype());
  dispatch_floating(a.dtype(), op, [&]<typename T>() {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out.data<T>();
    if (reduction == Reduction::none) {
      parallel_for(n, 8, [&](int64_t i) { po[i] = static_cast<T>(f(double(pa[i]), double(pb[i]))); });
      return;
    }
    const double total =
        sums_in_chunks(1, n, 8, [&](int64_t, int64_t i) { return f(double(pa[i]), double(pb[i])); })[0];
    po[0] = static_cast<T>(reduction == Reduction::mean ? total / static_cast<double>(n) : total);
  });
  return out;
}

// -Σ_c q[n, c] log softmax(logits[n])[c] per row (N, C), reduced, with q the target distribution:
// 1 - label_smoothing at target[n] plus label_smoothing / C everywhere (the one-hot when 0). Rows
// whose target is ignore_index contribute 0; `count` is the number of the other rows (the mean's
// divisor). Targets in range.
Tensor cross_entropy_kernel(const Tensor& logits, const Tensor& target, int64_t ignore_index, Reduction reduction,
                            int64_t count, double label_smoothing);

// What cross_entropy's backward needs: the per-row weight of the gradient (N, 1), 0 for ignored
// rows and 1/count (mean) or 1 otherwise; and the target distribution q (N, C) of the kernel above
// (the one-hot without smoothing), zero in ignored rows.
struct CrossEntropyTargets {
  Tensor row_weight;
  Tensor distribution;
};
CrossEntropyTargets cross_entropy_targets(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                                          Reduction reduction, int64_t count, double label_smoothing);

}  // namespace ag
