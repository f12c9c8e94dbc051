// Fused scaled dot-product attention (attention.cpp): softmax(q @ kᵀ / √d + masks) @ v, with its
// own backward.
#pragma once

#include "engine/generator.h"
#include "engine/options.h"
#include "engine/tensor.h"

namespace ag {

// q (B, H, T, d), k (B, H, S, d), v (B, H, S, dv) → output (B, H, T, dv). The boolean masks read as
// in PyTorch, each under PyTorch's name for it:
//   attn_mask broadcasts to (B, H, T, S): b8 as in torch's scaled_dot_product_attention, TRUE = the
//     key TAKES PART (false = masked); or additive in q's dtype (-inf masks).
//   key_padding_mask b8 (B, S) as in torch.nn.MultiheadAttention, TRUE = the key is padding (IGNORED).
//   is_causal masks key j > query i.
// dropout_p > 0 drops weights (draws from gen as dropout does; in a data-parallel step each
// example's weight (h, i, j) at a place that depends on neither T nor S: attention_dropout_mask in
// engine/kernels/dropout.h, so padding a batch's queries or keys changes no real weight's mask).
// With need_weights, `weights` holds the (B, H, T, S) weights that multiplied v (after dropout),
// for inspection: no gradient.
//
// Note [fully masked rows]: a query whose keys are all masked has no weights to normalise.
// masked_rows says what it gets; every attention class of nn passes its choice through here.
//   nan (default, PyTorch's): NaN weights and output for that query, as softmax over all -inf
//     gives in PyTorch; the backward gives it, like PyTorch's masked_fill/softmax/matmul, zero dq
//     and no share of dk (dv is NaN: the NaN weights multiply the incoming gradient).
//   zero: all-zero weights, so a zero output and zero gradients for that query; one empty
//     (all-padding) sequence does not poison a batch's loss.
// Either way the query passes q and k nothing at any order: create_graph's backward gives the
// second order of the composition (backward_weights in attention.cpp).
//
// Note [streaming attention]: `kernel` picks how the op computes. streaming (the FlashAttention
// recurrence, engine/kernels/flash_attention.h) never holds the (T, S) weights, only each row's
// logsumexp; it cannot return weights or apply dropout. materialising computes the (B, H, T, S)
// weights (returned with need_weights). automatic streams whenever it can and the problem is large
// enough for streaming to be at least as fast (kStreamingMinScores in attention.cpp).
struct AttentionOptions {
  Tensor attn_mask = {};         // b8: true = takes part; or additive
  Tensor key_padding_mask = {};  // b8 (B, S): true = ignored
  bool is_causal = false;
  double dropout_p = 0.0;
  bool need_weights = false;
  MaskedRows masked_rows = MaskedRows::nan;
  AttentionKernel kernel = AttentionKernel::automatic;
  bool merge_heads = false;  // packed ops only: output (N, T, H·dv), merge_heads(the heads' output)
};
struct Attention {
  Tensor output;
  Tensor weights;
};
Attention scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                       const AttentionOptions& options = {}, Generator& gen = default_generator());

// The same attention on projections packed as one product per projection group makes them (nn's
// MultiheadAttention: one product against in_proj_weight for self-attention; for cross-attention one
// for the queries and one against the k and v rows for the memory). Each projection is E = H·d
// columns of its source, split into heads of d:
//   packed_self_attention: qkv (N, L, 3E), each position's [q | k | v];
//   packed_cross_attention: q (N, T, E) and kv (N, S, 2E), each key position's [k | v].
// Output (N, H, T, d) and options as scaled_dot_product_attention's on the split heads, to the bit;
// with merge_heads, merge_heads(that output) (N, T, E), what an out_proj reads, to the bit (the bf16
// head kernel writes it so, the other kernels merge their output with recorded ops).
// One node: its backward writes each source's gradient whole, where the split heads' slices would
// each place theirs into zeros and then be summed.
// heads (N, H, T, d) side by side as (N, T, H·d): transpose(heads, 1, 2) reshaped, recorded.
Tensor merge_heads(const Tensor& heads);
Attention packed_self_attention(const Tensor& qkv, int64_t heads, const AttentionOptions& options = {},
                                Generator& gen = default_generator());
Attention packed_cross_attention(const Tensor& q, const Tensor& kv, int64_t heads, const AttentionOptions& options = {},
                                 Generator& gen = default_generator());

// Whether the op streams T queries over S keys with these options (the kernel chosen, or automatic's
// rule): a memory estimate counts the (B, H, T, S) weights only when it does not. Outside autocast:
// under it, heads of at most 64 queries and keys stream as well (Note [bf16 head kernel]).
bool attention_streams(int64_t T, int64_t S, const AttentionOptions& options);

}  // namespace ag
