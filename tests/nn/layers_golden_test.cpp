// The basic layers against PyTorch (tools/golden/layers.py): outputs, gradients, print(model).
#include <gtest/gtest.h>

#include "engine/autograd.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/index.h"
#include "engine/ops/pointwise.h"
#include "engine/ops/reduce.h"
#include "nn/layers.h"
#include "tests/golden_util.h"

namespace ag::nn {
namespace {

// Loads the golden weights into `module`, runs it on the golden input, backpropagates
// Σ out ⊙ probe and compares output, input gradient, parameter gradients and the printout.
void check_against_golden(UnaryModule& module, const std::string& name) {
  const Golden golden("layer_" + name);
  NamedTensors state;
  for (const auto& [key, t] : golden.tensors())
    if (key.rfind("param.", 0) == 0) state.emplace_back(key.substr(6), t);
  module.load_state_dict(state);
  Tensor x = golden["x"];
  const bool input_grad = golden.has("grad.x");
  if (input_grad) x = clone(x).requires_grad_();
  Tensor out = module(x);
  expect_close(out, golden["out"], name + " output");
  sum(mul(out, golden["probe"])).backward();
  if (input_grad) expect_close(x.grad(), golden["grad.x"], name + " input gradient");
  for (const auto& [param_name, param] : module.named_parameters())
    expect_close(param.grad(), golden["grad.param." + param_name], name + " gradient of " + param_name);
  EXPECT_EQ(module.str(), golden.metadata().at("module"));
}

TEST(GoldenLayers, Linear) {
  Linear linear(5, 3);
  check_against_golden(linear, "linear");
}

TEST(GoldenLayers, LinearWithoutBias) {
  Linear linear(4, 6, false);
  check_against_golden(linear, "linear_nobias");
}

TEST(GoldenLayers, EmbeddingWithPadding) {
  Embedding embedding(7, 4, 0);
  check_against_golden(embedding, "embedding");
  EXPECT_EQ(embedding.weight.grad().at({0, 0}), 0.0);
}

TEST(GoldenLayers, LayerNorm) {
  LayerNorm norm({6});
  check_against_golden(norm, "layernorm");
}

TEST(GoldenLayers, ReLU) {
  ReLU relu;
  check_against_golden(relu, "relu");
}

TEST(GoldenLayers, GELU) {
  GELU gelu;
  check_against_golden(gelu, "gelu");
}

TEST(GoldenLayers, GELUTanh) {
  GELU gelu(GeluApproximation::tanh);
  check_against_golden(gelu, "gelu_tanh");
}

TEST(GoldenLayers, Sequential) {
  Sequential seq({std::make_shared<Linear>(4, 8), std::make_shared<ReLU>(), std::make_shared<Linear>(8, 2)});
  check_against_golden(seq, "sequential");
}

}  // namespace
}  // namespace ag::nn
