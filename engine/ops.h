// Every op of the engine, by family. Each family lives in one file engine/ops/<family>.cpp
// with forward, backward and registry entry side by side. All ops are differentiable in
// every floating input unless marked "not differentiable".
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "engine/tensor.h"

namespace ag {

// ---- elementwise.cpp: numpy broadcasting; backward reduces to each input's shape.
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(double a, const Tensor& b);  // a / b elementwise (10.0 / t)
Tensor neg(const Tensor& x);
Tensor pow(const Tensor& x, double exponent);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor clamp(const Tensor& x, double min, double max);  // min > max: max everywhere, as PyTorch
Tensor relu(const Tensor& x);
enum class GeluApproximation { none, tanh };  // none: x·Φ(x) with erf; tanh: the GPT-2 form
Tensor gelu(const Tensor& x, GeluApproximation approximation = GeluApproximation::none);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor clone(const Tensor& x);
Tensor to(const Tensor& x, DType dtype);   // differentiable between f32 and f64
Tensor sign(const Tensor& x);              // not differentiable
Tensor gt(const Tensor& x, double value);  // b8, not differentiable
Tensor lt(const Tensor& x, double value);  // b8, not differentiable

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor operator-(const Tensor& x);

// ---- reduce.cpp
Tensor sum(const Tensor& x);  // all elements, 0-d result
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor max(const Tensor& x);                                     // gradient split evenly among tied maxima (as PyTorch)
Tensor max(const Tensor& x, int64_t dim, bool keepdim = false);  // gradient to the first arg-max
Tensor min(const Tensor& x);
Tensor min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);  // i64, not differentiable
Tensor broadcast_to(const Tensor& x, const Shape& shape);           // materialises; backward sum_to
Tensor sum_to(const Tensor& x, const Shape& shape);                 // sums broadcast dims away

// ---- shape.cpp: reshape, flatten, unsqueeze and squeeze share storage; the rest copy.
Tensor reshape(const Tensor& x, const Shape& shape);  // one size may be -1
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor squeeze(const Tensor& x, int64_t dim);  // a no-op if that dim is not 1
Tensor squeeze(const Tensor& x);               // every size-1 dim
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim);  // last piece may be smaller
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim);
// Elements start, start+step, ... < end along dim; negative start/end count from the end.
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);

// ---- index.cpp
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);  // index: 1-D i64
// Rows of weight (V, D) gathered by i64 indices of any shape → indices.shape + (D).
// Backward scatter-adds; rows at padding_idx get no gradient. As in PyTorch a negative padding_idx
// counts from the end (-1 is the last row) and one outside [-V, V) is an error; none: no padding.
Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx = std::nullopt);
// padding_idx resolved to a row in [0, rows), or -1 for none; throws (naming op) when out of range.
int64_t padding_index(std::string_view op, std::optional<int64_t> padding_idx, int64_t rows);

// ---- mask.cpp: masks are b8 tensors, broadcast against x; true means "fill" / "take a".
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
Tensor triu(const Tensor& x, int64_t diagonal = 0);  // over the last two dims
Tensor tril(const Tensor& x, int64_t diagonal = 0);
// (T, T) b8, true above the diagonal: the future positions a causal attention must not see.
Tensor causal_mask(int64_t size);
Tensor logical_not(const Tensor& mask);  // b8 → b8: flips a mask between the two conventions

// ---- matmul.cpp: 2-D, and batched N-D with broadcast batch dims like torch.matmul
// (1-D operands are promoted as in torch.matmul). The flags transpose the last two dims
// of an operand without a copy.
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);

// ---- softmax.cpp
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

// ---- attention.cpp: softmax(q @ kᵀ / √d + masks) @ v, fused, with its own backward.
// q (B, H, T, d), k (B, H, S, d), v (B, H, S, dv) → output (B, H, T, dv). The boolean masks read as
// in PyTorch, each under PyTorch's name for it:
//   attn_mask broadcasts to (B, H, T, S): b8 as in torch's scaled_dot_product_attention, TRUE = the
//     key TAKES PART (false = masked); or additive in q's dtype (-inf masks).
//   key_padding_mask b8 (B, S) as in torch.nn.MultiheadAttention, TRUE = the key is padding (IGNORED).
//   is_causal masks key j > query i.
// dropout_p > 0 drops weights (draws from gen as dropout does). With need_weights, `weights` holds
// the (B, H, T, S) weights that multiplied v (after dropout), for inspection: no gradient.
//
// Note [fully masked rows]: a query whose keys are all masked has no weights to normalise.
// masked_rows says what it gets; every attention class of nn passes its choice through here.
//   nan (default, PyTorch's): NaN weights and output for that query, as softmax over all -inf
//     gives in PyTorch; the backward gives it, like PyTorch's masked_fill/softmax/matmul, zero dq
//     and no share of dk (dv is NaN: the NaN weights multiply the incoming gradient).
//   zero: all-zero weights, so a zero output and zero gradients for that query; one empty
//     (all-padding) sequence does not poison a batch's loss.
enum class MaskedRows { nan, zero };
//
// Note [streaming attention]: `kernel` picks how the op computes. streaming (the FlashAttention
// recurrence, engine/kernels/flash_attention.h) never holds the (T, S) weights, only each row's
// logsumexp; it cannot return weights or apply dropout. materialising computes the (B, H, T, S)
// weights (returned with need_weights). automatic streams whenever it can and the problem is large
// enough for streaming to be at least as fast (kStreamingMinScores in attention.cpp).
enum class AttentionKernel { automatic, streaming, materialising };
struct AttentionOptions {
  Tensor attn_mask = {};         // b8: true = takes part; or additive
  Tensor key_padding_mask = {};  // b8 (B, S): true = ignored
  bool is_causal = false;
  double dropout_p = 0.0;
  bool need_weights = false;
  MaskedRows masked_rows = MaskedRows::nan;
  AttentionKernel kernel = AttentionKernel::automatic;
};
struct Attention {
  Tensor output;
  Tensor weights;
};
Attention scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                       const AttentionOptions& options = {}, Generator& gen = default_generator());

// ---- dropout.cpp: in training, zeroes each element with probability p and scales the rest
// by 1/(1-p); in eval, the identity.
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen = default_generator());

// ---- norm.cpp: normalises over the trailing dims given by normalized_shape.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);

// ---- loss.cpp
enum class Reduction { none, mean, sum };
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);
// Numerically stable: max(x,0) - x·y + log(1 + exp(-|x|)).
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        Reduction reduction = Reduction::mean);
// logits (N, C) and i64 targets (N); targets equal to ignore_index add nothing, and the mean is
// over the others.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index = -100,
                     Reduction reduction = Reduction::mean);

}  // namespace ag
