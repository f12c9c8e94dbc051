#include "tasks/g2p/evaluation.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "tasks/common/corpus.h"
#include "tasks/common/memory.h"
#include "tasks/common/text.h"
#include "tasks/g2p/decode.h"
#include "tasks/g2p/metrics.h"
#include "tasks/g2p/report.h"

namespace ag::g2p {

Lexicon load_lexicon(const std::string& data, bool stress) {
  return data.empty() ? read_cmudict(tasks::corpus_path("cmudict/index.js"), stress) : read_pairs(data);
}

EvalSet eval_set(const Lexicon& lexicon, Split split, const Symbols& source, const Symbols& target, int64_t limit) {
  std::vector<int64_t> indices = words_in(lexicon, split);
  if (limit > 0 && limit < static_cast<int64_t>(indices.size())) {  // the peer's evenly spaced subset
    std::vector<int64_t> subset;
    const double step = static_cast<double>(indices.size()) / static_cast<double>(limit);
    for (int64_t i = 0; i < limit; ++i) subset.push_back(indices[static_cast<size_t>(static_cast<double>(i) * step)]);
    indices = std::move(subset);
  }
  EvalSet set;
  for (const int64_t i : indices) {
    const std::string& word = lexicon.words[static_cast<size_t>(i)];
    set.words.push_back(word);
    set.sources.push_back(source.encode_word(word, lexicon.path));
    std::vector<Ids> refs;
    for (const Pronunciation& p : lexicon.prons[static_cast<size_t>(i)])
      refs.push_back(target.encode_phonemes(p, lexicon.path));
    set.references.push_back(std::move(refs));
  }
  return set;
}

Decoded decode_timed(G2PTransformer& model, const std::vector<Ids>& sources, int64_t beam, int64_t max_extra,
                     int64_t batch_size, const std::function<void(int64_t)>& done) {
  const auto start = std::chrono::steady_clock::now();
  Decoded d{decode_all(model, sources, {.beam = beam, .max_extra = max_extra}, batch_size, done)};
  d.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return d;
}

void print_rates(const std::string& what, const ErrorRates& rates, const Decoded& decoded) {
  fmt::print(
      "{}: PER {:.2f}%  WER {:.2f}% on {} words ({} wrong, {} edits over {} phonemes); decoded in {:.2f} s = "
      "{:.0f} words/s\n",
      what, rates.per(), rates.wer(), rates.words, rates.wrong, rates.edits, rates.ref_length, decoded.seconds,
      decoded.words_per_second());
}

void print_confusions(const std::vector<Ids>& predictions, const std::vector<std::vector<Ids>>& references,
                      const Symbols& target, int64_t top) {
  const std::vector<Confusion> confusions = top_confusions(predictions, references, target, top);
  if (confusions.empty()) return;
  fmt::print("most frequent confusions (reference → predicted, ∅ = nothing):\n");
  for (const Confusion& c : confusions)
    fmt::print("  {:>4} → {:<4} {:6}\n", tasks::printable(c.reference), tasks::printable(c.predicted), c.count);
}

std::string report_of(const std::string& title, G2PTransformer& model, const EvalSet& test,
                      const std::vector<Ids>& predictions, const Symbols& source, const Symbols& target) {
  ReportData data;
  data.title = title;
  std::vector<int64_t> lengths;
  for (const Ids& s : test.sources) lengths.push_back(static_cast<int64_t>(s.size()));
  data.by_length = rates_by_length(predictions, test.references, lengths);
  data.confusions = top_confusions(predictions, test.references, target, 12);
  for (size_t k = 0; k < 4 && k < test.words.size(); ++k) {
    const size_t i = (k * 2 + 1) * test.words.size() / 9;  // a few words spread over the (sorted) split
    Alignment a;
    for (const int64_t id : test.sources[i]) a.letters.push_back(source.symbol(id));
    for (const int64_t id : predictions[i]) a.phonemes.push_back(target.symbol(id));
    for (const std::vector<double>& row : cross_attention(model, test.sources[i], predictions[i]))
      a.weights.insert(a.weights.end(), row.begin(), row.end());
    data.alignments.push_back(std::move(a));
  }
  return report_svg(data);
}

namespace {

// One batch's decoding peak: `rows` (words × beam) of up to `longest_word` letters.
double decoding_bytes(const ModelConfig& c, int64_t rows, int64_t longest_word, int64_t max_extra) {
  const auto R = static_cast<double>(rows), W = static_cast<double>(longest_word),
             steps = W + static_cast<double>(max_extra) + 1, D = static_cast<double>(c.transformer.d_model),
             F = static_cast<double>(c.transformer.dim_feedforward), H = static_cast<double>(c.transformer.nhead),
             Ld = static_cast<double>(c.transformer.num_decoder_layers);
  return 4 * std::max(R * D * (W * (1 + 2 * Ld) + 3 * Ld * steps),   // memory, caches
                      R * (6 * W * D + 2 * W * F + 2 * H * W * W));  // one encoder layer
}

}  // namespace

double all_decoding_bytes(const ModelConfig& c, int64_t parameters, int64_t words, int64_t batch_size, int64_t beam,
                          int64_t longest_word, int64_t max_extra) {
  const auto workers = static_cast<double>(decoding_workers(words, batch_size));
  const int64_t rows = std::min(batch_size, words) * beam;
  return workers * decoding_bytes(c, rows, longest_word, max_extra) +
         (workers - 1) * 4 * static_cast<double>(parameters);
}

void check_decoding_memory(const std::string& command, const G2PTransformer& model, const std::vector<Ids>& sources,
                           int64_t beam, int64_t max_extra, int64_t batch_size, const std::string& batch_setting,
                           int64_t max_memory_mb) {
  size_t longest_word = 1;
  for (const Ids& source : sources) longest_word = std::max(longest_word, source.size());
  tasks::check_memory_quietly(
      {.command = command,
       .task = "g2p",
       .step_settings = "no training step",
       .eval_bytes = all_decoding_bytes(model.config, model.num_parameters(), static_cast<int64_t>(sources.size()),
                                        batch_size, beam, static_cast<int64_t>(longest_word), max_extra),
       .eval_settings = fmt::format("{} x --beam {} words of up to {} letters", batch_setting, beam, longest_word)},
      max_memory_mb);
}

}  // namespace ag::g2p
