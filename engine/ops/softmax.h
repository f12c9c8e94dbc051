// softmax and log_softmax over one dim, and softmax's backward (softmax.cpp).
#pragma once

#include "engine/tensor.h"

namespace ag {

Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// softmax's backward, y ⊙ (g − Σ_dim g ⊙ y) for y = softmax(x): one fused pass, differentiable again.
Tensor softmax_backward(const Tensor& y, const Tensor& grad, int64_t dim);

}  // namespace ag
