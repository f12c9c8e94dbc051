#include "nn/transformer.h"

#include <cmath>

#include "engine/autocast.h"
#include "engine/autograd.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/attention.h"
#include "engine/ops/dropout.h"
#include "engine/ops/mask.h"
#include "engine/ops/matmul.h"
#include "engine/ops/pointwise.h"
#include "engine/ops/shape.h"

namespace ag::nn {

namespace {

// U(-a, a) with a = √(6 / (fan_in + fan_out)) for a (fan_out, fan_in) matrix (torch's xavier_uniform_;
// in torch style its formula, √3 · √(2 / (fan_in + fan_out)), which can differ in the last bit).
Tensor xavier_uniform(const Shape& shape, Generator& gen) {
  const auto fans = static_cast<double>(shape[0] + shape[1]);
  const double bound = gen.torch() ? std::sqrt(3.0) * std::sqrt(2.0 / fans) : std::sqrt(6.0 / fans);
  return init_uniform(shape, bound, gen);
}

std::string shape_or_undefined(const Tensor& t) { return t.defined() ? shape_str(t.shape()) : "undefined"; }

void check_mask(std::string_view module, std::string_view what, const Tensor& mask, const Shape& expected) {
  if (!mask.defined()) return;
  AG_CHECK(mask.dtype() == DType::b8 && mask.shape() == expected,
           "{}: expected a b8 {} of shape {} (true = hidden), got {} of shape {}", module, what, shape_str(expected),
           dtype_name(mask.dtype()), shape_str(mask.shape()));
}

// Every mask against src (N, S, E) and tgt (N, T, E), so a bad one is named before any work.
void check_masks(const TransformerMasks& m, int64_t N, int64_t S, int64_t T) {
  check_mask("Transformer", "src_mask", m.src_mask, {S, S});
  check_mask("Transformer", "tgt_mask", m.tgt_mask, {T, T});
  check_mask("Transformer", "memory_mask", m.memory_mask, {T, S});
  check_mask("Transformer", "src_key_padding_mask", m.src_key_padding_mask, {N, S});
  check_mask("Transformer", "tgt_key_padding_mask", m.tgt_key_padding_mask, {N, T});
  check_mask("Transformer", "memory_key_padding_mask", m.memory_key_padding_mask, {N, S});
}

// norm(x + dropout(sublayer)), the post-norm residual of every sublayer: sublayer(residual) computes
// the sublayer's output, plus the residual when given one, added in its last product (linear_add);
// it is given x where dropout is inactive (eval, p = 0), the same numbers as the add after it, and
// otherwise dropout's mask is applied in the add's pass (add_dropout).
template <typename Sublayer>
Tensor add_and_norm(const Tensor& x, Sublayer&& sublayer, Dropout& dropout, LayerNorm& norm) {
  if (!dropout.is_training() || dropout.p == 0) return norm(sublayer(x));
  return norm(add_dropout(x, sublayer(Tensor()), dropout.p, true, dropout.generator()));
}

// linear2(dropout(relu(linear1(x)))), the first two as one op; plus the residual if given one.
Tensor feed_forward(const Tensor& x, Linear& linear1, Dropout& dropout, Linear& linear2, const Tensor& residual) {
  const Tensor hidden = linear1.forward_relu_dropout(x, dropout);
  return residual.defined() ? linear2.forward_add(hidden, residual) : linear2(hidden);
}

}  // namespace

PackedMultiheadAttention::PackedMultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout, Generator& gen)
    : num_heads(num_heads), dropout(dropout), gen_(&gen) {
  AG_CHECK(embed_dim > 0 && num_heads > 0 && embed_dim % num_heads == 0,
           "MultiheadAttention: embed_dim {} must be a positive multiple of num_heads {}", embed_dim, num_heads);
  AG_CHECK(dropout >= 0 && dropout <= 1, "MultiheadAttention: dropout must be in [0, 1], got {}", dropout);
  // PyTorch builds out_proj (its Linear draws) before xavier_uniform_ draws in_proj_weight; attograd's
  // own style keeps its older order, so that its seeded runs repeat.
  const auto make_out_proj = [&] {
    return std::make_shared<NonDynamicallyQuantizableLinear>(embed_dim, embed_dim, true, gen);
  };
  std::shared_ptr<NonDynamicallyQuantizableLinear> projection = gen.torch() ? make_out_proj() : nullptr;
  in_proj_weight = register_parameter("in_proj_weight", xavier_uniform({3 * embed_dim, embed_dim}, gen));
  in_proj_bias = register_parameter("in_proj_bias", zeros({3 * embed_dim}));
  out_proj = register_module("out_proj", projection ? projection : make_out_proj());
  NoGradGuard no_grad;
  out_proj->bias.zero_();
}

void PackedMultiheadAttention::check_input(const Tensor& x) const {
  const int64_t E = in_proj_bias.size(0) / 3;
  AG_CHECK(x.defined() && x.dim() == 3 && x.size(2) == E,
           "MultiheadAttention: expected query, key and value of shape (N, L, {}), got {}", E, shape_or_undefined(x));
}

std::pair<Tensor, Tensor> PackedMultiheadAttention::unrecorded_projection(int64_t which) const {
  ProjectionSlices& s = projection_slices_;
  if (s.weight.lock() != in_proj_weight.impl_ptr() || s.weight_version != in_proj_weight.version() ||
      s.bias.lock() != in_proj_bias.impl_ptr() || s.bias_version != in_proj_bias.version()) {
    const int64_t E = in_proj_bias.size(0) / 3;
    for (int64_t i = 0; i < 3; ++i) {
      s.weights[static_cast<size_t>(i)] = slice(in_proj_weight, 0, i * E, (i + 1) * E);  // (E, E)
      s.biases[static_cast<size_t>(i)] = slice(in_proj_bias, 0, i * E, (i + 1) * E);     // (E)
    }
    s.weight = in_proj_weight.impl_ptr();
    s.bias = in_proj_bias.impl_ptr();
    s.weight_version = in_proj_weight.version();
    s.bias_version = in_proj_bias.version();
  }
  return {s.weights[static_cast<size_t>(which)], s.biases[static_cast<size_t>(which)]};
}

Tensor PackedMultiheadAttention::project(const Tensor& x, int64_t which) const {
  check_input(x);
  const int64_t E = in_proj_bias.size(0) / 3;
  const auto [w, b] = grad_enabled() ? std::pair{slice(in_proj_weight, 0, which * E, (which + 1) * E),  // (E, E)
                                                 slice(in_proj_bias, 0, which * E, (which + 1) * E)}    // (E)
                                     : unrecorded_projection(which);
  const Tensor projected = linear(x, w, b);                                             // (N, L, E)
  Tensor heads = reshape(projected, {x.size(0), x.size(1), num_heads, E / num_heads});  // (N, L, H, E/H)
  return transpose(heads, 1, 2);                                                        // (N, H, L, E/H)
}

Tensor PackedMultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                         const Tensor& key_padding_mask, const Tensor& attn_mask,
                                         const Tensor& residual) {
  AG_CHECK(key.defined() && value.defined() && key.dim() == 3 && value.dim() == 3 && key.size(1) == value.size(1),
           "MultiheadAttention: expected key and value (N, S, E) of one length, got {} and {}", shape_or_undefined(key),
           shape_or_undefined(value));
  if (key.impl() != value.impl())
    return attend(query, project(key, 1), project(value, 2), key_padding_mask, attn_mask, residual);
  // One product per projection group: self-attention's q, k and v against in_proj_weight (3E, E);
  // cross-attention's q against its first E rows, and the memory's k and v against the other 2E.
  check_input(query);
  check_input(key);
  AG_CHECK(query.size(0) == key.size(0), "MultiheadAttention: query {} and key {} must share the batch size",
           shape_str(query.shape()), shape_str(key.shape()));
  AttentionOptions o = options(query.size(0), query.size(1), key.size(1), key_padding_mask, attn_mask);
  o.merge_heads = true;  // the output as out_proj reads it, (N, T, E)
  if (query.impl() == key.impl()) {
    const Tensor qkv = linear(query, in_proj_weight, in_proj_bias);  // (N, L, 3E)
    return output(packed_self_attention(qkv, num_heads, o, *gen_), residual);
  }
  const int64_t E = in_proj_bias.size(0) / 3;
  const Tensor q = linear(query, slice(in_proj_weight, 0, 0, E), slice(in_proj_bias, 0, 0, E));         // (N, T, E)
  const Tensor kv = linear(key, slice(in_proj_weight, 0, E, 3 * E), slice(in_proj_bias, 0, E, 3 * E));  // (N, S, 2E)
  return output(packed_cross_attention(q, kv, num_heads, o, *gen_), residual);
}

AttentionOptions PackedMultiheadAttention::options(int64_t N, int64_t T, int64_t S, const Tensor& key_padding_mask,
                                                   const Tensor& attn_mask) const {
  check_mask("MultiheadAttention", "attn_mask", attn_mask, {T, S});
  check_mask("MultiheadAttention", "key_padding_mask", key_padding_mask, {N, S});
  AttentionOptions o{.key_padding_mask = key_padding_mask,
                     .dropout_p = is_training() ? dropout : 0.0,
                     .need_weights = !is_training(),  // kept for inspection in eval mode: attention_weights()
                     .masked_rows = masked_rows};
  if (attn_mask.defined()) o.attn_mask = logical_not(attn_mask);  // sdpa's attn_mask: true = takes part
  return o;
}

// The heads' output merged (N, T, E) through out_proj, plus the residual if given one (added in
// out_proj's product); keeps the weights (eval mode).
Tensor PackedMultiheadAttention::output(const Attention& attention, const Tensor& residual) {
  weights_ = attention.weights;
  return residual.defined() ? out_proj->forward_add(attention.output, residual) : (*out_proj)(attention.output);
}

Tensor PackedMultiheadAttention::attend(const Tensor& query, const Tensor& k, const Tensor& v,
                                        const Tensor& key_padding_mask, const Tensor& attn_mask,
                                        const Tensor& residual) {
  Tensor q = project(query, 0);  // (N, H, T, Dh)
  AG_CHECK(k.dim() == 4 && v.dim() == 4 && q.size(0) == k.size(0) && k.size(2) == v.size(2),
           "MultiheadAttention: query {}, keys {} and values {} must share the batch size, keys and values the length",
           shape_str(query.shape()), shape_str(k.shape()), shape_str(v.shape()));
  const AttentionOptions o = options(q.size(0), q.size(2), k.size(2), key_padding_mask, attn_mask);
  Attention attention = scaled_dot_product_attention(q, k, v, o, *gen_);
  attention.output = merge_heads(attention.output);  // (N, H, T, Dh) → (N, T, E)
  return output(attention, residual);
}

TransformerEncoderLayer::TransformerEncoderLayer(const TransformerLayerOptions& o, Generator& gen) {
  self_attn =
      register_module("self_attn", std::make_shared<PackedMultiheadAttention>(o.d_model, o.nhead, o.dropout, gen));
  linear1 = register_module("linear1", std::make_shared<Linear>(o.d_model, o.dim_feedforward, true, gen));
  dropout = register_module("dropout", std::make_shared<Dropout>(o.dropout, gen));
  linear2 = register_module("linear2", std::make_shared<Linear>(o.dim_feedforward, o.d_model, true, gen));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(Shape{o.d_model}, o.layer_norm_eps));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(Shape{o.d_model}, o.layer_norm_eps));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(o.dropout, gen));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(o.dropout, gen));
}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask) {
  const auto attention = [&](const Tensor& r) {
    return (*self_attn)(src, src, src, src_key_padding_mask, src_mask, r);
  };
  Tensor x = add_and_norm(src, attention, *dropout1, *norm1);
  return add_and_norm(
      x, [&](const Tensor& r) { return feed_forward(x, *linear1, *dropout, *linear2, r); }, *dropout2, *norm2);
}

TransformerDecoderLayer::TransformerDecoderLayer(const TransformerLayerOptions& o, Generator& gen) {
  self_attn =
      register_module("self_attn", std::make_shared<PackedMultiheadAttention>(o.d_model, o.nhead, o.dropout, gen));
  multihead_attn =
      register_module("multihead_attn", std::make_shared<PackedMultiheadAttention>(o.d_model, o.nhead, o.dropout, gen));
  linear1 = register_module("linear1", std::make_shared<Linear>(o.d_model, o.dim_feedforward, true, gen));
  dropout = register_module("dropout", std::make_shared<Dropout>(o.dropout, gen));
  linear2 = register_module("linear2", std::make_shared<Linear>(o.dim_feedforward, o.d_model, true, gen));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(Shape{o.d_model}, o.layer_norm_eps));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(Shape{o.d_model}, o.layer_norm_eps));
  norm3 = register_module("norm3", std::make_shared<LayerNorm>(Shape{o.d_model}, o.layer_norm_eps));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(o.dropout, gen));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(o.dropout, gen));
  dropout3 = register_module("dropout3", std::make_shared<Dropout>(o.dropout, gen));
}

Tensor TransformerDecoderLayer::forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask,
                                        const Tensor& memory_mask, const Tensor& tgt_key_padding_mask,
                                        const Tensor& memory_key_padding_mask) {
  const auto attention = [&](const Tensor& r) {
    return (*self_attn)(tgt, tgt, tgt, tgt_key_padding_mask, tgt_mask, r);
  };
  Tensor x = add_and_norm(tgt, attention, *dropout1, *norm1);
  const auto cross = [&](const Tensor& r) {  // (N, T, E)
    return (*multihead_attn)(x, memory, memory, memory_key_padding_mask, memory_mask, r);
  };
  x = add_and_norm(x, cross, *dropout2, *norm2);
  return add_and_norm(
      x, [&](const Tensor& r) { return feed_forward(x, *linear1, *dropout, *linear2, r); }, *dropout3, *norm3);
}

Tensor TransformerDecoderLayer::forward_step(const Tensor& tgt, DecoderLayerCache& cache,
                                             const Tensor& memory_key_padding_mask) {
  const auto extend = [](const Tensor& cached, const Tensor& step) {  // (N, H, t, Dh) → (N, H, t + 1, Dh)
    return cached.defined() ? cat_keeping_bf16_copy({cached, step}, 2) : step;
  };
  cache.self_keys = extend(cache.self_keys, self_attn->project(tgt, 1));
  cache.self_values = extend(cache.self_values, self_attn->project(tgt, 2));
  const auto attention = [&](const Tensor& r) {
    return self_attn->attend(tgt, cache.self_keys, cache.self_values, {}, {}, r);
  };
  Tensor x = add_and_norm(tgt, attention, *dropout1, *norm1);
  const auto cross = [&](const Tensor& r) {
    return multihead_attn->attend(x, cache.memory_keys, cache.memory_values, memory_key_padding_mask, {}, r);
  };
  x = add_and_norm(x, cross, *dropout2, *norm2);  // (N, 1, E)
  return add_and_norm(
      x, [&](const Tensor& r) { return feed_forward(x, *linear1, *dropout, *linear2, r); }, *dropout3, *norm3);
}

int64_t DecoderCache::length() const {
  return layers.empty() || !layers[0].self_keys.defined() ? 0 : layers[0].self_keys.size(2);
}

int64_t DecoderCache::batch() const { return layers.empty() ? 0 : layers[0].memory_keys.size(0); }

void DecoderCache::select(const Tensor& rows) {
  const auto keep = [&](Tensor& t) {
    if (t.defined()) t = index_select_keeping_bf16_copy(t, 0, rows);
  };
  for (DecoderLayerCache& layer : layers) {
    keep(layer.self_keys);
    keep(layer.self_values);
    keep(layer.memory_keys);
    keep(layer.memory_values);
  }
  keep(memory_key_padding_mask);
}

TransformerEncoder::TransformerEncoder(const TransformerLayerOptions& options, int64_t num_layers, Generator& gen) {
  AG_CHECK(num_layers > 0, "TransformerEncoder: expected a positive number of layers, got {}", num_layers);
  layers = register_module("layers", std::make_shared<ModuleList<TransformerEncoderLayer>>());
  for (int64_t i = 0; i < num_layers; ++i) layers->push_back(std::make_shared<TransformerEncoderLayer>(options, gen));
  norm = register_module("norm", std::make_shared<LayerNorm>(Shape{options.d_model}, options.layer_norm_eps));
}

Tensor TransformerEncoder::forward(const Tensor& src, const Tensor& mask, const Tensor& src_key_padding_mask) {
  Tensor x = src;
  for (auto& layer : *layers) x = (*layer)(x, mask, src_key_padding_mask);
  return (*norm)(x);
}

TransformerDecoder::TransformerDecoder(const TransformerLayerOptions& options, int64_t num_layers, Generator& gen) {
  AG_CHECK(num_layers > 0, "TransformerDecoder: expected a positive number of layers, got {}", num_layers);
  layers = register_module("layers", std::make_shared<ModuleList<TransformerDecoderLayer>>());
  for (int64_t i = 0; i < num_layers; ++i) layers->push_back(std::make_shared<TransformerDecoderLayer>(options, gen));
  norm = register_module("norm", std::make_shared<LayerNorm>(Shape{options.d_model}, options.layer_norm_eps));
}

Tensor TransformerDecoder::forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask,
                                   const Tensor& memory_mask, const Tensor& tgt_key_padding_mask,
                                   const Tensor& memory_key_padding_mask) {
  Tensor x = tgt;
  for (auto& layer : *layers)
    x = (*layer)(x, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask);
  return (*norm)(x);
}

DecoderCache TransformerDecoder::start(const Tensor& memory, const Tensor& memory_key_padding_mask) {
  NoGradGuard no_grad;
  const ScopeGuard scope = enter_scope();
  DecoderCache cache;
  cache.memory_key_padding_mask = memory_key_padding_mask;
  for (auto& layer : *layers) {
    DecoderLayerCache& c = cache.layers.emplace_back();
    c.memory_keys = layer->multihead_attn->project(memory, 1);    // (N, H, S, Dh)
    c.memory_values = layer->multihead_attn->project(memory, 2);  // (N, H, S, Dh)
  }
  return cache;
}

Tensor TransformerDecoder::forward_step(const Tensor& tgt, DecoderCache& cache) {
  AG_CHECK(
      tgt.defined() && tgt.dim() == 3 && tgt.size(1) == 1 && cache.layers.size() == layers->size() &&
          tgt.size(0) == cache.batch(),
      "TransformerDecoder: forward_step expects one position (N, 1, E) and a cache from start() for N = {}, got {}",
      cache.batch(), shape_or_undefined(tgt));
  NoGradGuard no_grad;
  const ScopeGuard scope = enter_scope();
  Tensor x = tgt;
  for (size_t l = 0; l < layers->size(); ++l)
    x = (*layers)[l].forward_step(x, cache.layers[l], cache.memory_key_padding_mask);
  return (*norm)(x);
}

Transformer::Transformer(const TransformerOptions& o, Generator& gen) {
  const TransformerLayerOptions layer{o.d_model, o.nhead, o.dim_feedforward, o.dropout, o.layer_norm_eps};
  encoder = register_module("encoder", std::make_shared<TransformerEncoder>(layer, o.num_encoder_layers, gen));
  decoder = register_module("decoder", std::make_shared<TransformerDecoder>(layer, o.num_decoder_layers, gen));
  NoGradGuard no_grad;
  for (Tensor& p : parameters())
    if (p.dim() > 1) p.copy_(xavier_uniform(p.shape(), gen));
}

Tensor Transformer::forward(const Tensor& src, const Tensor& tgt, const TransformerMasks& m) {
  AG_CHECK(src.defined() && tgt.defined() && src.dim() == 3 && tgt.dim() == 3 && src.size(0) == tgt.size(0),
           "Transformer: expected src (N, S, E) and tgt (N, T, E) with the same N, got {} and {}",
           shape_or_undefined(src), shape_or_undefined(tgt));
  check_masks(m, src.size(0), src.size(1), tgt.size(1));
  Tensor memory = (*encoder)(src, m.src_mask, m.src_key_padding_mask);  // (N, S, E)
  return (*decoder)(tgt, memory, m.tgt_mask, m.memory_mask, m.tgt_key_padding_mask,
                    m.memory_key_padding_mask);  // (N, T, E)
}

PositionalEncoding::PositionalEncoding(int64_t d_model, int64_t max_len) {
  AG_CHECK(d_model > 0 && max_len > 0, "PositionalEncoding: expected positive sizes, got d_model={} max_len={}",
           d_model, max_len);
  Tensor table = zeros({max_len, d_model});
  for (int64_t pos = 0; pos < max_len; ++pos) {
    for (int64_t i = 0; i < d_model; ++i) {
      const double angle = static_cast<double>(pos) / std::pow(10000.0, static_cast<double>(i - i % 2) / d_model);
      table.set({pos, i}, i % 2 == 0 ? std::sin(angle) : std::cos(angle));
    }
  }
  pe = register_buffer("pe", table);
}

Tensor PositionalEncoding::forward(const Tensor& x) {
  AG_CHECK(x.defined() && x.dim() == 3 && x.size(1) <= pe.size(0) && x.size(2) == pe.size(1),
           "PositionalEncoding: expected input of shape (N, L ≤ {}, {}), got {}", pe.size(0), pe.size(1),
           shape_or_undefined(x));
  return add(x, slice(pe, 0, 0, x.size(1)));  // (N, L, D) + (L, D)
}

std::string PositionalEncoding::extra_repr() const {
  return fmt::format("d_model={}, max_len={}", pe.size(1), pe.size(0));
}

}  // namespace ag::nn
