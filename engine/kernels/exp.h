// e^x in branch-free float arithmetic the compiler vectorises (libm's expf is a scalar call).
// Compile its callers with -fno-trapping-math, or GCC keeps the clamp's select scalar.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace ag::kernels {

// Cephes' expf: e^x = 2ⁿ · e^r with n = floor(x·log₂e + ½) and r = x − n·ln 2 (ln 2 as a high part
// and a correction), e^r = 1 + r + r²·P(r). Its constants, for exp_nonpositive and for the 16-lane
// form in flash_attention.cpp.
namespace cephes_exp {
inline constexpr float kLog2e = 1.44269504088896341f, kLn2High = 0.693359375f, kLn2Correction = 2.12194440e-4f;
inline constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f, kP3 = 4.1665795894e-2f,
                       kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;
}  // namespace cephes_exp

// e^x for x ≤ 0: Cephes' expf (about 1 ulp); x below -87 gives e^-87, not 0; NaN gives NaN.
[[gnu::always_inline]] inline float exp_nonpositive(float x) {
  using namespace cephes_exp;
  x = x < -87.0f ? -87.0f : x;
  const float n = std::floor(x * kLog2e + 0.5f);
  const float r = x - n * kLn2High + n * kLn2Correction;
  float p = kP0;
  p = p * r + kP1;
  p = p * r + kP2;
  p = p * r + kP3;
  p = p * r + kP4;
  p = p * r + kP5;
  const float e = p * r * r + r + 1.0f;
  // 2ⁿ from its exponent bits; a NaN x gives a NaN n, whose conversion to int would be undefined:
  // the select makes its exponent bits 0 (the float 0), and e (NaN) · 0 keeps the NaN.
  const float exponent = n > -127.0f ? n : -127.0f;
  return e * std::bit_cast<float>((static_cast<int32_t>(exponent) + 127) << 23);
}

// e^x for x ≤ 0, exactly 0 below -87 (a masked -inf key or score: weight 0, as in PyTorch); the
// double one is libm's. Both here, as one overload set: a copy of one of them in a caller's own
// namespace would hide the other (the float calls would then quietly take the scalar double one).
[[gnu::always_inline]] inline float exp_or_zero(float x) { return x < -87.0f ? 0.0f : exp_nonpositive(x); }
[[gnu::always_inline]] inline double exp_or_zero(double x) { return std::exp(x); }

}  // namespace ag::kernels
