// `eval g2p` and `predict g2p`: a model read back from a checkpoint with its symbol tables, decoding a
// split's words (scored against their references) or a user's words.
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "engine/io.h"
#include "engine/json.h"
#include "nn/checkpoint.h"
#include "tasks/common/checkpoint_config.h"
#include "tasks/common/memory.h"
#include "tasks/common/text.h"
#include "tasks/g2p/decode.h"
#include "tasks/g2p/evaluation.h"
#include "tasks/g2p/metrics.h"
#include "tasks/g2p/task.h"

namespace ag::g2p {

namespace {

constexpr int64_t kPredictBatch = 512;  // words `predict g2p` decodes at once

// A trained model and what it needs to read words: the checkpoint's config and symbols.
struct Trained {
  std::unique_ptr<G2PTransformer> model;
  Symbols source, target;
  nlohmann::json config;
};

Trained load_trained(const std::string& path) {
  const nn::Checkpoint checkpoint = nn::read_checkpoint(path);
  nlohmann::json config = checkpoint.settings;
  tasks::check_checkpoint_task(config, "g2p", path);
  for (const char* key : {"source_symbols", "target_symbols"})
    AG_CHECK(checkpoint.metadata.count(key), "{}: the checkpoint has no {}", path, key);
  Symbols source = Symbols::from_json(checkpoint.metadata.at("source_symbols"), path);
  Symbols target = Symbols::from_json(checkpoint.metadata.at("target_symbols"), path);
  const G2POptions run = tasks::from_json(settings(), config, path, G2POptions{});
  const ModelConfig& model_config = run.model;
  AG_CHECK(model_config.source_vocab == source.size() && model_config.target_vocab == target.size(),
           "{}: the config's vocabularies ({}, {}) differ from the symbols it stores ({}, {})", path,
           model_config.source_vocab, model_config.target_vocab, source.size(), target.size());
  auto model = nn::build_from_config(checkpoint, path, [&] { return build_model(run, source, target); });
  nn::load(path, *model);
  model->eval();
  return {std::move(model), std::move(source), std::move(target), std::move(config)};
}

// The words `predict` is given as the model's ids: each one not empty and short enough to decode (its
// letters, then up to max_extra phonemes and <eos>, in the model's max_len positions).
std::vector<Ids> encode_words(const Trained& trained, const std::vector<std::string>& words, int64_t max_extra) {
  const int64_t longest = trained.model->config.max_len - max_extra - 1;
  std::vector<Ids> sources;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string where = fmt::format("predict g2p: word {}", i + 1);
    AG_CHECK(!words[i].empty(), "{} is empty; expected a word to spell out", where);
    sources.push_back(trained.source.encode_word(words[i], where));
    AG_CHECK(static_cast<int64_t>(sources.back().size()) <= longest,
             "{} has {} characters, more than the {} this model decodes (its {} positions, less the run's "
             "--max-extra {} and one for the end)",
             where, sources.back().size(), longest, trained.model->config.max_len, max_extra);
  }
  return sources;
}

// `eval` and `predict`: refuses decoding `sources` in batches of `batch_size` words (`batch_setting`
// names it) × `beam` rows that would not fit (tasks::check_memory_quietly), before decoding.
void check_decoding_memory(const std::string& command, const ModelConfig& c, const std::vector<Ids>& sources,
                           const DecodeOptions& decode, int64_t batch_size, const std::string& batch_setting,
                           int64_t max_memory_mb) {
  size_t longest_word = 1;
  for (const Ids& source : sources) longest_word = std::max(longest_word, source.size());
  const int64_t words = std::min(batch_size, static_cast<int64_t>(sources.size()));
  tasks::check_memory_quietly(
      {.command = command,
       .task = "g2p",
       .step_settings = "no training step",
       .eval_bytes = decoding_bytes(c, words * decode.beam, static_cast<int64_t>(longest_word), decode.max_extra),
       .eval_settings =
           fmt::format("{} x --beam {} words of up to {} letters", batch_setting, decode.beam, longest_word)},
      max_memory_mb);
}

}  // namespace

int eval(const EvalOptions& options) {
  Trained trained = load_trained(options.checkpoint);
  AG_CHECK(options.split == "test" || options.split == "val" || options.split == "train",
           "eval g2p: --split must be test, val or train, got '{}'", options.split);
  const std::string data =
      options.data.empty() ? tasks::config_string(trained.config, "data", options.checkpoint) : options.data;
  const Lexicon lexicon = load_lexicon(data, tasks::config_bool(trained.config, "stress", options.checkpoint));
  tasks::note_if_not_the_runs_data(trained.config, options.checkpoint, lexicon.path);
  if (!options.report.empty()) check_not_an_input(options.report);  // before decoding, not after
  const Split split = options.split == "test" ? Split::test : options.split == "val" ? Split::val : Split::train;
  const EvalSet set = eval_set(lexicon, split, trained.source, trained.target, 0);
  AG_CHECK(!set.words.empty(), "{}: its {} split is empty", lexicon.path, options.split);
  const int64_t max_extra = tasks::config_whole(trained.config, "max_extra", options.checkpoint, 10);
  check_decoding_memory("eval", trained.model->config, set.sources, {.beam = options.beam, .max_extra = max_extra},
                        options.eval_batch_size, fmt::format("--eval-batch-size {}", options.eval_batch_size),
                        options.max_memory_mb);
  const Decoded decoded = decode_timed(*trained.model, set.sources, options.beam, max_extra, options.eval_batch_size);
  print_rates(fmt::format("{} ({})", options.split, options.beam > 1 ? fmt::format("beam {}", options.beam) : "greedy"),
              score(decoded.predictions, set.references), decoded);
  print_confusions(decoded.predictions, set.references, trained.target, options.confusions);
  if (!options.report.empty()) {
    write_file_atomically(options.report,
                          report_of(fmt::format("{}, {} ({})", options.checkpoint, options.split,
                                                options.beam > 1 ? fmt::format("beam {}", options.beam) : "greedy"),
                                    *trained.model, set, decoded.predictions, trained.source, trained.target));
    fmt::print("wrote {}\n", options.report);
  }
  return 0;
}

int predict(const PredictOptions& options) {
  Trained trained = load_trained(options.checkpoint);
  std::vector<std::string> words = options.words;
  if (!options.file.empty()) {
    const std::string text = tasks::read_text_file(options.file);
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      std::string word = text.substr(start, end - start);
      if (!word.empty() && word.back() == '\r') word.pop_back();
      if (!word.empty()) words.push_back(word);
      start = end + 1;
    }
  }
  AG_CHECK(!words.empty(), "predict g2p: no words given; expected WORD... or --file FILE (one word per line)");
  const int64_t max_extra = tasks::config_whole(trained.config, "max_extra", options.checkpoint, 10);
  const std::vector<Ids> sources = encode_words(trained, words, max_extra);
  const DecodeOptions decode{.beam = options.beam, .max_extra = max_extra};
  check_decoding_memory("predict", trained.model->config, sources, decode, kPredictBatch,
                        fmt::format("{} words at once", kPredictBatch), options.max_memory_mb);
  const std::vector<Ids> predictions = decode_all(*trained.model, sources, decode, kPredictBatch);
  for (size_t i = 0; i < words.size(); ++i)
    fmt::print("{}\t{}\n", tasks::printable(words[i]), tasks::printable(trained.target.decode(predictions[i], " ")));
  return 0;
}

}  // namespace ag::g2p
