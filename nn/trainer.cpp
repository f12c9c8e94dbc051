#include "nn/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "engine/autograd.h"
#include "engine/hash.h"
#include "nn/checkpoint.h"

namespace ag::nn {

namespace {

std::atomic<int> stop_signal{0};  // the signal that asked the run to stop, 0 if none

extern "C" void request_stop(int signal) { stop_signal = signal; }

// A tqdm-like line on stderr: where the run is, a bar, it/s (or tokens/s), the running loss and
// the time left.
class ProgressBar {
 public:
  ProgressBar(bool enabled, std::string label, int64_t steps, int64_t tokens_per_step, std::string unit)
      : enabled_(enabled && ::isatty(STDERR_FILENO)),
        label_(std::move(label)),
        unit_(std::move(unit)),
        steps_(steps),
        tokens_per_step_(tokens_per_step),
        start_(std::chrono::steady_clock::now()) {}
  ~ProgressBar() { clear(); }
  void clear() const {
    if (enabled_) std::fputs("\r\033[K", stderr);
  }
  // `step` of this bar's steps are done, `first` of them before it started (a resumed epoch).
  void update(int64_t step, int64_t first, double running_loss) const {
    if (!enabled_) return;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double per_second = seconds > 0 ? static_cast<double>(step - first) / seconds : 0.0;
    const int filled = static_cast<int>(20 * step / steps_);
    const std::string rate =
        tokens_per_step_ > 0
            ? fmt::format("{:.1f}k {}/s", per_second * static_cast<double>(tokens_per_step_) / 1e3, unit_)
            : fmt::format("{:.0f} it/s", per_second);
    const double left = per_second > 0 ? static_cast<double>(steps_ - step) / per_second : 0.0;
    std::fprintf(stderr, "\r%s [%s%s] %3lld%% %s loss %.4f %d:%02d left\033[K", label_.c_str(),
                 std::string(filled, '#').c_str(), std::string(20 - filled, '.').c_str(),
                 static_cast<long long>(100 * step / steps_), rate.c_str(), running_loss, static_cast<int>(left) / 60,
                 static_cast<int>(left) % 60);
  }

 private:
  bool enabled_;
  std::string label_, unit_;
  int64_t steps_, tokens_per_step_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

void stop_training_on_signals() {
  for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGUSR1}) std::signal(signal, request_stop);
}

void stop_if_signalled(const std::string& during, const std::string& kept) {
  if (const int signal = stop_signal.exchange(0); signal != 0)
    throw TrainingInterrupted(fmt::format("stopped by {} {}; {}", strsignal(signal), during, kept), signal);
}

Trainer::Trainer(Module& model, Optimizer& optimizer, TrainTask& task, TrainerOptions options)
    : model_(model),
      optimizer_(optimizer),
      task_(task),
      options_(std::move(options)),
      shuffle_(options_.seed, options_.shuffle_rng),
      best_score_(-INFINITY),
      shard_(dist::this_shard()) {
  AG_CHECK(options_.epochs >= 1, "trainer: epochs must be at least 1, got {}", options_.epochs);
  AG_CHECK(options_.batch_size >= 1, "trainer: batch size must be at least 1, got {}", options_.batch_size);
  AG_CHECK(task_.train_size() >= 1, "trainer: the training set is empty");
  AG_CHECK(options_.micro_batches >= 1, "trainer: micro_batches must be at least 1, got {}", options_.micro_batches);
  AG_CHECK(options_.steps_per_epoch >= 0 && options_.max_steps >= 0 &&
               (options_.max_steps == 0 || options_.max_steps > (options_.epochs - 1) * options_.steps_per_epoch),
           "trainer: max_steps {} does not fall in the last of {} epochs of {} steps", options_.max_steps,
           options_.epochs, options_.steps_per_epoch);
  epoch_start_shuffle_ = shuffle_.state();
  if (shard_.ranks > 1) reducer_ = std::make_unique<dist::GradientReducer>(optimizer_.params());
  if (!dist::is_root()) options_.files = nullptr;  // rank 0 alone writes the files
}

int64_t Trainer::steps_in_epoch(int64_t epoch) const {
  if (options_.steps_per_epoch == 0) return (task_.train_size() + options_.batch_size - 1) / options_.batch_size;
  const int64_t before = (epoch - 1) * options_.steps_per_epoch;
  return options_.max_steps > 0 ? std::min(options_.steps_per_epoch, options_.max_steps - before)
                                : options_.steps_per_epoch;
}

int64_t Trainer::total_steps() const {
  int64_t total = 0;
  for (int64_t epoch = 1; epoch <= options_.epochs; ++epoch) total += steps_in_epoch(epoch);
  return total;
}

// The epoch's batches of example indices, drawn from shuffle_ (which the epoch's checkpoint saves
// as it was before these draws, so a resume draws them again).
std::vector<std::vector<int64_t>> Trainer::draw_batches(int64_t epoch) {
  const int64_t n = task_.train_size(), batch_size = options_.batch_size;
  std::vector<std::vector<int64_t>> batches;
  if (options_.steps_per_epoch > 0) {  // random examples, with replacement
    for (int64_t step = 0; step < steps_in_epoch(epoch); ++step) {
      std::vector<int64_t>& batch = batches.emplace_back(batch_size);
      for (int64_t& index : batch) index = shuffle_.randint(0, n);
    }
    return batches;
  }
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  if (TorchGenerator* torch = shuffle_.torch())
    order = torch->data_loader_epoch(n);
  else
    shuffle(order, shuffle_);
  return task_.batches(order, batch_size, shuffle_);
}

std::vector<std::vector<int64_t>> TrainTask::batches(const std::vector<int64_t>& shuffled, int64_t batch_size,
                                                     Generator&) {
  std::vector<std::vector<int64_t>> batches;
  const auto n = static_cast<int64_t>(shuffled.size());
  for (int64_t first = 0; first < n; first += batch_size)
    batches.emplace_back(shuffled.begin() + first, shuffled.begin() + std::min(first + batch_size, n));
  return batches;
}

// Where training is, in the run's own units: "iteration N" (a run of iterations, as charlm's) or
// "epoch E, step S".
std::string Trainer::position(int64_t epoch, int64_t step) const {
  if (options_.steps_per_epoch > 0) return fmt::format("iteration {}", (epoch - 1) * options_.steps_per_epoch + step);
  return fmt::format("epoch {}, step {}", epoch, step);
}

// "training diverged: WHAT; " and what the folder keeps: the last finite checkpoint, or nothing.
TrainingDiverged Trainer::diverged(const std::string& what) const {
  std::string kept = "nothing was saved (no --out)";
  if (options_.files)
    kept = saved_.empty() ? fmt::format("this run wrote no checkpoint: {} is as it was", options_.files->where())
                          : fmt::format("{} keeps the last finite state, after {}",
                                        options_.files->where(RunFile::last_checkpoint), saved_);
  return TrainingDiverged(fmt::format("training diverged: {}; {}", what, kept));
}

// Divergence a loss may not show yet: a weight or optimizer state that is not finite. Checked on
// every rank (they hold the same state) before each checkpoint, which could not be loaded.
void Trainer::check_state_finite(int64_t epoch, int64_t step) const {
  NamedTensors state = model_.state_dict();
  for (const auto& [name, tensor] : optimizer_.state_dict()) state.emplace_back(kOptimizerPrefix + name, tensor);
  if (const std::string found = first_non_finite(state); !found.empty())
    throw diverged(fmt::format("after {}, {}", position(epoch, step), found));
}

TrainingInterrupted Trainer::interrupted(int64_t epoch, int64_t step) {
  int signal = stop_signal.exchange(0);
  if (signal == 0) signal = SIGTERM;  // another rank got it
  check_state_finite(epoch, step);
  std::string kept = "no checkpoint was written";
  if (options_.files) {
    std::map<std::string, std::string> meta = checkpoint_metadata();
    meta["epoch_step"] = std::to_string(step);
    meta["epoch_loss_sum"] = fmt::format("{:.17g}", loss_sum_);
    options_.files->write(RunFile::last_checkpoint,
                          checkpoint_bytes(model_, options_.config.dump(), &optimizer_, meta));
    write_config();
    kept = fmt::format("{} holds it (continue with --resume)", options_.files->where(RunFile::last_checkpoint));
  }
  return TrainingInterrupted(fmt::format("stopped by {} after {}; {}", strsignal(signal), position(epoch, step), kept),
                             signal);
}

template <typename Work>
void Trainer::profiled(const std::string& section, Work&& work) {
  if (profiler_)
    profiler_->section(section, work);
  else
    work();
}

// Whether the steps --profile asked for are done (the table not yet reported).
bool Trainer::profile_window_full() const {
  return profiler_ && static_cast<int64_t>(step_seconds_.size()) == options_.profile_after + options_.profile_steps;
}

// Hands the profile's table to options_.profile_ready and closes the window; when the run ends
// before the window is full, with the steps it had (none: a line saying so).
void Trainer::report_profile() {
  const int64_t profiled_steps = static_cast<int64_t>(step_seconds_.size()) - options_.profile_after;
  std::string text = fmt::format("--profile: nothing profiled: the run ended within the warm-up (its first {} steps)\n",
                                 options_.profile_after);
  if (profiler_) {
    const std::string cut = profiled_steps < options_.profile_steps
                                ? fmt::format(": the run ended before the {} asked", options_.profile_steps)
                                : "";
    text = fmt::format("where a step's time goes, by op ({} steps after the first {} of this run{}):\n{}",
                       profiled_steps, options_.profile_after, cut, profiler_->table(profiled_steps));
  }
  profiler_.reset();
  if (options_.profile_ready) options_.profile_ready(text);
}

// One optimizer step on the global batch: this rank's shard of it forward and backward (each
// micro-batch's mean loss weighted by its share of the batch's loss terms, TrainTask::loss_terms,
// known before any backward since every rank holds the whole batch's indices; so the gradients
// summed over the ranks are those of the batch's mean loss), then the step. Returns whether any
// rank was asked to stop.
bool Trainer::train_step(const std::vector<int64_t>& batch, int64_t epoch, int64_t step) {
  const auto start = std::chrono::steady_clock::now();
  if (options_.lr_schedule) {
    const int64_t global_step = options_.steps_per_epoch > 0 ? (epoch - 1) * options_.steps_per_epoch + step
                                                             : (epoch - 1) * steps_in_epoch(1) + step;
    optimizer_.set_lr(options_.lr_schedule(global_step));
  }
  if (options_.profile_steps > 0 && static_cast<int64_t>(step_seconds_.size()) == options_.profile_after)
    profiler_.emplace();
  profiled("(optimizer: zero_grad)", [&] { optimizer_.zero_grad(); });
  const int64_t global_rows = static_cast<int64_t>(batch.size());
  const int64_t shard_first = shard_.begin(global_rows), shard_rows = shard_.end(global_rows) - shard_first;
  const int64_t parts = options_.micro_batches;
  const bool whole = shard_.ranks == 1 && parts == 1;          // the batch in one forward and backward
  double step_numbers[2] = {0, stop_signal != 0 ? 1.0 : 0.0};  // the batch's mean loss, stop requests
  const double batch_terms = loss_terms(batch, 0, global_rows);
  // Each example's dropout mask from a stream of its own: the same under any split of the batch.
  BatchShardGuard in_batch(global_rows);
  for (int64_t part = 0; part < parts; ++part) {  // this rank's shard, in micro-batches
    const int64_t first = shard_first + shard_rows * part / parts;
    const int64_t rows = shard_first + shard_rows * (part + 1) / parts - first;
    if (rows == 0) continue;
    in_batch.select(first, rows);
    Tensor loss = task_.loss({batch.begin() + first, batch.begin() + first + rows});
    const double share = loss_terms(batch, first, rows) / batch_terms;
    step_numbers[0] += loss.item() * share;
    if (reducer_ && part == parts - 1) reducer_->arm();  // this backward finishes the gradients
    loss.backward(whole ? Tensor() : full(loss.shape(), share, loss.dtype()));
  }
  if (reducer_) profiled("(gradients: all-reduce)", [&] { reducer_->finish(step_numbers, position(epoch, step + 1)); });
  const double value = step_numbers[0];
  if (!std::isfinite(value)) throw diverged(fmt::format("the loss is {} at {}", value, position(epoch, step + 1)));
  if (options_.clip_grad_norm > 0)
    profiled("(clip_grad_norm)", [&] { clip_grad_norm(optimizer_.params(), options_.clip_grad_norm); });
  profiled(fmt::format("(optimizer: {} step)", optimizer_.type_name()), [&] { optimizer_.step(); });
  loss_sum_ += value * static_cast<double>(global_rows);
  step_seconds_.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return step_numbers[1] > 0;
}

// The loss terms of batch[first, first + rows): what their mean loss is a mean over.
double Trainer::loss_terms(const std::vector<int64_t>& batch, int64_t first, int64_t rows) const {
  double terms = 0;
  for (int64_t i = first; i < first + rows; ++i) terms += task_.loss_terms(batch[static_cast<size_t>(i)]);
  AG_CHECK(terms > 0, "trainer: the task's loss has no terms over {} examples (loss_terms must be positive)", rows);
  return terms;
}

double Trainer::train_epoch(int64_t epoch) {
  epoch_start_shuffle_ = shuffle_.state();
  const std::vector<std::vector<int64_t>> batches = draw_batches(epoch);
  const int64_t steps = static_cast<int64_t>(batches.size());
  const std::string label =
      options_.steps_per_epoch > 0
          ? fmt::format("iter {}/{}", (epoch - 1) * options_.steps_per_epoch + steps, total_steps())
          : fmt::format("epoch {}/{}", epoch, options_.epochs);
  ProgressBar bar(options_.progress, label, steps, options_.tokens_per_step, options_.rate_unit);
  model_.train();
  int64_t examples = 0;
  for (int64_t step = 0; step < resume_step_; ++step) examples += static_cast<int64_t>(batches[step].size());
  loss_sum_ = resume_loss_sum_;
  for (int64_t step = resume_step_; step < steps; ++step) {
    const bool stop = train_step(batches[step], epoch, step);
    examples += static_cast<int64_t>(batches[step].size());
    if (profile_window_full()) {
      bar.clear();  // the table goes to stderr too
      report_profile();
    }
    bar.update(step + 1, resume_step_, loss_sum_ / static_cast<double>(examples));
    if (stop) throw interrupted(epoch, step + 1);
  }
  resume_step_ = 0;
  resume_loss_sum_ = 0;
  return loss_sum_ / static_cast<double>(examples);
}

double Trainer::score(const EpochRecord& record) const {
  const BestEpochRule rule = task_.best_epoch_rule();
  const auto it = record.metrics.find(rule.metric);
  if (it == record.metrics.end()) return -record.train_loss;
  return rule.higher_is_better ? it->second : -it->second;
}

// The task's metrics over its evaluation set, each rank evaluating its shard. A metric that is not
// finite (a validation loss of NaN) is divergence.
std::map<std::string, double> Trainer::evaluate(int64_t epoch) {
  NoGradGuard no_grad;
  model_.eval();
  const MetricSums sums = task_.evaluate(shard_);
  std::vector<double> flat;
  std::string names;
  for (const auto& [name, metric] : sums) {
    flat.insert(flat.end(), {metric.sum, metric.count});
    names += name + "\n";
  }
  if (shard_.ranks > 1) {
    dist::check_same_on_every_rank(fnv1a64(names), "the names of the evaluation's metrics");
    dist::sum_over_ranks(flat, "the evaluation's sums");
  }
  std::map<std::string, double> metrics;
  size_t at = 0;
  for (const auto& [name, _] : sums) {
    metrics[name] = flat[at] / flat[at + 1];
    if (flat[at + 1] > 0 && !std::isfinite(metrics[name]))
      throw diverged(
          fmt::format("the validation {} is {} after {}", name, metrics[name], position(epoch, steps_in_epoch(epoch))));
    at += 2;
  }
  return metrics;
}

// Data parallelism: every rank must hold the same parameters and optimizer state.
void Trainer::check_ranks_agree(const std::string& when) const {
  if (shard_.ranks == 1) return;
  std::vector<Tensor> state = optimizer_.params();
  for (const auto& [name, tensor] : optimizer_.state_dict()) state.push_back(tensor);
  dist::check_same_on_every_rank(dist::checksum(state), "the parameters and optimizer state " + when);
}

std::vector<EpochRecord> Trainer::fit() {
  check_ranks_agree("at the start");
  if (!options_.files) return run_epochs();
  // Each epoch's files are replaced but not synced (that would cost more than the epoch); the
  // run's last ones are synced once, when it ends or stops (Ctrl-C, a NaN loss).
  std::vector<EpochRecord> history;
  try {
    history = run_epochs();
  } catch (...) {
    options_.files->sync();  // best effort: the error that stopped the run is the one to report
    throw;
  }
  AG_CHECK(options_.files->sync(), "{}: the checkpoints could not be flushed to the disk: {}", options_.files->where(),
           std::strerror(errno));
  return history;
}

std::vector<EpochRecord> Trainer::run_epochs() {
  for (int64_t epoch = static_cast<int64_t>(history_.size()) + 1; epoch <= options_.epochs; ++epoch) {
    EpochRecord record{epoch, train_epoch(epoch), evaluate(epoch)};
    if (options_.steps_per_epoch > 0) {
      record.metrics["iter"] = static_cast<double>((epoch - 1) * options_.steps_per_epoch + steps_in_epoch(epoch));
      record.metrics["lr"] = optimizer_.lr();
    }
    const bool best = score(record) > best_score_;  // strictly: the earliest epoch wins a tie
    if (best) best_score_ = score(record);
    history_.push_back(record);
    check_ranks_agree(fmt::format("after epoch {}", epoch));
    check_state_finite(epoch, steps_in_epoch(epoch));
    if (options_.files) save_epoch(record, best);
  }
  if (options_.profile_steps > 0 &&
      static_cast<int64_t>(step_seconds_.size()) < options_.profile_after + options_.profile_steps)
    report_profile();  // the run ended within the warm-up or the window
  return history_;
}

}  // namespace ag::nn
