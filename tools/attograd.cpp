// The `attograd` command-line program as a function (main.cpp calls it; so does the fuzz target).
// Exit codes: 0 success, 1 runtime error (one message on stderr), 2 usage error (with the usage line).
#include <filesystem>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/threads.h"
#include "nn/distributed.h"
#include "nn/trainer.h"
#include "tools/commands.h"
#include "tools/flag_checks.h"

namespace {

// A message as a user reads it: nlohmann-json's tags ("[json.exception.parse_error.101] ") cut out,
// wherever a message quotes that library's text.
std::string without_library_tags(std::string message) {
  for (size_t tag = message.find("[json.exception."); tag != std::string::npos;
       tag = message.find("[json.exception.")) {
    const size_t end = message.find("] ", tag);
    message.erase(tag, end == std::string::npos ? std::string::npos : end + 2 - tag);
  }
  return message;
}

// What went wrong, in plain words: out of memory, a file system error with its path, or the
// exception's message without a library's tags.
std::string describe_error(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr)
    return "out of memory: an allocation failed (a smaller model, batch or input?)";
  if (const auto* fs = dynamic_cast<const std::filesystem::filesystem_error*>(&e))
    return fs->path1().string() + ": " + fs->code().message();
  return without_library_tags(e.what());
}

}  // namespace

int ag::cli::run(int argc, char** argv, Mode mode) {
  CLI::App app{"attograd: a small reverse-mode autograd engine for attention models"};
  app.set_version_flag("--version", "attograd 0.1.0");
  app.require_subcommand(1);
  app.fallthrough();  // global options (--threads) may follow the subcommand; subcommands inherit this
  int threads = 0;
  app.add_option("--threads", threads, "OpenMP threads for every kernel (default: OMP_NUM_THREADS or all cores)")
      ->check(ag::cli::whole_number(1, 1024));

  std::vector<ag::cli::Command> commands = {ag::cli::add_gradcheck_command(app)};
  for (std::vector<ag::cli::Command> group :
       {ag::cli::add_train_commands(app), ag::cli::add_eval_commands(app), ag::cli::add_predict_commands(app)})
    commands.insert(commands.end(), group.begin(), group.end());
  commands.push_back(ag::cli::add_bench_command(app));
  commands.push_back(ag::cli::add_sample_command(app));
  commands.push_back(ag::cli::add_walkthrough_command(app));
  for (const ag::cli::Command& command : ag::cli::add_graph_commands(app)) commands.push_back(command);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (!ag::nn::dist::is_root()) return e.get_exit_code() == 0 ? 0 : 2;  // rank 0 says it
    return app.exit(e) == 0 ? 0 : 2;  // prints the message (and usage); --help and --version are not errors
  }
  if (mode == Mode::parse_only) return 0;
  if (threads > 0) ag::set_num_threads(threads);
  try {
    for (const ag::cli::Command& command : commands)
      if (command.app->parsed()) return command.run();
  } catch (const ag::nn::TrainingDiverged& e) {  // every rank of a data-parallel job stops here: rank 0 says it
    if (ag::nn::dist::is_root()) std::cerr << "attograd: error: " << e.what() << "\n";
    return 3;
  } catch (const ag::nn::TrainingInterrupted& e) {  // likewise
    if (ag::nn::dist::is_root()) std::cerr << "attograd: " << e.what() << "\n";
    return 128 + e.signal;             // as a shell reports a process the signal ended: 130 for SIGINT
  } catch (const std::exception& e) {  // ag::Error included: the message, without a library's tags
    // In a data-parallel job the other ranks would wait for this one: end them all.
    if (ag::nn::dist::ranks() > 1) ag::nn::dist::abort_job("error: " + describe_error(e), 1);
    std::cerr << "attograd: error: " << describe_error(e) << "\n";
    return 1;
  }
  return 0;
}
