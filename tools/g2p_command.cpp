// `attograd train g2p`, `eval g2p`, `predict g2p`: flags onto tasks/g2p's options.
#include "nn/trainer.h"
#include "tasks/g2p/task.h"
#include "tools/commands.h"
#include "tools/flag_checks.h"

namespace ag::cli {

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
            nn::stop_training_on_signals();
            return g2p::train(*options);
          }};
}

Command add_eval_g2p(CLI::App* eval) {
  auto options = std::make_shared<g2p::EvalOptions>();
  CLI::App* app = eval->add_subcommand("g2p", "PER, WER, words/s and the most frequent confusions of a G2P model");
  app->add_option("--checkpoint", options->checkpoint, "A checkpoint written by `train g2p`")->check(kPath)->required();
  app->add_option("--data", options->data, "The data to split and evaluate (default: what it was trained on)")
      ->check(kPath)
      ->check(CLI::ExistingFile);
  app->add_option("--split", options->split, "The hash split to evaluate")
      ->check(CLI::IsMember({"test", "val", "train"}))
      ->capture_default_str();
  app->add_option("--beam", options->beam, "Beam width (1: greedy)")->check(whole_number(1, 64))->capture_default_str();
  app->add_option("--eval-batch-size", options->eval_batch_size, "Words decoded at once")
      ->check(whole_number(1, 65536))
      ->capture_default_str();
  app->add_option("--report", options->report,
                  "Also write the report (error rates by length, confusions, attention alignments) as SVG here")
      ->check(kPath);
  return {app, [options] { return g2p::eval(*options); }};
}

Command add_predict_g2p(CLI::App* predict) {
  auto options = std::make_shared<g2p::PredictOptions>();
  CLI::App* app = predict->add_subcommand("g2p", "The pronunciation of each word, one per line: WORD<TAB>PHONEMES");
  app->add_option("--checkpoint", options->checkpoint, "A checkpoint written by `train g2p`")->check(kPath)->required();
  app->add_option("words", options->words, "Words to pronounce (or --file)");
  app->add_option("--file", options->file, "One word per line")->check(kPath)->check(CLI::ExistingFile);
  app->add_option("--beam", options->beam, "Beam width (1: greedy)")->check(whole_number(1, 64))->capture_default_str();
  return {app, [options] { return g2p::predict(*options); }};
}

}  // namespace ag::cli
