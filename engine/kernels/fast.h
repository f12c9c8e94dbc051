// Forward kernels shared between op families (the fused attention op builds on them). They
// compute without recording: the ops that call them attach the backward. Each dispatches f32
// work above a measured size to oneDNN and runs the reference loops otherwise.
#pragma once

#include "engine/tensor.h"

namespace ag {

// scale · (a @ b), with matmul's shapes, broadcasting and transposition flags.
Tensor matmul_forward(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b, double scale);

// softmax (log = false) or log_softmax of x over dim.
Tensor softmax_forward(const Tensor& x, int64_t dim, bool log);

// The softmax backward in one pass: dx = y ⊙ (g − Σ_dim g ⊙ y), y the softmax output.
Tensor softmax_backward_data(const Tensor& y, const Tensor& g, int64_t dim);

// Dropout's scaled keep-mask: 1/(1-p) where kept, 0 where dropped (everywhere if p = 1), one
// draw from gen per element in row-major order.
Tensor dropout_mask(const Shape& shape, DType dtype, double p, Generator& gen);

}  // namespace ag
