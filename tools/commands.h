// Each subcommand of the `attograd` program adds itself to the app here.
#pragma once

#include <CLI/CLI.hpp>
#include <vector>

#include "tasks/common/run_dir.h"
#include "tasks/common/training.h"

namespace ag::cli {

// A subcommand and what runs when it was chosen (returns the process exit code).
struct Command {
  CLI::App* app;
  std::function<int()> run;
};

Command add_gradcheck_command(CLI::App& app);
Command add_bench_command(CLI::App& app);
std::vector<Command> add_train_commands(CLI::App& app);    // train sentiment, squares, charlm, g2p
std::vector<Command> add_eval_commands(CLI::App& app);     // eval sentiment, squares, charlm, g2p
std::vector<Command> add_predict_commands(CLI::App& app);  // predict sentiment, g2p
Command add_sample_command(CLI::App& app);                 // sample (from a charlm checkpoint)
Command add_export_command(CLI::App& app);                 // export (a checkpoint as a model file)
Command add_walkthrough_command(CLI::App& app);
std::vector<Command> add_graph_commands(CLI::App& app);  // graph squares, sentiment, charlm, g2p, walkthrough

// --precision f32|bf16 on `eval`, `predict` and `sample` (after either subcommand of eval and
// predict): each of their commands then runs under ag::AutocastGuard. `train` has its own, recorded
// in config.json (its settings table).
void add_precision_flags(CLI::App& app, std::vector<Command>& commands);

// The flags of every `train <task>` that are not settings, for this process only: --out, --resume,
// --quiet, --max-memory, --trace-backward, --detect-anomaly, --profile (the settings' flags come
// from the task's table: settings_flags.h).
void add_run_flags(CLI::App* app, tasks::TrainingOptions& options);
// --max-memory MB (train, eval g2p, predict g2p): "`what` is above this many MB (default: the memory
// available)"; tasks::check_memory or check_memory_quietly refuses what would not fit.
void add_max_memory_flag(CLI::App* app, int64_t& max_memory_mb, const std::string& what);

// What a resume may change, from the tables of every task's settings: `train --help` prints it
// (text), tasks/README.md holds it (markdown; a test compares).
std::string resume_table(tasks::TableFormat format);

// The whole program: parses argv, runs the chosen subcommand, returns the exit code. parse_only
// stops after parsing and checking the flags (the fuzz target drives it so, writing no files).
enum class Mode { run, parse_only };
int run(int argc, char** argv, Mode mode = Mode::run);

}  // namespace ag::cli
