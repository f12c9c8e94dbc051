#include "engine/kernels/loss.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace ag {

Tensor cross_entropy_kernel(const Tensor& logits, const Tensor& target, int64_t ignore_index, Reduction reduction,
                            int64_t count) {
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
      double m = row[0];
      for (int64_t j = 1; j < classes; ++j) m = std::max(m, double(row[j]));
      double s = 0;
      for (int64_t j = 0; j < classes; ++j) s += std::exp(row[j] - m);
      // -log_softmax(row)[target] = (max - row[target]) + log Σ: the difference first, as in
      // log_softmax, so that huge logits ([1e300, 1e300, 0]) keep their log 2.
      losses[r] = (m - row[pt[r]]) + std::log(s);
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
                                          Reduction reduction, int64_t count) {
  const int64_t rows = logits.size(0);
  const int64_t classes = logits.size(1);
  const int64_t* pt = target.data<int64_t>();
  Tensor row_weight = zeros({rows, 1}, logits.dtype());
  Tensor one_hot = zeros(logits.shape(), logits.dtype());
  dispatch_floating(logits.dtype(), "cross_entropy", [&]<typename T>() {
    const T weight = reduction == Reduction::mean ? T(1) / static_cast<T>(count) : T(1);
    T* pw = row_weight.data<T>();
    T* ph = one_hot.data<T>();
    for (int64_t r = 0; r < rows; ++r) {
      if (pt[r] == ignore_index) continue;
      pw[r] = weight;
      ph[r * classes + pt[r]] = T(1);
    }
  });
  return {row_weight, one_hot};
}

}  // namespace ag
