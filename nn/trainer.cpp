#include "nn/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <numeric>

#include "engine/autograd.h"
#include "nn/checkpoint.h"

namespace ag::nn {

namespace {

std::atomic<bool> stop_requested{false};

extern "C" void request_stop(int) { stop_requested = true; }

std::string encode_generator(const Generator& gen) {
  const Generator::State s = gen.state();
  uint64_t spare_bits = 0;
  std::memcpy(&spare_bits, &s.spare_normal, 8);
  return fmt::format("{:016x} {} {:016x}", s.counter, s.has_spare_normal ? 1 : 0, spare_bits);
}

void decode_generator(const std::string& text, Generator& gen) {
  Generator::State s{};
  unsigned long long counter = 0, spare_bits = 0;
  int has_spare = 0;
  AG_CHECK(std::sscanf(text.c_str(), "%llx %d %llx", &counter, &has_spare, &spare_bits) == 3,
           "checkpoint: malformed generator state '{}'", text);
  s.counter = counter;
  s.has_spare_normal = has_spare != 0;
  std::memcpy(&s.spare_normal, &spare_bits, 8);
  gen.set_state(s);
}

nlohmann::json to_json(const std::vector<EpochRecord>& history) {
  nlohmann::json rows = nlohmann::json::array();
  for (const EpochRecord& r : history)
    rows.push_back({{"epoch", r.epoch}, {"train_loss", r.train_loss}, {"metrics", r.metrics}});
  return rows;
}

std::vector<EpochRecord> history_from_json(const std::string& text) {
  std::vector<EpochRecord> history;
  for (const auto& row : nlohmann::json::parse(text))
    history.push_back({row.at("epoch").get<int64_t>(), row.at("train_loss").get<double>(),
                       row.at("metrics").get<std::map<std::string, double>>()});
  return history;
}

// A tqdm-like line on stderr: epoch, bar, percent, it/s, running loss.
class ProgressBar {
 public:
  ProgressBar(bool enabled, int64_t epoch, int64_t epochs, int64_t steps)
      : enabled_(enabled && ::isatty(STDERR_FILENO)),
        epoch_(epoch),
        epochs_(epochs),
        steps_(steps),
        start_(std::chrono::steady_clock::now()) {}
  ~ProgressBar() {
    if (enabled_) std::fputs("\r\033[K", stderr);
  }
  void update(int64_t step, double running_loss) const {
    if (!enabled_) return;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const int filled = static_cast<int>(20 * step / steps_);
    std::fprintf(stderr, "\repoch %lld/%lld [%s%s] %3lld%% %.0f it/s loss %.4f", static_cast<long long>(epoch_),
                 static_cast<long long>(epochs_), std::string(filled, '#').c_str(),
                 std::string(20 - filled, '.').c_str(), static_cast<long long>(100 * step / steps_),
                 seconds > 0 ? step / seconds : 0.0, running_loss);
  }

 private:
  bool enabled_;
  int64_t epoch_, epochs_, steps_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

void stop_training_on_sigint() { std::signal(SIGINT, request_stop); }

Trainer::Trainer(Module& model, Optimizer& optimizer, TrainTask& task, TrainerOptions options)
    : model_(model),
      optimizer_(optimizer),
      task_(task),
      options_(std::move(options)),
      shuffle_(options_.seed),
      best_score_(-INFINITY) {
  AG_CHECK(options_.epochs >= 1, "trainer: epochs must be at least 1, got {}", options_.epochs);
  AG_CHECK(options_.batch_size >= 1, "trainer: batch size must be at least 1, got {}", options_.batch_size);
  AG_CHECK(task_.train_size() >= 1, "trainer: the training set is empty");
}

void Trainer::resume(const std::string& last_checkpoint) {
  check_same_run_kind(last_checkpoint, read_checkpoint(last_checkpoint));
  const Checkpoint checkpoint = load(last_checkpoint, model_, &optimizer_);
  const auto& meta = checkpoint.metadata;
  for (const char* key : {"history", "shuffle_rng", "default_rng"})
    AG_CHECK(meta.count(key), "{}: not a training checkpoint (no '{}' in its metadata)", last_checkpoint, key);
  try {
    history_ = history_from_json(meta.at("history"));
  } catch (const std::exception& e) {  // json's: name the file, not the parser
    fail("{}: the training history in its metadata is malformed: {}", last_checkpoint, e.what());
  }
  for (const EpochRecord& record : history_) best_score_ = std::max(best_score_, score(record));
  decode_generator(meta.at("shuffle_rng"), shuffle_);
  decode_generator(meta.at("default_rng"), default_generator());
}

void Trainer::check_same_run_kind(const std::string& path, const Checkpoint& checkpoint) const {
  const nlohmann::json saved = nlohmann::json::parse(checkpoint.config());  // an object: read_checkpoint checked
  const nlohmann::json current = nlohmann::json::parse(options_.config.empty() ? "{}" : options_.config);
  for (const char* key : {"task", "model"}) {
    const std::string want = current.contains(key) ? current[key].dump() : "(none)";
    const std::string got = saved.contains(key) ? saved[key].dump() : "(none)";
    AG_CHECK(want == got, "{}: cannot resume: the checkpoint's {} is {}, this run's is {}", path, key, got, want);
  }
  for (const auto& [key, value] : options_.checkpoint_metadata) {
    const auto it = checkpoint.metadata.find(key);
    AG_CHECK(it != checkpoint.metadata.end() && it->second == value,
             "{}: cannot resume: the checkpoint's {} differs from this run's (other training data?)", path, key);
  }
}

TrainingInterrupted Trainer::interrupted(int64_t epoch, int64_t step) const {
  const std::string kept = options_.out_dir.empty() || history_.empty()
                               ? "no checkpoint was written yet"
                               : fmt::format("{}/last.safetensors holds epoch {} (continue with --resume)",
                                             options_.out_dir, history_.back().epoch);
  return TrainingInterrupted(fmt::format("interrupted at epoch {}, step {}; {}", epoch, step, kept));
}

double Trainer::train_epoch(int64_t epoch) {
  const int64_t n = task_.train_size();
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  for (int64_t i = n - 1; i > 0; --i) std::swap(order[i], order[shuffle_.randint(0, i + 1)]);  // Fisher-Yates
  const int64_t steps = (n + options_.batch_size - 1) / options_.batch_size;
  ProgressBar bar(options_.progress, epoch, options_.epochs, steps);
  model_.train();
  double total = 0;
  for (int64_t step = 0; step < steps; ++step) {
    const auto first = order.begin() + step * options_.batch_size;
    const std::vector<int64_t> batch(first, std::min(first + options_.batch_size, order.end()));
    optimizer_.zero_grad();
    Tensor loss = task_.loss(batch);
    const double value = loss.item();
    if (!std::isfinite(value))
      throw TrainingDiverged(
          fmt::format("training diverged: the loss is {} at epoch {}, step {}", value, epoch, step + 1));
    loss.backward();
    optimizer_.step();
    total += value * static_cast<double>(batch.size());
    bar.update(step + 1, total / static_cast<double>(std::min(n, (step + 1) * options_.batch_size)));
    if (stop_requested) throw interrupted(epoch, step + 1);
  }
  return total / static_cast<double>(n);
}

void Trainer::write_metrics() const {
  std::string csv = "epoch,train_loss";
  const std::map<std::string, double>& first = history_.front().metrics;
  for (const auto& [name, _] : first) csv += "," + name;
  csv += "\n";
  for (const EpochRecord& r : history_) {
    csv += fmt::format("{},{:.9g}", r.epoch, r.train_loss);
    for (const auto& [name, _] : first) csv += fmt::format(",{:.9g}", r.metrics.count(name) ? r.metrics.at(name) : NAN);
    csv += "\n";
  }
  write_file_atomically(options_.out_dir + "/metrics.csv", csv);
}

double Trainer::score(const EpochRecord& record) const {
  const BestEpochRule rule = task_.best_epoch_rule();
  const auto it = record.metrics.find(rule.metric);
  if (it == record.metrics.end()) return -record.train_loss;
  return rule.higher_is_better ? it->second : -it->second;
}

void Trainer::save_epoch(const EpochRecord& record, bool best) {
  std::map<std::string, std::string> meta = options_.checkpoint_metadata;
  meta["epoch"] = std::to_string(record.epoch);
  meta["history"] = to_json(history_).dump();
  meta["shuffle_rng"] = encode_generator(shuffle_);
  meta["default_rng"] = encode_generator(default_generator());
  const std::string checkpoint = checkpoint_bytes(model_, options_.config, &optimizer_, meta);
  write_file_atomically(options_.out_dir + "/last.safetensors", checkpoint);
  if (best) write_file_atomically(options_.out_dir + "/best.safetensors", checkpoint);
  write_metrics();
}

std::vector<EpochRecord> Trainer::fit() {
  if (options_.out_dir.empty()) return run_epochs();
  create_output_folder(options_.out_dir);
  // Each epoch's files are replaced atomically but not synced (that would cost more than the
  // epoch); the run's last ones are synced once, when it ends or stops (Ctrl-C, a NaN loss).
  const std::vector<std::string> files = {options_.out_dir + "/last.safetensors",
                                          options_.out_dir + "/best.safetensors", options_.out_dir + "/metrics.csv"};
  std::vector<EpochRecord> history;
  try {
    history = run_epochs();
  } catch (...) {
    sync_to_disk(files);  // best effort: the error that stopped the run is the one to report
    throw;
  }
  AG_CHECK(sync_to_disk(files), "{}: the checkpoints could not be flushed to the disk: {}", options_.out_dir,
           std::strerror(errno));
  return history;
}

std::vector<EpochRecord> Trainer::run_epochs() {
  for (int64_t epoch = static_cast<int64_t>(history_.size()) + 1; epoch <= options_.epochs; ++epoch) {
    EpochRecord record{epoch, train_epoch(epoch), {}};
    {
      NoGradGuard no_grad;
      model_.eval();
      record.metrics = task_.evaluate();
    }
    const bool best = score(record) > best_score_;  // strictly: the earliest epoch wins a tie
    if (best) best_score_ = score(record);
    history_.push_back(record);
    if (!options_.out_dir.empty()) save_epoch(record, best);
  }
  return history_;
}

}  // namespace ag::nn
