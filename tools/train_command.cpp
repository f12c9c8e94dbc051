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

namespace ag::cli {

namespace {

// Flags of `train sentiment` not given take --dataset uci's defaults when it is chosen.
void take_uci_defaults(CLI::App* app, sentiment::SentimentOptions& options) {
  const sentiment::SentimentOptions uci = sentiment::uci_defaults();
  const auto given = [&](const char* flag) { return app->get_option(flag)->count() > 0; };
  if (!given("--epochs")) options.training.epochs = uci.training.epochs;
  if (!given("--lr")) options.training.lr = uci.training.lr;
  if (!given("--batch-size")) options.training.batch_size = uci.training.batch_size;
  if (!given("--out")) options.training.out = uci.training.out;
  if (!given("--dim")) options.dim = uci.dim;
  if (!given("--weight-decay")) options.weight_decay = uci.weight_decay;
  if (!given("--batching")) options.batching = uci.batching;
  if (!given("--dropout")) options.dropout = uci.dropout;
  if (!given("--lr-schedule")) options.lr_schedule = uci.lr_schedule;
}

Command add_train_sentiment(CLI::App* train) {
  auto options = std::make_shared<sentiment::SentimentOptions>();
  CLI::App* app = train->add_subcommand(
      "sentiment", "Seed 002's sentiment classifier: its 50 sentences, or UCI's 3,000 reviews (--dataset uci)");
  add_training_flags(app, options->training, "AdamW learning rate");
  CLI::Option* dataset =
      app->add_option("--dataset", options->dataset,
                      "seed: seed 002's 50 sentences; uci: UCI's 3,000 Amazon, IMDB and Yelp review sentences (hash "
                      "split; its defaults: --epochs 20 --lr 0.002 --lr-schedule cosine --batch-size 32 --dim 64 "
                      "--weight-decay 0.01 --dropout 0.7 --batching length --out runs/sentiment-uci)")
          ->check(CLI::IsMember({"seed", "uci"}))
          ->capture_default_str();
  app->add_option("--weight-decay", options->weight_decay, "AdamW's decoupled weight decay")
      ->check(number(0.0, 1.0))
      ->capture_default_str();
  app->add_option("--data", options->data, "Training data: label<TAB>text lines (default: seed 002's)")
      ->check(kPath)
      ->check(CLI::ExistingFile)
      ->excludes(dataset);
  app->add_option("--val-fraction", options->val_fraction, "Share of --data held out for validation")
      ->check(number(0.0, 0.9))
      ->capture_default_str();
  app->add_option("--dim", options->dim, "Embedding and attention width")
      ->check(whole_number(1, 4096))
      ->capture_default_str();
  app->add_option("--heads", options->heads,
                  "0: SelfAttention; N: seed 003's MultiHeadAttention (causal) with N heads dividing --dim")
      ->check(whole_number(0, 4096))
      ->capture_default_str();
  app->add_option("--dropout", options->dropout, "Dropout on the embeddings while training")
      ->check(number(0.0, 0.9))
      ->capture_default_str();
  app->add_option("--batching", options->batching,
                  "shuffled: batches of shuffled sentences; length: of sentences of similar length, in a shuffled "
                  "order (--dataset uci's default)")
      ->check(CLI::IsMember({"shuffled", "length"}))
      ->capture_default_str();
  app->add_option("--lr-schedule", options->lr_schedule,
                  "constant, or cosine: each step's lr falls from --lr to 0 along a half cosine over the run "
                  "(--dataset uci's default)")
      ->check(CLI::IsMember({"constant", "cosine"}))
      ->capture_default_str();
  app->add_option("--min-count", options->min_count,
                  "Times a word must occur in the training sentences to enter the vocabulary")
      ->check(kCount)
      ->capture_default_str();
  return {app, [app, options] {
            carry_over_settings(app, options->training);
            if (options->dataset == "uci") take_uci_defaults(app, *options);
            if (options->heads > 0) check_heads_divide(options->heads, "--heads", options->dim, "--dim");
            nn::stop_training_on_signals();
            return sentiment::train(*options);
          }};
}

Command add_train_squares(CLI::App* train) {
  auto options = std::make_shared<squares::SquaresOptions>();
  CLI::App* app = train->add_subcommand(
      "squares", "Seed 004's noisy squares: predict the last two corners (train seed 13, held-out test seed 19)");
  CLI::Option* lr = add_training_flags(app, options->training, "Adam learning rate (transformer: 0.003)");
  app->add_option("--model", options->model.model,
                  "selfattn: seed 004's EncoderDecoderSelfAttn; transformer: encoder-decoder with positional encoding")
      ->check(CLI::IsMember({"selfattn", "transformer"}))
      ->capture_default_str();
  const squares::ModelConfig transformer = squares::default_model_config("transformer");
  const auto size_help = [&](const std::string& what, int64_t transformer_default) {
    return fmt::format("{} (transformer: {})", what, transformer_default);
  };
  const std::vector<CLI::Option*> sizes = {
      app->add_option("--heads", options->model.heads, size_help("Attention heads", transformer.heads)),
      app->add_option("--d-model", options->model.d_model, size_help("Model width", transformer.d_model)),
      app->add_option("--ff-units", options->model.ff_units, size_help("Feed-forward width", transformer.ff_units)),
      app->add_option("--layers", options->model.layers,
                      size_help("Transformer: encoder and decoder layers each", transformer.layers))};
  for (CLI::Option* size : sizes) size->check(whole_number(1, 4096))->capture_default_str();
  CLI::Option* dropout = app->add_option("--dropout", options->model.dropout, "Transformer: dropout")
                             ->check(number(0.0, 0.9))
                             ->capture_default_str();
  app->add_option("--rng", options->rng,
                  "attograd: attograd's generator; torch: follow the PyTorch peer step for step (numpy's squares, "
                  "PyTorch's initial weights after manual_seed(23) and its DataLoader shuffle; --seed defaults to 42)")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, RngStyle>{{"attograd", RngStyle::attograd}, {"torch", RngStyle::torch}}))
      ->default_str("attograd");
  return {app, [app, options, lr, sizes, dropout] {
            carry_over_settings(app, options->training);
            // Flags not given take the chosen model's defaults.
            const squares::ModelConfig defaults = squares::default_model_config(options->model.model);
            const std::vector<int64_t> default_sizes = {defaults.heads, defaults.d_model, defaults.ff_units,
                                                        defaults.layers};
            std::vector<int64_t*> fields = {&options->model.heads, &options->model.d_model, &options->model.ff_units,
                                            &options->model.layers};
            for (size_t i = 0; i < sizes.size(); ++i)
              if (sizes[i]->count() == 0) *fields[i] = default_sizes[i];
            if (dropout->count() == 0) options->model.dropout = defaults.dropout;
            if (lr->count() == 0) options->training.lr = squares::default_lr(options->model.model);
            if (options->rng == RngStyle::torch && app->get_option("--seed")->count() == 0)
              options->training.seed = squares::kTorchSetSeed;
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
  add_training_flags(app, options->training, "Peak AdamW learning rate", /*epochs=*/false);
  app->add_option("--data", options->data, "A UTF-8 text file (default: Moby-Dick, fetched by tools/fetch_data.sh)")
      ->check(kPath);
  app->add_option("--iters", options->iters, "Optimizer steps")->check(kCount)->capture_default_str();
  app->add_option("--eval-interval", options->eval_interval, "Iterations between validation losses and checkpoints")
      ->check(kCount)
      ->capture_default_str();
  app->add_option("--warmup-iters", options->warmup_iters, "Linear warm-up, then cosine decay to --min-lr")
      ->check(whole_number(0, 1000000))
      ->capture_default_str();
  app->add_option("--min-lr", options->min_lr, "Learning rate at the last iteration")
      ->check(kPositive)
      ->capture_default_str();
  app->add_option("--weight-decay", options->weight_decay, "AdamW's decoupled weight decay (matrices only)")
      ->check(number(0.0, 1.0))
      ->capture_default_str();
  app->add_option("--grad-clip", options->grad_clip, "Clip the gradients' global norm to this (0: no clipping)")
      ->check(number(0.0, 1e6))
      ->capture_default_str();
  app->add_option("--block-size", options->model.block_size, "Context length (characters)")
      ->check(whole_number(1, 4096))
      ->capture_default_str();
  app->add_option("--layers", options->model.n_layer, "Transformer blocks")
      ->check(whole_number(1, 64))
      ->capture_default_str();
  app->add_option("--heads", options->model.n_head, "Attention heads (dividing --width)")
      ->check(whole_number(1, 256))
      ->capture_default_str();
  app->add_option("--width", options->model.n_embd, "Embedding width (n_embd)")
      ->check(whole_number(1, 8192))
      ->capture_default_str();
  app->add_option("--dropout", options->model.dropout, "Dropout (embeddings, attention weights, residuals)")
      ->check(number(0.0, 0.9))
      ->capture_default_str();
  app->add_flag("--bias", options->model.bias, "Biases in the Linears and LayerNorms (nanoGPT's train.py: none)");
  return {app, [app, options] {
            carry_over_settings(app, options->training);
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
  add_training_flags(app, options->training, "Peak Adam learning rate");
  CLI::Option* data =
      app->add_option("--data", options->data,
                      "source<TAB>target lines (target tokens separated by spaces, the source taken as characters); "
                      "default: CMUdict, fetched by tools/fetch_data.sh")
          ->check(kPath)
          ->check(CLI::ExistingFile);
  app->add_flag("--stress", options->stress, "CMUdict: keep the stress digits (69 symbols instead of 39)")
      ->excludes(data);
  app->add_option("--preset", options->preset,
                  "small: d 128, 4 heads, 2 + 2 layers, FF 512; base: d 256, 4 heads, 3 + 3 "
                  "layers, FF 1024 (dropout 0.1 both)")
      ->check(CLI::IsMember({"small", "base"}))
      ->capture_default_str();
  const std::vector<std::pair<CLI::Option*, int64_t g2p::ModelConfig::*>> sizes = {
      {app->add_option("--d-model", options->model.d_model, "Model width (default: the preset's)"),
       &g2p::ModelConfig::d_model},
      {app->add_option("--heads", options->model.heads, "Attention heads, dividing --d-model (default: the preset's)"),
       &g2p::ModelConfig::heads},
      {app->add_option("--enc-layers", options->model.encoder_layers, "Encoder layers (default: the preset's)"),
       &g2p::ModelConfig::encoder_layers},
      {app->add_option("--dec-layers", options->model.decoder_layers, "Decoder layers (default: the preset's)"),
       &g2p::ModelConfig::decoder_layers},
      {app->add_option("--ff", options->model.feed_forward, "Feed-forward width (default: the preset's)"),
       &g2p::ModelConfig::feed_forward}};
  for (const auto& [option, field] : sizes) option->check(whole_number(1, 8192));
  CLI::Option* dropout =
      app->add_option("--dropout", options->model.dropout, "Dropout (default: the preset's)")->check(number(0.0, 0.9));
  app->add_option("--min-lr", options->min_lr, "Learning rate at the last step")
      ->check(number(0.0, 1.0))
      ->capture_default_str();
  app->add_option("--warmup-frac", options->warmup_frac, "Share of the steps spent warming up")
      ->check(number(0.0, 1.0))
      ->capture_default_str();
  app->add_option("--label-smoothing", options->label_smoothing, "PyTorch's cross-entropy label smoothing")
      ->check(number(0.0, 1.0))
      ->capture_default_str();
  app->add_option("--clip", options->clip, "Clip the gradients' global norm to this (0: no clipping)")
      ->check(number(0.0, 1e6))
      ->capture_default_str();
  app->add_option("--max-extra", options->max_extra, "Decoding: at most (letters + this) phonemes")
      ->check(whole_number(0, 64))
      ->capture_default_str();
  app->add_option("--beam", options->beam, "Beam width for the test set at the end (1: greedy; validation is greedy)")
      ->check(whole_number(1, 64))
      ->capture_default_str();
  app->add_option("--eval-batch-size", options->eval_batch_size, "Words decoded at once")
      ->check(whole_number(1, 65536))
      ->capture_default_str();
  app->add_option("--train-fraction", options->train_fraction, "Smoke runs: train on this share of the pairs")
      ->check(number(1e-6, 1.0))
      ->capture_default_str();
  app->add_option("--eval-limit", options->eval_limit,
                  "Smoke runs: validate and test on this many evenly spaced words (0: all)")
      ->check(whole_number(0, 100000000))
      ->capture_default_str();
  // --heads must divide --d-model (each the given value or the preset's): a usage error, before any work.
  app->callback([options, sizes] {
    const g2p::ModelConfig defaults = g2p::preset_config(options->preset);
    const auto value = [&](size_t i) {
      return sizes[i].first->count() > 0 ? options->model.*sizes[i].second : defaults.*sizes[i].second;
    };
    if (value(0) % value(1) != 0)
      throw CLI::ValidationError("--heads", fmt::format("--heads {} must divide --d-model {}", value(1), value(0)));
  });
  return {app, [app, options, sizes, dropout] {
            carry_over_settings(app, options->training);
            // Sizes not given take the preset's.
            const g2p::ModelConfig defaults = g2p::preset_config(options->preset);
            for (const auto& [option, field] : sizes)
              if (option->count() == 0) options->model.*field = defaults.*field;
            if (dropout->count() == 0) options->model.dropout = defaults.dropout;
            check_min_lr(options->min_lr, options->training.lr);
            nn::stop_training_on_signals();
            return g2p::train(*options);
          }};
}

}  // namespace

CLI::Option* add_training_flags(CLI::App* app, tasks::TrainingOptions& options, const std::string& lr_help,
                                bool epochs) {
  if (epochs)
    app->add_option("--epochs", options.epochs, "Passes over the training set")->check(kCount)->capture_default_str();
  CLI::Option* lr = app->add_option("--lr", options.lr, lr_help)->check(kPositive)->capture_default_str();
  app->add_option("--batch-size", options.batch_size, "Examples per step (under mpirun: of all ranks together)")
      ->check(kCount)
      ->capture_default_str();
  app->add_option("--micro-batches", options.micro_batches,
                  "Run each batch (each rank's share) in this many forward/backward passes, their gradients summed: "
                  "the same step in less memory")
      ->check(kCount)
      ->capture_default_str();
  app->add_option("--seed", options.seed, "Seed for initialisation and shuffling")->check(kSeed)->capture_default_str();
  app->add_option("--out", options.out, "Output folder")->check(kPath)->capture_default_str();
  app->add_option(
         "--resume", options.resume,
         "Continue the run in this folder (its last.safetensors): flags not given keep the run's values, --epochs "
         "(charlm: --iters) may grow, --out defaults to it; another value of any other setting is refused (the table: "
         "train --help)")
      ->check(kPath)
      ->check(CLI::ExistingDirectory);
  app->add_option("--precision", options.precision,
                  "f32, or bf16: the products (matmul, Linear, attention) take bf16 operands with f32 results, "
                  "forward and backward, on CPUs with AVX512_BF16; weights, optimizer and checkpoints stay f32")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  app->add_flag("--quiet", options.quiet, "No progress bar");
  add_max_memory_flag(app, options.max_memory_mb,
                      "Refuse to start when the estimated peak memory (printed at the start)");
  app->add_flag("--trace-backward", options.trace_backward,
                "Trace the first step's backward on stderr: each node's op, scope, gradient norms and time, then a "
                "summary by op");
  app->add_flag("--detect-anomaly", options.detect_anomaly,
                "Check every op's output and every gradient for NaN/Inf; the first one stops the run naming the op, "
                "its module scope and whether it was forward or backward");
  app->add_option("--profile", options.profile_steps,
                  fmt::format("After the first {} steps (warm-up), profile N steps by op and print where their time "
                              "goes on stderr, as `bench transformer --profile` does (self time share, calls, ms, "
                              "GFLOP/s, GB/s, MB allocated per step), and in OUT/profile.txt; training goes on, its "
                              "numbers unchanged",
                              nn::kProfileWarmupSteps))
      ->check(kCount);
  return lr;
}

void add_max_memory_flag(CLI::App* app, int64_t& max_memory_mb, const std::string& what) {
  app->add_option("--max-memory", max_memory_mb, what + " is above this many MB (default: the memory available)")
      ->check(whole_number(1, int64_t{1} << 40));
}

void carry_over_settings(CLI::App* app, tasks::TrainingOptions& training) {
  training.run_dir = std::make_shared<tasks::RunDir>(training.resume);  // reads last.safetensors, once
  const tasks::RunDir& run = *training.run_dir;
  const CLI::Option* model_flag = app->get_option_no_throw("--model");
  const std::string model = model_flag && model_flag->count() > 0 ? model_flag->as<std::string>() : "";
  // Another task's or model's run: nothing to carry over; the run folder refuses it, naming both.
  if (!run.continues(app->get_name(), model)) return;
  const auto set = [](CLI::Option* option, const std::string& value) {
    option->add_result(value);
    option->run_callback();
  };
  for (CLI::Option* option : app->get_options()) {
    if (option->count() > 0) continue;
    const std::optional<tasks::RunDir::Carried> carried = run.carried_over(option->get_name(), app->get_name(), model);
    if (!carried) continue;
    try {
      set(option, carried->value);
    } catch (const CLI::Error& e) {  // a checkpoint edited by hand: say where the value came from
      fail("--resume {}: the checkpoint's {} cannot be carried over: {}", training.resume, carried->setting, e.what());
    }
  }
  if (app->get_option("--out")->count() == 0) set(app->get_option("--out"), training.resume);
}

std::vector<Command> add_train_commands(CLI::App& app) {
  CLI::App* train =
      app.add_subcommand("train", "Train a task; writes OUT/config.json, metrics.csv, checkpoints, plots");
  train->require_subcommand(1);
  train->footer(tasks::resume_table());
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
