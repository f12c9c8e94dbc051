#include "nn/optim.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <utility>

#include "engine/autocast.h"
#include "engine/autograd.h"
#include "engine/kernels/optim.h"
#include "engine/kernels/parallel.h"
#include "engine/kernels/reduce.h"

namespace ag::nn {

namespace {

void check_hyperparameter(std::string_view optimizer, std::string_view name, double value, bool valid) {
  AG_CHECK(valid, "{}: invalid {}: {}", optimizer, name, value);
}

std::string state_key(size_t index, const std::string& field) { return fmt::format("state.{}.{}", index, field); }

std::string describe(const Tensor& t) { return fmt::format("{} {}", shape_str(t.shape()), dtype_name(t.dtype())); }

Tensor copy_of(const Tensor& source) { return empty(source.shape(), source.dtype()).copy_(source); }

}  // namespace

// ---- Optimizer

Optimizer::Optimizer(std::string_view name, std::vector<Tensor> params, double lr)
    : params_(std::move(params)), state_(params_.size()), lr_(lr) {
  AG_CHECK(!params_.empty(), "{}: got an empty parameter list", name);
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    AG_CHECK(p.defined() && is_floating(p.dtype()) && p.requires_grad() && p.is_leaf(),
             "{}: parameter {} must be a floating leaf tensor that requires grad", name, i);
  }
  check_hyperparameter(name, "lr", lr, lr >= 0);
}

void Optimizer::set_lr(double lr) {
  check_hyperparameter(type_name(), "lr", lr, lr >= 0);
  lr_ = lr;
}

void Optimizer::zero_grad() {
  for (const Tensor& p : params_) p.set_grad({});
}

void Optimizer::step() {
  NoGradGuard no_grad;
  const std::vector<std::string> names = buffer_names();
  try {
    for (size_t i = 0; i < params_.size(); ++i) {
      Tensor& param = params_[i];
      const Tensor& grad = param.grad();
      if (!grad.defined()) continue;
      ParamState& state = state_[i];
      if (state.buffers.size() != names.size())
        for (size_t b = 0; b < names.size(); ++b) state.buffers.push_back(zeros(param.shape(), param.dtype()));
      ++state.step;
      update(param, grad, state);
    }
  } catch (...) {
    finish_step();  // the parameters before the failure are updated, as when each ran in turn; none left pending
    throw;
  }
  finish_step();
}

NamedTensors Optimizer::state_dict() const {
  NamedTensors out{{"lr", scalar(lr_, DType::f64)}};
  const std::vector<std::string> names = buffer_names();
  for (size_t i = 0; i < params_.size(); ++i) {
    if (state_[i].step == 0) continue;
    out.emplace_back(state_key(i, "step"), full({}, static_cast<double>(state_[i].step), DType::i64));
    for (size_t b = 0; b < names.size(); ++b) out.emplace_back(state_key(i, names[b]), state_[i].buffers[b]);
  }
  return out;
}

// The problems with parameter `index`'s entries, which it removes from `given`: either none of
// them is there (not stepped yet) or all are, the step a positive 0-d i64 and each buffer shaped
// like the parameter.
std::vector<std::string> Optimizer::take_param_state(size_t index, std::map<std::string, Tensor>& given) const {
  std::vector<std::string> fields = buffer_names();
  fields.insert(fields.begin(), "step");
  std::vector<std::string> problems, missing;
  for (const std::string& field : fields) {
    const std::string key = state_key(index, field);
    auto it = given.find(key);
    if (it == given.end()) {
      missing.push_back(fmt::format("missing '{}'", key));
      continue;
    }
    const Tensor& value = it->second;
    const Tensor& param = params_[index];
    if (field == "step" && (value.dim() != 0 || value.dtype() != DType::i64 || value.item() < 1))
      problems.push_back(fmt::format("'{}' is {} = {}, expected a positive 0-d i64", key, describe(value),
                                     value.numel() == 1 ? value.item() : NAN));
    if (field != "step" && (value.shape() != param.shape() || value.dtype() != param.dtype()))
      problems.push_back(fmt::format("'{}' is {}, the parameter is {}", key, describe(value), describe(param)));
    given.erase(it);
  }
  if (missing.size() < fields.size()) problems.insert(problems.end(), missing.begin(), missing.end());
  return problems;
}

void Optimizer::load_state_dict(const NamedTensors& state) {
  std::map<std::string, Tensor> given(state.begin(), state.end());
  const std::map<std::string, Tensor> values = given;
  std::vector<std::string> problems;
  auto lr = given.find("lr");
  if (lr == given.end())
    problems.push_back("missing 'lr'");
  else if (lr->second.numel() != 1 || !is_floating(lr->second.dtype()) || !(lr->second.item() >= 0))
    problems.push_back(fmt::format("'lr' is {}, expected a non-negative floating scalar", describe(lr->second)));
  if (lr != given.end()) given.erase(lr);
  for (size_t i = 0; i < params_.size(); ++i) {
    std::vector<std::string> found = take_param_state(i, given);
    problems.insert(problems.end(), found.begin(), found.end());
  }
  for (const auto& [name, _] : given) problems.push_back(fmt::format("unexpected '{}'", name));
  if (!problems.empty()) fail("{}: load_state_dict: {}", type_name(), fmt::join(problems, "; "));

  lr_ = values.at("lr").item();
  const std::vector<std::string> names = buffer_names();
  for (size_t i = 0; i < params_.size(); ++i) {
    ParamState fresh;
    auto step = values.find(state_key(i, "step"));
    if (step != values.end()) {
      fresh.step = static_cast<int64_t>(step->second.item());
      for (const std::string& name : names) fresh.buffers.push_back(copy_of(values.at(state_key(i, name))));
    }
    state_[i] = std::move(fresh);
  }
}

// ---- SGD

SGD::SGD(std::vector<Tensor> params, double lr, SGDOptions options)
    : Optimizer("SGD", std::move(params), lr), options(options) {
  check_hyperparameter("SGD", "momentum", options.momentum, options.momentum >= 0);
  check_hyperparameter("SGD", "weight_decay", options.weight_decay, options.weight_decay >= 0);
  AG_CHECK(!options.nesterov || (options.momentum > 0 && options.dampening == 0),
           "SGD: nesterov momentum needs momentum > 0 and dampening 0, got momentum {} and dampening {}",
           options.momentum, options.dampening);
}

std::vector<std::string> SGD::buffer_names() const {
  if (options.momentum == 0) return {};
  return {"momentum_buffer"};
}

void SGD::update(Tensor& param, const Tensor& grad, ParamState& state) {
  if (!state.update.defined()) state.update = empty(param.shape(), param.dtype());
  dispatch_floating(param.dtype(), "SGD", [&]<typename T>() {
    const T* p = param.data<T>();
    const T* g = grad.data<T>();
    T* out = state.update.data<T>();
    T* buffer = options.momentum == 0 ? nullptr : state.buffers[0].data<T>();
    const T decay = options.weight_decay, momentum = options.momentum, damped = 1 - options.dampening;
    const bool first = state.step == 1;
    for (int64_t i = 0, n = param.numel(); i < n; ++i) {
      T d = options.weight_decay == 0 ? g[i] : g[i] + decay * p[i];  // d_p = grad.add(param, alpha=wd)
      if (buffer) {
        buffer[i] = first ? d : buffer[i] * momentum + damped * d;  // buf.mul_(momentum).add_(d_p, 1 - dampening)
        d = options.nesterov ? d + momentum * buffer[i] : buffer[i];
      }
      out[i] = d;
    }
  });
  param.add_(state.update, -lr());  // param.add_(d_p, alpha=-lr)
}

// ---- Adam and AdamW

Adam::Adam(std::vector<Tensor> params, AdamOptions options) : Adam(std::move(params), options, "Adam") {}

Adam::Adam(std::vector<Tensor> params, AdamOptions options, std::string_view name)
    : Optimizer(name, std::move(params), options.lr), options(options) {
  check_hyperparameter(name, "beta1", options.beta1, options.beta1 >= 0 && options.beta1 < 1);
  check_hyperparameter(name, "beta2", options.beta2, options.beta2 >= 0 && options.beta2 < 1);
  check_hyperparameter(name, "eps", options.eps, options.eps >= 0);
  check_hyperparameter(name, "weight_decay", options.weight_decay, options.weight_decay >= 0);
}

void Adam::update(Tensor& param, const Tensor& grad, ParamState& state) {
  adam_update(param, grad, state, options.weight_decay);
}

void Adam::adam_update(Tensor& param, const Tensor& grad, ParamState& state, double l2, double decay_factor) {
  const auto steps = static_cast<double>(state.step);
  const kernels::AdamStep step{.beta1 = options.beta1,
                               .beta2 = options.beta2,
                               .eps = options.eps,
                               .l2 = l2,
                               .kept = decay_factor,
                               .correction2 = std::sqrt(1 - std::pow(options.beta2, steps)),
                               .step_size = -lr() / (1 - std::pow(options.beta1, steps))};
  // One pass: the same bits as the three passes param.mul_(kept), the moments,
  // param.add_(update, step_size) would give. An f32 parameter's pass runs in finish_step.
  ++param.impl()->storage->version;  // an in-place write, as mul_ and add_ count it
  if (param.dtype() == DType::f32) {
    const auto same_param = [&](const kernels::AdamTensor& t) { return t.param == param.data<float>(); };
    if (std::any_of(gathered_.begin(), gathered_.end(), same_param)) finish_step();  // listed twice: in turn
    const Tensor copy = weight_bf16_copy_to_fill(param);  // under autocast: the next forward's operand
    gathered_.push_back({step, param.data<float>(), grad.data<float>(), state.buffers[0].data<float>(),
                         state.buffers[1].data<float>(), param.numel(),
                         copy.defined() ? reinterpret_cast<uint16_t*>(copy.data<BFloat16>()) : nullptr});
    if (copy.defined()) bf16_copies_.emplace_back(param, copy);
    return;
  }
  dispatch_floating(param.dtype(), type_name(), [&]<typename T>() {
    kernels::adam_step(step, param.data<T>(), grad.data<T>(), state.buffers[0].data<T>(), state.buffers[1].data<T>(),
                       param.numel());
  });
}

void Adam::finish_step() {
  const std::vector<kernels::AdamTensor> updates = std::exchange(gathered_, {});
  kernels::adam_steps(updates);
  for (const auto& [param, copy] : std::exchange(bf16_copies_, {})) keep_weight_bf16_copy(param, copy);
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options, const std::vector<Tensor>& no_decay)
    : Adam(std::move(params),
           {.lr = options.lr,
            .beta1 = options.beta1,
            .beta2 = options.beta2,
            .eps = options.eps,
            .weight_decay = options.weight_decay},
           "AdamW") {
  for (const Tensor& p : no_decay) {
    AG_CHECK(std::any_of(this->params().begin(), this->params().end(),
                         [&](const Tensor& q) { return q.impl() == p.impl(); }),
             "AdamW: a no_decay tensor of shape {} is not one of the parameters", shape_str(p.shape()));
    no_decay_.insert(p.impl());
  }
}

void AdamW::update(Tensor& param, const Tensor& grad, ParamState& state) {
  // param.mul_(1 - lr * weight_decay), in adam_update's pass
  adam_update(param, grad, state, 0, no_decay_.count(param.impl()) ? 1 : 1 - lr() * options.weight_decay);
}

// ---- clip_grad_norm

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, double norm_type) {
  AG_CHECK(norm_type >= 1, "clip_grad_norm: norm_type must be a p >= 1 or INFINITY, got {}", norm_type);
  AG_CHECK(max_norm >= 0, "clip_grad_norm: max_norm must be non-negative, got {}", max_norm);
  const bool infinity = std::isinf(norm_type);
  int64_t elements = 0;
  for (const Tensor& p : params) {
    if (!p.grad().defined()) continue;
    AG_CHECK(p.grad().dtype() == DType::f32 || p.grad().dtype() == DType::f64,
             "clip_grad_norm: expected f32 or f64 gradients, got a {} one of shape {}", dtype_name(p.grad().dtype()),
             shape_str(p.grad().shape()));
    elements += p.grad().numel();
  }
  // Each gradient's Σ|g|^p (or max |g|) on its own, the gradients shared between threads, then
  // added in the parameters' order: the same number for any thread count.
  const auto count = static_cast<int64_t>(params.size());
  const int64_t cost = elements / std::max<int64_t>(1, count);  // elements per gradient
  std::vector<double> partials(params.size(), 0.0);
  parallel_for(count, cost, [&](int64_t i) {
    const Tensor& grad = params[static_cast<size_t>(i)].grad();
    if (!grad.defined()) return;
    double& partial = partials[static_cast<size_t>(i)];
    dispatch_floating(grad.dtype(), "clip_grad_norm", [&]<typename T>() {
      const T* g = grad.template data<T>();
      const int64_t n = grad.numel();
      if (norm_type == 2) {  // the common case, without a pow per element, vectorised
        partial = sum_in_lanes(g, n, [](double v) { return v * v; });
        return;
      }
      for (int64_t k = 0; k < n; ++k) {
        const double magnitude = std::abs(static_cast<double>(g[k]));
        partial = infinity ? std::max(partial, magnitude) : partial + std::pow(magnitude, norm_type);
      }
    });
  });
  double total = 0;
  for (const double partial : partials) total = infinity ? std::max(total, partial) : total + partial;
  if (!infinity) total = std::pow(total, 1 / norm_type);
  const double coefficient = max_norm / (total + 1e-6);
  if (coefficient < 1)  // each gradient scaled by the thread that summed it (the same schedule): in its cache
    parallel_for(count, cost, [&](int64_t i) {
      const NoGradGuard no_grad;  // on every thread: grad mode is a thread's own
      if (const Tensor& grad = params[static_cast<size_t>(i)].grad(); grad.defined()) Tensor(grad).mul_(coefficient);
    });
  return total;
}

// ---- learning-rate schedules

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer), base_lr_(optimizer.lr()) {}

void LRScheduler::start() { optimizer_.set_lr(lr_at(0)); }

void LRScheduler::step() { optimizer_.set_lr(lr_at(++epoch_)); }

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  AG_CHECK(step_size > 0, "StepLR: step_size must be positive, got {}", step_size);
  AG_CHECK(gamma >= 0, "StepLR: gamma must be non-negative, got {}", gamma);
  start();
}

double StepLR::lr_at(int64_t epoch) const {
  return base_lr_ * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

WarmupCosineLR::WarmupCosineLR(Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps)
    : LRScheduler(optimizer), warmup_steps_(warmup_steps), total_steps_(total_steps) {
  AG_CHECK(warmup_steps >= 0 && total_steps > warmup_steps,
           "WarmupCosineLR: expected 0 <= warmup_steps < total_steps, got warmup_steps {} and total_steps {}",
           warmup_steps, total_steps);
  start();
}

double WarmupCosineLR::lr_at(int64_t epoch) const {
  if (epoch < warmup_steps_) return base_lr_ * static_cast<double>(epoch) / static_cast<double>(warmup_steps_);
  const double progress =
      std::min(1.0, static_cast<double>(epoch - warmup_steps_) / static_cast<double>(total_steps_ - warmup_steps_));
  return base_lr_ * 0.5 * (1 + std::cos(std::numbers::pi * progress));
}

}  // namespace ag::nn
