// The matrix product without recording: its plan (shapes, promotion, broadcasting, transposition
// flags) and its kernels. ops/matmul.cpp records the backward; attention builds on it.
#pragma once

#include <cstdint>
#include <functional>

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

// Below this many multiply-adds (batch·M·K·N) the reference loops beat oneDNN's ~1 µs per call
// (tools/bench: BM_Matmul at 8³ … 32³; see tools/bench/README.md).
inline constexpr int64_t kOneDnnMatmulMin = 8192;
// Up to this many rows against a weight stored (N, K), dot products per row beat oneDNN.
inline constexpr int64_t kFewRowsMax = 4;

// Note [products split by thread]
// oneDNN 2.6 uses a second thread poorly on this project's products: a batch of small matrices
// (charlm's 48 attention heads of 64×64×32 in bf16: 0.064 ms on one thread, 0.069 on two) and the
// Linears' products of a few hundred rows (a weight gradient 128×768×512 in bf16, inside a charlm
// step: 0.31 ms on one thread and on two). Instead, each thread runs a primitive built for one
// thread (engine/kernels/onednn.h) on its own share: a contiguous range of the batch's matrices,
// or of the output's rows (on multiples of 16). Each output element is computed by one thread over
// the whole of K either way: no sum is split. Measured in tools/bench/README.md, "Products split
// by thread".
//
// Calls share(first, last) on each thread, for contiguous ranges covering [0, count) (boundaries
// on multiples of `multiple`, the last range to count), and returns whether every share was taken;
// an exception thrown by a share is rethrown on the calling thread once every share has returned.
// When products_split_by_thread(count, multiple, work) is false the caller runs one primitive.
bool products_split_by_thread(int64_t count, int64_t multiple, int64_t work);
bool shares_by_thread(int64_t count, int64_t multiple, const std::function<bool(int64_t, int64_t)>& share);

// Checks the operands (floating or bf16, same dtype, inner dims, broadcastable batch dims) and plans
// the product.
MatmulPlan plan_matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b);

// scale · (a @ b) as planned; bf16 operands give an f32 result (f32 accumulation).
Tensor run_matmul(const Tensor& a, const Tensor& b, const MatmulPlan& plan, double scale);

// scale · (a @ b), with matmul's shapes, broadcasting and transposition flags; bf16 operands give
// an f32 result.
Tensor matmul_forward(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b, double scale);

}  // namespace ag
