#include "engine/function.h"

#include <algorithm>

namespace ag {

FunctionContext::FunctionContext(std::string_view function, std::vector<bool> needs_input_grad)
    : function_(function), needs_input_grad_(std::move(needs_input_grad)) {}

void FunctionContext::save_for_backward(std::vector<Tensor> tensors) {
  AG_CHECK(backward_saved_ == nullptr, "{}: save_for_backward is for forward; backward reads ctx.saved()", function_);
  to_save_ = std::move(tensors);
}

const std::vector<Tensor>& FunctionContext::saved() const {
  AG_CHECK(backward_saved_ != nullptr, "{}: ctx.saved() is for backward; forward has the tensors themselves",
           function_);
  return *backward_saved_;
}

bool FunctionContext::needs_input_grad(size_t input) const {
  AG_CHECK(input < needs_input_grad_.size(), "{}: needs_input_grad({}), but forward has {} tensor input(s)", function_,
           input, needs_input_grad_.size());
  return needs_input_grad_[input];
}

const std::any& FunctionContext::value_of(const std::string& key) const {
  auto it = values_.find(key);
  if (it != values_.end()) return it->second;
  std::string keys;
  for (const auto& [name, value] : values_) keys += (keys.empty() ? "" : ", ") + name;
  fail("{}: ctx.get(\"{}\"): forward set no such value; it set: {}", function_, key, keys.empty() ? "none" : keys);
}

void FunctionContext::wrong_type(const std::string& key) const {
  fail("{}: ctx.get(\"{}\") asks for another type than forward's ctx.set gave it", function_, key);
}

std::vector<bool> inputs_needing_grad(const std::vector<Tensor>& inputs) {
  std::vector<bool> needs(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    needs[i] = (grad_enabled() && inputs[i].defined() && inputs[i].requires_grad()) ||
               fw::tangent_of(inputs[i]).defined();  // forward mode derives the JVP from backward
  return needs;
}

// While it lives, ctx.saved() gives `saved` (backward's and jvp's view of what forward saved).
class SavedScope {
 public:
  SavedScope(FunctionContext& ctx, const std::vector<Tensor>& saved) : ctx_(ctx) { ctx.backward_saved_ = &saved; }
  ~SavedScope() { ctx_.backward_saved_ = nullptr; }
  SavedScope(const SavedScope&) = delete;
  SavedScope& operator=(const SavedScope&) = delete;

 private:
  FunctionContext& ctx_;
};

void attach_function_node(Tensor& out, const std::shared_ptr<FunctionContext>& ctx, const std::vector<Tensor>& inputs,
                          FunctionBackward backward, FunctionJvp jvp) {
  AG_CHECK(out.defined(), "{}: forward returned an undefined tensor", ctx->function_);
  if (!needs_recording(inputs)) return;
  AG_CHECK(is_floating(out.dtype()), "{}: forward returned a {} tensor; only f32 and f64 outputs carry gradients",
           ctx->function_, dtype_name(out.dtype()));
  const std::vector<Tensor> saved = std::move(ctx->to_save_);
  ctx->to_save_.clear();
  // The context holds no tensor from here on (the node holds them): it may live in the node.
  fw::JvpFn tangent;
  if (jvp != nullptr) {
    tangent = [&ctx, &saved, jvp](const fw::JvpContext& c) {
      const SavedScope scope(*ctx, saved);
      return jvp(*ctx, c.tangents);
    };
  }
  attach_node(
      out, ctx->function_, inputs, saved,
      [ctx, backward](const BackwardContext& c) {
        const SavedScope scope(*ctx, c.saved);
        return backward(*ctx, {c.grad});
      },
      tangent);
}

}  // namespace ag
