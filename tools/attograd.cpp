// The `attograd` command-line program as a function (main.cpp calls it; so does the fuzz target).
// Exit codes: 0 success, 1 runtime error (one message on stderr), 2 usage error (with the usage line).
#include <filesystem>
#include <iostream>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include "engine/autocast.h"
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

// A rank of a data-parallel job that cannot start (a usage error, a missing file): it meets the others
// in their start-up agreement with its failure, so that none waits for it; every rank ends with the
// first failing rank's message (rank 0 prints it) and exit code.
int stop_before_start(int exit_code, const std::string& message) {
  ag::nn::dist::StartState failed;
  failed.ready = false;
  failed.exit_code = exit_code;
  failed.message = message;
  const std::optional<ag::nn::dist::Refusal> refusal = ag::nn::dist::agree_to_start(failed);
  if (ag::nn::dist::is_root() && !refusal->message.empty()) std::cerr << "attograd: " << refusal->message << "\n";
  return refusal->exit_code;
}

}  // namespace

void ag::cli::add_precision_flags(CLI::App& app, std::vector<Command>& commands) {
  for (const char* name : {"eval", "predict", "sample"}) {
    CLI::App* parent = app.get_subcommand(name);
    auto precision = std::make_shared<std::string>("f32");
    parent
        ->add_option("--precision", *precision,
                     "f32, or bf16: the products (matmul, Linear, attention) with bf16 operands and f32 results, on "
                     "CPUs with AVX512_BF16 (engine/README.md, \"Mixed precision\")")
        ->check(CLI::IsMember({"f32", "bf16"}))
        ->capture_default_str();
    for (Command& command : commands)
      if (command.app == parent || command.app->get_parent() == parent)
        command.run = [run = command.run, precision] {
          const ag::AutocastGuard autocast(*precision == "bf16");
          return run();
        };
  }
}

int ag::cli::run(int argc, char** argv, Mode mode) {
  CLI::App app{"attograd: a small reverse-mode autograd engine for attention models"};
  app.set_version_flag("--version", "attograd 0.1.0");
  app.require_subcommand(1);
  app.fallthrough();  // global options (--threads) may follow the subcommand; subcommands inherit this
  int threads = 0;
  app.add_option("--threads", threads, "OpenMP threads for every kernel (default: OMP_NUM_THREADS or all cores)")
      ->check(ag::cli::whole_number(1, 1024));
  double collective_timeout = ag::nn::dist::collective_timeout();
  app.add_option("--collective-timeout", collective_timeout,
                 "Under mpirun: seconds a rank waits for the others in a reduction before it ends the job (exit 4)")
      ->check(ag::cli::number(1, 1e6))
      ->capture_default_str();

  std::vector<ag::cli::Command> commands = {ag::cli::add_gradcheck_command(app)};
  for (std::vector<ag::cli::Command> group :
       {ag::cli::add_train_commands(app), ag::cli::add_eval_commands(app), ag::cli::add_predict_commands(app)})
    commands.insert(commands.end(), group.begin(), group.end());
  commands.push_back(ag::cli::add_bench_command(app));
  commands.push_back(ag::cli::add_sample_command(app));
  commands.push_back(ag::cli::add_export_command(app));
  commands.push_back(ag::cli::add_walkthrough_command(app));
  for (const ag::cli::Command& command : ag::cli::add_graph_commands(app)) commands.push_back(command);
  ag::cli::add_precision_flags(app, commands);

  try {
    ag::cli::refuse_empty_values(app, argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (ag::nn::dist::ranks() == 1)
      return app.exit(e) == 0 ? 0 : 2;  // prints the message (and usage); --help
                                        // and --version are not errors
    std::ostringstream out, err;
    const int status = app.exit(e, out, err) == 0 ? 0 : 2;
    if (ag::nn::dist::is_root()) std::cout << out.str() << std::flush;
    std::string message = err.str();
    while (!message.empty() && message.back() == '\n') message.pop_back();
    return stop_before_start(status, message);
  }
  if (mode == Mode::parse_only) return 0;
  if (threads > 0) ag::set_num_threads(threads);
  ag::nn::dist::set_collective_timeout(collective_timeout);
  try {
    for (const ag::cli::Command& command : commands) {
      if (!command.app->parsed()) continue;
      const int status = command.run();
      // A command that trains nothing (eval, say) under mpirun: its ranks still meet once.
      if (ag::nn::dist::ranks() > 1 && !ag::nn::dist::agreed_to_start())
        return stop_before_start(status, status == 0 ? "" : fmt::format("ended with exit code {}", status));
      return status;
    }
  } catch (const ag::nn::dist::StartRefused& e) {  // every rank stops here: rank 0 says why
    if (ag::nn::dist::is_root()) std::cerr << "attograd: " << e.what() << "\n";
    return e.exit_code;
  } catch (const ag::nn::TrainingDiverged& e) {  // every rank of a data-parallel job stops here: rank 0 says it
    if (ag::nn::dist::is_root()) std::cerr << "attograd: error: " << e.what() << "\n";
    return 3;
  } catch (const ag::cli::UsageError& e) {  // flags that contradict each other: as a parse error
    if (ag::nn::dist::is_root()) std::cerr << "attograd: error: " << e.what() << "\n";
    return 2;
  } catch (const ag::nn::TrainingInterrupted& e) {  // likewise
    if (ag::nn::dist::is_root()) std::cerr << "attograd: " << e.what() << "\n";
    return 128 + e.signal;             // as a shell reports a process the signal ended: 130 for SIGINT
  } catch (const std::exception& e) {  // ag::Error included: the message, without a library's tags
    // In a data-parallel job the other ranks would wait for this one: before the start, they meet it
    // in the agreement; after it, end them all.
    if (ag::nn::dist::ranks() > 1 && !ag::nn::dist::agreed_to_start())
      return stop_before_start(1, "error: " + describe_error(e));
    if (ag::nn::dist::ranks() > 1) ag::nn::dist::abort_job("error: " + describe_error(e), 1);
    std::cerr << "attograd: error: " << describe_error(e) << "\n";
    return 1;
  }
  return 0;
}
