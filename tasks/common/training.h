// What every task's training run shares: the common settings (the CLI's common flags), and the
// run itself: the run folder (tasks/common/run_dir.h), the Trainer, the history it returns.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/trainer.h"
#include "tasks/common/settings.h"
#include "tasks/common/svg.h"

namespace ag::tasks {

class RunDir;  // tasks/common/run_dir.h

// The flags every `train <task>` takes; each task sets its own defaults.
struct TrainingOptions {
  int64_t epochs = 100;
  double lr = 1e-2;
  int64_t batch_size = 16;    // the global batch (all ranks')
  int64_t micro_batches = 1;  // each batch (each rank's shard) in this many passes, gradients summed
  uint64_t seed = 0;
  std::string out{};
  std::string resume{};  // an OUT folder to continue
  // The run folder, with the resumed checkpoint read once: the CLI opens it to carry settings over;
  // left empty (tests, a program of one's own), run_training opens it from `resume`.
  std::shared_ptr<RunDir> run_dir{};
  bool quiet = false;
  bool trace_backward = false;  // trace the first step's backward on stderr (engine/inspect.h)
  bool detect_anomaly = false;  // the first NaN/Inf, forward or backward, stops the run naming its op and scope
  int64_t profile_steps = 0;    // > 0: that many steps after the warm-up profiled by op (nn::TrainerOptions)
  // --profile's warm-up: this process's steps before the profiled ones
  int64_t profile_after = nn::kProfileWarmupSteps;
  int64_t max_memory_mb = 0;      // a bound on the estimated peak (tasks/common/memory.h); 0: the memory available
  std::string precision = "f32";  // "bf16": the products under ag::AutocastGuard (engine/autocast.h)
};

// attograd's version (CMake's PROJECT_VERSION), stored in every config.
std::string version();

// True for "bf16", false for "f32"; anything else is an error naming --precision.
bool precision_is_bf16(const std::string& precision);

// The settings every task shares, the first rows of each task's table (settings.h): `lr_help` names
// the task's optimizer; without `epochs_flag` the epochs are counted by the task (charlm's
// evaluations) and --epochs is no flag. Then the process's: ranks, threads, the version.
std::vector<Setting<TrainingOptions>> common_settings(const std::string& lr_help, bool epochs_flag = true);

// A run's config: the task's settings (its table's to_json and what it derives from the data) with
// the process's ranks, thread count and version, stored in config.json and every checkpoint, and the
// table's rows, which name each setting's flag and resume rule.
struct RunConfig {
  nlohmann::json settings;
  std::vector<SettingName> names;
};
nlohmann::json with_process_settings(nlohmann::json settings);
template <class Options>
RunConfig run_config(nlohmann::json settings, const std::vector<Setting<Options>>& table) {
  return {with_process_settings(std::move(settings)), setting_names(table)};
}

// What a task sets in the Trainer's options beyond the common flags (steps per epoch, an lr
// schedule, clipping: nn::TrainerOptions).
using TrainerSettings = std::function<void(nn::TrainerOptions&)>;

// What a training run gives back to its task.
struct TrainedRun {
  std::vector<nn::EpochRecord> history;  // the whole run's, a resumed run's earlier epochs included
  std::vector<double> step_seconds;      // the wall time of each step this process ran
  std::shared_ptr<RunDir> folder;        // the run folder: the task writes its plots through it
  // The best epoch's model, as best.safetensors holds it (nothing without --out: no checkpoints).
  std::optional<nn::BestModel> best;
};

// Runs the Trainer. With options.resume it continues that folder's last.safetensors, the config
// checked by the resume table (run_dir.h). Before writing, the run folder claims --out (checked,
// locked for the rest of the process) and receives the Trainer's files; it writes OUT/config.json
// with the first checkpoint, so a run that fails before one leaves the folder's config.json
// describing the checkpoint there. Under mpirun, every rank trains its shard, and rank 0 alone
// writes; the other ranks get nothing back (nullopt: rank 0 reports) and their command returns.
// With options.profile_steps, the profile's table goes to stderr when its steps are done, and into
// OUT/profile.txt when the run ends.
std::optional<TrainedRun> run_training(nn::Module& model, nn::Optimizer& optimizer, nn::TrainTask& task,
                                       const TrainingOptions& options, const RunConfig& config,
                                       const std::map<std::string, std::string>& checkpoint_metadata = {},
                                       const TrainerSettings& settings = {});

// The loss of one training step as a task's `train` computes it (the model freshly initialised from
// the run's seed, the first batch), with the model that made it: what `attograd graph <task>` draws
// and the step page records. Each task's first_step_loss returns one; it calls `before_forward`, if
// given, with the model's named parameters before the forward (the step page's --tangent gives one
// of them a tangent there).
template <class Model>
struct StepLoss {
  std::unique_ptr<Model> model;
  Tensor loss;
};
using BeforeForward = std::function<void(const NamedTensors& parameters)>;

// The rows of that first batch: the task's first batch_size training examples in order (all of them
// when there are fewer), where `train` shuffles.
std::vector<int64_t> first_batch(const nn::TrainTask& task, int64_t batch_size);

// A run's train loss and validation loss (its "val_loss" metric) per epoch: the two curves of a
// task's losses.svg, named `train` and `validation`.
std::vector<plot::Series> loss_curves(const std::vector<nn::EpochRecord>& history, const std::string& train,
                                      const std::string& validation);

}  // namespace ag::tasks
