// The Trainer's run files: what a checkpoint carries besides the tensors (the history, the RNG
// states, a mid-epoch position), resuming from one, metrics.csv, config.json, and the best model
// kept in memory. The training loop itself is trainer.cpp.
#include <cmath>
#include <cstdio>
#include <cstring>

#include "engine/autograd.h"
#include "engine/json.h"
#include "engine/ops/arithmetic.h"
#include "nn/checkpoint.h"
#include "nn/trainer.h"

namespace ag::nn {

namespace {

// A copy of a model's state that later steps do not change.
NamedTensors copy_of(const NamedTensors& state) {
  NoGradGuard no_grad;
  NamedTensors copy;
  for (const auto& [name, tensor] : state) copy.emplace_back(name, clone(tensor));
  return copy;
}

// PyTorch's generator (--rng torch) is not saved: its runs cannot be resumed, and say so.
constexpr const char* kTorchGeneratorState = "torch";

std::string encode_generator(const Generator::State& s) {
  if (s.torch) return kTorchGeneratorState;
  uint64_t spare_bits = 0;
  std::memcpy(&spare_bits, &s.spare_normal, 8);
  return fmt::format("{:016x} {} {:016x}", s.counter, s.has_spare_normal ? 1 : 0, spare_bits);
}

void decode_generator(const std::string& text, Generator& gen) {
  AG_CHECK(text != kTorchGeneratorState,
           "checkpoint: a run with PyTorch's generator (--rng torch) cannot be resumed: its state is not saved");
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
  for (const auto& row : parse_json(text, "the history"))
    history.push_back({row.at("epoch").get<int64_t>(), row.at("train_loss").get<double>(),
                       row.at("metrics").get<std::map<std::string, double>>()});
  return history;
}

}  // namespace

void Trainer::resume(const Checkpoint& checkpoint) {
  const std::string& last_checkpoint = checkpoint.path;
  check_same_run_kind(checkpoint);
  load(checkpoint, model_, &optimizer_);
  const auto& meta = checkpoint.metadata;
  for (const char* key : {"history", "shuffle_rng", "default_rng"})
    AG_CHECK(meta.count(key), "{}: not a training checkpoint (no '{}' in its metadata)", last_checkpoint, key);
  try {
    history_ = history_from_json(meta.at("history"));
  } catch (const std::exception& e) {  // json's: name the file, not the parser
    fail("{}: the training history in its metadata is malformed: {}", last_checkpoint, json_error_text(e));
  }
  for (const EpochRecord& record : history_) best_score_ = std::max(best_score_, score(record));
  decode_generator(meta.at("shuffle_rng"), shuffle_);
  decode_generator(meta.at("default_rng"), default_generator());
  if (meta.count("epoch_step")) {  // saved in the middle of an epoch (a signal)
    try {
      resume_step_ = std::stoll(meta.at("epoch_step"));
      resume_loss_sum_ = std::stod(meta.at("epoch_loss_sum"));
    } catch (const std::exception& e) {
      fail("{}: the mid-epoch position in its metadata is malformed: {}", last_checkpoint, e.what());
    }
    // epoch_step may equal the epoch's steps: the signal came on its last step, before its evaluation.
    AG_CHECK(resume_step_ >= 0 && resume_step_ <= steps_in_epoch(static_cast<int64_t>(history_.size()) + 1),
             "{}: the checkpoint's epoch_step {} does not fit this run's epoch of {} steps", last_checkpoint,
             resume_step_, steps_in_epoch(static_cast<int64_t>(history_.size()) + 1));
  }
}

void Trainer::check_same_run_kind(const Checkpoint& checkpoint) const {
  const std::string& path = checkpoint.path;
  const nlohmann::json& saved = checkpoint.settings;  // an object: read_checkpoint checked
  const nlohmann::json current = options_.config.is_object() ? options_.config : nlohmann::json::object();
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
  options_.files->write(RunFile::metrics, csv);
}

// What a resume needs besides the tensors: the history, the RNG states as they were when the
// current epoch began (shuffle) and are now (dropout). The best score is recomputed from the history.
std::map<std::string, std::string> Trainer::checkpoint_metadata() const {
  std::map<std::string, std::string> meta = options_.checkpoint_metadata;
  meta["epoch"] = std::to_string(history_.empty() ? 0 : history_.back().epoch);
  meta["history"] = to_json(history_).dump();
  meta["shuffle_rng"] = encode_generator(epoch_start_shuffle_);
  meta["default_rng"] = encode_generator(default_generator().state());
  return meta;
}

// The config, written after the checkpoint it describes: a run that fails before its first
// checkpoint leaves the run's config and checkpoints as they were.
void Trainer::write_config() const {
  if (!options_.config.is_null()) options_.files->write(RunFile::config, options_.config.dump(2) + "\n");
}

void Trainer::save_epoch(const EpochRecord& record, bool best) {
  epoch_start_shuffle_ = shuffle_.state();  // the next epoch starts from here
  std::map<std::string, std::string> meta = checkpoint_metadata();
  meta["epoch"] = std::to_string(record.epoch);
  const std::string checkpoint = checkpoint_bytes(model_, options_.config.dump(), &optimizer_, meta);
  options_.files->write(RunFile::last_checkpoint, checkpoint);
  write_config();
  if (best) {
    options_.files->write(RunFile::best_checkpoint, checkpoint);
    best_ = BestModel{record.epoch, copy_of(model_.state_dict())};
  }
  write_metrics();
  saved_ = position(record.epoch, steps_in_epoch(record.epoch));
}

}  // namespace ag::nn
