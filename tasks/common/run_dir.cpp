#include "tasks/common/run_dir.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "engine/io.h"
#include "engine/json.h"
#include "engine/safetensors.h"
#include "tasks/common/text.h"

namespace ag::tasks {

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

// Settings a resumed run may change; each change is applied and recorded in the config's
// "resumed" list. Every other setting must be the checkpoint's: the CLI carries them over.
const std::vector<ResumeRule>& resume_rules() {
  static const std::vector<ResumeRule> rules = {
      {"epochs", "may grow past the epochs done (else the run trains nothing: exit 1); recorded"},
      {"iters",
       "(charlm) may grow past the evaluation intervals done x eval_interval; the cosine schedule then decays to the "
       "new end, from the next step; recorded"},
      {"threads", "may change; recorded (bit-identity with an uninterrupted run needs the same count)"},
      {"ranks",
       "(mpirun -np N) may change: a checkpoint does not depend on how a batch is split; recorded (bit-identity "
       "needs the same split)"},
      {"micro_batches", "may change, as ranks; recorded"},
      {"precision", "(--precision f32|bf16) may change: checkpoints are f32 either way; recorded"},
      {"attograd_version", "may change: a newer build continues an older run; recorded"}};
  return rules;
}

std::string resume_table() {
  std::string table = "On --resume, by setting of config.json (whatever its flag is called):\n";
  for (const ResumeRule& rule : resume_rules()) table += fmt::format("  {:<17} {}\n", rule.setting, rule.on_resume);
  table += fmt::format("  {:<17} {}\n", "any other",
                       "carried over from the checkpoint when its flag is not given; another value is refused, naming "
                       "the setting, its flag and both values (a new run goes into another --out)");
  table +=
      "Not settings, for this process only: --out (defaults to the resumed folder; another one is claimed like a new "
      "run's), --quiet, --trace-backward, --detect-anomaly, --profile, --max-memory, --report-memory.";
  return table;
}

namespace {

// The names of the Trainer's files in a run folder.
const char* file_name(nn::RunFile file) {
  switch (file) {
    case nn::RunFile::config:
      return "config.json";
    case nn::RunFile::metrics:
      return "metrics.csv";
    case nn::RunFile::last_checkpoint:
      return "last.safetensors";
    case nn::RunFile::best_checkpoint:
      return "best.safetensors";
  }
  fail("run folder: unknown file {}", static_cast<int>(file));
}

bool may_change_on_resume(const std::string& setting) {
  const std::vector<ResumeRule>& rules = resume_rules();
  return std::any_of(rules.begin(), rules.end(), [&](const ResumeRule& rule) { return setting == rule.setting; });
}

// Refuses an --out folder that holds files but no attograd run (no config.json): the user's own
// files, which a run would overwrite; lists what is there. The lock file alone is a run's.
void check_empty_or_a_run(const std::string& out) {
  std::error_code error;
  if (std::filesystem::is_regular_file(out + "/" + file_name(nn::RunFile::config), error)) return;
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
  const std::string path = out + "/" + file_name(nn::RunFile::config);
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
// A run's "data" recorded relative by an older version (a file of the folder it ran in) is the file
// this run reads if it resolves to the path now recorded (tasks::recorded_data_path).
bool same_data_file(const std::string& key, const nlohmann::json& saved, const nlohmann::json& current) {
  return key == "data" && saved.is_string() && current.contains(key) && current[key].is_string() &&
         recorded_data_path(saved.get<std::string>()) == current[key].get<std::string>();
}

// Returns the lock file's descriptor (open for the rest of the process: the lock lives with it) and
// whether this call made the file.
std::pair<int, bool> lock_output_folder(const std::string& out) {
  const std::string path = out + "/.attograd.lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  const bool made = fd >= 0;
  if (!made && errno == EEXIST) fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  AG_CHECK(fd >= 0, "--out {}: cannot create the lock file {}: {}", out, path, std::strerror(errno));
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  if (::fcntl(fd, F_SETLK, &lock) == 0) return {fd, made};
  const int error = errno;
  struct flock holder = lock;
  const bool known = ::fcntl(fd, F_GETLK, &holder) == 0 && holder.l_type != F_UNLCK;
  ::close(fd);
  AG_CHECK(error == EACCES || error == EAGAIN, "--out {}: cannot lock {}: {}", out, path, std::strerror(error));
  fail("--out {}: another run (pid {}) is writing to this folder; wait for it to end or choose another --out", out,
       known ? std::to_string(holder.l_pid) : "unknown");
}

// Refuses a folder where the run's files (config.json, metrics.csv, the checkpoints) would replace
// one of its inputs (Note [inputs are not outputs] in engine/io.h), before any work. The checkpoints
// a run continues in its own folder (`resumed`: its last.safetensors and best.safetensors) are its
// to replace.
void check_no_input_replaced(const std::string& out, const std::string& resumed) {
  std::error_code error;
  if (!resumed.empty() && std::filesystem::equivalent(resumed, out, error))
    for (const nn::RunFile file : {nn::RunFile::last_checkpoint, nn::RunFile::best_checkpoint})
      forget_input(out + "/" + file_name(file));
  for (const nn::RunFile file :
       {nn::RunFile::config, nn::RunFile::metrics, nn::RunFile::last_checkpoint, nn::RunFile::best_checkpoint})
    check_not_an_input(out + "/" + file_name(file));
}

}  // namespace

RunDir::RunDir(const std::string& resume) : resumed_folder_(resume) {
  if (resume.empty()) return;
  const std::string path = resume + "/" + file_name(nn::RunFile::last_checkpoint);
  checkpoint_ = nn::read_checkpoint(path);
  checkpoint_config_ = parse_json(checkpoint_->config(), path);  // an object: read_checkpoint checked
  if (epochs_done() > 0) resumed_best_ = read_resumed_best();
}

int64_t RunDir::epochs_done() const {
  try {
    return std::stoll(checkpoint().metadata.at("epoch"));
  } catch (const std::exception&) {
    fail("{}/last.safetensors: not a training checkpoint (no epoch count in its metadata)", resumed_folder_);
  }
}

// The resumed run's best epoch, read and checked before any training: the end of the run reads it
// (g2p's test, UCI's report), and a run resumed into another --out carries it there.
std::string RunDir::read_resumed_best() const {
  const std::string best = resumed_folder_ + "/" + file_name(nn::RunFile::best_checkpoint);
  std::error_code error;
  AG_CHECK(std::filesystem::exists(std::filesystem::symlink_status(best, error)),
           "--resume {}: cannot resume: {} is missing; the run has done {} epoch(s), and its end reads the best of "
           "them from there: put it back, or start a new run in another --out",
           resumed_folder_, best, epochs_done());
  std::string bytes = read_file(best, "checkpoint");
  nn::parse_checkpoint(bytes, best);
  note_input(best);
  return bytes;
}

const nn::Checkpoint& RunDir::checkpoint() const {
  AG_CHECK(checkpoint_.has_value(), "run folder: not a resumed run");
  return *checkpoint_;
}

bool RunDir::continues(const std::string& task, const std::string& model) const {
  const nlohmann::json& config = checkpoint_config_;
  return resuming() && config.value("task", nlohmann::json()) == task &&
         (model.empty() || config.value("model", nlohmann::json()) == model);
}

std::optional<RunDir::Carried> RunDir::carried_over(const std::string& flag, const std::string& task,
                                                    const std::string& model) const {
  const nlohmann::json& config = checkpoint_config_;
  if (!flag.starts_with("--") || !continues(task, model)) return std::nullopt;
  std::string key = flag.substr(2);
  std::replace(key.begin(), key.end(), '-', '_');
  // A flag that is the one flag of a setting named otherwise (--layers: n_layer); not --data, which
  // many derived settings name.
  const auto& named = settings_named_otherwise();
  const auto sets = [&](const auto& entry) { return entry.second == flag; };
  if (!config.contains(key) && std::count_if(named.begin(), named.end(), sets) == 1)
    key = std::find_if(named.begin(), named.end(), sets)->first;
  if (!config.contains(key) || config[key] == "") return std::nullopt;  // "": the default (seed 002's data)
  return Carried{key, config[key].is_string() ? config[key].get<std::string>() : config[key].dump()};
}

std::string RunDir::resumed_config(const std::string& config, const nn::TrainerOptions& trainer) const {
  const std::string& folder = resumed_folder_;
  const nlohmann::json& saved = checkpoint_config_;
  nlohmann::json current = nlohmann::json::parse(config);
  nlohmann::json changed = nlohmann::json::object();
  std::vector<std::string> keys = {"task", "model"};  // first: other keys differ when these do
  for (const char* key : {"data", "data_sha256"})     // then the data: its counts differ when its content does
    if (saved.contains(key)) keys.push_back(key);
  for (const auto& [key, _] : saved.items())
    if (std::find(keys.begin(), keys.end(), key) == keys.end() && key != "resumed") keys.push_back(key);
  for (const std::string& key : keys) {
    const nlohmann::json value = saved.value(key, nlohmann::json("(none)"));
    const std::string now = current.contains(key) ? current[key].dump() : "(none)";
    if (now == value.dump() || same_data_file(key, value, current)) continue;
    AG_CHECK(key != "data_sha256",
             "--resume {}: cannot resume: the data {} changed since the run began: its sha256 is {}, the run "
             "recorded {}; resume with the run's data, or start a new run in another --out",
             folder, printable(current.value("data", "")), printable(now), printable(value.dump()));
    AG_CHECK(may_change_on_resume(key),
             "--resume {}: cannot resume: the checkpoint's {} is {}, this run's is {} (set by {}); a resumed run "
             "keeps the checkpoint's settings: leave the flag out, or start a new run in another --out",
             folder, key, printable(value.dump()), printable(now), flag_of_setting(key));
    changed[key] = {{"from", value}, {"to", current[key]}};
  }
  for (const auto& [key, _] : current.items())  // data_sha256: a run older than the digest has none
    AG_CHECK(saved.contains(key) || may_change_on_resume(key) || key == "data_sha256",
             "{}/last.safetensors: the checkpoint's config has no \"{}\" (the setting of {}), so it does not say "
             "what the run it continues had (damaged or edited?); start a new run in another --out",
             folder, key, flag_of_setting(key));
  const int64_t done = epochs_done();
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

void RunDir::claim(const std::string& out, const std::string& config) {
  check_no_input_replaced(out, resuming() ? resumed_folder_ : "");
  create_output_folder(out);
  // Locked before the folder is judged: a run writing there is named, not its half-written files.
  const auto [lock, made] = lock_output_folder(out);
  try {
    check_empty_or_a_run(out);
    check_not_another_run(out, config);
  } catch (...) {
    if (made) ::unlink((out + "/.attograd.lock").c_str());  // a folder refused is left as it was
    ::close(lock);
    throw;
  }
  out_ = out;
  std::error_code error;
  if (resumed_best_ && std::filesystem::equivalent(resumed_folder_, out, error)) resumed_best_.reset();
}

std::string RunDir::path(const std::string& name) const {
  AG_CHECK(!out_.empty(), "run folder: no --out was claimed, so it has no {}", name);
  AG_CHECK(!name.empty() && name.find('/') == std::string::npos, "run folder: '{}' is not a file name",
           printable(name));
  return out_ + "/" + name;
}

std::string RunDir::where(nn::RunFile file) const { return path(file_name(file)); }

// Each epoch's files are replaced without waiting for the disk (an fsync would cost more than the
// epoch): sync() puts them there once.
// A run resumed into another folder carries its best epoch there with its first checkpoint (after
// config.json, so the folder is a run's from then on); a better epoch then replaces it.
void RunDir::write(nn::RunFile file, const std::string& bytes) {
  write_file_atomically(where(file), bytes, Durability::deferred);
  if (file != nn::RunFile::config || !resumed_best_) return;
  write_file_atomically(where(nn::RunFile::best_checkpoint), *resumed_best_, Durability::deferred);
  resumed_best_.reset();
}

bool RunDir::sync() {
  std::vector<std::string> paths;
  for (const nn::RunFile file :
       {nn::RunFile::last_checkpoint, nn::RunFile::best_checkpoint, nn::RunFile::metrics, nn::RunFile::config})
    paths.push_back(where(file));
  return sync_to_disk(paths);
}

void RunDir::write(const std::string& name, const std::string& bytes) { write_file_atomically(path(name), bytes); }

}  // namespace ag::tasks
