#include "seeds/seed004.h"

#include "engine/autograd.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/attention.h"
#include "engine/ops/mask.h"
#include "engine/ops/shape.h"

namespace ag::seeds::seed004 {

namespace {

void check_sequence(std::string_view module, std::string_view what, const Tensor& x, int64_t features) {
  AG_CHECK(x.defined() && x.dim() == 3 && x.size(2) == features, "{}: expected {} of shape (N, L, {}), got {}", module,
           what, features, x.defined() ? shape_str(x.shape()) : "undefined");
}

std::shared_ptr<nn::Sequential> feed_forward(int64_t d_model, int64_t ff_units, int64_t d_out, Generator& gen) {
  return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::UnaryModule>>{
      std::make_shared<nn::Linear>(d_model, ff_units, true, gen), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(ff_units, d_out, true, gen)});
}

}  // namespace

Attention::Attention(int64_t hidden_dim, int64_t input_dim, bool proj_values, Generator& gen)
    : input_dim_(input_dim < 0 ? hidden_dim : input_dim), proj_values_(proj_values) {
  AG_CHECK(hidden_dim > 0 && input_dim_ > 0, "Attention: expected positive sizes, got hidden_dim={} input_dim={}",
           hidden_dim, input_dim_);
  linear_query = register_module("linear_query", std::make_shared<nn::Linear>(input_dim_, hidden_dim, true, gen));
  linear_key = register_module("linear_key", std::make_shared<nn::Linear>(input_dim_, hidden_dim, true, gen));
  linear_value = register_module("linear_value", std::make_shared<nn::Linear>(input_dim_, hidden_dim, true, gen));
}

void Attention::init_keys(const Tensor& keys) {
  check_sequence("Attention.init_keys", "keys", keys, input_dim_);
  const ScopeGuard scope = enter_scope();
  proj_keys_ = (*linear_key)(keys);                       // (N, L, H)
  values_ = proj_values_ ? (*linear_value)(keys) : keys;  // (N, L, H), or the keys (N, L, input_dim)
}

Tensor Attention::forward(const Tensor& query, const Tensor& hidden) {
  AG_CHECK(proj_keys_.defined(), "Attention: call init_keys(keys) before forward");
  check_sequence("Attention", "a query", query, input_dim_);
  AG_CHECK(query.size(0) == proj_keys_.size(0), "Attention: the query has batch size {}, the keys {}", query.size(0),
           proj_keys_.size(0));
  // softmax(proj_query proj_keysᵀ / √d_k, hidden keys masked) values, as one head of the fused op.
  AttentionOptions o{.need_weights = true, .masked_rows = masked_rows};
  if (hidden.defined())
    o.attn_mask = logical_not(hidden.dim() == 3 ? unsqueeze(hidden, 1) : hidden);  // true = takes part
  const Tensor proj_query = (*linear_query)(query);                                // (N, T, H)
  const ag::Attention a = scaled_dot_product_attention(unsqueeze(proj_query, 1), unsqueeze(proj_keys_, 1),
                                                       unsqueeze(values_, 1), o);  // (N, 1, T, H)
  alphas_ = squeeze(a.weights, 1);                                                 // (N, T, L)
  return squeeze(a.output, 1);                                                     // (N, T, H)
}

MultiHeadAttention::MultiHeadAttention(int64_t n_heads, int64_t d_model, int64_t input_dim, bool proj_values,
                                       Generator& gen) {
  AG_CHECK(n_heads > 0, "MultiHeadAttention: expected a positive number of heads, got {}", n_heads);
  linear_out =
      register_module("linear_out", std::make_shared<nn::Linear>(numel({n_heads, d_model}), d_model, true, gen));
  attn_heads = register_module("attn_heads", std::make_shared<nn::ModuleList<Attention>>());
  for (int64_t h = 0; h < n_heads; ++h)
    attn_heads->push_back(std::make_shared<Attention>(d_model, input_dim, proj_values, gen));
}

void MultiHeadAttention::init_keys(const Tensor& keys) {
  const ScopeGuard scope = enter_scope();
  for (auto& head : *attn_heads) head->init_keys(keys);
}

Tensor MultiHeadAttention::alphas() const {
  std::vector<Tensor> per_head;
  for (auto& head : *attn_heads) per_head.push_back(head->alphas());
  return stack(per_head, 0);  // (n_heads, N, T, L)
}

Tensor MultiHeadAttention::forward(const Tensor& query, const Tensor& hidden) {
  std::vector<Tensor> contexts;
  for (auto& head : *attn_heads) contexts.push_back((*head)(query, hidden));  // each (N, T, D)
  Tensor concatenated = cat(contexts, -1);                                    // (N, T, n_heads·D)
  return (*linear_out)(concatenated);                                         // (N, T, D)
}

EncoderSelfAttn::EncoderSelfAttn(int64_t n_heads, int64_t d_model, int64_t ff_units, int64_t n_features,
                                 Generator& gen) {
  self_attn_heads =
      register_module("self_attn_heads", std::make_shared<MultiHeadAttention>(n_heads, d_model, n_features, true, gen));
  ffn = register_module("ffn", feed_forward(d_model, ff_units, d_model, gen));
}

Tensor EncoderSelfAttn::forward(const Tensor& query, const Tensor& hidden) {
  self_attn_heads->init_keys(query);
  Tensor att = (*self_attn_heads)(query, hidden);  // (N, L, d_model)
  return (*ffn)(att);
}

DecoderSelfAttn::DecoderSelfAttn(int64_t n_heads, int64_t d_model, int64_t ff_units, int64_t n_features,
                                 Generator& gen) {
  const int64_t features = n_features < 0 ? d_model : n_features;
  self_attn_heads =
      register_module("self_attn_heads", std::make_shared<MultiHeadAttention>(n_heads, d_model, features, true, gen));
  cross_attn_heads =
      register_module("cross_attn_heads", std::make_shared<MultiHeadAttention>(n_heads, d_model, -1, true, gen));
  ffn = register_module("ffn", feed_forward(d_model, ff_units, features, gen));
}

void DecoderSelfAttn::init_keys(const Tensor& states) {
  const ScopeGuard scope = enter_scope();
  cross_attn_heads->init_keys(states);
}

Tensor DecoderSelfAttn::forward(const Tensor& query, const Tensor& source_hidden, const Tensor& target_hidden) {
  self_attn_heads->init_keys(query);
  Tensor att1 = (*self_attn_heads)(query, target_hidden);  // (N, T, d_model)
  Tensor att2 = (*cross_attn_heads)(att1, source_hidden);  // (N, T, d_model)
  return (*ffn)(att2);                                     // (N, T, n_features)
}

EncoderDecoderSelfAttn::EncoderDecoderSelfAttn(std::shared_ptr<EncoderSelfAttn> encoder_,
                                               std::shared_ptr<DecoderSelfAttn> decoder_, int64_t input_len,
                                               int64_t target_len)
    : input_len(input_len), target_len(target_len) {
  AG_CHECK(encoder_ && decoder_, "EncoderDecoderSelfAttn: the encoder and the decoder must not be null");
  AG_CHECK(input_len > 0 && target_len > 0,
           "EncoderDecoderSelfAttn: expected positive input_len and target_len, got {} and {}", input_len, target_len);
  encoder = register_module("encoder", std::move(encoder_));
  decoder = register_module("decoder", std::move(decoder_));
}

void EncoderDecoderSelfAttn::encode(const Tensor& source_seq, const Tensor& source_hidden) {
  Tensor encoder_states = (*encoder)(source_seq, source_hidden);  // (N, input_len, d_model)
  decoder->init_keys(encoder_states);
}

Tensor EncoderDecoderSelfAttn::decode(const Tensor& shifted_target_seq, const Tensor& source_hidden,
                                      const Tensor& target_hidden) {
  return (*decoder)(shifted_target_seq, source_hidden, target_hidden);
}

Tensor EncoderDecoderSelfAttn::predict(const Tensor& source_seq, const Tensor& source_hidden) {
  Tensor inputs = slice(source_seq, 1, -1, source_seq.size(1));  // (N, 1, F): the last source point
  for (int64_t i = 0; i < target_len; ++i) {
    Tensor out = decode(inputs, source_hidden, causal_mask(i + 1));      // (N, i+1, F)
    inputs = cat({inputs, slice(out, 1, -1, out.size(1))}, 1).detach();  // (N, i+2, F)
  }
  return slice(inputs, 1, 1, inputs.size(1));  // (N, target_len, F)
}

Tensor EncoderDecoderSelfAttn::forward(const Tensor& X, const Tensor& source_hidden) {
  AG_CHECK(X.defined() && X.dim() == 3 && X.size(1) >= input_len,
           "EncoderDecoderSelfAttn: expected X of shape (N, L ≥ {}, F), got {}", input_len,
           X.defined() ? shape_str(X.shape()) : "undefined");
  Tensor source_seq = slice(X, 1, 0, input_len);  // (N, input_len, F)
  encode(source_seq, source_hidden);
  if (!is_training()) return predict(source_seq, source_hidden);
  AG_CHECK(X.size(1) == input_len + target_len,
           "EncoderDecoderSelfAttn: in training mode X must hold source and target, (N, {} + {}, F), got {}", input_len,
           target_len, shape_str(X.shape()));
  Tensor shifted_target_seq = slice(X, 1, input_len - 1, X.size(1) - 1);  // (N, target_len, F)
  return decode(shifted_target_seq, source_hidden, causal_mask(target_len));
}

}  // namespace ag::seeds::seed004
