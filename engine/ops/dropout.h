// Dropout (dropout.cpp): in training, zeroes each element with probability p and scales the rest
// by 1/(1-p); in eval, the identity.
#pragma once

#include "engine/tensor.h"

namespace ag {

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen = default_generator());
// residual + dropout(x, p, training, gen), the mask drawn and applied in the residual add's pass:
// the same numbers as the two ops (the same draws from gen, the same roundings).
Tensor add_dropout(const Tensor& residual, const Tensor& x, double p, bool training,
                   Generator& gen = default_generator());
// dropout's backward: grad ⊙ keep · scale, keep the b8 mask of the kept elements (PyTorch's
// native_dropout_backward); differentiable again (its derivative is itself).
Tensor dropout_backward(const Tensor& grad, const Tensor& keep, double scale);

}  // namespace ag
