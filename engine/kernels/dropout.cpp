#include "engine/kernels/dropout.h"

#include <cmath>

#include "engine/generator.h"

namespace ag::kernels {

namespace {

uint64_t first_kept(double p) { return static_cast<uint64_t>(std::ceil(std::ldexp(p, 53))); }  // ⌈p·2⁵³⌉

template <typename T>
[[gnu::always_inline]] inline void mask_range(uint64_t counter, uint64_t kept_from, T scale, T* __restrict out,
                                              int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t bits = Generator::mix(counter + static_cast<uint64_t>(i + 1) * Generator::kIncrement);
    out[i] = (bits >> 11) >= kept_from ? scale : T(0);
  }
}

[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void mask_range_f32(uint64_t counter,
                                                                                        uint64_t kept_from, float scale,
                                                                                        float* out, int64_t n) {
  mask_range(counter, kept_from, scale, out, n);
}

[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void mask_range_f64(uint64_t counter,
                                                                                        uint64_t kept_from,
                                                                                        double scale, double* out,
                                                                                        int64_t n) {
  mask_range(counter, kept_from, scale, out, n);
}

}  // namespace

void dropout_mask_row(uint64_t counter, double p, float scale, float* out, int64_t n) {
  mask_range_f32(counter, first_kept(p), scale, out, n);
}

void dropout_mask_row(uint64_t counter, double p, double scale, double* out, int64_t n) {
  mask_range_f64(counter, first_kept(p), scale, out, n);
}

}  // namespace ag::kernels
