// `attograd sample`: text from a `train charlm` checkpoint.
#include "tasks/charlm/task.h"
#include "tools/commands.h"
#include "tools/flag_checks.h"

namespace ag::cli {

Command add_sample_command(CLI::App& app) {
  auto options = std::make_shared<charlm::SampleOptions>();
  CLI::App* sample = app.add_subcommand("sample", "Generate text from a `train charlm` checkpoint, streamed to stdout");
  sample
      ->add_option("--checkpoint", options->checkpoint,
                   "A checkpoint written by `train charlm`, or a model file `export` made of one")
      ->check(kPath)
      ->required();
  sample->add_option("--prompt", options->prompt, "Text to continue (default: a newline)")->check(kText);
  sample->add_option("--tokens", options->tokens, "Characters to generate")
      ->check(whole_number(0, 100000000))
      ->capture_default_str();
  sample->add_option("--temperature", options->temperature, "Divides the logits: < 1 sharper, > 1 flatter")
      ->check(kPositive)
      ->capture_default_str();
  sample->add_option("--top-k", options->top_k, "Draw only from the K most likely characters (0: all)")
      ->check(whole_number(0, 1 << 21))
      ->capture_default_str();
  sample->add_option("--seed", options->seed, "Seed of the draws: the same seed gives the same text")
      ->check(kSeed)
      ->capture_default_str();
  sample->add_flag("--drop-unknown", options->drop_unknown,
                   "Leave out prompt characters the model's vocabulary lacks (default: an error listing them)");
  sample->footer(
      "Keys and values are cached, so each character costs one position's forward pass. The context holds at most "
      "the model's block size: when it is full, it jumps to its last half (re-encoded at positions 0...) and "
      "generation goes on, so each character sees between half a block and a whole block of context.");
  return {sample, [options] { return charlm::sample(*options); }};
}

}  // namespace ag::cli
