#include "engine/kernels/loss.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/kernels/exp.h"
#include "engine/kernels/reduce.h"

namespace ag {

namespace {

// Σ_j e^(row[j] − max) over a row whose largest value is max, added in double in eight lanes
// (sum_in_lanes). An f32 row's exponentials are taken in f32 (exp_or_zero, which the compiler
// vectorises, where libm's exp is a scalar call per logit, 2% of a charlm step); an f64 row's in
// double.
[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] double sum_exp_below(const float* row, float max,
                                                                                         int64_t n) {
  return sum_in_lanes(
      row, n, [max](double v) __attribute__((always_inline)) {
        return static_cast<double>(kernels::exp_or_zero(static_cast<float>(v) - max));
      });
}
double sum_exp_below(const double* row, double max, int64_t n) {
  return sum_in_lanes(row, n, [max](double v) { return std::exp(v - max); });
}

}  // namespace

Tensor cross_entropy_kernel(const Tensor& logits, const Tensor& target, int64_t ignore_index, Reduction reduction,
                            int64_t count, double label_smoothing) {
  const int64_t rows = logits.size(0);
  const int64_t classes = logits.size(1);
  const int64_t* pt = target.data<int64_t>();
  Tensor out = empty(reduction == Reduction::none ? Shape{rows} : Shape{}, logits.dtype());
  dispatch_floating(logits.dtype(), "cross_entropy", [&]<typename T>() {
    const T* px = logits.data<T>();
    std::vector<double> losses(rows, 0.0);
    parallel_for(rows, 2 * classes, [&](int64_t r) {
      if (pt[r] == ignore_index) return;
      const T* row = px + r * classes;
      T max = row[0];
      for (int64_t j = 1; j < classes; ++j) max = std::max(max, row[j]);
      const double m = max, s = sum_exp_below(row, max, classes);
      // -log_softmax(row)[target] = (max - row[target]) + log Σ: the difference first, as in
      // log_softmax, so that huge logits ([1e300, 1e300, 0]) keep their log 2.
      const double log_sum = std::log(s);
      losses[r] = (m - row[pt[r]]) + log_sum;
      if (label_smoothing == 0) return;
      // PyTorch's form: (1 - ε) · nll + ε · mean_c(-log_softmax(row)[c])
      double smooth = 0;
      for (int64_t j = 0; j < classes; ++j) smooth += (m - row[j]) + log_sum;
      losses[r] = (1 - label_smoothing) * losses[r] + label_smoothing * smooth / static_cast<double>(classes);
    });
    T* po = out.data<T>();
    if (reduction == Reduction::none) {
      for (int64_t r = 0; r < rows; ++r) po[r] = static_cast<T>(losses[r]);
      return;
    }
    double total = 0;
    for (double l : losses) total += l;
    po[0] = static_cast<T>(reduction == Reduction::mean ? total / static_cast<double>(count) : total);
  });
  return out;
}

CrossEntropyTargets cross_entropy_targets(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                                          Reduction reduction, int64_t count, double label_smoothing) {
  const int64_t rows = logits.size(0);
  const int64_t classes = logits.size(1);
  const int64_t* pt = target.data<int64_t>();
  Tensor row_weight = zeros({rows, 1}, logits.dtype());
  Tensor distribution = zeros(logits.shape(), logits.dtype());
  dispatch_floating(logits.dtype(), "cross_entropy", [&]<typename T>() {
    const T weight = reduction == Reduction::mean ? T(1) / static_cast<T>(count) : T(1);
    const T spread = static_cast<T>(label_smoothing / static_cast<double>(classes));
    T* pw = row_weight.data<T>();
    T* pq = distribution.data<T>();
    for (int64_t r = 0; r < rows; ++r) {
      if (pt[r] == ignore_index) continue;
      pw[r] = weight;
      T* q = pq + r * classes;
      if (label_smoothing != 0) std::fill(q, q + classes, spread);
      q[pt[r]] += static_cast<T>(1 - label_smoothing);
    }
  });
  return {row_weight, distribution};
}

}  // namespace ag
