#include "tasks/common/training.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>

#include "engine/autocast.h"
#include "engine/inspect.h"
#include "engine/io.h"
#include "engine/threads.h"
#include "nn/checkpoint.h"
#include "tasks/common/run_dir.h"
#include "tasks/common/text.h"

namespace ag::tasks {

std::string version() { return ATTOGRAD_VERSION; }

bool precision_is_bf16(const std::string& precision) {
  AG_CHECK(precision == "f32" || precision == "bf16", "--precision: expected f32 or bf16, got '{}'", precision);
  return precision == "bf16";
}

std::string config_json(const TrainingOptions& options, const std::string& task_settings) {
  nlohmann::json config = nlohmann::json::parse(task_settings);
  config.update({{"epochs", options.epochs},
                 {"lr", options.lr},
                 {"batch_size", options.batch_size},
                 {"micro_batches", options.micro_batches},
                 {"ranks", nn::dist::ranks()},
                 {"seed", options.seed},
                 {"threads", get_num_threads()},
                 {"precision", options.precision},
                 {"attograd_version", version()}});
  return config.dump();
}

std::optional<TrainedRun> run_training(nn::Module& model, nn::Optimizer& optimizer, nn::TrainTask& task,
                                       const TrainingOptions& options, const std::string& config,
                                       const std::map<std::string, std::string>& checkpoint_metadata,
                                       const TrainerSettings& settings) {
  const AutocastGuard autocast(precision_is_bf16(options.precision));  // refused here, before anything is written
  nn::TrainerOptions trainer_options{.epochs = options.epochs,
                                     .batch_size = options.batch_size,
                                     .micro_batches = options.micro_batches,
                                     .seed = options.seed,
                                     .progress = !options.quiet,
                                     .config = config,
                                     .checkpoint_metadata = checkpoint_metadata};
  if (settings) settings(trainer_options);
  std::string profile;  // the table, for OUT/profile.txt
  trainer_options.profile_steps = options.profile_steps;
  trainer_options.profile_ready = [&profile](const std::string& table) {
    profile = table;
    if (nn::dist::is_root()) fmt::print(stderr, "{}", table);
  };
  if (trainer_options.steps_per_epoch == 0 && options.batch_size > task.train_size() && nn::dist::is_root())
    fmt::print("note: --batch-size {} is more than the {} training examples: each step takes all {}\n",
               options.batch_size, task.train_size(), task.train_size());
  const std::shared_ptr<RunDir> run = options.run_dir ? options.run_dir : std::make_shared<RunDir>(options.resume);
  if (run->resuming()) trainer_options.config = run->resumed_config(config, trainer_options);
  if (!options.out.empty()) trainer_options.files = run.get();  // claimed below, before the first write
  nn::Trainer trainer(model, optimizer, task, trainer_options);
  if (run->resuming()) trainer.resume(run->checkpoint());
  // Nothing is written before here; the Trainer writes config.json beside the first checkpoint.
  // Under mpirun, rank 0 alone writes (and claims the folder).
  if (!options.out.empty() && nn::dist::is_root()) run->claim(options.out, trainer_options.config);
  // Under mpirun: every rank is ready, with the same settings and data, or none starts.
  nn::dist::StartState ready;
  ready.settings = trainer_options.config;
  ready.files = data_files_read();
  if (auto refusal = nn::dist::agree_to_start(ready)) throw nn::dist::StartRefused(*refusal);
  const DetectAnomalyGuard anomaly(options.detect_anomaly);
  std::optional<BackwardTrace> trace;
  if (options.trace_backward) trace.emplace(&std::cerr, /*walks=*/1, parameter_names(model.named_parameters()));
  const auto start = std::chrono::steady_clock::now();
  std::vector<nn::EpochRecord> history = trainer.fit();
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  if (!nn::dist::is_root()) return std::nullopt;  // data parallelism: the other ranks are done; rank 0 reports
  fmt::print("trained in {:.3f} s (wall, the epochs' checkpoints included)\n", took.count());
  if (!profile.empty() && !options.out.empty()) run->write("profile.txt", profile);
  return TrainedRun{std::move(history), trainer.step_seconds(), run};
}

std::vector<int64_t> first_batch(const nn::TrainTask& task, int64_t batch_size) {
  std::vector<int64_t> rows(static_cast<size_t>(std::min(batch_size, task.train_size())));
  std::iota(rows.begin(), rows.end(), 0);
  return rows;
}

}  // namespace ag::tasks
