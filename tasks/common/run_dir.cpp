#include "tasks/common/run_dir.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <fmt/ranges.h>
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

namespace {

// One row of the table: the setting, then what happens on --resume.
std::string table_row(const std::string& setting, const std::string& rule, TableFormat format) {
  if (format == TableFormat::markdown) {
    std::string cell;  // a '|' in the rule is the cell's, not a column's
    for (const char c : rule) cell += c == '|' ? std::string("\\|") : std::string(1, c);
    return fmt::format("| `{}` | {} |\n", setting, cell);
  }
  return fmt::format("  {:<17} {}\n", setting, rule);
}

}  // namespace

std::string resume_table(const std::vector<SettingName>& common,
                         const std::vector<std::pair<std::string, std::vector<SettingName>>>& tasks,
                         TableFormat format) {
  const bool text = format == TableFormat::text;
  std::string table = text ? "On --resume, by setting of config.json (whatever its flag is called):\n"
                           : "| setting | on `--resume` |\n|---|---|\n";
  for (const SettingName& s : common)
    if (s.on_resume == OnResume::may_change) table += table_row(s.key, s.resume_note, format);
  for (const auto& [task, names] : tasks)
    for (const SettingName& s : names)
      if (s.on_resume == OnResume::may_change &&
          std::none_of(common.begin(), common.end(), [&](const SettingName& c) { return c.key == s.key; }))
        table += table_row(s.key, fmt::format("({}) {}", task, s.resume_note), format);
  const std::string other =
      "carried over from the checkpoint when its flag is not given; another value is refused, naming the setting, "
      "its flag and both values (a new run goes into another --out)";
  table += text ? table_row("any other", other, format) : fmt::format("| any other | {} |\n", other);
  if (text)
    table +=
        "Not settings, for this process only: --out (defaults to the resumed folder; another one is claimed like a "
        "new run's), --quiet, --trace-backward, --detect-anomaly, --profile, --profile-after, --max-memory, "
        "--report-memory.";
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

}  // namespace

void print_files_written(const std::string& out, const std::vector<std::string>& task_files) {
  std::vector<std::string> files{file_name(nn::RunFile::config), file_name(nn::RunFile::metrics)};
  files.insert(files.end(), task_files.begin(), task_files.end());
  files.push_back(file_name(nn::RunFile::last_checkpoint));
  files.push_back(file_name(nn::RunFile::best_checkpoint));
  fmt::print("wrote {}/{}\n", out, fmt::join(files, ", "));
}

namespace {

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
void check_not_another_run(const std::string& out, const nlohmann::json& config) {
  const std::string path = out + "/" + file_name(nn::RunFile::config);
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) return;
  const std::string task = config.value("task", "");
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

// The epochs a training checkpoint was saved after.
int64_t epoch_of(const nn::Checkpoint& checkpoint) {
  try {
    return std::stoll(checkpoint.metadata.at("epoch"));
  } catch (const std::exception&) {
    fail("{}: not a training checkpoint (no epoch count in its metadata)", checkpoint.path);
  }
}

}  // namespace

RunDir::RunDir(const std::string& resume, std::vector<SettingName> settings)
    : settings_(std::move(settings)), resumed_folder_(resume) {
  if (resume.empty()) return;
  const std::string path = resume + "/" + file_name(nn::RunFile::last_checkpoint);
  checkpoint_ = nn::read_checkpoint(path);
  AG_CHECK(!checkpoint_->is_model_file(),
           "--resume {}: {} is a model file (exported, no optimizer state); --resume needs a run folder's "
           "last.safetensors",
           resume, path);
  if (epochs_done() > 0) resumed_best_ = read_resumed_best();
}

int64_t RunDir::epochs_done() const { return epoch_of(checkpoint()); }

// The resumed run's best epoch, read and checked before any training: the end of the run reads it
// (g2p's test, UCI's report), and a run resumed into another --out carries it there.
std::string RunDir::read_resumed_best() {
  const std::string best = resumed_folder_ + "/" + file_name(nn::RunFile::best_checkpoint);
  std::error_code error;
  AG_CHECK(std::filesystem::exists(std::filesystem::symlink_status(best, error)),
           "--resume {}: cannot resume: {} is missing; the run has done {} epoch(s), and its end reads the best of "
           "them from there: put it back, or start a new run in another --out",
           resumed_folder_, best, epochs_done());
  std::string bytes = read_file(best, "checkpoint");
  nn::Checkpoint checkpoint = nn::parse_checkpoint(bytes, best);
  note_input(best);
  resumed_best_model_ = nn::BestModel{epoch_of(checkpoint), std::move(checkpoint.model)};
  return bytes;
}

const nn::Checkpoint& RunDir::checkpoint() const {
  AG_CHECK(checkpoint_.has_value(), "run folder: not a resumed run");
  return *checkpoint_;
}

bool RunDir::continues(const std::string& task, const std::string& model) const {
  if (!resuming()) return false;
  const nlohmann::json& config = checkpoint_->settings;
  return config.value("task", nlohmann::json()) == task &&
         (model.empty() || config.value("model", nlohmann::json()) == model);
}

bool RunDir::carries(const std::string& key) const {
  const nlohmann::json& config = checkpoint().settings;
  return config.contains(key) && config[key] != "";
}

std::string RunDir::flag_of(const std::string& key) const {
  for (const SettingName& s : settings_)
    if (s.key == key) return s.flag;
  std::string flag = "--" + key;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

bool RunDir::may_change(const std::string& key) const {
  return std::any_of(settings_.begin(), settings_.end(),
                     [&](const SettingName& s) { return s.key == key && s.on_resume == OnResume::may_change; });
}

nlohmann::json RunDir::resumed_config(nlohmann::json current, const nn::TrainerOptions& trainer) const {
  const std::string& folder = resumed_folder_;
  const nlohmann::json& saved = checkpoint().settings;
  nlohmann::json changed = nlohmann::json::object();
  std::vector<std::string> keys = {"task", "model"};  // first: other keys differ when these do
  for (const char* key : {"data", "data_sha256"})     // then the data: its counts differ when its content does
    if (saved.contains(key)) keys.push_back(key);
  for (const auto& [key, _] : saved.items())
    if (std::find(keys.begin(), keys.end(), key) == keys.end() && key != "resumed") keys.push_back(key);
  for (const std::string& key : keys) {
    const nlohmann::json value = saved.value(key, nlohmann::json("(none)"));
    const nlohmann::json now = current.value(key, nlohmann::json("(none)"));
    if (now == value || same_data_file(key, value, current)) continue;
    AG_CHECK(key != "data_sha256",
             "--resume {}: cannot resume: the data {} changed since the run began: its sha256 is {}, the run "
             "recorded {}; resume with the run's data, or start a new run in another --out",
             folder, printable(current.value("data", "")), printable(now.dump()), printable(value.dump()));
    AG_CHECK(may_change(key),
             "--resume {}: cannot resume: the checkpoint's {} is {}, this run's is {} (set by {}); a resumed run "
             "keeps the checkpoint's settings: leave the flag out, or start a new run in another --out",
             folder, key, printable(value.dump()), printable(now.dump()), flag_of(key));
    changed[key] = {{"from", value}, {"to", current[key]}};
  }
  for (const auto& [key, _] : current.items())  // data_sha256: a run older than the digest has none
    AG_CHECK(saved.contains(key) || may_change(key) || key == "data_sha256",
             "{}/last.safetensors: the checkpoint's config has no \"{}\" (the setting of {}), so it does not say "
             "what the run it continues had (damaged or edited?); start a new run in another --out",
             folder, key, flag_of(key));
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
  return current;
}

void RunDir::claim(const std::string& out, const nlohmann::json& config) {
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
