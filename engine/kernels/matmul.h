// The matrix product without recording: its plan (shapes, promotion, broadcasting, transposition
// flags) and its kernels. ops/matmul.cpp records the backward; attention builds on it.
#pragma once

#include <cstdint>

#include "engine/options.h"
#include "engine/tensor.h"

namespace ag {

// The shapes of one product. "Stored" shapes are the operands' own (promoted) shapes; the flags
// say whether the kernel reads their last two dims swapped.
struct MatmulPlan {
  Shape a_shape;    // a promoted: (..., M, K), or (..., K, M) when ta
  Shape b_shape;    // b promoted: (..., K, N), or (..., N, K) when tb
  Shape batch;      // the broadcast batch dims
  Shape out_shape;  // batch + (M, N), without the dims added by promotion
  int64_t m = 0, k = 0, n = 0;
  bool ta = false, tb = false;  // false for a 1-D operand: a vector is its own transpose
};

// Checks the operands (floating or bf16, same dtype, inner dims, broadcastable batch dims) and plans
// the product.
MatmulPlan plan_matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b);

// scale · (a @ b) as planned; bf16 operands give an f32 result (f32 accumulation).
Tensor run_matmul(const Tensor& a, const Tensor& b, const MatmulPlan& plan, double scale);

// scale · (a @ b), with matmul's shapes, broadcasting and transposition flags; bf16 operands give
// an f32 result.
Tensor matmul_forward(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b, double scale);

// relu?(x @ wᵀ + bias) for x (rows, K) and w (N, K), both f32, f64 or both bf16, bias (N) of the
// result's dtype or undefined: the product with its epilogue fused on oneDNN, or the product, then
// the bias and the activation in one pass over it. bf16 operands give an f32 result.
Tensor linear_forward(const Tensor& x, const Tensor& w, const Tensor& bias, Activation activation);

// A linear's backward, its pass over the output gradient g (rows, N) f32, reading g (and, after a
// ReLU, the output `out` (rows, N)) once: gz = g where out > 0 (or g), written as the products'
// operand (bf16-rounded as to(gz, DType::bf16) when `bf16`), and with `bias` its column sums
// db = Σ_rows gz, each summed in f64 in row order as sum(gz, {0}) does: the same bits as those ops.
struct LinearOutputGradient {
  Tensor operand;  // (rows, N): gz, f32 or bf16
  Tensor bias;     // (N), or undefined
};
LinearOutputGradient linear_output_gradient(const Tensor& g, const Tensor& out, bool bf16, bool bias);

}  // namespace ag
