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

// Golden data "transformer_<name>": loads torch's state_dict into `module`, gives `run` the inputs
// (leaves needing gradients) and masks, backpropagates Σ out ⊙ probe, compares everything.
void check_against_golden(Module& module, const std::string& name, const std::function<Tensor(const Inputs&)>& run) {
  const Golden golden("transformer_" + name);
  const Inputs inputs = load_golden_into(module, golden);
  Tensor out = run(inputs);
  expect_close(out, golden["out"], name + " output");
  sum(mul(out, golden["probe"])).backward();
  for (const auto& [key, t] : inputs)
    if (t.requires_grad()) expect_close(t.grad(), golden["grad.x." + key], name + " gradient of " + key);
  for (const auto& [param_name, param] : module.named_parameters())
    expect_close(param.grad(), golden["grad.param." + param_name], name + " gradient of " + param_name);
  EXPECT_EQ(module.str(), golden.metadata().at("module"));
}

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
  check_against_golden(model, "masked", [&](const Inputs& in) {
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
  check_against_golden(model, "unmasked", [&](const Inputs& in) { return model.forward(in.at("src"), in.at("tgt")); });
}

TEST(GoldenTransformer, SquaresModelWithPositionalEncoding) {
  SquaresTransformer model(2,
                           {.d_model = 8,
                            .nhead = 2,
                            .num_encoder_layers = 1,
                            .num_decoder_layers = 1,
                            .dim_feedforward = 16,
                            .dropout = 0.0},
                           16);
  check_against_golden(model, "squares", [&](const Inputs& in) {
    return model.forward(in.at("source"), in.at("shifted_target"), in.at("src_key_padding_mask"));
  });
}

}  // namespace
}  // namespace ag::nn
