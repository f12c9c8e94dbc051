// A task's settings as data: one row per setting (its config.json key, its flag and help, what
// values it takes, where it lives in the task's options, its rule on --resume), from which the CLI
// flags (tools/settings_flags.h), config.json (`to_json`), reading a checkpoint's config back
// (`from_json`) and the resume checks (RunDir, by `SettingName`) all follow. The task's options
// struct is the typed config; the settings every task shares are one table (`common_settings`,
// tasks/common/training.h), which each task's table starts with.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

namespace ag::tasks {

// Where a setting's value lives in the options.
using Field = std::variant<int64_t*, uint64_t*, double*, bool*, std::string*>;

// The values a setting takes: the CLI checks a flag's text by it, and a checkpoint's value read
// back is held to it.
struct Accepts {
  enum Kind { anything, whole, number, positive, seed, choice, path, existing_file } kind = anything;
  double min = 0, max = 0;             // whole, number: the closed range
  std::vector<std::string> choices{};  // choice
};

// On --resume a setting is carried over from the checkpoint when its flag is not given, and
// another value refused; or it may change, recorded in config.json's "resumed" list.
enum class OnResume { carried_over, may_change };

template <class Options>
struct Setting {
  std::string key;   // in config.json
  std::string flag;  // "--layers"; "" for a setting with no flag of its own (derived from the data)
  std::string help;  // the flag's help; with no flag, what decides the value ("--data")
  std::function<Field(Options&)> field{};  // empty: derived, written by the task beside the table's
  Accepts accepts{};
  OnResume on_resume = OnResume::carried_over;
  std::string resume_note{};                      // may_change: what happens, for the resume table
  std::function<bool(const Options&)> written{};  // when config.json has the key (empty: always)
  std::string excludes{};                         // a flag that may not be given with this one
};

// What the resume checks need of a row, whatever the task.
struct SettingName {
  std::string key, flag;  // flag: the flag, or with none what decides the value
  OnResume on_resume;
  std::string resume_note;
};

// Reads `key` of a checkpoint's config (from `path`) into `field`, typed, and with `accepts` held
// to it as a flag's value is (a run carried over); a missing key, a wrong type or a value refused
// fails naming the file, the key and the value. (A model read back is checked by the model's own
// rules instead: a program of one's own may have trained sizes beyond the flags'.)
void read_setting(const nlohmann::json& config, const std::string& key, const Field& field, const std::string& path,
                  const Accepts* accepts = nullptr);
// The value at `field` as JSON.
nlohmann::json setting_json(const Field& field);

template <class Options>
std::vector<SettingName> setting_names(const std::vector<Setting<Options>>& table) {
  std::vector<SettingName> names;
  for (const Setting<Options>& s : table)
    names.push_back({s.key, s.flag.empty() ? s.help : s.flag, s.on_resume, s.resume_note});
  return names;
}

// The settings of `options` the table writes (the rows with a field whose `written` holds).
template <class Options>
nlohmann::json to_json(const std::vector<Setting<Options>>& table, Options options) {
  nlohmann::json config = nlohmann::json::object();
  for (const Setting<Options>& s : table)
    if (s.field && (!s.written || s.written(options))) config[s.key] = setting_json(s.field(options));
  return config;
}

// A checkpoint's config (read from `path`) as options: every row with a field is read and checked;
// one the run may not have written (`written`, or a may_change row an older version had not)
// keeps `options`' value when missing.
template <class Options>
Options from_json(const std::vector<Setting<Options>>& table, const nlohmann::json& config, const std::string& path,
                  Options options) {
  for (const Setting<Options>& s : table) {
    const bool optional = s.written || s.on_resume == OnResume::may_change;
    if (s.field && (!optional || config.contains(s.key))) read_setting(config, s.key, s.field(options), path);
  }
  return options;
}

// The table of Options' `training` member's settings, as rows of Options.
template <class Options, class Training>
std::vector<Setting<Options>> lift_training(const std::vector<Setting<Training>>& common) {
  std::vector<Setting<Options>> rows;
  for (const Setting<Training>& s : common) {
    Setting<Options> row{s.key, s.flag, s.help, {}, s.accepts, s.on_resume, s.resume_note, {}};
    if (s.field) row.field = [f = s.field](Options& o) { return f(o.training); };
    if (s.written) row.written = [w = s.written](const Options& o) { return w(o.training); };
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace ag::tasks
