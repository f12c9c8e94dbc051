// The fused attention without recording. Shapes: q (B, H, T, d), k (B, H, S, d), v (B, H, S, dv);
// scores and weights (B, H, T, S). Note [streaming attention] in engine/ops/attention.h.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "engine/kernels/flash_attention.h"
#include "engine/tensor.h"

namespace ag {

// The problem's sizes and the masks that shape the scores.
struct AttentionPlan {
  int64_t B = 0, H = 0, T = 0, S = 0, d = 0, dv = 0;
  double scale = 1;
  bool causal = false;
  bool zero_masked_rows = false;  // MaskedRows::zero
  Shape mask_strides;             // attn_mask's strides read as (B, H, T, S), 0 along broadcast dims
  bool streaming = false;         // Note [streaming attention]
  bool bf16 = false;              // the materialising kernel's products take bf16 operands (AutocastGuard)
};

// The op's tensors: q, k, v and the two masks (either may be undefined).
struct AttentionTensors {
  const Tensor& q;
  const Tensor& k;
  const Tensor& v;
  const Tensor& attn_mask;
  const Tensor& key_padding_mask;
};

// scale · x @ y (flags as matmul's): with bf16 operands and an f32 result under p.bf16.
Tensor attention_product(const AttentionPlan& p, const Tensor& x, const Tensor& y, bool tx, bool ty, double scale);

// Whether the plan runs the bf16 head kernel (Note [bf16 head kernel], flash_attention.h): under
// autocast, streaming, heads that fit it.
bool bf16_head_kernel(const AttentionPlan& p);
// Whether the kernel's products read bf16 heads (q, k, v given in bf16): the materialising kernel's
// under autocast, and the bf16 head kernel's.
bool bf16_heads(const AttentionPlan& p);

// The bf16 head kernel (bf16_head_kernel(p)) on bf16 heads t.q, t.k, t.v (contiguous): out written
// where the HeadsOut say (contiguous heads, or merged), and its bf16 copy where out_bf16 says (if
// anywhere); returns each query row's logsumexp (B, H, T).
Tensor bf16_head_attention_forward(const AttentionPlan& p, const AttentionTensors& t, const kernels::HeadsOut& out,
                                   const kernels::Bf16HeadsOut& out_bf16 = {});
// Its backward from the forward's lse and the output's f32 gradient where dout says: dq, dk, dv
// written where the HeadsOut say (null data: not asked for), contiguous heads or a packed
// projection's gradient in place.
void bf16_head_attention_backward(const AttentionPlan& p, const AttentionTensors& t, const Tensor& lse,
                                  const kernels::HeadsIn& dout, const kernels::HeadsOut& dq,
                                  const kernels::HeadsOut& dk, const kernels::HeadsOut& dv);

// Streaming: out (B, H, T, dv) and each query row's logsumexp, lse (B, H, T); f32 out and lse from
// bf16 heads (bf16_heads).
Tensor attention_streaming_forward(const AttentionPlan& p, const AttentionTensors& t, Tensor& lse);
// Its backward: {dq, dk, dv} from out, lse and the output's gradient g, each only where `needs` asks
// (f32 for bf16 heads).
std::vector<Tensor> attention_backward_streaming(const AttentionPlan& p, const AttentionTensors& t, const Tensor& g,
                                                 const Tensor& out, const Tensor& lse, std::array<bool, 3> needs);

// The masked scores' softmax, and its fully masked rows (undefined if none).
struct MaskedWeights {
  Tensor weights;     // (B, H, T, S)
  Tensor empty_rows;  // (B, H, T, 1) b8
  Tensor operand;     // (B, H, T, S) bf16: weights ⊙ keep rounded, from attention_weights_with_operand
};

// weights = softmax(scale · q @ kᵀ, masked), (B, H, T, S); rows with every key masked are NaN, or
// zero under MaskedRows::zero.
MaskedWeights attention_weights(const Tensor& q, const Tensor& k, const AttentionPlan& p, const Tensor& attn_mask,
                                const Tensor& key_padding_mask);
// The same under autocast (p.bf16), with the product's bf16 operand: weights ⊙ keep (the dropout
// mask, if defined, of the weights' shape) rounded. The masks, the softmax and the rounding run in
// one pass over each block of rows while it is in cache.
MaskedWeights attention_weights_with_operand(const Tensor& q, const Tensor& k, const AttentionPlan& p,
                                             const Tensor& attn_mask, const Tensor& key_padding_mask,
                                             const Tensor& keep);
// The masks as one additive (B, H, T, S) tensor: 0, -inf where masked, or attn_mask's values.
Tensor additive_mask(const AttentionPlan& p, DType dtype, const Tensor& attn_mask, const Tensor& key_padding_mask);
// (B, H, T, 1) b8, true where a row's logsumexp lse (B, H, T) is -inf (every key masked);
// undefined when there are none.
Tensor rows_without_keys(const Tensor& lse);

}  // namespace ag
