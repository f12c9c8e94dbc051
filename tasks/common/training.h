// What every task's training run shares: the common settings (the CLI's common flags), and the
// run itself: OUT/config.json, the Trainer (with --resume), the history it returns.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "nn/trainer.h"

namespace ag::tasks {

// The flags every `train <task>` takes; each task sets its own defaults.
struct TrainingOptions {
  int64_t epochs = 100;
  double lr = 1e-2;
  int64_t batch_size = 16;    // the global batch (all ranks')
  int64_t micro_batches = 1;  // each batch (each rank's shard) in this many passes, gradients summed
  uint64_t seed = 0;
  std::string out{};
  std::string resume{};  // an OUT folder to continue
  bool quiet = false;
  bool trace_backward = false;  // trace the first step's backward on stderr (engine/inspect.h)
  bool detect_anomaly = false;  // the first NaN/Inf, forward or backward, stops the run naming its op and scope
};

// attograd's version (CMake's PROJECT_VERSION), stored in every config.
std::string version();

// The common settings, the thread count and the version merged into a task's settings
// (a JSON object as text): the config stored in config.json and every checkpoint.
std::string config_json(const TrainingOptions& options, const std::string& task_settings);

// What a task sets in the Trainer's options beyond the common flags (steps per epoch, an lr
// schedule, clipping: nn::TrainerOptions).
using TrainerSettings = std::function<void(nn::TrainerOptions&)>;

// Writes OUT/config.json, runs the Trainer (continuing OUT/last.safetensors of options.resume)
// and returns the whole history; with `step_seconds`, also the wall time of each step it ran.
// Under mpirun, every rank trains its shard; the ranks other than 0 then leave the MPI job and
// exit 0 here, and rank 0 alone goes on to report and write files.
std::vector<nn::EpochRecord> run_training(nn::Module& model, nn::Optimizer& optimizer, nn::TrainTask& task,
                                          const TrainingOptions& options, const std::string& config,
                                          const std::map<std::string, std::string>& checkpoint_metadata = {},
                                          const TrainerSettings& settings = {},
                                          std::vector<double>* step_seconds = nullptr);

}  // namespace ag::tasks
