#include "tasks/common/training.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "engine/autocast.h"
#include "engine/inspect.h"
#include "engine/io.h"
#include "engine/threads.h"
#include "nn/checkpoint.h"
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

const std::map<std::string, std::string>& settings_named_otherwise() {
  static const std::map<std::string, std::string> flags = {{"task", "the command, train <task>"},
                                                           {"n_layer", "--layers"},
                                                           {"n_head", "--heads"},
                                                           {"n_embd", "--width"},
                                                           {"model", "--model or --heads"},
                                                           {"vocab_size", "--data"},
                                                           {"data_chars", "--data"},
                                                           {"data_sha256", "--data, whose content differs"},
                                                           {"tokenizer", "--dataset"},
                                                           {"embedding_std", "--dataset"},
                                                           {"source_vocab", "--data"},
                                                           {"target_vocab", "--data or --stress"},
                                                           {"data_words", "--data"}};
  return flags;
}

std::string flag_of_setting(const std::string& key) {
  const auto it = settings_named_otherwise().find(key);
  if (it != settings_named_otherwise().end()) return it->second;
  std::string flag = "--" + key;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

namespace {

// Settings a resumed run may change; each change is applied and recorded in the config's
// "resumed" list. epochs/iters: train further (the count must pass what the run has done);
// threads, ranks, micro_batches: the machine may differ (a checkpoint does not depend on how a batch
// is split); precision: checkpoints are f32 either way; attograd_version: a newer build continues an
// older run.
// Every other setting must be the checkpoint's: the CLI carries them over (tools/train_command.cpp).
constexpr const char* kChangeableOnResume[] = {"epochs",        "iters",     "threads",         "ranks",
                                               "micro_batches", "precision", "attograd_version"};

// This run's config (JSON text) with a changed setting recorded under "resumed"; refuses any other
// difference from the checkpoint's config, and a run that would train nothing.
std::string resumed_config(const std::string& folder, const std::string& config, const nn::TrainerOptions& trainer) {
  const std::string path = folder + "/last.safetensors";
  const nn::Checkpoint checkpoint = nn::read_checkpoint(path);
  const nlohmann::json saved = nlohmann::json::parse(checkpoint.config());
  nlohmann::json current = nlohmann::json::parse(config);
  nlohmann::json changed = nlohmann::json::object();
  std::vector<std::string> keys = {"task", "model"};  // first: other keys differ when these do
  for (const auto& [key, _] : saved.items())
    if (key != "task" && key != "model" && key != "resumed") keys.push_back(key);
  for (const std::string& key : keys) {
    const nlohmann::json value = saved.value(key, nlohmann::json("(none)"));
    const std::string now = current.contains(key) ? current[key].dump() : "(none)";
    if (now == value.dump()) continue;
    const bool changeable = std::find_if(std::begin(kChangeableOnResume), std::end(kChangeableOnResume),
                                         [&](const char* k) { return key == k; }) != std::end(kChangeableOnResume);
    AG_CHECK(changeable,
             "--resume {}: cannot resume: the checkpoint's {} is {}, this run's is {} (set by {}); a resumed run "
             "keeps the checkpoint's settings: leave the flag out, or start a new run in another --out",
             folder, key, printable(value.dump()), printable(now), flag_of_setting(key));
    changed[key] = {{"from", value}, {"to", current[key]}};
  }
  int64_t done = 0;
  try {
    done = std::stoll(checkpoint.metadata.at("epoch"));
  } catch (const std::exception&) {
    fail("{}: not a training checkpoint (no epoch count in its metadata)", path);
  }
  if (trainer.steps_per_epoch > 0)
    AG_CHECK(trainer.epochs > done,
             "--resume {}: --iters {} trains nothing: the run has done {} evaluation intervals of {} iterations; give "
             "--iters > {} to train it further",
             folder, current.value("iters", int64_t{0}), done, trainer.steps_per_epoch, done * trainer.steps_per_epoch);
  else
    AG_CHECK(trainer.epochs > done,
             "--resume {}: --epochs {} trains nothing: the run has done {} epochs; give --epochs > {} to train it "
             "further",
             folder, trainer.epochs, done, done);
  current["resumed"] =
      saved.contains("resumed") && saved["resumed"].is_array() ? saved["resumed"] : nlohmann::json::array();
  if (!changed.empty()) current["resumed"].push_back({{"after_epoch", done}, {"changed", changed}});
  if (current["resumed"].empty()) current.erase("resumed");
  return current.dump();
}

// Refuses an --out folder that holds files but no attograd run (no config.json): the user's own
// files, which a run would overwrite; lists what is there. The lock file alone is a run's.
void check_empty_or_a_run(const std::string& out) {
  std::error_code error;
  if (std::filesystem::is_regular_file(out + "/config.json", error)) return;
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(out, error))
    if (entry.path().filename() != ".attograd.lock") names.push_back(printable(entry.path().filename().string()));
  if (names.empty()) return;
  std::sort(names.begin(), names.end());
  constexpr size_t kListed = 8;
  std::string listed;
  for (size_t i = 0; i < std::min(names.size(), kListed); ++i) listed += (i ? ", " : "") + names[i];
  if (names.size() > kListed) listed += fmt::format(" and {} more", names.size() - kListed);
  fail(
      "--out {}: is not empty and holds no attograd run (no config.json): {}; a run would overwrite such files: "
      "choose an empty or new folder, or a run's own",
      out, listed);
}

// Refuses an --out folder that holds another task's run (by its config.json).
void check_not_another_run(const std::string& out, const std::string& config) {
  const std::string path = out + "/config.json";
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) return;
  const std::string task = nlohmann::json::parse(config).value("task", "");
  nlohmann::json there;
  try {
    there = nlohmann::json::parse(read_file(path));
  } catch (const std::exception&) {
  }
  const std::string other = there.is_object() && there.contains("task") && there["task"].is_string()
                                ? there["task"].get<std::string>()
                                : "(not attograd's)";
  AG_CHECK(other == task,
           "--out {}: holds another run (its config.json's task is {}); a {} run would overwrite its files: choose "
           "another --out, or delete the folder",
           out, printable(other), task);
}

// Holds a write lock on OUT/.attograd.lock until the process ends, so two runs never write into one
// folder. An fcntl lock: the kernel drops it when the process ends however it ends, tells a
// second run the holder's pid, and lets this process take it again (tests train twice).
void lock_output_folder(const std::string& out) {
  const std::string path = out + "/.attograd.lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  AG_CHECK(fd >= 0, "--out {}: cannot create the lock file {}: {}", out, path, std::strerror(errno));
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  if (::fcntl(fd, F_SETLK, &lock) == 0) return;  // the descriptor stays open: the lock lives with the process
  const int error = errno;
  struct flock holder = lock;
  const bool known = ::fcntl(fd, F_GETLK, &holder) == 0 && holder.l_type != F_UNLCK;
  ::close(fd);
  AG_CHECK(error == EACCES || error == EAGAIN, "--out {}: cannot lock {}: {}", out, path, std::strerror(error));
  fail("--out {}: another run (pid {}) is writing to this folder; wait for it to end or choose another --out", out,
       known ? std::to_string(holder.l_pid) : "unknown");
}

}  // namespace

std::vector<nn::EpochRecord> run_training(nn::Module& model, nn::Optimizer& optimizer, nn::TrainTask& task,
                                          const TrainingOptions& options, const std::string& config,
                                          const std::map<std::string, std::string>& checkpoint_metadata,
                                          const TrainerSettings& settings, std::vector<double>* step_seconds) {
  const AutocastGuard autocast(precision_is_bf16(options.precision));  // refused here, before anything is written
  nn::TrainerOptions trainer_options{.epochs = options.epochs,
                                     .batch_size = options.batch_size,
                                     .micro_batches = options.micro_batches,
                                     .seed = options.seed,
                                     .out_dir = options.out,
                                     .progress = !options.quiet,
                                     .config = config,
                                     .checkpoint_metadata = checkpoint_metadata};
  if (settings) settings(trainer_options);
  if (trainer_options.steps_per_epoch == 0 && options.batch_size > task.train_size() && nn::dist::is_root())
    fmt::print("note: --batch-size {} is more than the {} training examples: each step takes all {}\n",
               options.batch_size, task.train_size(), task.train_size());
  if (!options.resume.empty()) trainer_options.config = resumed_config(options.resume, config, trainer_options);
  nn::Trainer trainer(model, optimizer, task, trainer_options);
  if (!options.resume.empty()) trainer.resume(options.resume + "/last.safetensors");
  // Nothing is written before here; the Trainer writes config.json beside the first checkpoint.
  // Under mpirun, rank 0 alone writes (and locks the folder).
  if (!options.out.empty() && nn::dist::is_root()) {
    create_output_folder(options.out);
    check_empty_or_a_run(options.out);
    check_not_another_run(options.out, trainer_options.config);
    lock_output_folder(options.out);
  }
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
  if (!nn::dist::is_root()) {  // data parallelism: the other ranks are done; rank 0 reports
    nn::dist::finalize();
    std::exit(0);
  }
  fmt::print("trained in {:.3f} s (wall, the epochs' checkpoints included)\n", took.count());
  if (step_seconds) *step_seconds = trainer.step_seconds();
  return history;
}

}  // namespace ag::tasks
