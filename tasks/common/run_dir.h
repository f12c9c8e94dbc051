// The run folder, owned end to end by one object: the checkpoint a --resume continues (read once),
// the table of settings a resume may change, the output folder (created, checked, locked) and
// every file written into it. The CLI asks it for the settings to carry over; run_training asks it
// for the resumed config and hands the Trainer the checkpoint it read and the folder as the run's
// files (nn::RunFiles: config.json, metrics.csv, last.safetensors, best.safetensors); the task
// writes its plots through it.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "nn/checkpoint.h"
#include "nn/trainer.h"

namespace ag::tasks {

// The flag that sets a config setting: "--" and its key with '-' for '_' ("batch_size" →
// "--batch-size"), except for the settings settings_named_otherwise() lists (charlm's nanoGPT
// names, settings derived from a flag).
std::string flag_of_setting(const std::string& key);
const std::map<std::string, std::string>& settings_named_otherwise();

// One row of the resume table: a setting of the config (not a flag: a setting keeps its row
// whatever its flag is called in a task) that a resumed run may change, and what then happens.
// Every setting not in the table is carried over from the checkpoint, and another value is refused.
struct ResumeRule {
  const char* setting;
  const char* on_resume;
};
const std::vector<ResumeRule>& resume_rules();
// The table as text, for `train --help`: the rows above, then the rule for every other setting.
std::string resume_table();

class RunDir : public nn::RunFiles {
 public:
  // A new run (resume empty), or one continuing RESUME/last.safetensors, which is read here, once;
  // RESUME/best.safetensors too, once an epoch is done (refused when missing or damaged: the end of
  // the run reads it, and --out NEW gets a copy with its first checkpoint).
  explicit RunDir(const std::string& resume = {});

  bool resuming() const { return checkpoint_.has_value(); }
  const std::string& resumed_folder() const { return resumed_folder_; }
  const nn::Checkpoint& checkpoint() const;  // the resumed last.safetensors
  // Whether the resumed checkpoint is a run of this task (and, `model` given, of this model).
  bool continues(const std::string& task, const std::string& model) const;
  // The value a flag not given takes from the checkpoint: the setting the flag sets and its value as
  // the flag's text (a string unquoted). Nothing when the config has no such setting or holds ""
  // (a default, as seed 002's data), or the checkpoint is another task's or, with `model` given,
  // another model's (resumed_config then refuses it, naming both).
  struct Carried {
    std::string setting, value;
  };
  std::optional<Carried> carried_over(const std::string& flag, const std::string& task, const std::string& model) const;
  // This run's config (JSON text) checked against the checkpoint's by the resume table: a change
  // the table allows is recorded in the "resumed" list, any other difference refused naming the
  // setting, its flag and both values, as is a run that would train nothing.
  std::string resumed_config(const std::string& config, const nn::TrainerOptions& trainer) const;
  // Before the first write: creates `out`, refuses one holding files but no attograd run or another
  // task's run, and locks it (OUT/.attograd.lock) for the rest of the process.
  void claim(const std::string& out, const std::string& config);

  // The Trainer's files in the claimed folder: config.json, metrics.csv, last.safetensors and
  // best.safetensors, each replaced atomically and synced by sync(), once, when the run ends.
  void write(nn::RunFile file, const std::string& bytes) override;
  bool sync() override;
  std::string where() const override { return out_; }  // the claimed folder
  std::string where(nn::RunFile file) const override;  // its path (a task reads best.safetensors there)
  // A file of the task's own (a plot, a report) by name ("losses.svg"), replaced atomically and
  // synced at once.
  void write(const std::string& name, const std::string& bytes);

 private:
  std::string path(const std::string& name) const;
  int64_t epochs_done() const;  // by the resumed checkpoint
  std::string read_resumed_best() const;

  std::string out_;  // the claimed folder ("": none, nothing may be written)
  std::string resumed_folder_;
  std::optional<nn::Checkpoint> checkpoint_;
  nlohmann::json checkpoint_config_;
  std::optional<std::string> resumed_best_;  // its bytes, until written into another --out
};

}  // namespace ag::tasks
