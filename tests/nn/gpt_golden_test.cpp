// nn::GPT against the peer's nanoGPT model in PyTorch (tools/golden/gpt.py): the PyTorch
// state_dict loads as it is (tied lm_head included); logits, loss and every parameter's gradient
// agree, with and without biases, over a whole block and a shorter sequence.
#include <gtest/gtest.h>

#include <sstream>

#include "engine/ops/arithmetic.h"
#include "engine/ops/loss.h"
#include "engine/ops/shape.h"
#include "nn/gpt.h"
#include "tests/golden_util.h"

namespace ag::nn {
namespace {

GPTConfig config_of(const Golden& golden) {
  std::istringstream fields(golden.metadata().at("config"));
  std::vector<int64_t> v;
  for (std::string field; std::getline(fields, field, ',');) v.push_back(std::stoll(field));
  return {.vocab_size = v[0], .block_size = v[1], .n_layer = v[2], .n_head = v[3], .n_embd = v[4], .bias = v[5] != 0};
}

class GPTGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(GPTGolden, LogitsLossAndGradientsMatchPyTorch) {
  const Golden golden("gpt_" + GetParam());
  Generator gen(1);
  GPT model(config_of(golden), gen);
  load_golden_into(model, golden);
  const Tensor logits = model.forward(golden["idx"]);
  expect_close(logits, golden["out"], GetParam() + " logits");
  const int64_t V = model.config.vocab_size;
  const Tensor loss = cross_entropy(reshape(logits, {-1, V}), reshape(golden["targets"], {-1}));
  expect_close(reshape(loss, {1}), golden["loss"], GetParam() + " loss");
  loss.backward();
  for (const auto& [name, param] : model.named_parameters())
    expect_close(param.grad(), golden["grad.param." + name], GetParam() + " gradient of " + name, 1e-6, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Cases, GPTGolden, ::testing::Values("tiny", "short_bias"));

}  // namespace
}  // namespace ag::nn
