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

// residual + x @ weightᵀ + bias, a residual connection's add as the product's epilogue (a oneDNN
// binary post-op) instead of a pass of its own: the same numbers as add(residual, linear(x, weight,
// bias)), its reference. residual has the output's shape and dtype (x's, or f32 for bf16 operands).
Tensor linear_add(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& residual);

// dropout(relu(x @ weightᵀ + bias), p, training, gen), a Transformer's feed-forward hidden layer, as one
// op: the mask drawn and applied in one pass over the product's ReLU output, in place (with its bf16
// copy under autocast), and no mask kept, since the backward reads the output alone: the ReLU passed
// and the mask kept exactly where out > 0, so gz = g · 1/(1 − p) there. The same draws from gen and
// the same numbers as that composition, its reference (a dropped element's gradient is +0 where the
// composition's can be −0). PyTorch's generator, eval and p = 0 run the composition.
Tensor linear_relu_dropout(const Tensor& x, const Tensor& weight, const Tensor& bias, double p, bool training,
                           Generator& gen);

}  // namespace ag
