#include "tasks/g2p/model.h"

#include <cmath>

#include "engine/autograd.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/mask.h"
#include "engine/ops/shape.h"
#include "tasks/g2p/data.h"

namespace ag::g2p {

ModelConfig preset_config(const std::string& name) {
  if (name == "small") return {};
  if (name == "base")
    return {.transformer = {.d_model = 256,
                            .nhead = 4,
                            .num_encoder_layers = 3,
                            .num_decoder_layers = 3,
                            .dim_feedforward = 1024,
                            .dropout = 0.1}};
  fail("g2p: unknown preset '{}', expected small or base", name);
}

Tensor padding_mask(const Tensor& ids) {
  Tensor mask = empty(ids.shape(), DType::b8);
  const int64_t* id = ids.data<int64_t>();
  bool* hidden = mask.data<bool>();
  for (int64_t i = 0; i < ids.numel(); ++i) hidden[i] = id[i] == kPad;
  return mask;
}

G2PTransformer::G2PTransformer(const ModelConfig& c, Generator& gen) : config(c) {
  const nn::TransformerOptions& t = c.transformer;
  AG_CHECK(c.source_vocab > 1 && c.target_vocab > kEos + 1 && t.d_model > 0 && t.nhead > 0 &&
               t.d_model % t.nhead == 0 && t.num_encoder_layers > 0 && t.num_decoder_layers > 0 &&
               t.dim_feedforward > 0 && t.dropout >= 0 && t.dropout < 1 && c.max_len > 0,
           "G2PTransformer: bad sizes (source_vocab {}, target_vocab {}, d_model {}, heads {}, layers {} + {}, ff {}, "
           "dropout {}); expected positive sizes, d_model a multiple of heads, dropout in [0, 1)",
           c.source_vocab, c.target_vocab, t.d_model, t.nhead, t.num_encoder_layers, t.num_decoder_layers,
           t.dim_feedforward, t.dropout);
  src_emb = register_module("src_emb",
                            std::make_shared<nn::Embedding>(c.source_vocab, c.transformer.d_model, std::nullopt, gen));
  tgt_emb = register_module("tgt_emb",
                            std::make_shared<nn::Embedding>(c.target_vocab, c.transformer.d_model, std::nullopt, gen));
  drop = register_module("drop", std::make_shared<nn::Dropout>(c.transformer.dropout, gen));
  transformer = register_module("transformer", std::make_shared<nn::Transformer>(c.transformer, gen));
  out = register_module("out", std::make_shared<nn::Linear>(c.transformer.d_model, c.target_vocab, true, gen));
  pe_ = nn::PositionalEncoding(c.transformer.d_model, c.max_len).pe;
  // The peer: every parameter with more than one dim re-drawn xavier_uniform_ (embeddings and head too).
  NoGradGuard no_grad;
  for (Tensor& p : parameters())
    if (p.dim() > 1) {
      const double bound = std::sqrt(6.0 / static_cast<double>(p.size(0) + p.size(1)));
      p.copy_(nn::init_uniform(p.shape(), bound, gen));
    }
}

Tensor G2PTransformer::embed(nn::Embedding& embedding, const Tensor& ids, int64_t first_position) {
  AG_CHECK(ids.dim() == 2 && first_position + ids.size(1) <= config.max_len,
           "G2PTransformer: expected ids (N, L) with positions up to {}, got {} from position {}", config.max_len,
           shape_str(ids.shape()), first_position);
  Tensor scaled = mul(embedding(ids), std::sqrt(static_cast<double>(config.transformer.d_model)));  // (N, L, D)
  return (*drop)(add(scaled, slice(pe_, 0, first_position, first_position + ids.size(1))));         // + (L, D)
}

Tensor G2PTransformer::encode(const Tensor& source) {
  return (*transformer->encoder)(embed(*src_emb, source), Tensor(), padding_mask(source));  // (N, S, D)
}

Tensor G2PTransformer::forward(const Tensor& source, const Tensor& target_in) {
  const Tensor source_padding = padding_mask(source);                                                // (N, S)
  const Tensor memory = (*transformer->encoder)(embed(*src_emb, source), Tensor(), source_padding);  // (N, S, D)
  const Tensor decoded = (*transformer->decoder)(embed(*tgt_emb, target_in), memory, causal_mask(target_in.size(1)),
                                                 Tensor(), padding_mask(target_in), source_padding);  // (N, T, D)
  return (*out)(decoded);                                                                             // (N, T, V)
}

nn::DecoderCache G2PTransformer::start_decoding(const Tensor& memory, const Tensor& source) {
  return transformer->decoder->start(memory, padding_mask(source));
}

Tensor G2PTransformer::decode_step(const Tensor& last_tokens, nn::DecoderCache& cache) {
  NoGradGuard no_grad;
  const Tensor ids = reshape(last_tokens, {last_tokens.size(0), 1});                                 // (N, 1)
  const Tensor x = transformer->decoder->forward_step(embed(*tgt_emb, ids, cache.length()), cache);  // (N, 1, D)
  return reshape((*out)(x), {last_tokens.size(0), config.target_vocab});                             // (N, V)
}

}  // namespace ag::g2p
