// Trainer: epochs over seeded-shuffled batches, evaluation after each epoch, the metrics table, a
// progress bar, checkpoints (last, and best by a metric the task chooses), handed to the run's
// files (RunFiles), and resume. Under
// mpirun, data-parallel (nn/distributed.h): each rank takes its shard of every global batch and
// of the evaluation; the gradients and metrics are summed over the ranks.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/profile.h"
#include "nn/checkpoint.h"
#include "nn/distributed.h"
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

// An evaluation's metric as a sum over examples (or elements) and their count: the metric is
// sum / count, so the parts that data-parallel ranks evaluate add up.
struct MetricSum {
  double sum = 0;
  double count = 0;
};
using MetricSums = std::map<std::string, MetricSum>;

// What the Trainer asks of a task. The Trainer sets train/eval mode and grad mode around calls.
class TrainTask {
 public:
  virtual ~TrainTask() = default;
  virtual int64_t train_size() const = 0;
  // The mean loss over the training examples at these indices (model in train mode): the mean of
  // the terms they add, each example adding loss_terms(example) of them (its target tokens, say).
  virtual Tensor loss(const std::vector<int64_t>& batch) = 0;
  // How many terms example `example` adds to loss()'s mean: 1 for a loss averaged over examples (or
  // over as many elements for every example); a token-averaged loss over padded rows counts the
  // example's tokens. A batch split in parts (micro-batches, ranks) weights each part's mean by its
  // terms over the whole batch's, so the sum of the parts is the loss of the batch in one piece.
  virtual double loss_terms(int64_t /*example*/) const { return 1; }
  // Metrics after an epoch (model in eval mode, no grad): "val_loss" if there is a validation set.
  // Over this rank's part of the evaluation examples (shard.begin(n) to shard.end(n)), which may be
  // empty; every rank returns the same names.
  virtual MetricSums evaluate(const dist::Shard& shard) = 0;
  virtual BestEpochRule best_epoch_rule() const { return {}; }
  // An epoch's batches from the shuffled training indices: by default runs of batch_size in that
  // order. A task may group them otherwise (by length, say), drawing only from `shuffle`, into as
  // many batches of at most batch_size (a resume and an lr schedule count on that number).
  virtual std::vector<std::vector<int64_t>> batches(const std::vector<int64_t>& shuffled, int64_t batch_size,
                                                    Generator& shuffle);
};

// The files of a training run the Trainer makes.
enum class RunFile {
  config,           // the run's config (JSON), beside each checkpoint it describes
  metrics,          // one CSV row per epoch
  last_checkpoint,  // the state after the latest epoch (or the step a signal stopped)
  best_checkpoint,  // the epoch best by the task's BestEpochRule
};

// Where a training run's files go. The Trainer makes each file's bytes and hands them over; where
// and how they are kept is the implementation's (tasks::RunDir: a folder, each file replaced
// atomically). The Trainer checks what it hands over first: never a checkpoint with a non-finite
// tensor.
class RunFiles {
 public:
  virtual ~RunFiles() = default;
  // Replaces `file` with `bytes`, so that a reader sees the old file or the new one, never a part;
  // not necessarily on the disk yet (sync).
  virtual void write(RunFile file, const std::string& bytes) = 0;
  // Puts the files written so far on the disk. False if that failed, errno telling why (it does not
  // throw: it also runs while an error unwinds).
  virtual bool sync() = 0;
  // Where the files are, and one of them, for messages ("runs/squares/last.safetensors").
  virtual std::string where() const = 0;
  virtual std::string where(RunFile file) const = 0;
};

// The steps --profile leaves out first: the first steps pay for first-touch page faults and
// oneDNN's primitive creation, which later steps do not.
inline constexpr int64_t kProfileWarmupSteps = 2;

struct TrainerOptions {
  int64_t epochs = 100;
  int64_t batch_size = 16;    // the global batch (all ranks')
  int64_t micro_batches = 1;  // each rank's shard of a batch in this many forward/backward passes, gradients summed
  // 0: an epoch is one pass over the training set in a seeded shuffle. N > 0: an epoch is N
  // steps, each on batch_size indices drawn uniformly from [0, train_size()) (nanoGPT's random
  // windows), and metrics.csv gains the columns iter (steps so far) and lr.
  int64_t steps_per_epoch = 0;
  int64_t max_steps = 0;                              // with steps_per_epoch: the last epoch ends here (0: no cut)
  std::function<double(int64_t step)> lr_schedule{};  // if set: the lr of each step, counted from 0
  double clip_grad_norm = 0;                          // > 0: the gradients' global norm is clipped to it
  int64_t tokens_per_step = 0;                        // > 0: the progress bar shows tokens/s (global)
  std::string rate_unit = "tok";                      // what tokens_per_step counts, in the bar ("words")
  uint64_t seed = 0;
  // The shuffle's generator: attograd's, or PyTorch's, drawing each epoch's order as
  // DataLoader(shuffle=True, generator=g) does with g seeded by `seed`.
  RngStyle shuffle_rng = RngStyle::attograd;
  RunFiles* files = nullptr;  // the run's config, metrics and checkpoints; nothing written if null
  bool progress = true;       // the bar on stderr, only when stderr is a terminal
  nlohmann::json config{};    // the run's settings (an object), stored in checkpoints and config.json
  std::map<std::string, std::string> checkpoint_metadata;  // e.g. the vocabulary
  // > 0: after this process's first profile_after steps, the next profile_steps are profiled by op
  // (engine/profile.h), and profile_ready gets the table (with a line saying which steps) when the
  // last of them ends, or when the run ends first, with the steps it had. Nothing else changes: the
  // numbers and files are the same bytes as without. A later window shows a steady state that the
  // first steps do not, where shapes vary by batch (each new one builds its oneDNN primitives).
  int64_t profile_steps = 0;
  int64_t profile_after = kProfileWarmupSteps;
  std::function<void(const std::string& table)> profile_ready{};
};

struct EpochRecord {
  int64_t epoch = 0;      // from 1
  double train_loss = 0;  // the mean of the epoch's batch losses
  std::map<std::string, double> metrics;
  // No wall time: metrics.csv and checkpoints must be the same bytes for the same seed.
};

// A non-finite loss, validation metric, weight or optimizer state: training stopped, the last
// finite checkpoints are untouched (none with a non-finite tensor is ever written).
class TrainingDiverged : public Error {
 public:
  using Error::Error;
};
// SIGINT, SIGTERM, SIGHUP or SIGUSR1 arrived: stopped after the current step, whose state `last` holds
// (a resume continues from that step, bit for bit).
class TrainingInterrupted : public Error {
 public:
  TrainingInterrupted(const std::string& message, int signal) : Error(message), signal(signal) {}
  int signal;  // the process should exit with 128 + signal
};

// The best epoch's model state (as best.safetensors holds it), kept in memory for the end of a run.
struct BestModel {
  int64_t epoch = 0;
  NamedTensors state;
};

class Trainer {
 public:
  Trainer(Module& model, Optimizer& optimizer, TrainTask& task, TrainerOptions options);
  // Continues from a run's last.safetensors, as read (model, optimizer, RNG states, epoch,
  // history). Refuses a checkpoint of another task or model, or whose options.checkpoint_metadata
  // (the vocabulary) differs from this run's.
  void resume(const Checkpoint& checkpoint);
  // Trains up to options.epochs; with options.files, checkpoints every epoch and syncs them to the
  // disk when it returns or throws. Under mpirun, rank 0 alone writes.
  std::vector<EpochRecord> fit();
  // The wall time of each training step of this process (batch, forward, backward, step): not
  // written to any file, so that files stay the same bytes from run to run.
  const std::vector<double>& step_seconds() const { return step_seconds_; }
  // The best epoch this process saved (nothing when none of its epochs beat a resumed run's best).
  const std::optional<BestModel>& best() const { return best_; }

 private:
  void check_same_run_kind(const Checkpoint& checkpoint) const;
  std::vector<EpochRecord> run_epochs();
  int64_t steps_in_epoch(int64_t epoch) const;
  int64_t total_steps() const;
  std::vector<std::vector<int64_t>> draw_batches(int64_t epoch);
  double train_epoch(int64_t epoch);
  bool train_step(const std::vector<int64_t>& batch, int64_t epoch, int64_t step);  // adds to loss_sum_
  template <typename Work>
  void profiled(const std::string& section, Work&& work);  // a Profiler section while the window is open
  bool profile_window_full() const;
  void report_profile();
  double loss_terms(const std::vector<int64_t>& batch, int64_t first, int64_t rows) const;
  std::map<std::string, double> evaluate(int64_t epoch);
  void check_ranks_agree(const std::string& when) const;
  TrainingInterrupted interrupted(int64_t epoch, int64_t step);
  std::string position(int64_t epoch, int64_t step) const;
  TrainingDiverged diverged(const std::string& what) const;
  void check_state_finite(int64_t epoch, int64_t step) const;
  std::map<std::string, std::string> checkpoint_metadata() const;
  void save_epoch(const EpochRecord& record, bool best);
  void write_config() const;
  void write_metrics() const;
  double score(const EpochRecord& record) const;  // higher is better

  Module& model_;
  Optimizer& optimizer_;
  TrainTask& task_;
  TrainerOptions options_;
  Generator shuffle_;  // the batches' draws; checkpointed as it was when the current epoch began
  Generator::State epoch_start_shuffle_{};
  std::vector<EpochRecord> history_;
  double best_score_;
  int64_t resume_step_ = 0;  // steps of the current epoch a mid-epoch checkpoint had done
  double resume_loss_sum_ = 0;
  double loss_sum_ = 0;  // of the current epoch's steps so far
  std::string saved_;    // the position this run's last.safetensors holds ("" before it writes one)
  std::vector<double> step_seconds_;
  std::optional<BestModel> best_;
  std::optional<Profiler> profiler_;  // while this process's steps are profiled (TrainerOptions::profile_steps)
  dist::Shard shard_;                 // this process's part of each batch
  std::unique_ptr<dist::GradientReducer> reducer_;  // with more than one rank
};

// Installs SIGINT, SIGTERM, SIGHUP and SIGUSR1 handlers (mpirun forwards SIGUSR1 at once, SIGTERM
// only after odls_base_sigkill_timeout) that ask a running Trainer to stop after its
// current step, save it and throw TrainingInterrupted.
void stop_training_on_signals();
// After training, for a task's own long work (g2p's test decoding), called between pieces of it:
// throws TrainingInterrupted when one of those signals came since, naming it, what it stopped
// (`during`) and what the run folder keeps (`kept`).
void stop_if_signalled(const std::string& during, const std::string& kept);

}  // namespace ag::nn
