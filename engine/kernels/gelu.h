// The f32 GELU (erf form) and its derivative over contiguous arrays, in loops the compiler
// vectorises (AVX-512, AVX2 clones): libm's erff and expf are scalar calls, and in a GPT's MLP
// they were a sixth of a training step. erf is Abramowitz & Stegun 7.1.26 (|error| ≤ 1.5e-7, the
// formula PyTorch's vectorised f32 erf uses), written so that 1 + erf(z) for z < 0 is computed as
// erfc(|z|) without cancellation; exp is Cephes' expf polynomial (about 1 ulp).
#pragma once

#include <cstdint>

namespace ag::kernels {

void gelu_erf(const float* x, float* out, int64_t n);  // x · Φ(x)
// x · Φ(x), and the same rounded to bf16 bits (round-to-nearest-even) in the same pass: autocast's
// operand for the product that reads GELU's output.
void gelu_erf_with_bf16(const float* x, float* out, uint16_t* out_bf16, int64_t n);
void gelu_erf_derivative(const float* x, float* out, int64_t n);  // Φ(x) + x · φ(x)
// grad · (Φ(x) + x · φ(x)) in one pass: the numbers of gelu_erf_derivative, then the product.
void gelu_erf_backward(const float* grad, const float* x, float* out, int64_t n);
// x · Φ(x) and Φ(x) + x · φ(x) in one pass, the numbers of gelu_erf and gelu_erf_derivative, with
// out_bf16 (or null) out rounded to bf16 as well; derivative may be x itself (each element is read
// before it is written): a Linear's GELU, whose backward then multiplies by the derivative instead of
// computing Φ again (the erf's division and exponential are the cost).
void gelu_erf_with_derivative(const float* x, float* out, uint16_t* out_bf16, float* derivative, int64_t n);

}  // namespace ag::kernels
