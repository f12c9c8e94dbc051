// A GPT as nanoGPT's model.py builds it, with its module tree and state_dict names, so that a
// checkpoint moves to and from nanoGPT's PyTorch code (and ../shared/peer/charlm_torch.py):
//   transformer.wte (V, C), transformer.wpe (block, C),
//   transformer.h.{i}: ln_1, attn.c_attn (3C, C), attn.c_proj (C, C), ln_2, mlp.c_fc (4C, C), mlp.c_proj (C, 4C)
//   transformer.ln_f, lm_head (V, C) — the same tensor as transformer.wte.weight (tied).
// Pre-LayerNorm blocks, causal multi-head self-attention through the engine's fused
// scaled_dot_product_attention, exact (erf) GELU. Init: N(0, 0.02) for Linear and Embedding
// weights, N(0, 0.02/√(2·n_layer)) for the two residual projections (c_proj), biases 0.
#pragma once

#include <memory>
#include <vector>

#include "nn/layers.h"

namespace ag::nn {

struct GPTConfig {
  int64_t vocab_size = 0;
  int64_t block_size = 64;  // the longest context, and wpe's rows
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;
  double dropout = 0;
  bool bias = false;  // biases in Linears and LayerNorms (nanoGPT's train.py: none)
};

// Keys and values of every layer for the tokens seen so far: keys[l], values[l] are
// (B, n_head, length, head_dim). Generation appends to it instead of re-running the context.
struct KVCache {
  std::vector<Tensor> keys, values;
  int64_t length() const { return keys.empty() || !keys[0].defined() ? 0 : keys[0].size(2); }
};

class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(const GPTConfig& config, Generator& gen);
  // x (B, T, C) → (B, T, C). With `cached_keys/values` (inference): either they are empty and T
  // tokens are attended causally, or they hold earlier positions and T is 1; they are extended.
  // With residual: residual + the attention's output, the add in c_proj's product where dropout is
  // inactive (linear_add).
  Tensor forward(const Tensor& x, Tensor* cached_keys = nullptr, Tensor* cached_values = nullptr,
                 const Tensor& residual = {});
  std::string type_name() const override { return "CausalSelfAttention"; }

  int64_t n_head;
  double dropout;
  std::shared_ptr<Linear> c_attn, c_proj;

 private:
  // qkv (B, T, 3C) against the cache's keys and values, which it extends → (B, nh, T, hs).
  Tensor attend_cached(const Tensor& qkv, Tensor& cached_keys, Tensor& cached_values, double p) const;
};

class MLP : public UnaryModule {
 public:
  MLP(const GPTConfig& config, Generator& gen);
  Tensor forward(const Tensor& x) override;  // c_proj(gelu(c_fc(x))), dropout
  // residual + forward(x), the add in c_proj's product where dropout is inactive (linear_add), in this
  // module's scope.
  Tensor forward_add(const Tensor& x, const Tensor& residual);
  std::string type_name() const override { return "MLP"; }

  double dropout;
  std::shared_ptr<Linear> c_fc, c_proj;

 private:
  Tensor output(const Tensor& x, const Tensor& residual);  // forward's body (no scope or hooks of its own)
};

class Block : public Module {
 public:
  Block(const GPTConfig& config, Generator& gen);
  // x + attn(ln_1(x)), then + mlp(ln_2(·)); the cache as CausalSelfAttention's.
  Tensor forward(const Tensor& x, Tensor* cached_keys = nullptr, Tensor* cached_values = nullptr);
  std::string type_name() const override { return "Block"; }

  std::shared_ptr<LayerNorm> ln_1, ln_2;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<MLP> mlp;
};

class GPT : public Module {
 public:
  explicit GPT(const GPTConfig& config, Generator& gen = default_generator());
  // idx (B, T) i64 token ids, T ≤ block_size → logits (B, T, vocab_size).
  Tensor forward(const Tensor& idx);
  // Inference with a cache (no gradient): idx (B, T) continues the tokens in `cache` (empty, or
  // T = 1 after a first call); returns the logits of the last position, (B, vocab_size).
  Tensor forward_cached(const Tensor& idx, KVCache& cache);
  std::string type_name() const override { return "GPT"; }
  std::string extra_repr() const override;

  const GPTConfig config;
  std::shared_ptr<Embedding> wte, wpe;
  std::shared_ptr<ModuleList<Block>> h;
  std::shared_ptr<LayerNorm> ln_f;

 private:
  Tensor embed(const Tensor& idx, int64_t first_position);  // wte(idx) + wpe(positions), dropout
  Tensor head(const Tensor& x);                             // ln_f, then logits through the tied wte
};

}  // namespace ag::nn
