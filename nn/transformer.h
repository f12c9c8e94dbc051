// The "Attention is all you need" encoder-decoder, laid out like torch.nn.Transformer
// (batch_first=True, post-norm, ReLU feed-forward): the same module tree, parameter names and
// maths, so torch's state_dict loads straight into it and both give the same outputs.
// torch.nn.Transformer has no positional encoding; PositionalEncoding is a separate module, and
// squares' SquaresTransformer (tasks/squares/transformer.cpp) and g2p's G2PTransformer put the pieces
// together for their tasks.
//
// Masks are b8 with torch's boolean convention, true where attention is forbidden:
//   src_mask (S, S), tgt_mask (T, T) — causal_mask(T) —, memory_mask (T, S);
//   *_key_padding_mask (N, length): true at padding positions.
// A query row with every key hidden gets NaN, as in PyTorch.
#pragma once

#include <array>
#include <memory>
#include <utility>
#include <vector>

#include "engine/ops/attention.h"
#include "engine/options.h"
#include "nn/layers.h"
#include "nn/module.h"

namespace ag::nn {

// torch's class for MultiheadAttention.out_proj; a Linear under another printed name.
class NonDynamicallyQuantizableLinear : public Linear {
 public:
  using Linear::Linear;
  std::string type_name() const override { return "NonDynamicallyQuantizableLinear"; }
};

// torch.nn.MultiheadAttention(embed_dim, num_heads, dropout, batch_first=True) with its packed
// projection: in_proj_weight (3E, E) holds W_q, W_k, W_v stacked; heads of width E / num_heads;
// dropout on the attention weights in training mode. Masks read as PyTorch's: b8 attn_mask (T, S) and
// key_padding_mask (N, S), TRUE = NOT allowed to attend (the opposite of scaled_dot_product_attention's
// attn_mask). A query with every key masked gets masked_rows' treatment (PyTorch's NaN by default:
// Note [fully masked rows] in engine/ops/attention.h).
class PackedMultiheadAttention : public Callable<PackedMultiheadAttention> {
 public:
  PackedMultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0.0,
                           Generator& gen = default_generator());
  // query (N, T, E), key and value (N, S, E) → (N, T, E). Self-attention (query, key and value one
  // tensor) projects with one product against in_proj_weight, cross-attention (key and value one
  // tensor) its key and value with one: engine's packed_self_attention / packed_cross_attention.
  // With residual (N, T, E): residual + the output, the add in out_proj's product (linear_add).
  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& key_padding_mask = {},
                 const Tensor& attn_mask = {}, const Tensor& residual = {});
  std::string type_name() const override { return "MultiheadAttention"; }

  // The last forward's weights (N, H, T, S), detached, in eval mode; undefined after a training forward,
  // which does not compute them (as PyTorch's Transformer layers, which pass need_weights=False): under
  // autocast its softmax then writes the product's bf16 operand in its own pass.
  const Tensor& attention_weights() const { return weights_; }

  // x (N, L, E) through W_q (which 0), W_k (1) or W_v (2), split into heads → (N, H, L, E/H).
  Tensor project(const Tensor& x, int64_t which) const;
  // The attention of query (N, T, E) over keys and values already projected (N, H, S, E/H): forward's
  // second half, which decoding with a cache calls directly → (N, T, E).
  Tensor attend(const Tensor& query, const Tensor& keys, const Tensor& values, const Tensor& key_padding_mask = {},
                const Tensor& attn_mask = {}, const Tensor& residual = {});

  Tensor in_proj_weight;
  Tensor in_proj_bias;
  std::shared_ptr<NonDynamicallyQuantizableLinear> out_proj;
  int64_t num_heads;
  double dropout;
  MaskedRows masked_rows = MaskedRows::nan;

 private:
  void check_input(const Tensor& x) const;  // (N, L, E)
  AttentionOptions options(int64_t N, int64_t T, int64_t S, const Tensor& key_padding_mask,
                           const Tensor& attn_mask) const;
  Tensor output(const Attention& attention, const Tensor& residual);

  // W_q, W_k, W_v (which 0, 1, 2) and their biases without grad mode (decoding): sliced once per
  // version of in_proj_weight and in_proj_bias, not at every step (a slice is a copy, and under
  // autocast its bf16 copy one more conversion).
  std::pair<Tensor, Tensor> unrecorded_projection(int64_t which) const;

  struct ProjectionSlices {
    std::weak_ptr<TensorImpl> weight, bias;  // the in_proj_weight and in_proj_bias they were sliced from
    uint64_t weight_version = 0, bias_version = 0;
    std::array<Tensor, 3> weights, biases;
  };
  mutable ProjectionSlices projection_slices_;
  Generator* gen_;
  Tensor weights_;
};

struct TransformerLayerOptions {
  int64_t d_model;
  int64_t nhead;
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  double layer_norm_eps = 1e-5;
};

// x = norm1(x + self_attn(x)); x = norm2(x + ff(x)), ff = linear2(dropout(relu(linear1(x)))).
class TransformerEncoderLayer : public Callable<TransformerEncoderLayer> {
 public:
  explicit TransformerEncoderLayer(const TransformerLayerOptions& options, Generator& gen = default_generator());
  Tensor forward(const Tensor& src, const Tensor& src_mask = {}, const Tensor& src_key_padding_mask = {});
  std::string type_name() const override { return "TransformerEncoderLayer"; }

  std::shared_ptr<PackedMultiheadAttention> self_attn;
  std::shared_ptr<Linear> linear1;
  std::shared_ptr<Dropout> dropout;
  std::shared_ptr<Linear> linear2;
  std::shared_ptr<LayerNorm> norm1, norm2;
  std::shared_ptr<Dropout> dropout1, dropout2;
};

// Incremental decoding (inference, eval mode) for one decoder layer: the keys and values of the
// positions decoded so far (self-attention) and of the encoder's memory (cross-attention, projected
// once), each (N, H, length, E/H).
struct DecoderLayerCache {
  Tensor self_keys, self_values;
  Tensor memory_keys, memory_values;
};

// Masked self-attention, cross-attention to the encoder's memory, feed-forward; each sublayer
// residual then LayerNorm (norm1, norm2, norm3).
class TransformerDecoderLayer : public Callable<TransformerDecoderLayer> {
 public:
  explicit TransformerDecoderLayer(const TransformerLayerOptions& options, Generator& gen = default_generator());
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = {}, const Tensor& memory_mask = {},
                 const Tensor& tgt_key_padding_mask = {}, const Tensor& memory_key_padding_mask = {});
  std::string type_name() const override { return "TransformerDecoderLayer"; }
  // The layer at one new position: tgt (N, 1, E) → (N, 1, E), the position's keys and values added to
  // the cache. Equals forward's last row under a causal tgt_mask (no padding inside a decoded prefix).
  Tensor forward_step(const Tensor& tgt, DecoderLayerCache& cache, const Tensor& memory_key_padding_mask = {});

  std::shared_ptr<PackedMultiheadAttention> self_attn;
  std::shared_ptr<PackedMultiheadAttention> multihead_attn;
  std::shared_ptr<Linear> linear1;
  std::shared_ptr<Dropout> dropout;
  std::shared_ptr<Linear> linear2;
  std::shared_ptr<LayerNorm> norm1, norm2, norm3;
  std::shared_ptr<Dropout> dropout1, dropout2, dropout3;
};

// N encoder layers, then a final LayerNorm (`norm`).
class TransformerEncoder : public Callable<TransformerEncoder> {
 public:
  TransformerEncoder(const TransformerLayerOptions& options, int64_t num_layers, Generator& gen = default_generator());
  Tensor forward(const Tensor& src, const Tensor& mask = {}, const Tensor& src_key_padding_mask = {});
  std::string type_name() const override { return "TransformerEncoder"; }

  std::shared_ptr<ModuleList<TransformerEncoderLayer>> layers;
  std::shared_ptr<LayerNorm> norm;
};

// A decoder's state while it generates: every layer's cache and the memory's padding mask (N, S).
// select(rows) keeps (and reorders, repeats) batch rows: beam search, finished sequences dropped.
struct DecoderCache {
  std::vector<DecoderLayerCache> layers;
  Tensor memory_key_padding_mask;
  int64_t length() const;  // positions decoded so far
  int64_t batch() const;
  void select(const Tensor& rows);  // rows: 1-D i64 indices into the batch
};

class TransformerDecoder : public Callable<TransformerDecoder> {
 public:
  TransformerDecoder(const TransformerLayerOptions& options, int64_t num_layers, Generator& gen = default_generator());
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = {}, const Tensor& memory_mask = {},
                 const Tensor& tgt_key_padding_mask = {}, const Tensor& memory_key_padding_mask = {});
  std::string type_name() const override { return "TransformerDecoder"; }

  // Incremental decoding (no gradient): start() projects memory (N, S, E) for every layer's
  // cross-attention once; forward_step(tgt (N, 1, E)) runs the next position through every layer
  // and the final norm → (N, 1, E), as forward's last row would under a causal mask.
  DecoderCache start(const Tensor& memory, const Tensor& memory_key_padding_mask = {});
  Tensor forward_step(const Tensor& tgt, DecoderCache& cache);

  std::shared_ptr<ModuleList<TransformerDecoderLayer>> layers;
  std::shared_ptr<LayerNorm> norm;
};

struct TransformerOptions {
  int64_t d_model = 512;
  int64_t nhead = 8;
  int64_t num_encoder_layers = 6;
  int64_t num_decoder_layers = 6;
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  double layer_norm_eps = 1e-5;
};

// Every mask torch.nn.Transformer.forward takes; undefined ones hide nothing.
struct TransformerMasks {
  Tensor src_mask;                 // (S, S)
  Tensor tgt_mask;                 // (T, T), usually causal_mask(T)
  Tensor memory_mask;              // (T, S)
  Tensor src_key_padding_mask;     // (N, S)
  Tensor tgt_key_padding_mask;     // (N, T)
  Tensor memory_key_padding_mask;  // (N, S), usually src_key_padding_mask
};

// torch.nn.Transformer(batch_first=True). Parameters with more than one dim start Xavier-uniform,
// as torch's _reset_parameters does.
class Transformer : public Callable<Transformer> {
 public:
  explicit Transformer(const TransformerOptions& options = {}, Generator& gen = default_generator());
  // src (N, S, d_model), tgt (N, T, d_model) → (N, T, d_model).
  Tensor forward(const Tensor& src, const Tensor& tgt, const TransformerMasks& masks = {});
  std::string type_name() const override { return "Transformer"; }

  std::shared_ptr<TransformerEncoder> encoder;
  std::shared_ptr<TransformerDecoder> decoder;
};

// Adds the sinusoidal encoding of the paper: pe[pos, 2i] = sin(pos / 10000^(2i/d_model)),
// pe[pos, 2i+1] = cos(pos / 10000^(2i/d_model)). The table is the buffer `pe` (max_len, d_model).
class PositionalEncoding : public UnaryModule {
 public:
  PositionalEncoding(int64_t d_model, int64_t max_len = 512);
  Tensor forward(const Tensor& x) override;  // (N, L, d_model), L ≤ max_len
  std::string type_name() const override { return "PositionalEncoding"; }
  std::string extra_repr() const override;

  Tensor pe;
};

}  // namespace ag::nn
