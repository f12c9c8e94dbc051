// `attograd train <task>`: trains a task from the command line.
#include <cmath>

#include "nn/trainer.h"
#include "tasks/sentiment/task.h"
#include "tools/commands.h"

namespace ag::cli {

namespace {

// A finite, positive number: rejects nan, inf, 0 and negatives with the value in the message.
const CLI::Validator kPositiveFinite(
    [](const std::string& text) {
      try {
        const double v = std::stod(text);
        if (std::isfinite(v) && v > 0) return std::string();
      } catch (const std::exception&) {
      }
      return "expected a finite number > 0, got '" + text + "'";
    },
    "POSITIVE", "positive finite");

}  // namespace

Command add_train_command(CLI::App& app) {
  CLI::App* train =
      app.add_subcommand("train", "Train a task; writes OUT/config.json, metrics.csv, checkpoints, plots");
  train->require_subcommand(1);
  auto options = std::make_shared<sentiment::SentimentOptions>();
  CLI::App* sentiment = train->add_subcommand("sentiment", "Seed 002's sentiment classifier (50 sentences by default)");
  sentiment->add_option("--epochs", options->epochs, "Passes over the training set")
      ->check(CLI::Range(int64_t{1}, int64_t{1000000}))
      ->capture_default_str();
  sentiment->add_option("--lr", options->lr, "AdamW learning rate")->check(kPositiveFinite)->capture_default_str();
  sentiment->add_option("--weight-decay", options->weight_decay, "AdamW's decoupled weight decay")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  sentiment->add_option("--batch-size", options->batch_size, "Sentences per step")
      ->check(CLI::Range(int64_t{1}, int64_t{1000000}))
      ->capture_default_str();
  sentiment->add_option("--seed", options->seed, "Seed for initialisation and shuffling")->capture_default_str();
  sentiment->add_option("--out", options->out, "Output folder")->capture_default_str();
  sentiment->add_option("--resume", options->resume, "Continue the run in this output folder (its last.safetensors)")
      ->check(CLI::ExistingDirectory);
  sentiment->add_flag("--quiet", options->quiet, "No progress bar");
  sentiment->add_option("--data", options->data, "Training data: label<TAB>text lines (default: seed 002's)")
      ->check(CLI::ExistingFile);
  sentiment->add_option("--val-fraction", options->val_fraction, "Share of --data held out for validation")
      ->check(CLI::Range(0.0, 0.9))
      ->capture_default_str();
  sentiment->add_option("--dim", options->dim, "Embedding and attention width")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}))
      ->capture_default_str();
  return {sentiment, [options] {
            nn::stop_training_on_sigint();
            return sentiment::train(*options);
          }};
}

Command add_predict_command(CLI::App& app) {
  CLI::App* predict = app.add_subcommand("predict", "Predict with a trained model");
  predict->require_subcommand(1);
  auto options = std::make_shared<sentiment::PredictOptions>();
  CLI::App* sentiment = predict->add_subcommand("sentiment", "Probability that each text is positive");
  sentiment->add_option("--checkpoint", options->checkpoint, "A checkpoint written by `train sentiment`")
      ->required()
      ->check(CLI::ExistingFile);
  sentiment->add_option("texts", options->texts, "Texts to classify (or --file)");
  sentiment->add_option("--file", options->file, "One text per line")->check(CLI::ExistingFile);
  sentiment->add_option("--explain", options->explain, "Write the first text's attention weights as an SVG heatmap");
  return {sentiment, [options] { return sentiment::predict(*options); }};
}

}  // namespace ag::cli
