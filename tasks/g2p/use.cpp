// `eval g2p` and `predict g2p`: a Pronouncer (a checkpoint's model, a model file's or the shipped one), decoding a
// split's words (scored against their references) or a user's words: given as arguments or in a
// file, or read from stdin as they come (a word the model cannot read is then reported and skipped).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "engine/io.h"
#include "tasks/common/checkpoint_config.h"
#include "tasks/common/text.h"
#include "tasks/g2p/evaluation.h"
#include "tasks/g2p/metrics.h"
#include "tasks/g2p/pronouncer.h"
#include "tasks/g2p/task.h"

namespace ag::g2p {

namespace {

// The model `eval` and `predict` use: --checkpoint's, or the shipped one, named on stderr.
Pronouncer chosen_model(const std::string& checkpoint, const std::string& command) {
  if (!checkpoint.empty()) return Pronouncer::load(checkpoint);
  Pronouncer shipped = Pronouncer::shipped();
  std::cerr << fmt::format("{} g2p: {}; --checkpoint FILE for another\n", command, shipped.name());
  return shipped;
}

// A word `predict` was given, and where it came from for messages ("word 2", "line 3 of stdin").
struct Word {
  std::string text, origin;
};

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
// separated by spaces), json an object {"word", "phonemes": [...], "scores": [...], "end_score",
// "score"} on one line (the log-probabilities, rounded to 4 decimals).
std::string prediction_line(const Pronounced& p, const std::string& format) {
  if (format == "json") {
    const auto rounded = [](double x) { return std::round(x * 1e4) / 1e4; };
    std::vector<double> scores;
    for (const double s : p.scores) scores.push_back(rounded(s));
    return nlohmann::ordered_json{{"word", p.word},
                                  {"phonemes", p.phonemes},
                                  {"scores", scores},
                                  {"end_score", rounded(p.end_score)},
                                  {"score", rounded(p.score())}}
               .dump() +
           "\n";
  }
  return fmt::format("{}\t{}\n", tasks::printable(p.word),
                     tasks::printable(fmt::format("{}", fmt::join(p.phonemes, " "))));
}

// Pronounces `words` (`sources`, their ids) and prints each word's line; stdout is flushed, so a
// pipe sees the lines at once.
void pronounce(Pronouncer& pronouncer, const std::vector<std::string>& words, const std::vector<Ids>& sources,
               const PredictOptions& options) {
  const std::vector<Pronounced> pronounced = pronouncer.pronounce_encoded(
      words, sources,
      {.beam = options.beam, .scores = options.format == "json", .max_memory_mb = options.max_memory_mb});
  std::string lines;
  for (const Pronounced& p : pronounced) lines += prediction_line(p, options.format);
  fmt::print("{}", lines);
  std::fflush(stdout);
}

// The lines of a file descriptor as they come (a pipe, a terminal): see next().
class LineStream {
 public:
  explicit LineStream(int fd) : fd_(fd) {}

  // Waits until at least one whole line has come, then returns every whole line read so far (the
  // last line too once the input has ended), without its LF, CR LF or lone CR (as files are read:
  // tasks::as_text), and a byte order mark at the very start dropped; no lines only at the end of
  // the input. Reads 4 KiB at most at a time, so a long input comes in batches of a few hundred words.
  std::vector<std::string> next() {
    std::array<char, 4096> buffer{};
    while (!ended_) {
      const ssize_t n = ::read(fd_, buffer.data(), buffer.size());
      if (n < 0 && errno == EINTR) continue;
      AG_CHECK(n >= 0, "predict g2p: reading stdin: {}", std::strerror(errno));
      pending_.append(buffer.data(), static_cast<size_t>(n));
      ended_ = n == 0;
      const size_t cut = whole_lines_end();
      AG_CHECK(cut > 0 || pending_.size() <= kLongestLine,
               "predict g2p: stdin has more than {} bytes without a line break; expected one word per line",
               kLongestLine);
      if (cut == 0) continue;
      std::vector<std::string> lines = tasks::split_lines(std::string_view(pending_).substr(0, cut));
      pending_.erase(0, cut);
      if (!started_ && !lines.empty() && lines[0].starts_with("\xEF\xBB\xBF")) lines[0].erase(0, 3);
      started_ = true;
      return lines;
    }
    return {};
  }

 private:
  // Where the whole lines read so far end: after the last LF or CR (all of it once the input has
  // ended; 0 when no line is whole). A CR that ends what has come so far waits for the next read,
  // which may start with its CR LF's LF.
  size_t whole_lines_end() const {
    if (ended_) return pending_.size();
    size_t end = pending_.find_last_of("\r\n");
    if (end != std::string::npos && end + 1 == pending_.size() && pending_[end] == '\r')
      end = end == 0 ? std::string::npos : pending_.find_last_of("\r\n", end - 1);
    return end == std::string::npos ? 0 : end + 1;
  }

  static constexpr size_t kLongestLine = size_t{1} << 20;
  int fd_;
  std::string pending_;  // the start of a line whose line end has not come yet
  bool started_ = false, ended_ = false;
};

// `predict` without words: stdin's words, each batch pronounced as it comes. A word the model cannot
// read is reported on stderr and the others are pronounced; returns 1 if any was.
int pronounce_stdin(Pronouncer& pronouncer, const PredictOptions& options) {
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
        sources.push_back(pronouncer.encode(text, fmt::format("predict g2p: line {} of stdin", line)));
        words.push_back(std::move(text));
      } catch (const Error& e) {
        std::cerr << "attograd: error: " << e.what() << "\n";
        ++refused;
      }
    }
    if (!sources.empty()) pronounce(pronouncer, words, sources, options);
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
  AG_CHECK(options.split == "test" || options.split == "val" || options.split == "train",
           "eval g2p: --split must be test, val or train, got '{}'", options.split);
  Pronouncer pronouncer = chosen_model(options.checkpoint, "eval");
  const std::string& name = options.checkpoint.empty() ? pronouncer.name() : options.checkpoint;
  const std::string data =
      options.data.empty() ? tasks::config_string(pronouncer.config(), "data", name) : options.data;
  const Lexicon lexicon = load_lexicon(data, tasks::config_bool(pronouncer.config(), "stress", name));
  tasks::note_if_not_the_runs_data(pronouncer.config(), name, lexicon.path);
  if (!options.report.empty()) check_not_an_input(options.report);  // before decoding, not after
  const Split split = options.split == "test" ? Split::test : options.split == "val" ? Split::val : Split::train;
  const EvalSet set = eval_set(lexicon, split, pronouncer.source_symbols(), pronouncer.target_symbols(), 0);
  AG_CHECK(!set.words.empty(), "{}: its {} split is empty", lexicon.path, options.split);
  G2PTransformer& model = pronouncer.model();
  check_decoding_memory("eval", model, set.sources, options.beam, pronouncer.max_extra(), options.eval_batch_size,
                        fmt::format("--eval-batch-size {}", options.eval_batch_size), options.max_memory_mb);
  const Decoded decoded =
      decode_timed(model, set.sources, options.beam, pronouncer.max_extra(), options.eval_batch_size);
  const std::string decoder = options.beam > 1 ? fmt::format("beam {}", options.beam) : "greedy";
  print_rates(fmt::format("{} ({})", options.split, decoder), score(decoded.predictions, set.references), decoded);
  print_confusions(decoded.predictions, set.references, pronouncer.target_symbols(), options.confusions);
  if (!options.report.empty()) {
    write_file_atomically(options.report,
                          report_of(fmt::format("{}, {} ({})", name, options.split, decoder), model, set,
                                    decoded.predictions, pronouncer.source_symbols(), pronouncer.target_symbols()));
    fmt::print("wrote {}\n", options.report);
  }
  return 0;
}

int predict(const PredictOptions& options) {
  AG_CHECK(options.format == "text" || options.format == "tsv" || options.format == "json",
           "predict g2p: the format must be text, tsv or json, got '{}'", tasks::printable(options.format));
  Pronouncer pronouncer = chosen_model(options.checkpoint, "predict");
  if (options.words.empty() && options.file.empty()) return pronounce_stdin(pronouncer, options);
  const std::vector<Word> given = given_words(options);
  AG_CHECK(!given.empty(), "{}", kNoWords);
  std::vector<std::string> words;
  std::vector<Ids> sources;
  for (const Word& word : given) {
    sources.push_back(pronouncer.encode(word.text, "predict g2p: " + word.origin));
    words.push_back(word.text);
  }
  pronounce(pronouncer, words, sources, options);
  return 0;
}

}  // namespace ag::g2p
