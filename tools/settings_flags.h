// A task's settings table (tasks/common/settings.h) as flags: each row with a flag is one option
// checked by its `Accepts`; `settle_settings` then gives every setting whose flag was not given its
// value: a resumed run's (carried over from the checkpoint), else the default for what was chosen
// (sentiment's --dataset uci, squares' --model, g2p's --preset).
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <functional>
#include <memory>

#include "engine/error.h"
#include "tasks/common/run_dir.h"
#include "tasks/common/settings.h"

namespace ag::cli {

// One option for a setting, its value at `field`; the default shown unless it is a path.
CLI::Option* add_setting_flag(CLI::App* app, const std::string& flag, const std::string& help,
                              const tasks::Field& field, const tasks::Accepts& accepts);

// Copies the value of one setting between two options structs (both fields of one row).
void copy_setting(const tasks::Field& to, const tasks::Field& from);

template <class Options>
void add_setting_flags(CLI::App* app, const std::vector<tasks::Setting<Options>>& table, Options& options) {
  for (const tasks::Setting<Options>& s : table)
    if (!s.flag.empty() && s.field) add_setting_flag(app, s.flag, s.help, s.field(options), s.accepts);
  for (const tasks::Setting<Options>& s : table)
    if (!s.excludes.empty()) app->get_option(s.flag)->excludes(s.excludes);
}

// The flags of `table` named in `flags`, as `train` has them (same help, same checks): for the
// commands that build a task's model without training it (`graph`).
template <class Options>
void add_setting_flags(CLI::App* app, const std::vector<tasks::Setting<Options>>& table, Options& options,
                       const std::vector<std::string>& flags) {
  for (const std::string& flag : flags) {
    const auto row = std::find_if(table.begin(), table.end(), [&](const auto& s) { return s.flag == flag; });
    AG_CHECK(row != table.end() && row->field, "{}: the task's settings table has no flag {}", app->get_name(), flag);
    add_setting_flag(app, row->flag, row->help, row->field(options), row->accepts);
  }
}

// Opens the run folder (options.training.run_dir; with --resume its last.safetensors read once).
// Resuming a run of this task (and of the chosen --model), each setting whose flag was not given
// takes the checkpoint's value (read typed, held to the row's Accepts), and --out defaults to the
// resumed folder; the others not given take `defaults(options)`'s value. A flag given with another
// value than the checkpoint's is refused later by the run folder, by the table's resume rules.
template <class Options>
void settle_settings(CLI::App* app, const std::vector<tasks::Setting<Options>>& table, Options& options,
                     const std::function<Options(const Options&)>& defaults = {}) {
  options.training.run_dir = std::make_shared<tasks::RunDir>(options.training.resume, tasks::setting_names(table));
  const tasks::RunDir& run = *options.training.run_dir;
  const CLI::Option* model_flag = app->get_option_no_throw("--model");
  const std::string model = model_flag && model_flag->count() > 0 ? model_flag->as<std::string>() : "";
  // Another task's or model's run: nothing to carry over; the run folder refuses it, naming both.
  const bool carry = run.continues(app->get_name(), model);
  std::vector<const tasks::Setting<Options>*> unset;
  for (const tasks::Setting<Options>& s : table) {
    if (s.flag.empty() || !s.field || app->get_option(s.flag)->count() > 0) continue;
    if (carry && run.carries(s.key))
      tasks::read_setting(run.checkpoint_config(), s.key, s.field(options), run.checkpoint().path, &s.accepts);
    else
      unset.push_back(&s);
  }
  const bool out_given = app->get_option("--out")->count() > 0;
  if (carry && !out_given) options.training.out = options.training.resume;
  if (!defaults) return;
  Options chosen = defaults(options);
  for (const tasks::Setting<Options>* s : unset) copy_setting(s->field(options), s->field(chosen));
  if (!carry && !out_given) options.training.out = chosen.training.out;
}

}  // namespace ag::cli
