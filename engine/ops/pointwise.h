// Pointwise functions (pointwise.cpp): exp, log and the activations, one element to one element.
#pragma once

#include "engine/options.h"
#include "engine/tensor.h"

namespace ag {

// `Tensor exp(const Tensor& x)` and the like: one for each AG_POINTWISE_OP row of the table
// (exp, log, sigmoid, softplus, …: pointwise_rows.h lists them, each with its formula).
#define AG_POINTWISE_OP(op, ...) Tensor op(const Tensor& x);
#define AG_POINTWISE_ROW(op, ...)
#include "engine/ops/pointwise_rows.h"
#undef AG_POINTWISE_OP
#undef AG_POINTWISE_ROW

Tensor clamp(const Tensor& x, double min, double max);  // min > max: max everywhere, as PyTorch
// relu's derivative, one pass: grad where out > 0, else 0 (PyTorch's threshold_backward at 0).
Tensor threshold_backward(const Tensor& grad, const Tensor& out);
// The gelu row, or with GeluApproximation::tanh the gelu_tanh row.
Tensor gelu(const Tensor& x, GeluApproximation approximation = GeluApproximation::none);
// gelu's backward (erf form), g · gelu′(x): one pass when nothing records, recorded ops otherwise.
Tensor gelu_erf_backward(const Tensor& g, const Tensor& x);
// gelu(z) (erf form), recording nothing, with z then holding gelu′(z): for a node whose unrecorded
// backward multiplies by the derivative, z a product nothing else holds (a Linear's GELU:
// linear_output_gradient). In f32 one pass (kernels::gelu_erf_with_derivative) writing the
// derivative over z, the output carrying its bf16 copy under autocast as gelu's does; in other
// dtypes gelu's and gelu_erf_backward's own numbers, z the derivative's new tensor.
Tensor gelu_erf_keeping_derivative(Tensor& z);

}  // namespace ag
