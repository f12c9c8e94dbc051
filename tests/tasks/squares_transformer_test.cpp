// The squares task's Transformer model against the PyTorch peer's class (tools/golden/transformer.py:
// outputs, every gradient, print(model)), and its autoregressive predict().
#include <gtest/gtest.h>

#include "engine/ops/shape.h"
#include "tasks/squares/transformer.h"
#include "tests/golden_util.h"

namespace ag::squares {
namespace {

TEST(SquaresTransformer, AgreesWithThePyTorchPeer) {
  SquaresTransformer model(2,
                           {.d_model = 8,
                            .nhead = 2,
                            .num_encoder_layers = 1,
                            .num_decoder_layers = 1,
                            .dim_feedforward = 16,
                            .dropout = 0.0},
                           16);
  check_module_against_golden(model, "transformer_squares", [&](const std::map<std::string, Tensor>& in) {
    return model.forward(in.at("source"), in.at("shifted_target"), in.at("src_key_padding_mask"));
  });
}

TEST(SquaresTransformer, PredictFeedsBackItsOutputs) {
  Generator gen(8);
  nn::TransformerOptions options;
  options.d_model = 8;
  options.nhead = 2;
  options.num_encoder_layers = options.num_decoder_layers = 1;
  options.dim_feedforward = 16;
  options.dropout = 0.0;
  SquaresTransformer model(2, options, 16, gen);
  const Tensor source = randn({3, 2, 2}, DType::f32, gen);
  const Tensor predicted = model.predict(source, 2);  // (N, 2, F)
  ASSERT_TRUE(predicted.shape() == Shape({3, 2, 2}));
  EXPECT_FALSE(predicted.requires_grad());
  // Step 2 saw the last source point and step 1's prediction, as teacher forcing would show them.
  const Tensor shifted = cat({slice(source, 1, 1, 2), slice(predicted, 1, 0, 1)}, 1);  // (N, 2, F)
  EXPECT_EQ(model.forward(source, shifted).detach().to_vector(), predicted.to_vector());
}

}  // namespace
}  // namespace ag::squares
