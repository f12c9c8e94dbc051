// f32 ↔ bf16 over arrays: round-to-nearest-even as bf16_bits_from_f32 (engine/dtype.h), bit-exact
// with PyTorch's .to(torch.bfloat16), vectorised; and whether this CPU runs bf16 products natively.
#pragma once

#include <cstdint>

#include "engine/dtype.h"
#include "engine/tensor.h"

namespace ag {

void convert_f32_to_bf16(const float* in, BFloat16* out, int64_t n);
// The same rounding on the calling thread alone: for kernels already inside a parallel loop.
void round_to_bf16(const float* in, BFloat16* out, int64_t n);
// The same for `rows` rows of `cols` elements, in_stride and out_stride elements apart: one call for a
// strided copy's run of short rows (a head split's), not one per row.
void round_rows_to_bf16(const float* in, int64_t in_stride, BFloat16* out, int64_t out_stride, int64_t rows,
                        int64_t cols);
void convert_bf16_to_f32(const BFloat16* in, float* out, int64_t n);

// a ⊙ b (f32, one shape) rounded to bf16 in one pass: to(mul(a, b), DType::bf16)'s bits, for a
// product's operand that is itself a product (attention's dropped weights).
Tensor rounded_product(const Tensor& a, const Tensor& b);

// x's values in another dtype (a new tensor, or x when it has that dtype already), recording
// nothing: the one conversion, used by the kernels for a product's operands and by ops' `to`,
// which records it.
Tensor converted(const Tensor& x, DType dtype);

// True when the CPU has AVX512_BF16 (lscpu flag avx512_bf16): oneDNN then runs bf16 matmul at
// twice the f32 rate. Without it bf16 products are emulated and slower than f32.
bool cpu_has_avx512_bf16();

}  // namespace ag
