#include "tasks/squares/task.h"

#include <fmt/format.h>

#include "engine/autograd.h"
#include "engine/json.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/loss.h"
#include "engine/ops/shape.h"
#include "engine/safetensors.h"
#include "nn/checkpoint.h"
#include "nn/optim.h"
#include "tasks/common/checkpoint_config.h"
#include "tasks/common/memory.h"
#include "tasks/common/run_dir.h"
#include "tasks/common/svg.h"
#include "tasks/common/text.h"
#include "tasks/squares/plot.h"

namespace ag::squares {

namespace {

// Whole squares (N, 4, 2) split into the given corners and the ones to predict.
struct SourceTarget {
  Tensor source;  // (N, 2, 2)
  Tensor target;  // (N, 2, 2)
};

SourceTarget split(const Tensor& points) {
  return {slice(points, 1, 0, kSourceLen), slice(points, 1, kSourceLen, kSourceLen + kTargetLen)};
}

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

// The model, initialised from the run's seed; with --rng torch as the peer: PyTorch's draws after
// torch.manual_seed(23), and then set_seed(seed) for what the run draws next.
std::unique_ptr<SquaresModel> seeded_model(const SquaresOptions& options) {
  if (rng_style(options) == RngStyle::attograd) {
    manual_seed(options.training.seed, RngStyle::attograd);
    return make_model(options.model);
  }
  manual_seed(kTorchInitSeed, RngStyle::torch);
  std::unique_ptr<SquaresModel> model = make_model(options.model);
  manual_seed(options.training.seed, RngStyle::torch);
  return model;
}

// The model training starts from (seeded_model), built within the memory bound
// (tasks::build_within_memory).
std::unique_ptr<SquaresModel> build_model(const SquaresOptions& options) {
  const ModelConfig& m = options.model;
  return tasks::build_within_memory(
      "squares",
      fmt::format("--d-model {}, --heads {}, --ff-units {}, --layers {}", m.d_model, m.heads, m.ff_units, m.layers),
      options.training.max_memory_mb, [&] { return seeded_model(options); });
}

// With --rng torch, both data sets come from numpy's stream, as the peer's generate_sequences.
SquaresSpec data_spec(SquaresSpec spec, RngStyle rng) {
  spec.numpy_stream = rng == RngStyle::torch;
  return spec;
}

}  // namespace

ModelConfig default_model_config(const std::string& model) {
  if (model == "transformer") return {.model = model, .heads = 2, .d_model = 16, .ff_units = 32, .layers = 1};
  return {.model = model};
}

double default_lr(const std::string& model) { return model == "transformer" ? 3e-3 : 1e-2; }

// Note [memory estimate] for the squares models, in f32 values: each of a square's 4 corners keeps
// about 12·W + F per layer (W the attention's width: heads·d_model for seed 004's wide heads; F the
// feed-forward units) and 3·H·4 attention weights; evaluation decodes the test squares at once,
// `eval squares` in chunks of what fits tasks::kEvalChunkBytes.
double values_per_square(const ModelConfig& m) {
  const double width = static_cast<double>(m.model == "transformer" ? m.d_model : m.heads * m.d_model);
  return 4 * static_cast<double>(m.layers) * 2 *
         (12 * width + static_cast<double>(m.ff_units) + 12 * static_cast<double>(m.heads));
}

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

// The model's predictions of the sources (N, 2, 2), in chunks of what fits tasks::kEvalChunkBytes.
Tensor predict_in_chunks(SquaresModel& model, const ModelConfig& config, const Tensor& sources) {
  const int64_t n = sources.size(0), chunk = tasks::rows_per_chunk(4 * values_per_square(config), n);
  std::vector<Tensor> predicted;
  for (int64_t first = 0; first < n; first += chunk)
    predicted.push_back(model.predict(narrow(sources, 0, first, std::min(chunk, n - first))));
  return predicted.size() == 1 ? predicted[0] : cat(predicted, 0);
}

int train(const SquaresOptions& options) {
  const std::vector<Square> train_squares = generate_squares(data_spec(options.train_data, rng_style(options)));
  const Tensor test_points = points_tensor(generate_squares(data_spec(options.test_data, rng_style(options))));
  const std::unique_ptr<SquaresModel> model = build_model(options);
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
  fmt::print("wrote {}/config.json, metrics.csv, losses.svg, predictions.svg, last.safetensors, best.safetensors\n",
             options.training.out);
  return 0;
}

StepLoss first_step_loss(const SquaresOptions& options, const tasks::BeforeForward& before_forward) {
  const std::vector<Square> train_squares = generate_squares(data_spec(options.train_data, rng_style(options)));
  StepLoss step{build_model(options), {}};
  SquaresTask task(*step.model, train_squares,
                   points_tensor(generate_squares(data_spec(options.test_data, rng_style(options)))));
  if (before_forward) before_forward(step.model->module().named_parameters());
  step.loss = task.loss(tasks::first_batch(task, options.training.batch_size));
  return step;
}

int eval(const EvalOptions& options) {
  const nn::Checkpoint checkpoint = nn::read_checkpoint(options.checkpoint);
  const nlohmann::json& config = checkpoint.settings;
  tasks::check_checkpoint_task(config, "squares", options.checkpoint);
  const ModelConfig model_config = tasks::from_json(settings(), config, options.checkpoint, SquaresOptions{}).model;
  std::unique_ptr<SquaresModel> model =
      nn::build_from_config(checkpoint, options.checkpoint, [&] { return make_model(model_config); });
  nn::load(options.checkpoint, model->module());
  model->module().eval();
  NoGradGuard no_grad;
  const SourceTarget data = split(points_tensor(generate_squares(options.data)));
  const Tensor predicted = predict_in_chunks(*model, model_config, data.source);
  const double mse = mse_loss(predicted, data.target).item();
  if (!options.predictions.empty())
    save_safetensors(options.predictions, {{"source", data.source}, {"target", data.target}, {"predicted", predicted}},
                     {{"checkpoint", options.checkpoint}});
  fmt::print("MSE {:.6f} on {} squares (seed {}, noise {}), model {} from {}\n", mse, options.data.n, options.data.seed,
             options.data.noise, model_config.model, options.checkpoint);
  return 0;
}

}  // namespace ag::squares
