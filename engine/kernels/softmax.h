// Softmax kernels (no recording): the softmax ops and the fused attention build on them. f32 rows
// past a measured size run on oneDNN, the rest on reference loops.
#pragma once

#include <cstdint>

#include "engine/tensor.h"

namespace ag {

// softmax (log = false) or log_softmax of x over dim.
Tensor softmax_forward(const Tensor& x, int64_t dim, bool log);

// The softmax backward in one pass: dx = y ⊙ (g − Σ_dim g ⊙ y), y the softmax output.
Tensor softmax_backward_data(const Tensor& y, const Tensor& g, int64_t dim);

// Rows [0, count) of x (size each) in place: their softmax as softmax_forward gives it for short rows
// (longer ones sum Σ in another order), on the calling thread; with each weight, times keep's (if not
// null), rounded to bf16 in `operand` (count, size) in the same pass: the attention's weights and the
// bf16 operand of their product with v.
void softmax_rows_in_place_with_bf16(float* x, const float* keep, BFloat16* operand, int64_t count, int64_t size);

// softmax's backward over the last dim of f32 y and g, with g first multiplied by `keep` (if defined: attention's
// dropout) and the result rounded to bf16 (as to(dx, DType::bf16)), in one pass per row: the
// attention scores' gradient as the bf16 operand of its products.
Tensor softmax_backward_to_bf16(const Tensor& y, const Tensor& g, const Tensor& keep);

}  // namespace ag
