// `attograd eval <task>` (sentiment, squares, charlm; g2p in g2p_command.cpp): a trained model on data.
#include "tasks/charlm/task.h"
#include "tasks/sentiment/task.h"
#include "tasks/squares/task.h"
#include "tools/commands.h"
#include "tools/flag_checks.h"

namespace ag::cli {

std::vector<Command> add_eval_commands(CLI::App& app) {
  CLI::App* eval = app.add_subcommand("eval", "Evaluate a trained model");
  eval->require_subcommand(1);
  auto sentiment_options = std::make_shared<sentiment::EvalOptions>();
  CLI::App* sentiment = eval->add_subcommand("sentiment", "Accuracy and BCE loss on labelled sentences");
  sentiment->add_option("--checkpoint", sentiment_options->checkpoint, "A checkpoint written by `train sentiment`")
      ->check(kPath)
      ->required();
  CLI::Option* dataset =
      sentiment
          ->add_option("--dataset", sentiment_options->dataset,
                       "seed: seed 002's test sentences; uci: a split of UCI's review sentences, with the report")
          ->check(CLI::IsMember({"seed", "uci"}))
          ->capture_default_str();
  sentiment->add_option("--split", sentiment_options->split, "--dataset uci: the split to evaluate")
      ->check(CLI::IsMember({"train", "val", "test"}))
      ->capture_default_str();
  sentiment->add_option("--data", sentiment_options->data, "label<TAB>text lines (default: seed 002's test sentences)")
      ->check(kPath)
      ->check(CLI::ExistingFile)
      ->excludes(dataset);

  auto squares_options = std::make_shared<squares::EvalOptions>();
  CLI::App* squares = eval->add_subcommand("squares", "MSE of the predicted last two corners on fresh squares");
  squares->add_option("--checkpoint", squares_options->checkpoint, "A checkpoint written by `train squares`")
      ->check(kPath)
      ->required();
  squares->add_option("--data-seed", squares_options->data.seed, "Seed of the generated squares (19: the test set)")
      ->check(kSeed)
      ->capture_default_str();
  squares->add_option("--n", squares_options->data.n, "How many squares")->check(kCount)->capture_default_str();
  squares
      ->add_option("--predictions", squares_options->predictions,
                   "Also write the squares and predictions to this safetensors file (source, target, predicted)")
      ->check(kPath);

  auto charlm_options = std::make_shared<charlm::EvalOptions>();
  CLI::App* charlm = eval->add_subcommand("charlm", "Validation loss and bits per character of a character-level GPT");
  charlm->add_option("--checkpoint", charlm_options->checkpoint, "A checkpoint written by `train charlm`")
      ->check(kPath)
      ->required();
  charlm->add_option("--data", charlm_options->data, "A UTF-8 text file (default: the text it was trained on)")
      ->check(kPath);
  charlm->add_option("--split", charlm_options->split, "val: the last 10%; train: the first 90%; all")
      ->check(CLI::IsMember({"val", "train", "all"}))
      ->capture_default_str();
  charlm->add_flag("--drop-unknown", charlm_options->drop_unknown,
                   "Leave out characters the model's vocabulary lacks (default: an error listing them)");
  return {{sentiment, [sentiment_options] { return sentiment::eval(*sentiment_options); }},
          {squares, [squares_options] { return squares::eval(*squares_options); }},
          {charlm, [charlm_options] { return charlm::eval(*charlm_options); }},
          add_eval_g2p(eval)};
}

}  // namespace ag::cli
