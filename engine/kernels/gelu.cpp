#include "engine/kernels/gelu.h"

#include <cmath>

#include "engine/dtype.h"
#include "engine/kernels/exp.h"
#include "engine/kernels/parallel.h"

namespace ag::kernels {

namespace {

// 2Φ(x) = 1 + erf(x/√2), and the density's factor e^(−x²/2).
struct Cdf {
  float twice_cdf, gauss;
};
[[gnu::always_inline]] inline Cdf twice_cdf(float x) {
  const float z = std::fabs(x) * 0.70710678118654752f;  // |x|/√2
  const float t = 1.0f / (1.0f + 0.3275911f * z);
  float poly = 1.061405429f;
  poly = poly * t - 1.453152027f;
  poly = poly * t + 1.421413741f;
  poly = poly * t - 0.284496736f;
  poly = poly * t + 0.254829592f;
  const float gauss = exp_nonpositive(-z * z);  // e^(−x²/2)
  const float erfc = poly * t * gauss;          // erfc(|x|/√2)
  return {x < 0 ? erfc : 2.0f - erfc, gauss};
}

[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void gelu_range(const float* x, float* out,
                                                                                    int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = 0.5f * x[i] * twice_cdf(x[i]).twice_cdf;
}

// The same values, each also rounded to bf16 as to(out, DType::bf16) rounds it.
[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void gelu_with_bf16_range(const float* x,
                                                                                              float* out,
                                                                                              uint16_t* out_bf16,
                                                                                              int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    out[i] = 0.5f * x[i] * twice_cdf(x[i]).twice_cdf;
    out_bf16[i] = bf16_bits_from_f32(out[i]);
  }
}

// gelu′(x) = Φ(x) + x · φ(x), from x's Cdf
[[gnu::always_inline]] inline float derivative_of(float x, const Cdf& c) {
  constexpr float kInvSqrt2Pi = 0.39894228040143268f;  // φ(x) = e^(−x²/2)/√(2π)
  return 0.5f * c.twice_cdf + x * kInvSqrt2Pi * c.gauss;
}
[[gnu::always_inline]] inline float derivative(float x) { return derivative_of(x, twice_cdf(x)); }

[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void gelu_derivative_range(const float* x,
                                                                                               float* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = derivative(x[i]);
}

[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void gelu_backward_range(const float* grad,
                                                                                             const float* x, float* out,
                                                                                             int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float d = derivative(x[i]);  // rounded to f32 first, as gelu_derivative's output is
    out[i] = grad[i] * d;
  }
}

// x · Φ(x), with gelu′(x) written to *derivative. (A Cdf named in an `omp simd` loop's body is kept
// in memory, per lane, and the loop is not vectorised; inlined from here it is not.)
[[gnu::always_inline]] inline float gelu_and_derivative(float x, float* derivative) {
  const Cdf c = twice_cdf(x);
  *derivative = derivative_of(x, c);
  return 0.5f * x * c.twice_cdf;
}

[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void gelu_and_derivative_range(
    const float* x, float* out, uint16_t* out_bf16, float* d, int64_t n) {
  if (out_bf16 == nullptr) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = gelu_and_derivative(x[i], d + i);
    return;
  }
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    out[i] = gelu_and_derivative(x[i], d + i);
    out_bf16[i] = bf16_bits_from_f32(out[i]);
  }
}

constexpr int64_t kCostPerElement = 24;

}  // namespace

void gelu_erf(const float* x, float* out, int64_t n) {
  parallel_for_ranges(n, kCostPerElement,
                      [&](int64_t begin, int64_t end) { gelu_range(x + begin, out + begin, end - begin); });
}

void gelu_erf_with_bf16(const float* x, float* out, uint16_t* out_bf16, int64_t n) {
  parallel_for_ranges(n, kCostPerElement, [&](int64_t begin, int64_t end) {
    gelu_with_bf16_range(x + begin, out + begin, out_bf16 + begin, end - begin);
  });
}

void gelu_erf_derivative(const float* x, float* out, int64_t n) {
  parallel_for_ranges(n, kCostPerElement,
                      [&](int64_t begin, int64_t end) { gelu_derivative_range(x + begin, out + begin, end - begin); });
}

void gelu_erf_backward(const float* grad, const float* x, float* out, int64_t n) {
  parallel_for_ranges(n, kCostPerElement, [&](int64_t begin, int64_t end) {
    gelu_backward_range(grad + begin, x + begin, out + begin, end - begin);
  });
}

void gelu_erf_with_derivative(const float* x, float* out, uint16_t* out_bf16, float* derivative, int64_t n) {
  parallel_for_ranges(n, kCostPerElement, [&](int64_t begin, int64_t end) {
    gelu_and_derivative_range(x + begin, out + begin, out_bf16 ? out_bf16 + begin : nullptr, derivative + begin,
                              end - begin);
  });
}

}  // namespace ag::kernels
