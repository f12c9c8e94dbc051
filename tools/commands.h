// Each subcommand of the `attograd` program adds itself to the app here.
#pragma once

#include <CLI/CLI.hpp>
#include <vector>

namespace ag::cli {

// A subcommand and what runs when it was chosen (returns the process exit code).
struct Command {
  CLI::App* app;
  std::function<int()> run;
};

Command add_gradcheck_command(CLI::App& app);
Command add_bench_command(CLI::App& app);
std::vector<Command> add_train_commands(CLI::App& app);  // train sentiment, squares, charlm
std::vector<Command> add_eval_commands(CLI::App& app);   // eval sentiment, squares, charlm
Command add_predict_command(CLI::App& app);
Command add_sample_command(CLI::App& app);  // sample (from a charlm checkpoint)
Command add_walkthrough_command(CLI::App& app);
std::vector<Command> add_graph_commands(CLI::App& app);  // graph squares, sentiment, charlm, walkthrough

// The whole program: parses argv, runs the chosen subcommand, returns the exit code. parse_only
// stops after parsing and checking the flags (the fuzz target drives it so, writing no files).
enum class Mode { run, parse_only };
int run(int argc, char** argv, Mode mode = Mode::run);

}  // namespace ag::cli
