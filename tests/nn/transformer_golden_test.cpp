// The Transformer against torch.nn.Transformer(batch_first=True) (tools/golden/transformer.py):
// torch's state_dict loads as it is; outputs, gradients of every parameter and input, and
// print(model) agree, with and without causal and key-padding masks.
#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "engine/autograd.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/mask.h"
#include "engine/ops/reduce.h"
#include "nn/transformer.h"
#include "tests/golden_util.h"

namespace ag::nn {
namespace {

using Inputs = std::map<std::string, Tensor>;

Tensor mask_or_none(const Inputs& in, const std::string& name) {
  auto it = in.find(name);
  return it == in.end() ? Tensor() : it->second;
}

TransformerMasks masks_from(const Inputs& in) {
  TransformerMasks masks;
  masks.tgt_mask = mask_or_none(in, "tgt_mask");
  masks.src_key_padding_mask = mask_or_none(in, "src_key_padding_mask");
  masks.tgt_key_padding_mask = mask_or_none(in, "tgt_key_padding_mask");
  masks.memory_key_padding_mask = mask_or_none(in, "memory_key_padding_mask");
  return masks;
}

TEST(GoldenTransformer, CausalAndKeyPaddingMasks) {
  Transformer model({.d_model = 8,
                     .nhead = 2,
                     .num_encoder_layers = 2,
                     .num_decoder_layers = 2,
                     .dim_feedforward = 16,
                     .dropout = 0.0});
  check_module_against_golden(model, "transformer_masked", [&](const Inputs& in) {
    EXPECT_TRUE(in.at("tgt_mask").shape() == Shape({4, 4}));
    expect_close(to(in.at("tgt_mask"), DType::f32), to(causal_mask(4), DType::f32), "tgt_mask is causal_mask(4)");
    return model.forward(in.at("src"), in.at("tgt"), masks_from(in));
  });
}

TEST(GoldenTransformer, UnmaskedWithUnequalDepths) {
  Transformer model({.d_model = 8,
                     .nhead = 4,
                     .num_encoder_layers = 1,
                     .num_decoder_layers = 2,
                     .dim_feedforward = 12,
                     .dropout = 0.0});
  check_module_against_golden(model, "transformer_unmasked",
                              [&](const Inputs& in) { return model.forward(in.at("src"), in.at("tgt")); });
}

}  // namespace
}  // namespace ag::nn
