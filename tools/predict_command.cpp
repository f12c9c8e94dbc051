// `attograd predict <task>` (sentiment, g2p): a trained model on the user's texts.
#include "tasks/g2p/task.h"
#include "tasks/sentiment/task.h"
#include "tools/commands.h"
#include "tools/flag_checks.h"

namespace ag::cli {

std::vector<Command> add_predict_commands(CLI::App& app) {
  CLI::App* predict = app.add_subcommand("predict", "Predict with a trained model");
  predict->require_subcommand(1);
  auto options = std::make_shared<sentiment::PredictOptions>();
  CLI::App* sentiment = predict->add_subcommand("sentiment", "Probability that each text is positive");
  sentiment
      ->add_option("--checkpoint", options->checkpoint,
                   "A checkpoint written by `train sentiment`, or a model file `export` made of one")
      ->check(kPath)
      ->required();
  sentiment->add_option("texts", options->texts, "Texts to classify (or --file)");
  sentiment->add_option("--file", options->file, "One text per line")->check(kPath)->check(CLI::ExistingFile);
  sentiment->add_option("--explain", options->explain, "Write the first text's attention weights as an SVG heatmap")
      ->check(kPath);

  auto g2p_options = std::make_shared<g2p::PredictOptions>();
  CLI::App* g2p =
      predict->add_subcommand("g2p", "The pronunciation of each word, one per line (--format text, tsv or json)");
  g2p->add_option("--checkpoint", g2p_options->checkpoint,
                  "A checkpoint written by `train g2p`, or a model file `export` made of one (default: the model "
                  "shipped with attograd, named on stderr)")
      ->check(kPath);
  g2p->add_option("words", g2p_options->words,
                  "Words to pronounce (or --file; neither: stdin's lines, each batch printed as it comes)");
  g2p->add_option("--file", g2p_options->file, "One word per line")->check(kPath)->check(CLI::ExistingFile);
  g2p->add_option("--format", g2p_options->format,
                  "text: WORD<TAB>PHONEMES (the phonemes separated by spaces); tsv: the same, for scripts; json: "
                  "one object per line, {\"word\": WORD, \"phonemes\": [PHONEME, ...], \"scores\": [each phoneme's "
                  "log-probability, ...], \"end_score\": the end's, \"score\": their sum}. One line per word: "
                  "with --beam, the beam's best pronunciation")
      ->check(CLI::IsMember({"text", "tsv", "json"}))
      ->capture_default_str();
  g2p->add_option("--beam", g2p_options->beam, "Beam width (1: greedy)")
      ->check(whole_number(1, 64))
      ->capture_default_str();
  g2p->footer(
      "Empty lines are skipped. A word the model cannot read (a character it never saw, more letters than it "
      "decodes) given as an argument or in --file stops the command before it prints anything (exit 1); read from "
      "stdin, it is reported on stderr and the other words are pronounced, and the exit status is 1 at the end.");
  add_max_memory_flag(g2p, g2p_options->max_memory_mb, "Refuse to decode when the estimated peak memory");
  return {{sentiment, [options] { return sentiment::predict(*options); }},
          {g2p, [g2p_options] { return g2p::predict(*g2p_options); }}};
}

}  // namespace ag::cli
