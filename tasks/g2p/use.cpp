// `eval g2p` and `predict g2p`: a model read back from a checkpoint with its symbol tables, decoding a
// split's words (scored against their references) or a user's words: given as arguments or in a
// file, or read from stdin as they come (a word the model cannot read is then reported and skipped).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
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

// A word `predict` was given, and where it came from for messages ("word 2", "line 3 of stdin").
struct Word {
  std::string text, origin;
};

// A word as the model's ids: not empty, UTF-8, short enough to decode (its letters, then up to
// max_extra phonemes and <eos>, in the model's max_len positions), each character one the model
// has seen (the error quotes the word and names the characters).
Ids encode_word(const Trained& trained, const Word& word, int64_t max_extra) {
  const std::string where = "predict g2p: " + word.origin;
  AG_CHECK(!word.text.empty(), "{} is empty; expected a word to spell out", where);
  const int64_t longest = trained.model->config.max_len - max_extra - 1;
  const size_t characters = tasks::decode_utf8(word.text, where).size();
  AG_CHECK(static_cast<int64_t>(characters) <= longest,
           "{} has {} characters, more than the {} this model decodes (its {} positions, less the run's "
           "--max-extra {} and one for the end)",
           where, characters, longest, trained.model->config.max_len, max_extra);
  return trained.source.encode_word(word.text, fmt::format("{} '{}'", where, tasks::printable(word.text)));
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

constexpr const char* kNoWords =
    "predict g2p: no words given; expected WORD..., --file FILE or words on stdin (one word per line)";

// The words given as arguments, then --file's lines (empty ones skipped).
std::vector<Word> given_words(const PredictOptions& options) {
  std::vector<Word> words;
  for (const std::string& text : options.words) words.push_back({text, fmt::format("word {}", words.size() + 1)});
  if (options.file.empty()) return words;
  const std::vector<std::string> lines = tasks::split_lines(tasks::read_text_file(options.file));
  for (size_t i = 0; i < lines.size(); ++i)
    if (!lines[i].empty()) words.push_back({lines[i], fmt::format("{} line {}", options.file, i + 1)});
  return words;
}

// One word's pronunciation as `format` prints it: text and tsv "WORD<TAB>PHONEMES" (the phonemes
// separated by spaces), json an object {"word", "phonemes": [...]} on one line.
std::string prediction_line(const std::string& word, const Ids& phonemes, const Symbols& target,
                            const std::string& format) {
  if (format == "json") {
    std::vector<std::string> symbols;
    for (const int64_t id : phonemes) symbols.push_back(target.symbol(id));
    return nlohmann::ordered_json{{"word", word}, {"phonemes", symbols}}.dump() + "\n";
  }
  return fmt::format("{}\t{}\n", tasks::printable(word), tasks::printable(target.decode(phonemes, " ")));
}

// Decodes `sources` (words[k]'s ids), once decoding's memory is checked, and prints each word's line;
// stdout is flushed, so a pipe sees the lines at once.
void pronounce(Trained& trained, const std::vector<std::string>& words, const std::vector<Ids>& sources,
               const DecodeOptions& decode, const PredictOptions& options) {
  check_decoding_memory("predict", trained.model->config, sources, decode, kPredictBatch,
                        fmt::format("{} words at once", kPredictBatch), options.max_memory_mb);
  const std::vector<Ids> predictions = decode_all(*trained.model, sources, decode, kPredictBatch);
  std::string lines;
  for (size_t i = 0; i < words.size(); ++i)
    lines += prediction_line(words[i], predictions[i], trained.target, options.format);
  fmt::print("{}", lines);
  std::fflush(stdout);
}

// The lines of a file descriptor as they come (a pipe, a terminal): see next().
class LineStream {
 public:
  explicit LineStream(int fd) : fd_(fd) {}

  // Waits until at least one whole line has come, then returns every whole line read so far (the
  // last line too once the input has ended), without its LF or CR LF, and a byte order mark at the
  // very start dropped; no lines only at the end of the input. Reads 4 KiB at most at a time, so a
  // long input comes in batches of a few hundred words.
  std::vector<std::string> next() {
    std::array<char, 4096> buffer{};
    while (!ended_) {
      const ssize_t n = ::read(fd_, buffer.data(), buffer.size());
      if (n < 0 && errno == EINTR) continue;
      AG_CHECK(n >= 0, "predict g2p: reading stdin: {}", std::strerror(errno));
      pending_.append(buffer.data(), static_cast<size_t>(n));
      ended_ = n == 0;
      const size_t cut = ended_ ? pending_.size() : pending_.rfind('\n') + 1;  // npos + 1 = 0: no whole line
      AG_CHECK(cut > 0 || pending_.size() <= kLongestLine,
               "predict g2p: stdin has more than {} bytes without a line break; expected one word per line",
               kLongestLine);
      if (cut == 0) continue;
      std::vector<std::string> lines = tasks::split_lines(std::string_view(pending_).substr(0, cut));
      pending_.erase(0, cut);
      for (std::string& line : lines)
        if (line.ends_with('\r')) line.pop_back();
      if (!started_ && !lines.empty() && lines[0].starts_with("\xEF\xBB\xBF")) lines[0].erase(0, 3);
      started_ = true;
      return lines;
    }
    return {};
  }

 private:
  static constexpr size_t kLongestLine = size_t{1} << 20;
  int fd_;
  std::string pending_;  // the start of a line whose LF has not come yet
  bool started_ = false, ended_ = false;
};

// `predict` without words: stdin's words, each batch pronounced as it comes. A word the model cannot
// read is reported on stderr and the others are pronounced; returns 1 if any was.
int pronounce_stdin(Trained& trained, const DecodeOptions& decode, const PredictOptions& options) {
  if (::isatty(STDIN_FILENO)) std::cerr << "predict g2p: reading words from stdin, one per line (Ctrl-D ends)\n";
  LineStream input(STDIN_FILENO);
  int64_t line = 0, pronounced = 0, refused = 0;
  for (std::vector<std::string> lines = input.next(); !lines.empty(); lines = input.next()) {
    std::vector<std::string> words;
    std::vector<Ids> sources;
    for (std::string& text : lines) {
      ++line;
      if (text.empty()) continue;
      try {
        sources.push_back(encode_word(trained, {text, fmt::format("line {} of stdin", line)}, decode.max_extra));
        words.push_back(std::move(text));
      } catch (const Error& e) {
        std::cerr << "attograd: error: " << e.what() << "\n";
        ++refused;
      }
    }
    if (!sources.empty()) pronounce(trained, words, sources, decode, options);
    pronounced += static_cast<int64_t>(sources.size());
  }
  AG_CHECK(pronounced + refused > 0, "{}; stdin held none", kNoWords);
  if (refused == 0) return 0;
  std::cerr << fmt::format("attograd: predict g2p: {} of the {} words on stdin not pronounced (above)\n", refused,
                           pronounced + refused);
  return 1;
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
  AG_CHECK(options.format == "text" || options.format == "tsv" || options.format == "json",
           "predict g2p: the format must be text, tsv or json, got '{}'", tasks::printable(options.format));
  Trained trained = load_trained(options.checkpoint);
  const DecodeOptions decode{.beam = options.beam,
                             .max_extra = tasks::config_whole(trained.config, "max_extra", options.checkpoint, 10)};
  if (options.words.empty() && options.file.empty()) return pronounce_stdin(trained, decode, options);
  const std::vector<Word> given = given_words(options);
  AG_CHECK(!given.empty(), "{}", kNoWords);
  std::vector<std::string> words;
  std::vector<Ids> sources;
  for (const Word& word : given) {
    sources.push_back(encode_word(trained, word, decode.max_extra));
    words.push_back(word.text);
  }
  pronounce(trained, words, sources, decode, options);
  return 0;
}

}  // namespace ag::g2p
