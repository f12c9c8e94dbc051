// Optimizers (SGD, Adam, AdamW) with PyTorch's update rules and defaults, gradient clipping and
// learning-rate schedules. An optimizer updates its parameters in place under NoGradGuard, in
// one pass over each parameter; its state (step counts and buffers) is a NamedTensors, so it
// goes into a checkpoint next to the model's state_dict.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/kernels/optim.h"
#include "engine/tensor.h"

namespace ag::nn {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual std::string type_name() const = 0;  // "Adam"

  // Updates every parameter that has a gradient; parameters without one are left alone.
  void step();
  void zero_grad();  // sets every parameter's grad to undefined (PyTorch's set_to_none)

  double lr() const { return lr_; }
  void set_lr(double lr);
  const std::vector<Tensor>& params() const { return params_; }

  // "lr" (0-d f64) and, for every parameter i that has been stepped, "state.<i>.step" (0-d i64)
  // and "state.<i>.<buffer>" (exp_avg, exp_avg_sq; momentum_buffer), shaped like the parameter.
  NamedTensors state_dict() const;
  // Strict: a missing, unexpected, wrong-shape or wrong-dtype entry is an error naming it.
  void load_state_dict(const NamedTensors& state);

 protected:
  struct ParamState {
    int64_t step = 0;
    std::vector<Tensor> buffers;  // in buffer_names() order; allocated at the first step
    Tensor update;                // SGD's scratch of the parameter's shape, not part of the state
  };

  Optimizer(std::string_view name, std::vector<Tensor> params, double lr);  // name: for errors
  virtual std::vector<std::string> buffer_names() const = 0;
  // Writes the parameter's new value, with state.step already counting this step, or gathers the
  // write for finish_step, which step() calls after the last parameter's update.
  virtual void update(Tensor& param, const Tensor& grad, ParamState& state) = 0;
  virtual void finish_step() {}

 private:
  std::vector<std::string> take_param_state(size_t index, std::map<std::string, Tensor>& given) const;

  std::vector<Tensor> params_;
  std::vector<ParamState> state_;
  double lr_;
};

struct SGDOptions {
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;  // L2: added to the gradient
  bool nesterov = false;
};

// g ← grad + wd·p; with momentum: b ← g at the first step, else μ·b + (1 − dampening)·g, and
// g ← g + μ·b (nesterov) or b; p ← p − lr·g. As torch.optim.SGD; lr has no default there either.
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, double lr, SGDOptions options = {});
  std::string type_name() const override { return "SGD"; }

  const SGDOptions options;

 private:
  std::vector<std::string> buffer_names() const override;
  void update(Tensor& param, const Tensor& grad, ParamState& state) override;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;  // Adam: L2 added to the gradient; AdamW: decoupled
};

// m ← β₁m + (1−β₁)g, v ← β₂v + (1−β₂)g², p ← p − lr/(1−β₁ᵗ) · m / (√v/√(1−β₂ᵗ) + eps), with
// g = grad + wd·p. As torch.optim.Adam.
class Adam : public Optimizer {
 public:
  explicit Adam(std::vector<Tensor> params, AdamOptions options = {});
  std::string type_name() const override { return "Adam"; }

  const AdamOptions options;  // lr: the initial one; lr() is the current one

 protected:
  Adam(std::vector<Tensor> params, AdamOptions options, std::string_view name);
  std::vector<std::string> buffer_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  void update(Tensor& param, const Tensor& grad, ParamState& state) override;
  // Adam's step with L2 penalty l2 (Adam's weight decay), the parameter first scaled by
  // decay_factor (AdamW's decoupled decay, 1 - lr·weight_decay).
  void adam_update(Tensor& param, const Tensor& grad, ParamState& state, double l2, double decay_factor = 1);
  // The f32 parameters' updates, gathered by adam_update and run together (kernels::adam_steps).
  void finish_step() override;

 private:
  std::vector<kernels::AdamTensor> gathered_;
  std::vector<std::pair<Tensor, Tensor>> bf16_copies_;  // (weight, the autocast copy its update writes)
};

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

// Decoupled weight decay: p ← p·(1 − lr·wd), then Adam's step without L2. As torch.optim.AdamW.
// The parameters in `no_decay` (a subset of `params`) get no decay: PyTorch's second param group
// {"params": no_decay, "weight_decay": 0}, as nanoGPT uses for LayerNorm weights and biases.
class AdamW : public Adam {
 public:
  explicit AdamW(std::vector<Tensor> params, AdamWOptions options = {}, const std::vector<Tensor>& no_decay = {});
  std::string type_name() const override { return "AdamW"; }

 private:
  void update(Tensor& param, const Tensor& grad, ParamState& state) override;
  std::set<const TensorImpl*> no_decay_;
};

// Scales all gradients together so their joint norm is at most max_norm and returns the norm
// before clipping, as torch.nn.utils.clip_grad_norm_: every gradient is multiplied by
// min(1, max_norm / (total_norm + 1e-6)). norm_type is a p ≥ 1 or INFINITY (the largest |g|).
// Parameters without a gradient are skipped.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, double norm_type = 2);

// Sets the optimizer's learning rate from the number of step() calls so far, like
// torch.optim.lr_scheduler: construction sets the lr for epoch 0, each step() advances one.
class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  void step();
  int64_t last_epoch() const { return epoch_; }
  double last_lr() const { return optimizer_.lr(); }

 protected:
  explicit LRScheduler(Optimizer& optimizer);
  void start();  // sets the epoch-0 lr; derived constructors call it once their fields are set
  virtual double lr_at(int64_t epoch) const = 0;

  Optimizer& optimizer_;
  const double base_lr_;

 private:
  int64_t epoch_ = 0;
};

// lr = base_lr · γ^⌊epoch / step_size⌋.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 private:
  double lr_at(int64_t epoch) const override;
  int64_t step_size_;
  double gamma_;
};

// Linear warm-up from 0 to base_lr over warmup_steps, then cosine decay to 0 at total_steps
// (and 0 after): the schedule of transformers' get_cosine_schedule_with_warmup.
class WarmupCosineLR : public LRScheduler {
 public:
  WarmupCosineLR(Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps);

 private:
  double lr_at(int64_t epoch) const override;
  int64_t warmup_steps_;
  int64_t total_steps_;
};

}  // namespace ag::nn
