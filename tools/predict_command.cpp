// `attograd predict <task>` (sentiment; g2p in g2p_command.cpp): a trained model on the user's texts.
#include "tasks/sentiment/task.h"
#include "tools/commands.h"
#include "tools/flag_checks.h"

namespace ag::cli {

std::vector<Command> add_predict_commands(CLI::App& app) {
  CLI::App* predict = app.add_subcommand("predict", "Predict with a trained model");
  predict->require_subcommand(1);
  auto options = std::make_shared<sentiment::PredictOptions>();
  CLI::App* sentiment = predict->add_subcommand("sentiment", "Probability that each text is positive");
  sentiment->add_option("--checkpoint", options->checkpoint, "A checkpoint written by `train sentiment`")
      ->check(kPath)
      ->required();
  sentiment->add_option("texts", options->texts, "Texts to classify (or --file)");
  sentiment->add_option("--file", options->file, "One text per line")->check(kPath)->check(CLI::ExistingFile);
  sentiment->add_option("--explain", options->explain, "Write the first text's attention weights as an SVG heatmap")
      ->check(kPath);
  return {{sentiment, [options] { return sentiment::predict(*options); }}, add_predict_g2p(predict)};
}

}  // namespace ag::cli
