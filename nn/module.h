// Module: the libtorch-shaped base of every layer. Parameters, buffers and submodules are
// registered by name, in order; named_parameters() and state_dict() give PyTorch's dotted names
// for the same module tree, so a state_dict moves between attograd and PyTorch.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/inspect.h"
#include "engine/tensor.h"

namespace ag::nn {

class Module;

// Called after a module's forward with the module and its output (e.g. to capture attention
// weights); registered with Module::register_forward_hook.
using ForwardHook = std::function<void(Module&, const Tensor&)>;

// Removes the hook it was returned for (PyTorch's RemovableHandle). Removing twice, or after the
// module is gone, does nothing.
class HookHandle {
 public:
  HookHandle() = default;
  HookHandle(std::weak_ptr<std::vector<std::pair<uint64_t, ForwardHook>>> hooks, uint64_t id)
      : hooks_(std::move(hooks)), id_(id) {}
  void remove();

 private:
  std::weak_ptr<std::vector<std::pair<uint64_t, ForwardHook>>> hooks_;
  uint64_t id_ = 0;
};

class Module {
 public:
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The class name PyTorch prints ("Linear") and what follows it in parentheses.
  virtual std::string type_name() const = 0;
  virtual std::string extra_repr() const { return ""; }

  // Each parameter once (a tensor shared by two modules, as tied weights, under its first name);
  // state_dict() lists it under every name.
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

  // `hook(module, output)` runs after every forward of this module, in registration order.
  HookHandle register_forward_hook(ForwardHook hook);

  // The one way a module runs: `forward` (a callable returning the output) inside this module's
  // scope (nodes created in it record "encoder.ffn.0"), then the forward hooks. Callable's
  // operator() goes through it, as must any other method that runs the module (GPT's forward).
  template <typename Forward>
  Tensor call(Forward&& forward) {
    const ScopeGuard scope = enter_scope();
    Tensor output = forward();
    if (forward_hooks_ && !forward_hooks_->empty()) run_forward_hooks(output);
    return output;
  }

 protected:
  Module() = default;
  // Registers and returns the tensor (a handle sharing its storage).
  Tensor register_parameter(const std::string& name, Tensor value, bool requires_grad = true);
  Tensor register_buffer(const std::string& name, Tensor value);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    check_new_name(name);
    children_.emplace_back(name, module);
    module->set_scope_name(child_scope_name(name));
    return module;
  }
  // Pushes this module's name onto the scope path (nothing for the root, whose paths are relative
  // to it as in named_modules()). call() does it; so must any other method that runs children
  // (seed 004's init_keys).
  ScopeGuard enter_scope() const { return ScopeGuard(scope_name_); }
  // A container that is iterated, never called (ModuleList): its elements' scopes include its name.
  virtual bool is_container() const { return false; }

 private:
  void check_new_name(const std::string& name) const;
  void collect(const std::string& prefix, bool parameters, bool buffers, bool recurse, NamedTensors& out) const;
  std::string str(int indent) const;
  void run_forward_hooks(const Tensor& output);
  // What a child registered as `name` pushes: "attn_heads.0" in a ModuleList named attn_heads.
  std::string child_scope_name(const std::string& name) const;
  void set_scope_name(const std::string& name);  // and a container's elements'

  NamedTensors parameters_;
  NamedTensors buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  std::string scope_name_;  // what it pushes: its name in its parent; empty for the root
  std::shared_ptr<std::vector<std::pair<uint64_t, ForwardHook>>> forward_hooks_;  // created by the first hook
  uint64_t next_hook_id_ = 0;
};

// The base of a module that is called: `module(args...)` is Derived's `forward(args...)` run by
// call() (its scope, then its hooks). Defaults live on forward(); an argument written `{}` needs its
// type named at the call (`Tensor()`, `TransformerMasks{...}`), since a template cannot deduce one.
template <class Derived>
class Callable : public Module {
 public:
  template <class... Args>
  Tensor operator()(Args&&... args) {
    return call([&] { return static_cast<Derived&>(*this).forward(std::forward<Args>(args)...); });
  }
};

// A module with one tensor in and one out: what Sequential chains.
class UnaryModule : public Callable<UnaryModule> {
 public:
  virtual Tensor forward(const Tensor& x) = 0;
};

}  // namespace ag::nn
