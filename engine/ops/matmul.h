// Matrix products (matmul.cpp): 2-D, and batched N-D with broadcast batch dims like torch.matmul
// (1-D operands are promoted as in torch.matmul). The flags transpose the last two dims of an
// operand without a copy.
#pragma once

#include "engine/options.h"
#include "engine/tensor.h"

namespace ag {

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);

// activation(x @ weightᵀ + bias), torch.nn.functional.linear with its activation: x (..., in),
// weight (out, in), bias (out) or undefined. One product whose epilogue adds the bias and applies
// the activation (oneDNN post-ops), where matmul, add and relu would make three passes; the same
// numbers as that composition, which is its reference.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, Activation activation = Activation::none);

}  // namespace ag
