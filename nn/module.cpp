#include "nn/module.h"

#include <algorithm>
#include <map>

#include "engine/autograd.h"

namespace ag::nn {

void Module::check_new_name(const std::string& name) const {
  AG_CHECK(!name.empty() && name.find('.') == std::string::npos, "{}: invalid member name '{}' (no dots, not empty)",
           type_name(), name);
  auto taken = [&](const auto& list) {
    for (const auto& [n, _] : list)
      if (n == name) return true;
    return false;
  };
  AG_CHECK(!taken(parameters_) && !taken(buffers_) && !taken(children_), "{}: '{}' is registered twice", type_name(),
           name);
}

Tensor Module::register_parameter(const std::string& name, Tensor value, bool requires_grad) {
  check_new_name(name);
  AG_CHECK(value.defined() && is_floating(value.dtype()), "{}: parameter '{}' must be a floating tensor", type_name(),
           name);
  value.requires_grad_(requires_grad);
  parameters_.emplace_back(name, value);
  return value;
}

Tensor Module::register_buffer(const std::string& name, Tensor value) {
  check_new_name(name);
  AG_CHECK(value.defined(), "{}: buffer '{}' is undefined", type_name(), name);
  buffers_.emplace_back(name, value);
  return value;
}

void Module::collect(const std::string& prefix, bool parameters, bool buffers, bool recurse, NamedTensors& out) const {
  if (parameters)
    for (const auto& [name, t] : parameters_) out.emplace_back(prefix + name, t);
  if (buffers)
    for (const auto& [name, t] : buffers_) out.emplace_back(prefix + name, t);
  if (!recurse) return;
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", parameters, buffers, true, out);
}

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors all;
  collect("", true, false, recurse, all);
  // A tensor registered under two names (a GPT's lm_head tied to its token embedding) is one
  // parameter: listed once, under its first name, as PyTorch's named_parameters() does.
  NamedTensors out;
  for (auto& named : all) {  // not a structured binding: clang 14 (the fuzz build) cannot capture those
    const bool seen = std::any_of(out.begin(), out.end(),
                                  [&](const auto& kept) { return kept.second.impl() == named.second.impl(); });
    if (!seen) out.push_back(std::move(named));
  }
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [_, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  collect("", false, true, recurse, out);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [_, child] : children_) out.push_back(child);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t count = 0;
  for (const Tensor& t : parameters()) count += t.numel();
  return count;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [_, child] : children_) child->train(on);
}

void Module::zero_grad() {
  for (const Tensor& t : parameters()) t.set_grad({});
}

NamedTensors Module::state_dict() const {
  NamedTensors out;
  collect("", true, true, true, out);
  return out;
}

void Module::load_state_dict(const NamedTensors& state) {
  std::map<std::string, Tensor> given(state.begin(), state.end());
  std::vector<std::string> problems;
  const NamedTensors own = state_dict();
  for (const auto& [name, target] : own) {
    auto it = given.find(name);
    if (it == given.end()) {
      problems.push_back(fmt::format("missing '{}' {}", name, shape_str(target.shape())));
      continue;
    }
    const Tensor& value = it->second;
    if (value.shape() != target.shape() || value.dtype() != target.dtype()) {
      problems.push_back(fmt::format("'{}' has shape {} {}, the model expects {} {}", name, shape_str(value.shape()),
                                     dtype_name(value.dtype()), shape_str(target.shape()), dtype_name(target.dtype())));
    }
    given.erase(it);
  }
  for (const auto& [name, value] : given) problems.push_back(fmt::format("unexpected '{}'", name));
  if (!problems.empty()) {
    std::string message;
    for (const std::string& p : problems) message += (message.empty() ? "" : "; ") + p;
    fail("load_state_dict: the state does not fit {}: {}", type_name(), message);
  }
  NoGradGuard no_grad;
  std::map<std::string, Tensor> values(state.begin(), state.end());
  for (const auto& [name, target] : own) Tensor(target).copy_(values.at(name));
}

std::string Module::str(int indent) const {
  std::string out = type_name() + "(" + extra_repr();
  if (children_.empty()) return out + ")";
  const std::string pad(indent + 2, ' ');
  out += "\n";
  for (const auto& [name, child] : children_) out += pad + "(" + name + "): " + child->str(indent + 2) + "\n";
  return out + std::string(indent, ' ') + ")";
}

std::string Module::str() const { return str(0); }

HookHandle Module::register_forward_hook(ForwardHook hook) {
  AG_CHECK(hook != nullptr, "{}: register_forward_hook: the hook is empty", type_name());
  if (!forward_hooks_) forward_hooks_ = std::make_shared<std::vector<std::pair<uint64_t, ForwardHook>>>();
  forward_hooks_->emplace_back(next_hook_id_, std::move(hook));
  return HookHandle(forward_hooks_, next_hook_id_++);
}

std::string Module::child_scope_name(const std::string& name) const {
  return is_container() && !scope_name_.empty() ? scope_name_ + "." + name : name;
}

// A ModuleList may be filled before or after it is registered: either way its elements end up
// with its name in front of theirs.
void Module::set_scope_name(const std::string& name) {
  scope_name_ = name;
  if (is_container())
    for (const auto& [child_name, child] : children_) child->set_scope_name(child_scope_name(child_name));
}

void Module::run_forward_hooks(const Tensor& output) {
  // A copy: a hook may remove itself (or another) while they run.
  const std::vector<std::pair<uint64_t, ForwardHook>> hooks = *forward_hooks_;
  for (const auto& [id, hook] : hooks) hook(*this, output);
}

void HookHandle::remove() {
  if (auto hooks = hooks_.lock()) std::erase_if(*hooks, [this](const auto& entry) { return entry.first == id_; });
  hooks_.reset();
}

}  // namespace ag::nn
