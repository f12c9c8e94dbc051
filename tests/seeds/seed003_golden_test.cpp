// The seeds' attention classes against PyTorch (tools/golden/attention.py): outputs, attention
// weights, gradients, print(model); seed 003's MultiHeadAttention against torch.nn.MultiheadAttention.
#include <gtest/gtest.h>

#include "engine/autograd.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "seeds/seed003.h"
#include "tests/golden_util.h"

namespace ag::seeds {
namespace {

void load_golden_state(nn::Module& module, const Golden& golden) {
  NamedTensors state;
  for (const auto& [key, t] : golden.tensors())
    if (key.rfind("param.", 0) == 0) state.emplace_back(key.substr(6), t);
  module.load_state_dict(state);
}

// Loads the golden weights (and mask buffer) into `module`, runs it in eval mode on the golden
// input, backpropagates Σ out ⊙ probe and compares output, attention weights, input and
// parameter gradients and the printout.
void check_against_golden(AttentionModule& module, const std::string& name) {
  const Golden golden("attention_" + name);
  load_golden_state(module, golden);
  module.eval();
  Tensor x = clone(golden["x"]).requires_grad_();
  Tensor out = module(x);
  expect_close(out, golden["out"], name + " output");
  expect_close(module.last_attention_weights, golden["attn_weights"], name + " attention weights");
  sum(mul(out, golden["probe"])).backward();
  expect_close(x.grad(), golden["grad.x"], name + " input gradient");
  for (const auto& [param_name, param] : module.named_parameters())
    expect_close(param.grad(), golden["grad.param." + param_name], name + " gradient of " + param_name);
  EXPECT_EQ(module.str(), golden.metadata().at("module"));
}

// Seed 000's sentence and weights (d_v 28 ≠ d_k 24), in seed 002's class with the maths fixed.
TEST(GoldenAttention, SelfAttentionSeed000) {
  SelfAttention attention(16, 24, 24, 28);
  check_against_golden(attention, "self_attention_seed000");
  // The seed printed attention_weights2 = softmax(omega_2 / √24): token 2's row.
  expect_close(slice(attention.last_attention_weights, 0, 1, 2),
               tensor({0.2912, 0.0106, 0.0982, 0.0625, 0.4917, 0.0458}, {1, 6}), "seed 000 attention_weights2", 1e-4,
               0);
}

TEST(GoldenAttention, SelfAttentionBatched) {
  SelfAttention attention(5, 4, 4, 7);
  check_against_golden(attention, "self_attention_batched");
}

TEST(GoldenAttention, SelfAttentionV1) {
  SelfAttention_v1 attention(3, 2);
  check_against_golden(attention, "self_attention_v1");
}

TEST(GoldenAttention, SelfAttentionV2) {
  SelfAttention_v2 attention(3, 2);
  check_against_golden(attention, "self_attention_v2");
}

TEST(GoldenAttention, SelfAttentionV2WithBias) {
  SelfAttention_v2 attention(4, 3, true);
  check_against_golden(attention, "self_attention_v2_bias");
}

TEST(GoldenAttention, CausalAttention) {
  CausalAttention attention(3, 2, 6, 0.1);
  check_against_golden(attention, "causal");
}

TEST(GoldenAttention, CausalAttentionShorterThanContextWithBias) {
  CausalAttention attention(4, 3, 8, 0.1, true);
  check_against_golden(attention, "causal_bias");
}

// Seed 003's printed context_vecs are in the golden's "out" (the script checks them).
TEST(GoldenAttention, MultiHeadAttention) {
  MultiHeadAttention attention(6, 6, 3, 0.1, 2);
  check_against_golden(attention, "mha");
}

TEST(GoldenAttention, MultiHeadAttentionFourHeadsWithBias) {
  MultiHeadAttention attention(5, 8, 9, 0.1, 4, true);
  check_against_golden(attention, "mha_bias");
}

// torch.nn.MultiheadAttention(8, 2, batch_first=True) with in_proj_weight = [W_query; W_key;
// W_value], a causal attn_mask and a key_padding_mask hiding the last two tokens of sequence 2.
TEST(GoldenAttention, MultiHeadAttentionEqualsTorchMultiheadAttention) {
  const Golden golden("attention_mha_vs_torch");
  MultiHeadAttention attention(8, 8, 5, 0.1, 2, true);
  load_golden_state(attention, golden);
  attention.eval();
  Tensor x = clone(golden["x"]).requires_grad_();
  Tensor out = attention(x, golden["key_padding_mask"]);
  expect_close(out, golden["torch.out"], "MultiHeadAttention vs torch output");
  expect_close(mean(attention.last_attention_weights, {1}), golden["torch.attn_weights"],
               "MultiHeadAttention vs torch head-averaged weights");
  sum(mul(out, golden["probe"])).backward();
  expect_close(x.grad(), golden["torch.grad.x"], "MultiHeadAttention vs torch input gradient");
  EXPECT_EQ(attention.str(), golden.metadata().at("module"));
}

}  // namespace
}  // namespace ag::seeds
