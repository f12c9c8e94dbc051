// Custom differentiable functions, libtorch-shaped: a struct derived from Function<Itself> with a
// node name and a static forward and backward; Itself::apply(args…) runs it.
//
//   struct LogCosh : ag::Function<LogCosh> {
//     static constexpr std::string_view name = "LogCoshBackward";
//     static ag::Tensor forward(ag::FunctionContext& ctx, const ag::Tensor& x) {
//       ctx.save_for_backward({x});
//       const ag::Tensor a = ag::abs(x);  // log cosh x = |x| + log(1 + e^(−2|x|)) − log 2, no overflow
//       return a + ag::log(ag::exp(a * -2.0) + 1.0) - std::log(2.0);
//     }
//     static std::vector<ag::Tensor> backward(ag::FunctionContext& ctx, const std::vector<ag::Tensor>& grads) {
//       return {ag::mul(grads[0], ag::tanh(ctx.saved()[0]))};  // d log cosh x = tanh x
//     }
//   };
//   ag::Tensor y = LogCosh::apply(x);
//
// forward runs with grad mode off and returns one tensor. Its Tensor arguments are the inputs;
// any other argument (a scalar, a shape) is passed through and gets no gradient. backward gets
// one gradient per output (so grads[0]) and returns one gradient per Tensor argument, in order,
// each of its input's shape (undefined where needs_input_grad is false); the backward walk checks
// the count and the shapes and names the function when they are wrong. Written with engine ops,
// backward is differentiable itself, so gradgradcheck and create_graph work.
//
// Forward mode (engine/forward_ad.h): a function may state its JVP,
//   static ag::Tensor jvp(ag::FunctionContext& ctx, const std::vector<ag::Tensor>& tangents);
// one tangent per Tensor argument (zeros where the input carries none), ctx.saved() as backward
// sees it, returning the output's tangent. Without one, forward mode derives it from backward (so
// backward must be written in engine ops). gradcheck checks both against finite differences.
//
// Safe by construction (record()'s rules): an output that is an input (an identity forward), a
// leaf, or a tensor that already has a node gets the function's node on a new alias of its memory,
// so the input stays a leaf and an earlier node stays with the earlier tensor; saved tensors are
// version-checked, freed after the backward, and saving the output makes no reference cycle.
#pragma once

#include <any>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "engine/autograd.h"

namespace ag {

class FunctionContext;
using FunctionBackward = std::vector<Tensor> (*)(FunctionContext& ctx, const std::vector<Tensor>& grads);
using FunctionJvp = Tensor (*)(FunctionContext& ctx, const std::vector<Tensor>& tangents);

// What forward leaves for backward: tensors (save_for_backward) and other values (set).
class FunctionContext {
 public:
  FunctionContext(std::string_view function, std::vector<bool> needs_input_grad);

  // In forward: the tensors backward reads through saved(), in order. Inputs and the output may be
  // saved; each is checked for in-place changes before backward reads it. A second call replaces.
  void save_for_backward(std::vector<Tensor> tensors);
  // In backward: the tensors forward saved.
  const std::vector<Tensor>& saved() const;
  // Per Tensor argument of forward, in order: does its gradient matter?
  bool needs_input_grad(size_t input) const;

  // Values other than tensors (scalars, shapes, flags) for backward: ctx.set("beta", 0.5) in
  // forward, ctx.get<double>("beta") in backward (the type must be the one set).
  template <typename T>
  void set(const std::string& key, T value) {
    static_assert(!std::is_same_v<T, Tensor>, "tensors go through save_for_backward (version-checked, then freed)");
    values_[key] = std::move(value);
  }
  template <typename T>
  const T& get(const std::string& key) const {
    const T* value = std::any_cast<T>(&value_of(key));
    if (value == nullptr) wrong_type(key);
    return *value;
  }

  std::string_view function() const { return function_; }

 private:
  friend void attach_function_node(Tensor& out, const std::shared_ptr<FunctionContext>& ctx,
                                   const std::vector<Tensor>& inputs, FunctionBackward backward, FunctionJvp jvp);
  friend class SavedScope;
  const std::any& value_of(const std::string& key) const;
  [[noreturn]] void wrong_type(const std::string& key) const;

  std::string_view function_;
  std::vector<bool> needs_input_grad_;
  std::vector<Tensor> to_save_;                          // forward's, until the node takes them
  const std::vector<Tensor>* backward_saved_ = nullptr;  // while backward runs: the node's, version-checked
  std::map<std::string, std::any> values_;
};

// Per input: does grad mode want its gradient (or forward mode, to derive a JVP from backward)?
std::vector<bool> inputs_needing_grad(const std::vector<Tensor>& inputs);

// After forward: refuses an undefined or non-floating output (naming the function) and, if an input
// needs a gradient, attaches the function's node to `out`, the saved tensors moving to the node;
// if an input carries a tangent, gives `out` its tangent by `jvp` (or, if null, from backward).
void attach_function_node(Tensor& out, const std::shared_ptr<FunctionContext>& ctx, const std::vector<Tensor>& inputs,
                          FunctionBackward backward, FunctionJvp jvp = nullptr);

template <typename Derived>
struct Function {
  template <typename... Args>
  static Tensor apply(Args&&... args) {
    static_assert((!std::is_same_v<std::decay_t<Args>, std::vector<Tensor>> && ...),
                  "pass tensors to Function::apply one by one: a std::vector<Tensor> argument would get no gradient");
    std::vector<Tensor> inputs;
    (add_if_tensor(inputs, args), ...);
    auto ctx = std::make_shared<FunctionContext>(Derived::name, inputs_needing_grad(inputs));
    Tensor out;
    {
      const NoGradGuard no_grad;
      const fw::SuspendLevel primals_only;  // forward sees values; the tangent comes from jvp
      out = Derived::forward(*ctx, std::forward<Args>(args)...);
    }
    FunctionJvp jvp = nullptr;
    if constexpr (requires { &Derived::jvp; }) jvp = &Derived::jvp;
    attach_function_node(out, ctx, inputs, &Derived::backward, jvp);
    return out;
  }

 private:
  template <typename Arg>
  static void add_if_tensor(std::vector<Tensor>& inputs, const Arg& arg) {
    if constexpr (std::is_same_v<Arg, Tensor>) inputs.push_back(arg);
  }
};

}  // namespace ag
