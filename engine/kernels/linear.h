// The linear layer's kernels (ops/matmul.cpp's linear records their backward).
#pragma once

#include "engine/kernels/matmul.h"
#include "engine/options.h"
#include "engine/tensor.h"

namespace ag {

// relu?(x @ wᵀ + bias) (+ residual) for x (rows, K) and w (N, K), both f32, f64 or both bf16, bias
// (N) and residual (rows, N) of the result's dtype or undefined: the product with its epilogue fused
// on oneDNN, or the product, then the bias, the activation and the residual in one pass over it. bf16
// operands give an f32 result. Activation none or relu: the op applies a GELU in a pass of its own,
// since its backward reads the product.
Tensor linear_forward(const Tensor& x, const Tensor& w, const Tensor& bias, Activation activation,
                      const Tensor& residual = {});

// A linear's backward, its pass over the output gradient g (rows, N) f32, reading g (and the
// activation's saved tensor: a ReLU's output, or a GELU's derivative gelu′(z)) once: gz = g where
// out > 0 (g · relu_scale there for a ReLU's output after dropout, relu_scale = 1/(1 − p): the
// kept elements are where out > 0), g · gelu′(z) as gelu's backward computes it, or g, written as the products' operand
// (bf16-rounded as to(gz, DType::bf16) when `bf16`), and with `bias` its column sums
// db = Σ_rows gz, summed in f64 in row blocks as sum(gz, {0}) does: the same bits as those ops.
struct LinearOutputGradient {
  Tensor operand;  // (rows, N): gz, f32 or bf16
  Tensor bias;     // (N), or undefined
};
LinearOutputGradient linear_output_gradient(const Tensor& g, const Tensor& saved, Activation activation, bool bf16,
                                            bool bias, double relu_scale = 1);

}  // namespace ag
