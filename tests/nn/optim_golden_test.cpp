// Optimizers, gradient clipping and learning-rate schedules against PyTorch
// (tools/golden/optim.py): every parameter after each of 10 steps, to f32 tolerance; and
// clip_grad_norm the same at any thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>

#include "engine/ops/arithmetic.h"
#include "engine/threads.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/optim.h"
#include "tests/golden_util.h"

namespace ag::nn {
namespace {

using MakeOptimizer = std::function<std::unique_ptr<Optimizer>(std::vector<Tensor>)>;

// Trains Linear(4,8) → ReLU → Linear(8,1) from the golden initial weights with MSE on the
// golden data and compares the loss and every parameter after every step.
void check_training(const std::string& name, const MakeOptimizer& make_optimizer) {
  const Golden golden("optim_" + name);
  Sequential model({std::make_shared<Linear>(4, 8), std::make_shared<ReLU>(), std::make_shared<Linear>(8, 1)});
  NamedTensors initial;
  for (const auto& [param_name, _] : model.named_parameters())
    initial.emplace_back(param_name, golden["param." + param_name]);
  model.load_state_dict(initial);
  std::unique_ptr<Optimizer> optimizer = make_optimizer(model.parameters());
  MSELoss loss_fn;
  const std::vector<double> losses = golden["loss"].to_vector();
  for (int step = 1; step <= 10; ++step) {
    optimizer->zero_grad();
    Tensor loss = loss_fn(model(golden["x"]), golden["y"]);
    loss.backward();
    optimizer->step();
    EXPECT_NEAR(loss.item(), losses[step - 1], 1e-5 * (1 + std::abs(losses[step - 1]))) << name << " step " << step;
    for (const auto& [param_name, param] : model.named_parameters())
      expect_close(param, golden[fmt::format("step{}.{}", step, param_name)],
                   fmt::format("{} step {} {}", name, step, param_name));
  }
}

TEST(GoldenOptim, SGDWithMomentumAndWeightDecay) {
  check_training("sgd", [](std::vector<Tensor> params) {
    return std::make_unique<SGD>(std::move(params), 0.1, SGDOptions{.momentum = 0.9, .weight_decay = 1e-2});
  });
}

TEST(GoldenOptim, SGDNesterov) {
  check_training("sgd_nesterov", [](std::vector<Tensor> params) {
    return std::make_unique<SGD>(std::move(params), 0.05, SGDOptions{.momentum = 0.8, .nesterov = true});
  });
}

TEST(GoldenOptim, AdamWithL2) {
  check_training("adam", [](std::vector<Tensor> params) {
    return std::make_unique<Adam>(std::move(params), AdamOptions{.lr = 1e-2, .weight_decay = 1e-2});
  });
}

TEST(GoldenOptim, AdamWDefaults) {
  check_training("adamw", [](std::vector<Tensor> params) {
    return std::make_unique<AdamW>(std::move(params), AdamWOptions{.lr = 1e-2});
  });
}

TEST(GoldenOptim, ClipGradNorm) {
  const Golden golden("optim_clip_grad_norm");
  for (const auto& [norm_name, max_norm, norm_type] :
       {std::tuple{"2", 1.5, 2.0}, std::tuple{"inf", 0.5, double{INFINITY}}, std::tuple{"2_noclip", 100.0, 2.0}}) {
    std::vector<Tensor> params;
    for (int i = 0; i < 3; ++i) {
      const Tensor& grad = golden[fmt::format("grad.{}", i)];
      params.push_back(zeros(grad.shape()).requires_grad_());
      params.back().set_grad(clone(grad));
    }
    const double total = clip_grad_norm(params, max_norm, norm_type);
    EXPECT_NEAR(total, golden[std::string(norm_name) + ".total_norm"].item(), 1e-5) << norm_name;
    for (int i = 0; i < 3; ++i)
      expect_close(params[i].grad(), golden[fmt::format("{}.clipped.{}", norm_name, i)],
                   fmt::format("clip_grad_norm {} gradient {}", norm_name, i));
  }
}

// Gradients big enough to be shared between threads (one parameter without a gradient among them):
// the same bits at 1 and 2 threads, the norm that of an f64 sum, the gradients scaled to norm 1.
TEST(ClipGradNorm, SameBitsAtOneAndTwoThreads) {
  struct Clipped {
    double total, unclipped_norm;
    std::vector<Tensor> params;
  };
  const auto clip_with = [](int thread_count) {
    set_num_threads(thread_count);
    Generator gen(5);
    Clipped c{0, 0, {}};
    double sum = 0;
    for (const int64_t n : {70000, 3, 0, 40000, 129}) {
      c.params.push_back(zeros({n}).requires_grad_());
      if (n == 0) continue;
      c.params.back().set_grad(randn({n}, DType::f32, gen));
      for (const double g : c.params.back().grad().to_vector()) sum += g * g;
    }
    c.unclipped_norm = std::sqrt(sum);
    c.total = clip_grad_norm(c.params, 1.0, 2.0);
    return c;
  };
  const int threads = get_num_threads();
  const Clipped one = clip_with(1), two = clip_with(2);
  set_num_threads(threads);
  EXPECT_EQ(one.total, two.total);
  EXPECT_NEAR(two.total, two.unclipped_norm, 1e-9 * two.unclipped_norm);
  double sum = 0;
  for (size_t i = 0; i < one.params.size(); ++i) {
    ASSERT_EQ(one.params[i].grad().defined(), two.params[i].grad().defined());
    if (!one.params[i].grad().defined()) continue;
    EXPECT_EQ(one.params[i].grad().to_vector(), two.params[i].grad().to_vector()) << i;
    for (const double g : two.params[i].grad().to_vector()) sum += g * g;
  }
  EXPECT_NEAR(std::sqrt(sum), 1.0, 1e-5);
}

// Gradients that carry a graph (backward with create_graph) are scaled as detached values, on
// every thread, as before a double backward.
TEST(ClipGradNorm, ScalesGradientsThatCarryAGraph) {
  const int threads = get_num_threads();
  set_num_threads(2);
  const Tensor w = full({70000}, 3.0).requires_grad_(), u = full({70000}, 3.0).requires_grad_();
  sum(add(mul(w, w), mul(u, u))).backward({}, /*retain_graph=*/false, /*create_graph=*/true);  // 6 each, with graphs
  ASSERT_TRUE(w.grad().requires_grad() && u.grad().requires_grad());
  const double total = clip_grad_norm({w, u}, 1.0, 2.0);  // one gradient a thread
  set_num_threads(threads);
  EXPECT_NEAR(total, 6.0 * std::sqrt(140000.0), 1e-6 * total);
  EXPECT_NEAR(w.grad().to_vector().front(), 6.0 / total, 1e-9);
  EXPECT_NEAR(u.grad().to_vector().back(), 6.0 / total, 1e-9);
  w.set_grad({});  // a gradient with a graph holds its leaf through its AccumulateGrad node: a cycle
  u.set_grad({});
}

// The lr the optimizer holds before each of the optimizer/scheduler steps.
template <typename Scheduler, typename... Args>
std::vector<double> learning_rates(int steps, Args... args) {
  Tensor param = zeros({1}).requires_grad_();
  SGD sgd({param}, 0.5);
  Scheduler scheduler(sgd, args...);
  std::vector<double> rates;
  for (int i = 0; i < steps; ++i) {
    rates.push_back(sgd.lr());
    sgd.step();
    scheduler.step();
  }
  return rates;
}

TEST(GoldenOptim, StepLR) {
  const Golden golden("optim_schedules");
  expect_near(tensor(learning_rates<StepLR>(12, int64_t{3}, 0.1), {12}, DType::f64), golden["step_lr"].to_vector(),
              1e-12);
}

TEST(GoldenOptim, WarmupCosineLRMatchesLambdaLR) {
  const Golden golden("optim_schedules");
  expect_near(tensor(learning_rates<WarmupCosineLR>(24, int64_t{4}, int64_t{20}), {24}, DType::f64),
              golden["warmup_cosine"].to_vector(), 1e-12);
}

}  // namespace
}  // namespace ag::nn
