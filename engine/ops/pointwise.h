// Pointwise functions (pointwise.cpp): exp, log and the activations, one element to one element.
#pragma once

#include "engine/options.h"
#include "engine/tensor.h"

namespace ag {

Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor clamp(const Tensor& x, double min, double max);  // min > max: max everywhere, as PyTorch
Tensor relu(const Tensor& x);
// relu's derivative, one pass: grad where out > 0, else 0 (PyTorch's threshold_backward at 0).
Tensor threshold_backward(const Tensor& grad, const Tensor& out);
Tensor gelu(const Tensor& x, GeluApproximation approximation = GeluApproximation::none);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor softplus(const Tensor& x);  // log(1 + exp(x)), stable for large |x|
Tensor silu(const Tensor& x);      // x * sigmoid(x) (SiLU, swish)

}  // namespace ag
