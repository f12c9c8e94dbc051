// The attention node that scaled_dot_product_attention (attention.cpp) and the packed projections
// (packed_attention.cpp) share: its plan, its forward by either kernel and what the node saves, its
// backward (Note [one attention backward]). Internal to engine/ops/.
#pragma once

#include <array>
#include <vector>

#include "engine/kernels/attention.h"
#include "engine/ops/attention.h"

namespace ag {

// Both nodes save {q, k, v, attn_mask, key_padding_mask, …}: the materialising one then
// {weights, keep, empty_rows, and under autocast the bf16 operand weights ⊙ keep}, the streaming one
// {out, lse}.
enum Saved { kQ, kK, kV, kAttnMask, kKeyPadding, kWeightsOrOut, kKeepOrLse, kEmptyRows, kWeightsOperand, kSavedCount };

// Which of q, k and v want a gradient.
using Needs = std::array<bool, 3>;

// What one attention call computed: its output, the weights it returns (need_weights) and what its
// node saves, in Saved's order.
struct AttentionForward {
  Tensor out;      // (B, H, T, dv)
  Tensor weights;  // (B, H, T, S), with need_weights
  std::vector<Tensor> saved;
};

// The plan of an attention over q (B, H, T, d), k (B, H, S, d) and v (B, H, S, dv) of one dtype, the
// shapes, dropout_p and masks checked. Then, by Note [a causal attn_mask], an attn_mask that is
// exactly causal leaves `o` and the op runs as is_causal.
//
// Note [a causal attn_mask]
// An attn_mask that is exactly the causal mask of the (T, S) scores — additive 0 where key j <= query
// i and -inf where j > i (causal_mask(T): nn::Transformer's tgt_mask), or b8 true where j <= i — hides
// what is_causal hides, and adding 0 changes no score: so the op runs with is_causal and without the
// mask, the same numbers, and the kernels skip the hidden blocks instead of adding a mask to every
// score. One pass over the (T, S) mask, stopping at the first other value.
AttentionPlan plan_shapes(const Shape& q, const Shape& k, const Shape& v, DType dtype, AttentionOptions& o);

// The forward by the kernel the plan chose.
AttentionForward attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o,
                                   const AttentionPlan& plan, Generator& gen);

// {dq, dk, dv} (where `needs` asks) from the node's saved tensors, by the kernel that ran the forward.
std::vector<Tensor> node_backward(const AttentionPlan& plan, const Tensor& grad, const std::vector<Tensor>& saved,
                                  Needs needs);

}  // namespace ag
