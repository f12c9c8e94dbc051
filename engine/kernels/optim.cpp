#include "engine/kernels/optim.h"

#include <algorithm>
#include <cmath>

#include "engine/dtype.h"
#include "engine/kernels/parallel.h"

namespace ag::kernels {

namespace {

// The loop, inlined into each clone below. The constants are locals and the arrays __restrict, so
// nothing is reloaded per element. With kRounded, p's new values rounded to bf16 go to `rounded` too.
template <typename T, bool kRounded = false>
[[gnu::always_inline]] inline void adam_range(const AdamStep& step, T* __restrict p, const T* __restrict g,
                                              T* __restrict m, T* __restrict v, int64_t n,
                                              uint16_t* __restrict rounded = nullptr) {
  const T beta1 = step.beta1, beta2 = step.beta2, eps = step.eps, l2 = step.l2, kept = step.kept;
  const T one_minus_beta1 = 1 - step.beta1, one_minus_beta2 = 1 - step.beta2;
  const T correction2 = step.correction2, step_size = step.step_size;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T d = l2 == 0 ? g[i] : g[i] + l2 * p[i];  // (l2 == 0 is hoisted out of the loop)
    m[i] = m[i] * beta1 + one_minus_beta1 * d;
    v[i] = v[i] * beta2 + one_minus_beta2 * d * d;
    const T update = m[i] / (std::sqrt(v[i]) / correction2 + eps);  // exp_avg / denom
    p[i] = p[i] * kept + step_size * update;                        // param.addcdiv_(exp_avg, denom, -step_size)
    if constexpr (kRounded) rounded[i] = bf16_bits_from_f32(p[i]);
  }
}

[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void adam_range_f32(const AdamStep& step, float* p,
                                                                                        const float* g, float* m,
                                                                                        float* v, int64_t n) {
  adam_range(step, p, g, m, v, n);
}

[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void adam_range_f32_rounded(
    const AdamStep& step, float* p, const float* g, float* m, float* v, uint16_t* rounded, int64_t n) {
  adam_range<float, true>(step, p, g, m, v, n, rounded);
}

[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void adam_range_f64(const AdamStep& step, double* p,
                                                                                        const double* g, double* m,
                                                                                        double* v, int64_t n) {
  adam_range(step, p, g, m, v, n);
}

constexpr int64_t kCostPerElement = 16;

}  // namespace

void adam_step(const AdamStep& step, float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n) {
  parallel_for_ranges(n, kCostPerElement, [&](int64_t begin, int64_t end) {
    adam_range_f32(step, param + begin, grad + begin, exp_avg + begin, exp_avg_sq + begin, end - begin);
  });
}

void adam_step(const AdamStep& step, double* param, const double* grad, double* exp_avg, double* exp_avg_sq,
               int64_t n) {
  parallel_for_ranges(n, kCostPerElement, [&](int64_t begin, int64_t end) {
    adam_range_f64(step, param + begin, grad + begin, exp_avg + begin, exp_avg_sq + begin, end - begin);
  });
}

void adam_steps(const std::vector<AdamTensor>& tensors) {
  std::vector<int64_t> starts{0};  // where each tensor starts in the elements of all of them
  for (const AdamTensor& t : tensors) starts.push_back(starts.back() + t.n);
  parallel_for_ranges(starts.back(), kCostPerElement, [&](int64_t begin, int64_t end) {
    size_t i = std::upper_bound(starts.begin(), starts.end(), begin) - starts.begin() - 1;
    for (; i < tensors.size() && starts[i] < end; ++i) {
      const AdamTensor& t = tensors[i];
      const int64_t first = std::max(begin, starts[i]) - starts[i], last = std::min(end, starts[i + 1]) - starts[i];
      if (first >= last) continue;
      if (t.param_bf16)
        adam_range_f32_rounded(t.step, t.param + first, t.grad + first, t.exp_avg + first, t.exp_avg_sq + first,
                               t.param_bf16 + first, last - first);
      else
        adam_range_f32(t.step, t.param + first, t.grad + first, t.exp_avg + first, t.exp_avg_sq + first, last - first);
    }
  });
}

}  // namespace ag::kernels
