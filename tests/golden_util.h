// Loading golden data written by tools/golden/*.py (PyTorch) and comparing against it.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>

#include "engine/autograd.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/reduce.h"
#include "engine/safetensors.h"
#include "nn/module.h"
#include "tests/test_util.h"

namespace ag {

class Golden {
 public:
  // name: the file under tests/golden/ without ".safetensors".
  explicit Golden(const std::string& name) {
    const SafetensorsFile file =
        load_safetensors(std::string(ATTOGRAD_SOURCE_DIR) + "/tests/golden/" + name + ".safetensors");
    for (const auto& [key, tensor] : file.tensors) tensors_[key] = tensor;
    metadata_ = file.metadata;
  }
  const Tensor& operator[](const std::string& key) const {
    auto it = tensors_.find(key);
    if (it == tensors_.end()) throw Error("golden data has no tensor '" + key + "'");
    return it->second;
  }
  bool has(const std::string& key) const { return tensors_.count(key) > 0; }
  const std::map<std::string, Tensor>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::map<std::string, Tensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Loads the golden file's "param.*" tensors into `module` and returns its inputs by name: "x.*" as
// fresh leaves needing gradients, "mask.*" as they are.
inline std::map<std::string, Tensor> load_golden_into(nn::Module& module, const Golden& golden) {
  NamedTensors state;
  std::map<std::string, Tensor> inputs;
  for (const auto& [key, t] : golden.tensors()) {
    if (key.rfind("param.", 0) == 0) state.emplace_back(key.substr(6), t);
    if (key.rfind("x.", 0) == 0) inputs[key.substr(2)] = clone(t).requires_grad_();
    if (key.rfind("mask.", 0) == 0) inputs[key.substr(5)] = t;
  }
  module.load_state_dict(state);
  return inputs;
}

// |actual - expected| <= atol + rtol·|expected| elementwise, shapes equal; prints OK / NOT OK.
inline void expect_close(const Tensor& actual, const Tensor& expected, const std::string& what, double atol = 1e-5,
                         double rtol = 1e-4) {
  ASSERT_TRUE(actual.defined()) << what << " is undefined";
  ASSERT_EQ(shape_str(actual.shape()), shape_str(expected.shape())) << what;
  const std::vector<double> a = actual.to_vector(), e = expected.to_vector();
  double worst = 0;
  size_t worst_at = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double excess = std::abs(a[i] - e[i]) - (atol + rtol * std::abs(e[i]));
    if (excess > worst || std::isnan(a[i]) != std::isnan(e[i])) {
      worst = std::isnan(excess) ? INFINITY : excess;
      worst_at = i;
    }
  }
  EXPECT_LE(worst, 0.0) << what << ": element " << worst_at << " is " << a[worst_at] << ", PyTorch has " << e[worst_at];
  std::printf("%s %s\n", worst <= 0 ? "OK" : "NOT OK", what.c_str());
}

// Golden data `name`: loads torch's state_dict into `module`, gives `run` the inputs
// (leaves needing gradients) and masks, backpropagates Σ out ⊙ probe, compares everything.
inline void check_module_against_golden(nn::Module& module, const std::string& name,
                                        const std::function<Tensor(const std::map<std::string, Tensor>&)>& run) {
  const Golden golden(name);
  const std::map<std::string, Tensor> inputs = load_golden_into(module, golden);
  Tensor out = run(inputs);
  expect_close(out, golden["out"], name + " output");
  sum(mul(out, golden["probe"])).backward();
  for (const auto& [key, t] : inputs)
    if (t.requires_grad()) expect_close(t.grad(), golden["grad.x." + key], name + " gradient of " + key);
  for (const auto& [param_name, param] : module.named_parameters())
    expect_close(param.grad(), golden["grad.param." + param_name], name + " gradient of " + param_name);
  EXPECT_EQ(module.str(), golden.metadata().at("module"));
}

}  // namespace ag
