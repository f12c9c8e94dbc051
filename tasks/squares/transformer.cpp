#include "tasks/squares/transformer.h"

#include "engine/autograd.h"
#include "engine/ops/mask.h"
#include "engine/ops/shape.h"

namespace ag::squares {

SquaresTransformer::SquaresTransformer(int64_t n_features, const nn::TransformerOptions& options, int64_t max_len,
                                       Generator& gen) {
  input_proj = register_module("input_proj", std::make_shared<nn::Linear>(n_features, options.d_model, true, gen));
  pos_encoding = register_module("pos_encoding", std::make_shared<nn::PositionalEncoding>(options.d_model, max_len));
  transformer = register_module("transformer", std::make_shared<nn::Transformer>(options, gen));
  output_proj = register_module("output_proj", std::make_shared<nn::Linear>(options.d_model, n_features, true, gen));
}

Tensor SquaresTransformer::embed(const Tensor& points) { return (*pos_encoding)((*input_proj)(points)); }

Tensor SquaresTransformer::forward(const Tensor& source, const Tensor& shifted_target,
                                   const Tensor& src_key_padding_mask) {
  AG_CHECK(shifted_target.defined() && shifted_target.dim() == 3,
           "SquaresTransformer: expected a shifted target of shape (N, T, F), got {}",
           shifted_target.defined() ? shape_str(shifted_target.shape()) : "undefined");
  nn::TransformerMasks masks;
  masks.tgt_mask = causal_mask(shifted_target.size(1));
  masks.src_key_padding_mask = masks.memory_key_padding_mask = src_key_padding_mask;
  Tensor decoded = (*transformer)(embed(source), embed(shifted_target), masks);  // (N, T, d_model)
  return (*output_proj)(decoded);                                                // (N, T, F)
}

Tensor SquaresTransformer::predict(const Tensor& source, int64_t target_len, const Tensor& src_key_padding_mask) {
  AG_CHECK(source.defined() && source.dim() == 3 && target_len > 0,
           "SquaresTransformer: predict expects a source (N, S, F) and target_len > 0, got {} and {}",
           source.defined() ? shape_str(source.shape()) : "undefined", target_len);
  NoGradGuard no_grad;
  Tensor inputs = slice(source, 1, -1, source.size(1));  // (N, 1, F)
  for (int64_t i = 0; i < target_len; ++i) {
    Tensor out = forward(source, inputs, src_key_padding_mask);  // (N, i+1, F)
    inputs = cat({inputs, slice(out, 1, -1, out.size(1))}, 1);   // (N, i+2, F)
  }
  return slice(inputs, 1, 1, inputs.size(1));  // (N, target_len, F)
}

}  // namespace ag::squares
