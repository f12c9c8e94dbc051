// Module: the libtorch-shaped base of every layer. Parameters, buffers and submodules are
// registered by name, in order; named_parameters() and state_dict() give PyTorch's dotted names
// for the same module tree, so a state_dict moves between attograd and PyTorch.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/safetensors.h"
#include "engine/tensor.h"

namespace ag::nn {

class Module {
 public:
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The class name PyTorch prints ("Linear") and what follows it in parentheses.
  virtual std::string type_name() const = 0;
  virtual std::string extra_repr() const { return ""; }

  NamedTensors named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const { return children_; }
  std::vector<std::shared_ptr<Module>> children() const;
  int64_t num_parameters() const;

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad();  // sets every parameter's grad to undefined (PyTorch's set_to_none)

  // Parameters and buffers, each module's own first, then its children's, by dotted name.
  NamedTensors state_dict() const;
  // Copies values into the registered tensors. Strict: a missing, unexpected, wrong-shape or
  // wrong-dtype entry is an error naming it (all of them, not just the first).
  void load_state_dict(const NamedTensors& state);

  std::string str() const;  // like PyTorch's print(model)

 protected:
  Module() = default;
  // Registers and returns the tensor (a handle sharing its storage).
  Tensor register_parameter(const std::string& name, Tensor value, bool requires_grad = true);
  Tensor register_buffer(const std::string& name, Tensor value);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    check_new_name(name);
    children_.emplace_back(name, module);
    return module;
  }

 private:
  void check_new_name(const std::string& name) const;
  void collect(const std::string& prefix, bool parameters, bool buffers, bool recurse, NamedTensors& out) const;
  std::string str(int indent) const;

  NamedTensors parameters_;
  NamedTensors buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// A module with one tensor in and one out: what Sequential chains.
class UnaryModule : public Module {
 public:
  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return forward(x); }
};

}  // namespace ag::nn
