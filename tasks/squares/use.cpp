// `eval squares`: a model read back from a checkpoint, its autoregressive predictions of freshly
// generated squares and their MSE.
#include <fmt/format.h>

#include "engine/autograd.h"
#include "engine/json.h"
#include "engine/ops/loss.h"
#include "engine/ops/shape.h"
#include "engine/safetensors.h"
#include "nn/checkpoint.h"
#include "tasks/common/checkpoint_config.h"
#include "tasks/common/memory.h"
#include "tasks/squares/task.h"

namespace ag::squares {

namespace {

// The model's predictions of the sources (N, 2, 2), in chunks of what fits tasks::kEvalChunkBytes.
Tensor predict_in_chunks(SquaresModel& model, const ModelConfig& config, const Tensor& sources) {
  const int64_t n = sources.size(0), chunk = tasks::rows_per_chunk(4 * values_per_square(config), n);
  std::vector<Tensor> predicted;
  for (int64_t first = 0; first < n; first += chunk)
    predicted.push_back(model.predict(narrow(sources, 0, first, std::min(chunk, n - first))));
  return predicted.size() == 1 ? predicted[0] : cat(predicted, 0);
}

}  // namespace

int eval(const EvalOptions& options) {
  const nn::Checkpoint checkpoint = nn::read_checkpoint(options.checkpoint);
  const nlohmann::json& config = checkpoint.settings;
  tasks::check_checkpoint_task(config, "squares", options.checkpoint);
  const SquaresOptions run = tasks::from_json(settings(), config, options.checkpoint, SquaresOptions{});
  const ModelConfig& model_config = run.model;
  std::unique_ptr<SquaresModel> model =
      nn::build_from_config(checkpoint, options.checkpoint, [&] { return build_model(run); });
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
