// `attograd train <task>` (sentiment, squares, charlm, g2p): the flags every task
// shares, the run folder a --resume carries settings over from, and each task's own flags.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "nn/trainer.h"
#include "tasks/charlm/task.h"
#include "tasks/common/memory.h"
#include "tasks/common/run_dir.h"
#include "tasks/g2p/task.h"
#include "tasks/sentiment/task.h"
#include "tasks/squares/task.h"
#include "tools/commands.h"
#include "tools/flag_checks.h"
#include "tools/settings_flags.h"

namespace ag::cli {

namespace {

Command add_train_sentiment(CLI::App* train) {
  auto options = std::make_shared<sentiment::SentimentOptions>();
  CLI::App* app = train->add_subcommand(
      "sentiment", "Seed 002's sentiment classifier: its 50 sentences, or UCI's 3,000 reviews (--dataset uci)");
  add_setting_flags(app, sentiment::settings(), *options);
  add_run_flags(app, options->training);
  return {app, [app, options] {
            settle_settings<sentiment::SentimentOptions>(app, sentiment::settings(), *options,
                                                         sentiment::dataset_defaults);
            if (options->heads > 0) check_heads_divide(options->heads, "--heads", options->dim, "--dim");
            nn::stop_training_on_signals();
            return sentiment::train(*options);
          }};
}

Command add_train_squares(CLI::App* train) {
  auto options = std::make_shared<squares::SquaresOptions>();
  CLI::App* app = train->add_subcommand(
      "squares", "Seed 004's noisy squares: predict the last two corners (train seed 13, held-out test seed 19)");
  add_setting_flags(app, squares::settings(), *options);
  add_run_flags(app, options->training);
  return {app, [app, options] {
            settle_settings<squares::SquaresOptions>(app, squares::settings(), *options, squares::model_defaults);
            if (options->model.model == "transformer")
              check_heads_divide(options->model.heads, "--heads", options->model.d_model, "--d-model");
            nn::stop_training_on_signals();
            return squares::train(*options);
          }};
}

Command add_train_charlm(CLI::App* train) {
  auto options = std::make_shared<charlm::CharLMOptions>();
  CLI::App* app = train->add_subcommand(
      "charlm",
      "A character-level GPT (nanoGPT's model and recipe) on Moby-Dick or --data FILE; prints the validation loss");
  app->footer(
      "Random windows of --block-size characters from the first 90% of the text; every --eval-interval iterations "
      "(and at the end) the loss over every window of the last 10%. The defaults are nanoGPT's CPU baby GPT.");
  add_setting_flags(app, charlm::settings(), *options);
  add_run_flags(app, options->training);
  return {app, [app, options] {
            settle_settings(app, charlm::settings(), *options);
            check_heads_divide(options->model.n_head, "--heads", options->model.n_embd, "--width");
            check_min_lr(options->min_lr, options->training.lr);
            nn::stop_training_on_signals();
            return charlm::train(*options);
          }};
}

Command add_train_g2p(CLI::App* train) {
  auto options = std::make_shared<g2p::G2POptions>();
  CLI::App* app = train->add_subcommand(
      "g2p", "Grapheme-to-phoneme: spelling to pronunciation on the CMU Pronouncing Dictionary, or --data FILE.tsv");
  app->footer(
      "The PyTorch peer's recipe (../shared/peer/g2p_torch.py): batches of pairs of similar length in a shuffled "
      "order, Adam (0.9, 0.98), linear warm-up then cosine to --min-lr, label smoothing, gradient clipping. Words "
      "split by FNV-1a 64 % 10 (0 test, 1 validation). Each epoch: greedy decoding of the validation words (PER, "
      "WER); best.safetensors is the epoch with the lowest validation WER, and decodes the test set at the end.");
  add_setting_flags(app, g2p::settings(), *options);
  app->add_option("--eval-batch-size", options->eval_batch_size, "Words decoded at once")
      ->check(whole_number(1, 65536))
      ->capture_default_str();
  add_run_flags(app, options->training);
  // --heads must divide --d-model (each the given value or the preset's): a usage error, before any work.
  app->callback([app, options] {
    const g2p::ModelConfig preset = g2p::preset_config(options->preset);
    const auto given = [&](const char* flag) { return app->get_option(flag)->count() > 0; };
    const int64_t d_model = given("--d-model") ? options->model.transformer.d_model : preset.transformer.d_model;
    const int64_t heads = given("--heads") ? options->model.transformer.nhead : preset.transformer.nhead;
    if (d_model % heads != 0)
      throw CLI::ValidationError("--heads", fmt::format("--heads {} must divide --d-model {}", heads, d_model));
  });
  return {app, [app, options] {
            settle_settings<g2p::G2POptions>(app, g2p::settings(), *options, g2p::preset_defaults);
            check_min_lr(options->min_lr, options->training.lr);
            nn::stop_training_on_signals();
            return g2p::train(*options);
          }};
}

}  // namespace

void add_run_flags(CLI::App* app, tasks::TrainingOptions& options) {
  app->add_option("--out", options.out, "Output folder")->check(kPath)->capture_default_str();
  app->add_option(
         "--resume", options.resume,
         "Continue the run in this folder (its last.safetensors): flags not given keep the run's values, --epochs "
         "(charlm: --iters) may grow, --out defaults to it; another value of any other setting is refused (the table: "
         "train --help)")
      ->check(kPath)
      ->check(CLI::ExistingDirectory);
  app->add_flag("--quiet", options.quiet, "No progress bar");
  add_max_memory_flag(app, options.max_memory_mb,
                      "Refuse to start when the estimated peak memory (printed at the start)");
  app->add_flag("--trace-backward", options.trace_backward,
                "Trace the first step's backward on stderr: each node's op, scope, gradient norms and time, then a "
                "summary by op");
  app->add_flag("--detect-anomaly", options.detect_anomaly,
                "Check every op's output and every gradient for NaN/Inf; the first one stops the run naming the op, "
                "its module scope and whether it was forward or backward");
  CLI::Option* profile =
      app->add_option("--profile", options.profile_steps,
                      "After the warm-up (--profile-after), profile N steps by op and print where their time goes on "
                      "stderr, as `bench transformer --profile` does (self time share, calls, ms, GFLOP/s, GB/s, MB "
                      "allocated per step, page faults and oneDNN primitives built per step), and in "
                      "OUT/profile.txt; training goes on, its numbers unchanged")
          ->check(kCount);
  app->add_option("--profile-after", options.profile_after,
                  "--profile's warm-up: this process's steps before the profiled ones. Where batch shapes vary (g2p), "
                  "a window after the first epoch shows the steady state, every shape's primitives built")
      ->check(whole_number(0, 100000000))
      ->needs(profile)
      ->capture_default_str();
}

void add_max_memory_flag(CLI::App* app, int64_t& max_memory_mb, const std::string& what) {
  app->add_option("--max-memory", max_memory_mb, what + " is above this many MB (default: the memory available)")
      ->check(whole_number(1, int64_t{1} << 40));
}

std::string resume_table(tasks::TableFormat format) {
  return tasks::resume_table(tasks::setting_names(tasks::common_settings("")),
                             {{"sentiment", tasks::setting_names(sentiment::settings())},
                              {"squares", tasks::setting_names(squares::settings())},
                              {"charlm", tasks::setting_names(charlm::settings())},
                              {"g2p", tasks::setting_names(g2p::settings())}},
                             format);
}

std::vector<Command> add_train_commands(CLI::App& app) {
  CLI::App* train =
      app.add_subcommand("train", "Train a task; writes OUT/config.json, metrics.csv, checkpoints, plots");
  train->require_subcommand(1);
  train->footer(resume_table(tasks::TableFormat::text));
  // On `train` itself, so it may follow either task (options fall through to the parent).
  auto report_memory = std::make_shared<bool>(false);
  train->add_flag("--report-memory", *report_memory,
                  "At the end, print the peak resident memory beside the estimate printed at the start");
  std::vector<Command> commands = {add_train_sentiment(train), add_train_squares(train), add_train_charlm(train),
                                   add_train_g2p(train)};
  for (Command& command : commands)
    command.run = [run = command.run, report_memory] {
      const int status = run();
      if (*report_memory) tasks::report_memory();
      return status;
    };
  return commands;
}

}  // namespace ag::cli
