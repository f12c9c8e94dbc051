// nn::GPT's structure (nanoGPT's names, the tied head, the parameter count of the baby config)
// and its KV cache (the cached forward gives the logits of the full forward).
#include "nn/gpt.h"

#include <gtest/gtest.h>

#include "engine/autograd.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/shape.h"
#include "tests/golden_util.h"

namespace ag::nn {
namespace {

TEST(GPT, BabyConfigHasNanoGPTsNamesAndParameterCount) {
  GPT model({.vocab_size = 83});  // Moby-Dick's 83 characters; RESULTS.md: 806,400 parameters
  EXPECT_EQ(model.num_parameters(), 806400);
  std::vector<std::string> names;
  for (const auto& [name, _] : model.state_dict()) names.push_back(name);
  ASSERT_EQ(names.size(), 2u + 4 * 6 + 2);
  EXPECT_EQ(names.front(), "transformer.wte.weight");
  EXPECT_EQ(names[1], "transformer.wpe.weight");
  const std::vector<std::string> block = {"ln_1.weight", "attn.c_attn.weight", "attn.c_proj.weight",
                                          "ln_2.weight", "mlp.c_fc.weight",    "mlp.c_proj.weight"};
  for (size_t j = 0; j < block.size(); ++j) EXPECT_EQ(names[2 + 6 * 3 + j], "transformer.h.3." + block[j]);
  EXPECT_EQ(names[names.size() - 2], "transformer.ln_f.weight");
  EXPECT_EQ(names.back(), "lm_head.weight");
  // The head is the token embedding: one tensor, listed once among the parameters (27 = 18 + 9).
  const NamedTensors state = model.state_dict();
  EXPECT_EQ(state.front().second.impl(), state.back().second.impl());
  EXPECT_EQ(model.named_parameters().size(), 27u);
}

TEST(GPT, InitialisationHasNanoGPTsScales) {
  Generator gen(3);
  GPT model({.vocab_size = 50, .n_layer = 8, .n_embd = 256}, gen);
  auto std_of = [](const Tensor& t) {
    const std::vector<double> v = t.to_vector();
    double s = 0;
    for (double x : v) s += x * x;
    return std::sqrt(s / static_cast<double>(v.size()));
  };
  EXPECT_NEAR(std_of(model.wte->weight), 0.02, 0.001);
  EXPECT_NEAR(std_of((*model.h)[0].attn->c_attn->weight), 0.02, 0.0005);
  EXPECT_NEAR(std_of((*model.h)[5].mlp->c_proj->weight), 0.02 / 4.0, 0.0002);  // 0.02 / √(2·8)
  EXPECT_NEAR(std_of((*model.h)[5].attn->c_proj->weight), 0.02 / 4.0, 0.0002);
}

TEST(GPT, CachedForwardGivesTheFullForwardsLogits) {
  Generator gen(5);
  GPT model({.vocab_size = 13, .block_size = 10, .n_layer = 2, .n_head = 2, .n_embd = 16}, gen);
  model.eval();
  const Tensor idx = randint(0, 13, {2, 9}, gen);  // (B, T)
  NoGradGuard no_grad;
  const Tensor full = model.forward(idx);  // (B, T, V)
  KVCache cache;
  expect_close(model.forward_cached(slice(idx, 1, 0, 4), cache), squeeze(slice(full, 1, 3, 4), 1), "prefill of 4");
  for (int64_t t = 4; t < 9; ++t)
    expect_close(model.forward_cached(slice(idx, 1, t, t + 1), cache), squeeze(slice(full, 1, t, t + 1), 1),
                 "cached position " + std::to_string(t));
  EXPECT_EQ(cache.length(), 9);
  KVCache started;
  model.forward_cached(slice(idx, 1, 0, 2), started);
  expect_error([&] { model.forward_cached(slice(idx, 1, 2, 4), started); }, {"one token at a time"});
  expect_error([&] { model.forward(randint(0, 13, {1, 11}, gen)); }, {"block size 10"});
  expect_error([&] { model.forward(randn({1, 3})); }, {"i64", "(1,3)"});
}

TEST(GPT, RejectsSizesThatCannotWork) {
  expect_error([] { GPT({.vocab_size = 5, .n_head = 3, .n_embd = 16}); }, {"not a multiple of n_head 3"});
  expect_error([] { GPT({.vocab_size = 0}); }, {"vocab_size 0"});
}

}  // namespace
}  // namespace ag::nn
