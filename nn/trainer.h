// Trainer: epochs over seeded-shuffled batches, evaluation after each epoch, metrics.csv, a
// progress bar, checkpoints (last, and best by a metric the task chooses) and resume.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/error.h"
#include "nn/checkpoint.h"
#include "nn/module.h"
#include "nn/optim.h"

namespace ag::nn {

// Which epoch best.safetensors holds: the one with the lowest (or highest) value of one of the
// task's metrics, the earliest on ties. An epoch without that metric (no validation set) is
// ranked by its train loss instead, lowest best.
struct BestEpochRule {
  std::string metric = "val_loss";
  bool higher_is_better = false;
};

// What the Trainer asks of a task. The Trainer sets train/eval mode and grad mode around calls.
class TrainTask {
 public:
  virtual ~TrainTask() = default;
  virtual int64_t train_size() const = 0;
  // The mean loss over the training examples at these indices (model in train mode).
  virtual Tensor loss(const std::vector<int64_t>& batch) = 0;
  // Metrics after an epoch (model in eval mode, no grad): "val_loss" if there is a validation set.
  virtual std::map<std::string, double> evaluate() = 0;
  virtual BestEpochRule best_epoch_rule() const { return {}; }
};

struct TrainerOptions {
  int64_t epochs = 100;
  int64_t batch_size = 16;
  uint64_t seed = 0;
  std::string out_dir;   // metrics.csv, last.safetensors, best.safetensors; nothing written if empty
  bool progress = true;  // the bar on stderr, only when stderr is a terminal
  std::string config;    // JSON text stored in checkpoints
  std::map<std::string, std::string> checkpoint_metadata;  // e.g. the vocabulary
};

struct EpochRecord {
  int64_t epoch = 0;  // from 1
  double train_loss = 0;
  std::map<std::string, double> metrics;
  // No wall time: metrics.csv and checkpoints must be the same bytes for the same seed.
};

// A non-finite loss: training stopped, the last good checkpoints are untouched.
class TrainingDiverged : public Error {
 public:
  using Error::Error;
};
// SIGINT arrived: stopped after the current step; `last` holds the last complete epoch.
class TrainingInterrupted : public Error {
 public:
  using Error::Error;
};

class Trainer {
 public:
  Trainer(Module& model, Optimizer& optimizer, TrainTask& task, TrainerOptions options);
  // Continues from OUT/last.safetensors (model, optimizer, RNG states, epoch, history). Refuses a
  // checkpoint of another task or model, or whose options.checkpoint_metadata (the vocabulary)
  // differs from this run's.
  void resume(const std::string& last_checkpoint);
  // Trains up to options.epochs; with an out_dir, checkpoints every epoch and syncs them to the
  // disk when it returns or throws.
  std::vector<EpochRecord> fit();

 private:
  void check_same_run_kind(const std::string& path, const Checkpoint& checkpoint) const;
  std::vector<EpochRecord> run_epochs();
  double train_epoch(int64_t epoch);
  TrainingInterrupted interrupted(int64_t epoch, int64_t step) const;
  void save_epoch(const EpochRecord& record, bool best);
  void write_metrics() const;
  double score(const EpochRecord& record) const;  // higher is better

  Module& model_;
  Optimizer& optimizer_;
  TrainTask& task_;
  TrainerOptions options_;
  Generator shuffle_;
  std::vector<EpochRecord> history_;
  double best_score_;
};

// Installs a SIGINT handler that asks a running Trainer to stop after its current step.
void stop_training_on_sigint();

}  // namespace ag::nn
