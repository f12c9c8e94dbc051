// `attograd eval <task>` (sentiment, squares, charlm, g2p): a trained model on data.
#include "tasks/charlm/task.h"
#include "tasks/g2p/task.h"
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
  sentiment
      ->add_option("--checkpoint", sentiment_options->checkpoint,
                   "A checkpoint written by `train sentiment`, or a model file `export` made of one")
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
  squares
      ->add_option("--checkpoint", squares_options->checkpoint,
                   "A checkpoint written by `train squares`, or a model file `export` made of one")
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
  charlm
      ->add_option("--checkpoint", charlm_options->checkpoint,
                   "A checkpoint written by `train charlm`, or a model file `export` made of one")
      ->check(kPath)
      ->required();
  charlm->add_option("--data", charlm_options->data, "A UTF-8 text file (default: the text it was trained on)")
      ->check(kPath);
  charlm->add_option("--split", charlm_options->split, "val: the last 10%; train: the first 90%; all")
      ->check(CLI::IsMember({"val", "train", "all"}))
      ->capture_default_str();
  charlm->add_flag("--drop-unknown", charlm_options->drop_unknown,
                   "Leave out characters the model's vocabulary lacks (default: an error listing them)");

  auto g2p_options = std::make_shared<g2p::EvalOptions>();
  CLI::App* g2p = eval->add_subcommand("g2p", "PER, WER, words/s and the most frequent confusions of a G2P model");
  g2p->add_option("--checkpoint", g2p_options->checkpoint,
                  "A checkpoint written by `train g2p`, or a model file `export` made of one (default: the model "
                  "shipped with attograd)")
      ->check(kPath);
  g2p->add_option("--data", g2p_options->data, "The data to split and evaluate (default: what it was trained on)")
      ->check(kPath)
      ->check(CLI::ExistingFile);
  g2p->add_option("--split", g2p_options->split, "The hash split to evaluate")
      ->check(CLI::IsMember({"test", "val", "train"}))
      ->capture_default_str();
  g2p->add_option("--beam", g2p_options->beam, "Beam width (1: greedy)")
      ->check(whole_number(1, 64))
      ->capture_default_str();
  g2p->add_option("--eval-batch-size", g2p_options->eval_batch_size, "Words decoded at once")
      ->check(whole_number(1, 65536))
      ->capture_default_str();
  g2p->add_option("--report", g2p_options->report,
                  "Also write the report (error rates by length, confusions, attention alignments) as SVG here")
      ->check(kPath);
  add_max_memory_flag(g2p, g2p_options->max_memory_mb, "Refuse to decode when the estimated peak memory");
  return {{sentiment, [sentiment_options] { return sentiment::eval(*sentiment_options); }},
          {squares, [squares_options] { return squares::eval(*squares_options); }},
          {charlm, [charlm_options] { return charlm::eval(*charlm_options); }},
          {g2p, [g2p_options] { return g2p::eval(*g2p_options); }}};
}

}  // namespace ag::cli
