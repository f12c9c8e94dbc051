// The squares task's Transformer model (`train squares --model transformer`), built from the
// library's nn::Transformer and nn::PositionalEncoding; its module tree and names are the PyTorch
// peer's (tools/golden/transformer.py), so its checkpoints load there.
#pragma once

#include <memory>
#include <string>

#include "nn/layers.h"
#include "nn/transformer.h"

namespace ag::squares {

// For seed 004's squares: points (F features) projected to d_model, position-encoded, through
// the Transformer, projected back. forward() decodes a shifted target under the causal mask
// (teacher forcing); predict() generates target_len points from its own outputs.
class SquaresTransformer : public nn::Callable<SquaresTransformer> {
 public:
  SquaresTransformer(int64_t n_features, const nn::TransformerOptions& options, int64_t max_len = 512,
                     Generator& gen = default_generator());
  // source (N, S, F), shifted_target (N, T, F) → (N, T, F).
  Tensor forward(const Tensor& source, const Tensor& shifted_target, const Tensor& src_key_padding_mask = {});
  // The first target point is the last source point; returns (N, target_len, F), no gradient.
  Tensor predict(const Tensor& source, int64_t target_len, const Tensor& src_key_padding_mask = {});
  std::string type_name() const override { return "SquaresTransformer"; }

  std::shared_ptr<nn::Linear> input_proj;
  std::shared_ptr<nn::PositionalEncoding> pos_encoding;
  std::shared_ptr<nn::Transformer> transformer;
  std::shared_ptr<nn::Linear> output_proj;

 private:
  Tensor embed(const Tensor& points);  // (N, L, F) → (N, L, d_model)
};

}  // namespace ag::squares
