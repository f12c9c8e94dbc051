// Module: names, traversal, modes and strict loading.
#include <gtest/gtest.h>

#include "engine/autograd.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/reduce.h"
#include "nn/layers.h"
#include "tests/test_util.h"

namespace ag::nn {
namespace {

std::shared_ptr<Sequential> small_model() {
  return std::make_shared<Sequential>(std::vector<std::shared_ptr<UnaryModule>>{
      std::make_shared<Linear>(3, 4), std::make_shared<Dropout>(0.5), std::make_shared<LayerNorm>(Shape{4})});
}

TEST(Module, NamesChildrenAndCounts) {
  auto model = small_model();
  std::vector<std::string> names;
  for (const auto& [name, _] : model->named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(model->children().size(), 3u);
  EXPECT_EQ(model->num_parameters(), 3 * 4 + 4 + 4 + 4);
  EXPECT_EQ(model->str(),
            "Sequential(\n  (0): Linear(in_features=3, out_features=4, bias=True)\n  (1): Dropout(p=0.5, "
            "inplace=False)\n  (2): LayerNorm((4,), eps=1e-05, elementwise_affine=True)\n)");
}

TEST(Module, TrainAndEvalReachEveryChild) {
  auto model = small_model();
  model->eval();
  for (const auto& child : model->children()) EXPECT_FALSE(child->is_training());
  Tensor x = randn({2, 3});
  EXPECT_EQ((*model)(x).to_vector(), (*model)(x).to_vector());  // no dropout in eval
  model->train();
  for (const auto& child : model->children()) EXPECT_TRUE(child->is_training());
}

TEST(Module, ZeroGradClearsEveryGradient) {
  auto model = small_model();
  sum((*model)(randn({2, 3}))).backward();
  EXPECT_TRUE(model->parameters()[0].grad().defined());
  model->zero_grad();
  for (const Tensor& p : model->parameters()) EXPECT_FALSE(p.grad().defined());
}

TEST(Module, LoadStateDictIsStrictAndNamesEveryProblem) {
  auto model = small_model();
  NamedTensors state = model->state_dict();
  auto other = small_model();
  other->load_state_dict(state);
  EXPECT_EQ(other->parameters()[0].to_vector(), model->parameters()[0].to_vector());

  NamedTensors broken = state;
  broken.erase(broken.begin());                 // missing 0.weight
  broken[0].second = zeros({7});                // 0.bias of the wrong shape
  broken.emplace_back("3.weight", zeros({1}));  // unexpected
  expect_error([&] { other->load_state_dict(broken); },
               {"missing '0.weight'", "'0.bias' has shape (7)", "expects (4)", "unexpected '3.weight'"});
}

TEST(Module, SequentialRefusesNull) {
  Sequential seq;
  expect_error([&] { seq.push_back(nullptr); }, {"Sequential", "null"});
}

}  // namespace
}  // namespace ag::nn
