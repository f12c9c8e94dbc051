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
#include "tasks/common/settings.h"

namespace ag::tasks {

// The table of what a resume may change, for `train --help` (text) and tasks/README.md (markdown):
// the may_change rows of the common table (tasks/common/training.h), then each task's own, then the
// rule for every other setting.
enum class TableFormat { text, markdown };
std::string resume_table(const std::vector<SettingName>& common,
                         const std::vector<std::pair<std::string, std::vector<SettingName>>>& tasks,
                         TableFormat format = TableFormat::text);

// The line a finished run prints: "wrote OUT/config.json, metrics.csv, " the task's own files
// ("losses.svg"), then "last.safetensors, best.safetensors" (the Trainer's names, said once).
void print_files_written(const std::string& out, const std::vector<std::string>& task_files);

class RunDir : public nn::RunFiles {
 public:
  // A new run (resume empty), or one continuing RESUME/last.safetensors, which is read here, once;
  // RESUME/best.safetensors too, once an epoch is done (refused when missing or damaged: the end of
  // the run reads it, and --out NEW gets a copy with its first checkpoint).
  // `settings`: the task's table's rows (settings.h), which name a setting's flag and resume rule.
  explicit RunDir(const std::string& resume = {}, std::vector<SettingName> settings = {});

  bool resuming() const { return checkpoint_.has_value(); }
  const std::string& resumed_folder() const { return resumed_folder_; }
  const nn::Checkpoint& checkpoint() const;  // the resumed last.safetensors
  // Whether the resumed checkpoint is a run of this task (and, `model` given, of this model).
  bool continues(const std::string& task, const std::string& model) const;
  // The resumed checkpoint's config, and whether it carries `key` over (holds it, and not as "":
  // a default, as seed 002's data).
  const nlohmann::json& checkpoint_config() const { return checkpoint().settings; }
  bool carries(const std::string& key) const;
  // The resumed run's best epoch (read with last.safetensors; nothing before an epoch is done).
  const std::optional<nn::BestModel>& resumed_best() const { return resumed_best_model_; }
  // This run's config checked against the checkpoint's by the resume table: a change
  // the table allows is recorded in the "resumed" list, any other difference refused naming the
  // setting, its flag and both values, as is a run that would train nothing.
  nlohmann::json resumed_config(nlohmann::json current, const nn::TrainerOptions& trainer) const;
  // Before the first write: creates `out`, refuses one holding files but no attograd run or another
  // task's run, and locks it (OUT/.attograd.lock) for the rest of the process.
  void claim(const std::string& out, const nlohmann::json& config);

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
  int64_t epochs_done() const;                        // by the resumed checkpoint
  std::string read_resumed_best();                    // keeps its model in resumed_best_model_
  std::string flag_of(const std::string& key) const;  // the flag that sets it, for messages
  bool may_change(const std::string& key) const;      // by the table's resume rule

  std::vector<SettingName> settings_;
  std::string out_;  // the claimed folder ("": none, nothing may be written)
  std::string resumed_folder_;
  std::optional<nn::Checkpoint> checkpoint_;
  std::optional<std::string> resumed_best_;  // its bytes, until written into another --out
  std::optional<nn::BestModel> resumed_best_model_;
};

}  // namespace ag::tasks
