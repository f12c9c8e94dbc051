// Streaming attention (the FlashAttention recurrence): blocks of queries against blocks of keys
// with an online softmax, so the (T, S) weights never exist; only each query row's logsumexp is
// kept for the backward, which recomputes the weights block by block. f32 runs AVX-512 / AVX2
// clones chosen at run time, or with bf16 set, AVX512_BF16 dot products (autocast's products); f64 runs the same blocks
// in plain loops (the gradient checks). Every task writes its own rows, so results do not depend on scheduling: the
// same bits for any thread count.
#pragma once

#include <cstdint>

namespace ag::kernels {

// The problem as the kernels read it: contiguous q (B, H, T, d), k (B, H, S, d), v (B, H, S, dv);
// masks as pointers, null when absent. The masks (causal j > i, padded keys, a false b8 mask)
// make a score -inf; an additive mask is added to the scaled score.
template <typename F>
struct FlashProblem {
  int64_t B = 0, H = 0, T = 0, S = 0, d = 0, dv = 0;
  F scale = 1;
  bool causal = false;
  bool zero_masked_rows = false;          // a row with every key masked: output 0 (else NaN)
  bool bf16 = false;                      // f32 only: the block products' operands rounded to bf16,
                                          // summed in f32 (AVX512_BF16; the caller checks the CPU)
  const bool* padded = nullptr;           // (B, S), true = ignored
  const bool* takes_part = nullptr;       // b8 attn_mask, true = takes part
  const F* added = nullptr;               // additive attn_mask
  const int64_t* mask_strides = nullptr;  // attn_mask read as (B, H, T, S), 0 along broadcast dims
};

// scores (count) of query i against keys [j0, j0+count) in head (b, h), in place: -inf where
// masked, + the additive mask's values.
template <typename F>
void mask_scores(const FlashProblem<F>& p, F* scores, int64_t b, int64_t h, int64_t i, int64_t j0, int64_t count);

// out (B, H, T, dv) = softmax(scale · q @ kᵀ + masks) @ v; lse (B, H, T) = each row's
// logsumexp of the masked, scaled scores (-inf for a row with every key masked).
template <typename F>
void flash_attention_forward(const FlashProblem<F>& p, const F* q, const F* k, const F* v, F* out, F* lse);

// dq, dk, dv (shaped as q, k, v) from dout (B, H, T, dv), given the forward's out and lse. A row
// with every key masked gets no gradient (the MaskedRows::zero sense).
template <typename F>
void flash_attention_backward(const FlashProblem<F>& p, const F* q, const F* k, const F* v, const F* out, const F* lse,
                              const F* dout, F* dq, F* dk, F* dv);

// Note [bf16 head kernel]
// Under autocast, heads of at most kBf16HeadMax queries and keys (and head sizes up to it) run a
// kernel of their own: q, k, v given in bf16 (the head split writes them so), each head one
// block, its scores, weights and gradients never leaving L1. It writes its output, and its backward
// reads the output's f32 gradient and writes dq, dk, dv, wherever the caller says (HeadRows): the
// packed ops' output with the heads merged, their projections' gradients in place, with no copy to
// merge or gather the heads (ops/packed_attention.cpp). Products are vdpbf16ps over
// operands laid out once per head as pairs; the weights are computed 16 queries at a time, a query per
// lane and a key per vector, so a row's max and sum need no reduction across lanes. Under a causal mask the
// products skip, 16 rows at a time, the terms the mask makes zero (a 64-query head does 10 of its 16
// blocks), so a NaN or infinity in a hidden key's k or v no longer reaches earlier queries through
// 0 · NaN as it does in the materialising kernel (and in PyTorch's composition). The same
// arithmetic as the materialising kernel's under autocast (f32 scores and softmax, the weights
// rounded to bf16 for the products, f32 sums) in another order: equal to a few bf16 ulps.
inline constexpr int64_t kBf16HeadMax = 64;
bool bf16_heads_fit(int64_t T, int64_t S, int64_t d, int64_t dv);
// Where the bf16 head kernel reads or writes a head's f32 rows: head (b, h)'s row r at
// data + b·batch + h·head + r·row. Contiguous (B, H, L, width) heads (contiguous_heads), the heads
// merged side by side (B, L, H·width) (merged_heads), or one slot of a packed projection's gradient
// (N, L, slots·E), written in place.
template <typename P>
struct HeadRows {
  P data = nullptr;  // null: an output not asked for
  int64_t batch = 0, head = 0, row = 0;
  P at(int64_t b, int64_t h) const { return data + b * batch + h * head; }
};
using HeadsIn = HeadRows<const float*>;
using HeadsOut = HeadRows<float*>;
using Bf16HeadsOut = HeadRows<uint16_t*>;  // an f32 output's bf16 copy, laid out as the output
template <typename P>
HeadRows<P> contiguous_heads(P data, int64_t H, int64_t L, int64_t width) {
  return {data, H * L * width, L * width, width};
}
template <typename P>
HeadRows<P> merged_heads(P data, int64_t H, int64_t L, int64_t width) {
  return {data, L * H * width, width, H * width};
}
// out (where HeadsOut say) and lse (B, H, T) as flash_attention_forward gives them, from bf16 q, k, v;
// with out_bf16's data, also out rounded to bf16 there (the next product's operand), in the same pass.
void flash_attention_forward_bf16(const FlashProblem<float>& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                  const HeadsOut& out, float* lse, const Bf16HeadsOut& out_bf16 = {});
// dq, dk, dv (f32, where HeadsOut say) from bf16 q, k, v, the output's f32 gradient dout (where
// HeadsIn says; rounded to bf16 as the kernel lays each head out) and the forward's lse.
void flash_attention_backward_bf16(const FlashProblem<float>& p, const uint16_t* q, const uint16_t* k,
                                   const uint16_t* v, const float* lse, const HeadsIn& dout, const HeadsOut& dq,
                                   const HeadsOut& dk, const HeadsOut& dv);

}  // namespace ag::kernels
