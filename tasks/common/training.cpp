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

std::vector<Setting<TrainingOptions>> common_settings(const std::string& lr_help, bool epochs_flag) {
  using O = TrainingOptions;
  const Accepts count{Accepts::whole, 1, 1e6};
  return {{"task", "", "the command, train <task>"},
          {"epochs", epochs_flag ? "--epochs" : "", epochs_flag ? "Passes over the training set" : "--iters",
           [](O& o) { return &o.epochs; }, count, OnResume::may_change,
           "may grow past the epochs done (else the run trains nothing: exit 1); recorded"},
          {"lr", "--lr", lr_help, [](O& o) { return &o.lr; }, {Accepts::positive}},
          {"batch_size", "--batch-size", "Examples per step (under mpirun: of all ranks together)",
           [](O& o) { return &o.batch_size; }, count},
          {"micro_batches", "--micro-batches",
           "Run each batch (each rank's share) in this many forward/backward passes, their gradients summed: the same "
           "step in less memory",
           [](O& o) { return &o.micro_batches; }, count, OnResume::may_change, "may change, as ranks; recorded"},
          {"seed", "--seed", "Seed for initialisation and shuffling", [](O& o) { return &o.seed; }, {Accepts::seed}},
          {"precision",
           "--precision",
           "f32, or bf16: the products (matmul, Linear, attention) take bf16 operands with f32 results, forward and "
           "backward, on CPUs with AVX512_BF16; weights, optimizer and checkpoints stay f32",
           [](O& o) { return &o.precision; },
           {Accepts::choice, 0, 0, {"f32", "bf16"}},
           OnResume::may_change,
           "(--precision f32|bf16) carried over when not given; may change: checkpoints are f32 either way; recorded"},
          {"ranks",
           "",
           "mpirun -np N",
           {},
           {},
           OnResume::may_change,
           "(mpirun -np N) may change: a checkpoint does not depend on how a batch is split; recorded (bit-identity "
           "needs the same split)"},
          {"threads",
           "",
           "--threads",
           {},
           {},
           OnResume::may_change,
           "may change; recorded (bit-identity with an uninterrupted run needs the same count)"},
          {"attograd_version",
           "",
           "the program's version",
           {},
           {},
           OnResume::may_change,
           "may change: a newer build continues an older run; recorded"}};
}

nlohmann::json with_process_settings(nlohmann::json settings) {
  settings.update({{"ranks", nn::dist::ranks()}, {"threads", get_num_threads()}, {"attograd_version", version()}});
  return settings;
}

std::optional<TrainedRun> run_training(nn::Module& model, nn::Optimizer& optimizer, nn::TrainTask& task,
                                       const TrainingOptions& options, const RunConfig& config,
                                       const std::map<std::string, std::string>& checkpoint_metadata,
                                       const TrainerSettings& settings) {
  const AutocastGuard autocast(precision_is_bf16(options.precision));  // refused here, before anything is written
  nn::TrainerOptions trainer_options{.epochs = options.epochs,
                                     .batch_size = options.batch_size,
                                     .micro_batches = options.micro_batches,
                                     .seed = options.seed,
                                     .progress = !options.quiet,
                                     .config = config.settings,
                                     .checkpoint_metadata = checkpoint_metadata};
  if (settings) settings(trainer_options);
  std::string profile;  // the table, for OUT/profile.txt
  trainer_options.profile_steps = options.profile_steps;
  trainer_options.profile_after = options.profile_after;
  trainer_options.profile_ready = [&profile](const std::string& table) {
    profile = table;
    if (nn::dist::is_root()) fmt::print(stderr, "{}", table);
  };
  if (trainer_options.steps_per_epoch == 0 && options.batch_size > task.train_size() && nn::dist::is_root())
    fmt::print("note: --batch-size {} is more than the {} training examples: each step takes all {}\n",
               options.batch_size, task.train_size(), task.train_size());
  const std::shared_ptr<RunDir> run =
      options.run_dir ? options.run_dir : std::make_shared<RunDir>(options.resume, config.names);
  if (run->resuming()) trainer_options.config = run->resumed_config(config.settings, trainer_options);
  if (!options.out.empty()) trainer_options.files = run.get();  // claimed below, before the first write
  nn::Trainer trainer(model, optimizer, task, trainer_options);
  if (run->resuming()) trainer.resume(run->checkpoint());
  // Nothing is written before here; the Trainer writes config.json beside the first checkpoint.
  // Under mpirun, rank 0 alone writes (and claims the folder).
  if (!options.out.empty() && nn::dist::is_root()) run->claim(options.out, trainer_options.config);
  // Under mpirun: every rank is ready, with the same settings and data, or none starts.
  nn::dist::StartState ready;
  ready.settings = trainer_options.config.dump();
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
  return TrainedRun{std::move(history), trainer.step_seconds(), run,
                    trainer.best() ? trainer.best() : run->resumed_best()};
}

std::vector<int64_t> first_batch(const nn::TrainTask& task, int64_t batch_size) {
  std::vector<int64_t> rows(static_cast<size_t>(std::min(batch_size, task.train_size())));
  std::iota(rows.begin(), rows.end(), 0);
  return rows;
}

std::vector<plot::Series> loss_curves(const std::vector<nn::EpochRecord>& history, const std::string& train,
                                      const std::string& validation) {
  std::vector<plot::Series> curves = {{train, {}}, {validation, {}}};
  for (const nn::EpochRecord& r : history) {
    curves[0].values.push_back(r.train_loss);
    curves[1].values.push_back(r.metrics.at("val_loss"));
  }
  return curves;
}

}  // namespace ag::tasks
