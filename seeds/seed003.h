// The seeds' attention family, with the seeds' parameter names so state_dict() matches the
// PyTorch classes: SelfAttention (seeds 000/002), and seed 003's SelfAttention_v1,
// SelfAttention_v2, CausalAttention and MultiHeadAttention (split heads, out_proj).
//
// Every forward takes x (B, T, d_in) — the single-head classes also (T, d_in) — and an optional
// key-padding mask: b8 of x's shape without the last dim, true where the token is padding.
// Padded keys get exactly zero attention weight; the outputs at padded query positions are
// computed but meaningless. The weights of the last forward (after dropout in training, as
// PyTorch's need_weights; detached) stay in last_attention_weights for plotting.
#pragma once

#include <memory>
#include <string>

#include "engine/options.h"
#include "nn/layers.h"
#include "nn/module.h"

namespace ag::seeds {

// What every attention module shares: forward with or without a key-padding mask, the attention
// weights of the last forward, and what a query whose keys are all hidden gets (an all-padding
// sequence, or left padding under a causal mask). The seeds' classes choose MaskedRows::zero:
// zero weights, a zero context and zero gradient, so one empty sequence does not poison the
// batch; PyTorch gives NaN there (MaskedRows::nan). Note [fully masked rows] in engine/ops/attention.h.
// Every class runs the fused ag::scaled_dot_product_attention.
class AttentionModule : public nn::Callable<AttentionModule> {
 public:
  virtual Tensor forward(const Tensor& x, const Tensor& key_padding_mask = Tensor()) = 0;

  Tensor last_attention_weights;  // (…, T, T), or (B, H, T, T) for MultiHeadAttention
  MaskedRows masked_rows = MaskedRows::zero;
};

// Seeds 000/002: queries = x W_qᵀ (T, d_q), keys = x W_kᵀ (T, d_k), values = x W_vᵀ (T, d_v);
// context = softmax(queries keysᵀ / √d_k) values (T, d_v). d_q must equal d_k; d_v may differ.
// Weights ~ N(0, 1) as in seed 002's class (seed 000 draws them from U[0, 1)). Seed 002's own
// forward multiplies the wrong axes and takes softmax over dim 0: not reproduced.
class SelfAttention : public AttentionModule {
 public:
  SelfAttention(int64_t d_in, int64_t d_q, int64_t d_k, int64_t d_v, Generator& gen = default_generator());
  Tensor forward(const Tensor& x, const Tensor& key_padding_mask = Tensor()) override;
  std::string type_name() const override { return "SelfAttention"; }

  Tensor W_q;  // (d_q, d_in)
  Tensor W_k;  // (d_k, d_in)
  Tensor W_v;  // (d_v, d_in)
};

// Seed 003: weights (d_in, d_out) ~ U[0, 1), used as x @ w (no transpose).
class SelfAttention_v1 : public AttentionModule {
 public:
  SelfAttention_v1(int64_t d_in, int64_t d_out, Generator& gen = default_generator());
  Tensor forward(const Tensor& x, const Tensor& key_padding_mask = Tensor()) override;
  std::string type_name() const override { return "SelfAttention_v1"; }

  Tensor w_query;  // (d_in, d_out)
  Tensor w_key;    // (d_in, d_out)
  Tensor w_value;  // (d_in, d_out)
};

// Seed 003: the projections are Linear layers (PyTorch's init; bias if qkv_bias).
class SelfAttention_v2 : public AttentionModule {
 public:
  SelfAttention_v2(int64_t d_in, int64_t d_out, bool qkv_bias = false, Generator& gen = default_generator());
  Tensor forward(const Tensor& x, const Tensor& key_padding_mask = Tensor()) override;
  std::string type_name() const override { return "SelfAttention_v2"; }

  std::shared_ptr<nn::Linear> w_query, w_key, w_value;
};

// Seed 003, causal for real: position t attends to positions ≤ t only. x is (B, T, d_in) with
// T ≤ context_length. The buffer "mask" is the seed's f32 (context_length, context_length)
// triu(ones, 1): 1 above the diagonal, where a query would see the future.
class CausalAttention : public AttentionModule {
 public:
  CausalAttention(int64_t d_in, int64_t d_out, int64_t context_length, double dropout, bool qkv_bias = false,
                  Generator& gen = default_generator());
  Tensor forward(const Tensor& x, const Tensor& key_padding_mask = Tensor()) override;
  std::string type_name() const override { return "CausalAttention"; }

  std::shared_ptr<nn::Linear> w_query, w_key, w_value;
  std::shared_ptr<nn::Dropout> dropout;
  Tensor mask;
};

// Seed 003's final class: one projection each for queries, keys and values of width d_out,
// split into num_heads heads of width d_out / num_heads, causal attention per head, heads
// concatenated, then out_proj. The same maths as torch.nn.MultiheadAttention with a causal
// attn_mask (in_proj_weight = [W_query; W_key; W_value]).
class MultiHeadAttention : public AttentionModule {
 public:
  MultiHeadAttention(int64_t d_in, int64_t d_out, int64_t context_length, double dropout, int64_t num_heads,
                     bool qkv_bias = false, Generator& gen = default_generator());
  Tensor forward(const Tensor& x, const Tensor& key_padding_mask = Tensor()) override;
  std::string type_name() const override { return "MultiHeadAttention"; }

  int64_t num_heads, head_dim;
  std::shared_ptr<nn::Linear> W_query, W_key, W_value, out_proj;
  std::shared_ptr<nn::Dropout> dropout;
  Tensor mask;
};

// Seed 003's input: "Your journey starts with one step", one 3-d embedding per token, typed in
// as the notebook has them (6, 3).
Tensor seed003_inputs(DType dtype = DType::f32);

}  // namespace ag::seeds
