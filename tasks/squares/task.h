// `attograd train squares` and `attograd eval squares`: seed 004's noisy squares, the first two
// corners in, the last two out; a training set (seed 13) and a held-out test set (seed 19).
#pragma once

#include <memory>
#include <string>

#include "tasks/common/training.h"
#include "tasks/squares/data.h"
#include "tasks/squares/model.h"

namespace ag::squares {

struct SquaresOptions {
  tasks::TrainingOptions training{.epochs = 100, .lr = 1e-2, .batch_size = 16, .seed = 0, .out = "runs/squares"};
  ModelConfig model;
  SquaresSpec train_data{.n = 128, .seed = 13};
  SquaresSpec test_data{.n = 128, .seed = 19};
  // torch: replay the PyTorch peer (../shared/peer/squares_torch.py) step for step: numpy's squares,
  // the model built after torch.manual_seed(kTorchInitSeed), then set_seed(training.seed) (the
  // peer's 42) for PyTorch's generator and the DataLoader's shuffle.
  std::string rng = "attograd";  // or "torch"
};
inline constexpr uint64_t kTorchInitSeed = 23;  // seed 004's torch.manual_seed before the model
inline constexpr uint64_t kTorchSetSeed = 42;   // the --seed of --rng torch: StepByStep's set_seed(42)

// The defaults of each model: seed 004's sizes for "selfattn"; for "transformer" the sizes, and
// the learning rate, picked on seeds 0–2 (see tasks/squares/README.md).
ModelConfig default_model_config(const std::string& model);
double default_lr(const std::string& model);

// The settings of `train squares`, one row each (settings.cpp): its flags, config.json, the resume
// rules; and the defaults of what was not given: the chosen --model's sizes and lr, --rng torch's seed.
const std::vector<tasks::Setting<SquaresOptions>>& settings();
SquaresOptions model_defaults(const SquaresOptions& chosen);

struct EvalOptions {
  std::string checkpoint;  // written by `train squares`
  SquaresSpec data{.n = 128, .seed = 19};
  std::string predictions;  // if set: a safetensors file of "source", "target" and "predicted" (N, 2, 2)
};

// The model a run trains and its checkpoints hold: options.model, initialised from the run's seed;
// with --rng torch as the peer (PyTorch's draws after torch.manual_seed(23), then set_seed(seed) for
// what the run draws next). `train` and `first_step_loss` build it within the memory bound; `eval`
// within the file's tensors (nn::build_from_config), then loads them.
std::unique_ptr<SquaresModel> build_model(const SquaresOptions& options);

// Returns the process exit code; throws ag::Error on bad input.
int train(const SquaresOptions& options);
// Prints the MSE of the checkpoint's autoregressive predictions on freshly generated squares.
int eval(const EvalOptions& options);

// The loss of `train`'s first step (on the first batch_size training squares), with the model that
// made it: what `attograd graph squares` exports.
using StepLoss = tasks::StepLoss<SquaresModel>;
StepLoss first_step_loss(const SquaresOptions& options, const tasks::BeforeForward& before_forward = {});

}  // namespace ag::squares
