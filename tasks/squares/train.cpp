// `train squares`: both sets of squares, the model training starts from, the TrainTask (teacher
// forcing; autoregressive validation), the run's config and plots; `first_step_loss` (`attograd
// graph squares`).
#include <fmt/format.h>

#include "engine/autograd.h"
#include "engine/json.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/loss.h"
#include "engine/ops/shape.h"
#include "nn/optim.h"
#include "tasks/common/memory.h"
#include "tasks/common/run_dir.h"
#include "tasks/common/svg.h"
#include "tasks/squares/plot.h"
#include "tasks/squares/task.h"

namespace ag::squares {

namespace {

class SquaresTask : public nn::TrainTask {
 public:
  SquaresTask(SquaresModel& model, std::vector<Square> train, const Tensor& test_points)
      : model_(model), train_(std::move(train)), test_(split(test_points)) {}

  int64_t train_size() const override { return static_cast<int64_t>(train_.size()); }

  Tensor loss(const std::vector<int64_t>& batch) override {
    const Tensor X = points_tensor(train_, batch);  // (B, 4, 2)
    return mse_loss(model_.teacher_forced(X), split(X).target);
  }

  // The validation MSE of autoregressive predictions (eval mode) on the shard's held-out squares.
  nn::MetricSums evaluate(const nn::dist::Shard& shard) override {
    const int64_t n = test_.source.size(0), first = shard.begin(n), rows = shard.end(n) - first;
    if (rows == 0) return {{"val_loss", {}}};
    const Tensor target = narrow(test_.target, 0, first, rows);
    const Tensor squared_errors =
        mse_loss(model_.predict(narrow(test_.source, 0, first, rows)), target, Reduction::sum);
    return {{"val_loss", {squared_errors.item(), static_cast<double>(target.numel())}}};
  }

 private:
  SquaresModel& model_;
  std::vector<Square> train_;
  SourceTarget test_;
};

nlohmann::json spec_json(const SquaresSpec& spec) {
  return {{"n", spec.n}, {"seed", spec.seed}, {"noise", spec.noise}, {"variable_len", spec.variable_len}};
}

// The run's config: the table's settings and the task's own.
nlohmann::json run_settings(const SquaresOptions& o) {
  nlohmann::json config = tasks::to_json(settings(), o);
  config.update({{"task", "squares"},
                 {"source_len", kSourceLen},
                 {"target_len", kTargetLen},
                 {"optimizer", "Adam"},
                 {"train_data", spec_json(o.train_data)},
                 {"test_data", spec_json(o.test_data)}});
  return config;
}

RngStyle rng_style(const SquaresOptions& o) { return o.rng == "torch" ? RngStyle::torch : RngStyle::attograd; }

void write_plots(tasks::RunDir& folder, const std::vector<nn::EpochRecord>& history, SquaresModel& model,
                 const Tensor& test_points, const SquaresSpec& test_spec) {
  folder.write("losses.svg",
               plot::line_chart("squares: MSE per epoch", "epoch", "MSE",
                                tasks::loss_curves(history, "train (teacher forcing)", "validation (autoregressive)")));
  const SourceTarget test = split(test_points);
  const Tensor predicted = model.predict(test.source);
  folder.write("predictions.svg",
               predictions_svg(fmt::format("held-out squares (seed {}) after epoch {}: validation MSE {:.4f}",
                                           test_spec.seed, history.back().epoch, history.back().metrics.at("val_loss")),
                               test.source, test.target, predicted));
}

// The model training starts from (build_model), built within the memory bound
// (tasks::build_within_memory).
std::unique_ptr<SquaresModel> build_to_train(const SquaresOptions& options) {
  const ModelConfig& m = options.model;
  return tasks::build_within_memory(
      "squares",
      fmt::format("--d-model {}, --heads {}, --ff-units {}, --layers {}", m.d_model, m.heads, m.ff_units, m.layers),
      options.training.max_memory_mb, [&] { return build_model(options); });
}

// With --rng torch, both data sets come from numpy's stream, as the peer's generate_sequences.
SquaresSpec data_spec(SquaresSpec spec, RngStyle rng) {
  spec.numpy_stream = rng == RngStyle::torch;
  return spec;
}

}  // namespace

std::unique_ptr<SquaresModel> build_model(const SquaresOptions& options) {
  if (rng_style(options) == RngStyle::attograd) {
    manual_seed(options.training.seed, RngStyle::attograd);
    return make_model(options.model);
  }
  manual_seed(kTorchInitSeed, RngStyle::torch);
  std::unique_ptr<SquaresModel> model = make_model(options.model);
  manual_seed(options.training.seed, RngStyle::torch);
  return model;
}

// Note [memory estimate] for the squares models, in f32 values: each of a square's 4 corners keeps
// about 12·W + F per layer (W the attention's width: heads·d_model for seed 004's wide heads; F the
// feed-forward units) and 3·H·4 attention weights (values_per_square); evaluation decodes the test
// squares at once, `eval squares` in chunks of what fits tasks::kEvalChunkBytes.
tasks::MemoryEstimate memory_estimate(const SquaresOptions& o, int64_t parameters) {
  const ModelConfig& m = o.model;
  const auto B = static_cast<double>(std::min(o.training.batch_size, o.train_data.n)) /
                 static_cast<double>(o.training.micro_batches);
  return {.task = "squares",
          .parameters = parameters,
          .step_bytes = 4 * B * values_per_square(m),
          .step_settings = fmt::format("--batch-size {} (with --d-model {}, --heads {}, --layers {})",
                                       o.training.batch_size, m.d_model, m.heads, m.layers),
          .eval_bytes = 4 * static_cast<double>(o.test_data.n) * values_per_square(m),
          .eval_settings = fmt::format("{} test squares", o.test_data.n)};
}

int train(const SquaresOptions& options) {
  const std::vector<Square> train_squares = generate_squares(data_spec(options.train_data, rng_style(options)));
  const Tensor test_points = points_tensor(generate_squares(data_spec(options.test_data, rng_style(options))));
  const std::unique_ptr<SquaresModel> model = build_to_train(options);
  nn::Adam optimizer(model->module().parameters(), {.lr = options.training.lr});
  tasks::check_memory(memory_estimate(options, model->module().num_parameters()), options.training.max_memory_mb);
  SquaresTask task(*model, train_squares, test_points);
  const std::optional<tasks::TrainedRun> trained = tasks::run_training(
      model->module(), optimizer, task, options.training, tasks::run_config(run_settings(options), settings()), {},
      [&](nn::TrainerOptions& trainer) { trainer.shuffle_rng = rng_style(options); });
  if (!trained) return 0;  // another rank of a data-parallel job: rank 0 reports
  const std::vector<nn::EpochRecord>& history = trained->history;
  manual_seed(0, RngStyle::attograd);  // the process's default generator as it was

  model->module().eval();
  NoGradGuard no_grad;
  write_plots(*trained->folder, history, *model, test_points, options.test_data);
  const nn::EpochRecord& last = history.back();
  double best = INFINITY;
  for (const nn::EpochRecord& r : history) best = std::min(best, r.metrics.at("val_loss"));
  fmt::print(
      "epoch {}: train MSE {:.4f} (teacher forcing), validation MSE {:.4f} (autoregressive, {} held-out squares)\n",
      last.epoch, last.train_loss, last.metrics.at("val_loss"), options.test_data.n);
  fmt::print("best validation MSE {:.4f}\n", best);
  tasks::print_files_written(options.training.out, {"losses.svg", "predictions.svg"});
  return 0;
}

StepLoss first_step_loss(const SquaresOptions& options, const tasks::BeforeForward& before_forward) {
  const std::vector<Square> train_squares = generate_squares(data_spec(options.train_data, rng_style(options)));
  StepLoss step{build_to_train(options), {}};
  SquaresTask task(*step.model, train_squares,
                   points_tensor(generate_squares(data_spec(options.test_data, rng_style(options)))));
  if (before_forward) before_forward(step.model->module().named_parameters());
  step.loss = task.loss(tasks::first_batch(task, options.training.batch_size));
  return step;
}

}  // namespace ag::squares
