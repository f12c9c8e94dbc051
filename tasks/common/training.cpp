#include "tasks/common/training.h"

#include <fmt/core.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "engine/inspect.h"
#include "engine/safetensors.h"
#include "engine/threads.h"

namespace ag::tasks {

std::string version() { return ATTOGRAD_VERSION; }

std::string config_json(const TrainingOptions& options, const std::string& task_settings) {
  nlohmann::json config = nlohmann::json::parse(task_settings);
  config.update({{"epochs", options.epochs},
                 {"lr", options.lr},
                 {"batch_size", options.batch_size},
                 {"micro_batches", options.micro_batches},
                 {"ranks", nn::dist::ranks()},
                 {"seed", options.seed},
                 {"threads", get_num_threads()},
                 {"attograd_version", version()}});
  return config.dump();
}

std::vector<nn::EpochRecord> run_training(nn::Module& model, nn::Optimizer& optimizer, nn::TrainTask& task,
                                          const TrainingOptions& options, const std::string& config,
                                          const std::map<std::string, std::string>& checkpoint_metadata,
                                          const TrainerSettings& settings, std::vector<double>* step_seconds) {
  nn::TrainerOptions trainer_options{.epochs = options.epochs,
                                     .batch_size = options.batch_size,
                                     .micro_batches = options.micro_batches,
                                     .seed = options.seed,
                                     .out_dir = options.out,
                                     .progress = !options.quiet,
                                     .config = config,
                                     .checkpoint_metadata = checkpoint_metadata};
  if (settings) settings(trainer_options);
  nn::Trainer trainer(model, optimizer, task, trainer_options);
  if (!options.resume.empty()) trainer.resume(options.resume + "/last.safetensors");
  if (nn::dist::is_root()) {  // rank 0 alone writes files
    create_output_folder(options.out);
    write_file_atomically(options.out + "/config.json", nlohmann::json::parse(config).dump(2) + "\n");
  }
  const DetectAnomalyGuard anomaly(options.detect_anomaly);
  std::optional<BackwardTrace> trace;
  if (options.trace_backward) trace.emplace(&std::cerr, /*walks=*/1, parameter_names(model.named_parameters()));
  const auto start = std::chrono::steady_clock::now();
  std::vector<nn::EpochRecord> history = trainer.fit();
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  if (!nn::dist::is_root()) {  // data parallelism: the other ranks are done; rank 0 reports
    nn::dist::finalize();
    std::exit(0);
  }
  fmt::print("trained in {:.3f} s (wall, the epochs' checkpoints included)\n", took.count());
  if (step_seconds) *step_seconds = trainer.step_seconds();
  return history;
}

}  // namespace ag::tasks
