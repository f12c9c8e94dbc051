// Seed 004's self-attention encoder-decoder for the "noisy squares" task, class by class:
// Attention (one wide head), MultiHeadAttention (wide heads concatenated, then linear_out),
// EncoderSelfAttn, DecoderSelfAttn and EncoderDecoderSelfAttn. Parameter names and the module
// tree equal the seed's PyTorch classes, so a state_dict moves between the two.
//
// The masks are named `hidden` (source_hidden, target_hidden) because they are the opposite of
// the seed's `mask`, `source_mask` and `target_mask`: b8, TRUE where attention is FORBIDDEN (as
// masked_fill and causal_mask read), where the seed's are true where allowed (filled where
// `mask == 0`); causal_mask(T) is the negation of the seed's subsequent_mask(T). A port passes
// logical_not(seed_mask).
// A mask broadcasts against the scores (N, T_query, L_keys): (N, 1, L) hides source padding,
// (T, T) hides the future. Each head runs the fused ag::scaled_dot_product_attention; a query
// whose keys are all hidden gets masked_rows' treatment: zeros (MaskedRows::zero), like the
// seed classes of seeds/seed003.h, where the seed's -1e9 fill gave uniform weights (Note [fully
// masked rows] in engine/ops/attention.h; seed 004's data never hides a whole row).
#pragma once

#include <memory>

#include "engine/options.h"
#include "nn/layers.h"
#include "nn/module.h"

namespace ag::seeds::seed004 {

// Scaled dot-product attention with one head of width hidden_dim. init_keys() fixes the keys
// (and values) that later forward() calls attend to: the encoder states for cross-attention,
// the query itself for self-attention.
class Attention : public nn::Callable<Attention> {
 public:
  explicit Attention(int64_t hidden_dim, int64_t input_dim = -1, bool proj_values = false,
                     Generator& gen = default_generator());
  void init_keys(const Tensor& keys);                              // keys (N, L, input_dim)
  Tensor forward(const Tensor& query, const Tensor& hidden = {});  // (N, T, input_dim) → (N, T, hidden_dim)
  std::string type_name() const override { return "Attention"; }

  const Tensor& alphas() const { return alphas_; }  // the last attention weights (N, T, L), detached

  std::shared_ptr<nn::Linear> linear_query, linear_key, linear_value;
  MaskedRows masked_rows = MaskedRows::zero;

 private:
  int64_t input_dim_;
  bool proj_values_;
  Tensor proj_keys_;  // (N, L, hidden_dim)
  Tensor values_;     // (N, L, hidden_dim), or the keys themselves without proj_values
  Tensor alphas_;
};

// n_heads Attention heads of width d_model each; their contexts are concatenated
// (N, T, n_heads·d_model) and linear_out brings them back to d_model.
class MultiHeadAttention : public nn::Callable<MultiHeadAttention> {
 public:
  MultiHeadAttention(int64_t n_heads, int64_t d_model, int64_t input_dim = -1, bool proj_values = true,
                     Generator& gen = default_generator());
  void init_keys(const Tensor& keys);
  Tensor forward(const Tensor& query, const Tensor& hidden = {});
  std::string type_name() const override { return "MultiHeadAttention"; }

  Tensor alphas() const;  // every head's last attention weights stacked: (n_heads, N, T, L)

  std::shared_ptr<nn::Linear> linear_out;
  std::shared_ptr<nn::ModuleList<Attention>> attn_heads;
};

// Self-attention over the source sequence, then a feed-forward network.
class EncoderSelfAttn : public nn::Callable<EncoderSelfAttn> {
 public:
  EncoderSelfAttn(int64_t n_heads, int64_t d_model, int64_t ff_units, int64_t n_features = -1,
                  Generator& gen = default_generator());
  Tensor forward(const Tensor& query, const Tensor& hidden = {});  // (N, L, n_features) → (N, L, d_model)
  std::string type_name() const override { return "EncoderSelfAttn"; }

  std::shared_ptr<MultiHeadAttention> self_attn_heads;
  std::shared_ptr<nn::Sequential> ffn;
};

// Masked self-attention over the (shifted) target sequence, cross-attention to the encoder
// states given to init_keys(), then a feed-forward network back to n_features.
class DecoderSelfAttn : public nn::Callable<DecoderSelfAttn> {
 public:
  DecoderSelfAttn(int64_t n_heads, int64_t d_model, int64_t ff_units, int64_t n_features = -1,
                  Generator& gen = default_generator());
  void init_keys(const Tensor& states);  // encoder states (N, L, d_model)
  // (N, T, n_features) → (N, T, n_features). source_hidden hides encoder states, target_hidden
  // the decoder's own later positions.
  Tensor forward(const Tensor& query, const Tensor& source_hidden = {}, const Tensor& target_hidden = {});
  std::string type_name() const override { return "DecoderSelfAttn"; }

  std::shared_ptr<MultiHeadAttention> self_attn_heads;
  std::shared_ptr<MultiHeadAttention> cross_attn_heads;
  std::shared_ptr<nn::Sequential> ffn;
};

// The first input_len points of X are the source, the next target_len the target. In training
// mode forward() decodes the shifted target at once under the causal mask (teacher forcing);
// in eval mode it predicts target_len points one at a time from its own outputs.
class EncoderDecoderSelfAttn : public nn::Callable<EncoderDecoderSelfAttn> {
 public:
  EncoderDecoderSelfAttn(std::shared_ptr<EncoderSelfAttn> encoder, std::shared_ptr<DecoderSelfAttn> decoder,
                         int64_t input_len, int64_t target_len);
  // X (N, input_len + target_len, F) in training, (N, ≥ input_len, F) in eval → (N, target_len, F).
  Tensor forward(const Tensor& X, const Tensor& source_hidden = {});
  void encode(const Tensor& source_seq, const Tensor& source_hidden);
  Tensor decode(const Tensor& shifted_target_seq, const Tensor& source_hidden, const Tensor& target_hidden);
  Tensor predict(const Tensor& source_seq, const Tensor& source_hidden);  // no gradient flows out
  std::string type_name() const override { return "EncoderDecoderSelfAttn"; }

  std::shared_ptr<EncoderSelfAttn> encoder;
  std::shared_ptr<DecoderSelfAttn> decoder;
  int64_t input_len;
  int64_t target_len;
};

}  // namespace ag::seeds::seed004
