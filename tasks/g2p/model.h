// The G2P encoder-decoder: the PyTorch peer's G2PTransformer (../shared/peer/g2p_torch.py) with the
// same module tree and state_dict names (src_emb, tgt_emb, transformer.…, out), so a checkpoint
// moves between the two. Inputs are padded id matrices (pad id 0); targets start with <bos>.
#pragma once

#include <memory>
#include <string>

#include "nn/layers.h"
#include "nn/transformer.h"

namespace ag::g2p {

// The vocabularies and the positions around an nn::Transformer of the small preset's sizes.
struct ModelConfig {
  int64_t source_vocab = 0;
  int64_t target_vocab = 0;
  nn::TransformerOptions transformer{.d_model = 128,
                                     .nhead = 4,
                                     .num_encoder_layers = 2,
                                     .num_decoder_layers = 2,
                                     .dim_feedforward = 512,
                                     .dropout = 0.1};
  int64_t max_len = 256;  // positions the sinusoid table covers (source, and target incl. <bos>)
};

// The peer's presets: "small" (d 128, 4 heads, 2 + 2 layers, FF 512) and "base" (d 256, 4 heads,
// 3 + 3 layers, FF 1024), dropout 0.1; vocabularies left 0.
ModelConfig preset_config(const std::string& name);

class G2PTransformer : public nn::Module {
 public:
  explicit G2PTransformer(const ModelConfig& config, Generator& gen = default_generator());
  // source (N, S) and target_in (N, T) ids → logits (N, T, target_vocab), teacher forcing.
  Tensor forward(const Tensor& source, const Tensor& target_in);
  // (N, S) ids → the encoder's memory (N, S, d_model).
  Tensor encode(const Tensor& source);
  // Incremental decoding: the decoder's cache over a memory, then the logits (N, target_vocab) of
  // the next position given the last token of each row (N) ids.
  nn::DecoderCache start_decoding(const Tensor& memory, const Tensor& source);
  Tensor decode_step(const Tensor& last_tokens, nn::DecoderCache& cache);
  std::string type_name() const override { return "G2PTransformer"; }

  const ModelConfig config;
  std::shared_ptr<nn::Embedding> src_emb, tgt_emb;
  std::shared_ptr<nn::Dropout> drop;
  std::shared_ptr<nn::Transformer> transformer;
  std::shared_ptr<nn::Linear> out;

 private:
  // dropout(embedding(ids) · √d + pe[first, first + L)) → (N, L, d_model)
  Tensor embed(nn::Embedding& embedding, const Tensor& ids, int64_t first_position = 0);

  Tensor pe_;  // (max_len, d_model): not a parameter or a saved buffer (the peer's persistent=False)
};

// True where the id is padding: the key-padding mask of a padded id matrix (N, L) → b8 (N, L).
Tensor padding_mask(const Tensor& ids);

}  // namespace ag::g2p
