// A split's words decoded and scored, what the end of `train g2p` (the test words) and `eval g2p`
// share: the lexicon a run reads, a split's words as ids with their references, timed decoding, the
// printed error rates and confusions, report.svg, and decoding's memory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tasks/g2p/data.h"
#include "tasks/g2p/metrics.h"
#include "tasks/g2p/model.h"

namespace ag::g2p {

// A lexicon as the run reads it: CMUdict from the data cache, or the user's pairs.
Lexicon load_lexicon(const std::string& data, bool stress);

// The words of one split as ids, each with its references (every pronunciation, file order).
struct EvalSet {
  std::vector<std::string> words;
  std::vector<Ids> sources;
  std::vector<std::vector<Ids>> references;
};
// `limit` > 0: that many evenly spaced words of the split (smoke runs), as the peer's subset.
EvalSet eval_set(const Lexicon& lexicon, Split split, const Symbols& source, const Symbols& target, int64_t limit);

struct Decoded {
  std::vector<Ids> predictions;
  double seconds = 0;
  double words_per_second() const { return seconds > 0 ? static_cast<double>(predictions.size()) / seconds : 0; }
};
// decode_all, timed.
Decoded decode_timed(G2PTransformer& model, const std::vector<Ids>& sources, int64_t beam, int64_t max_extra,
                     int64_t batch_size, const std::function<void(int64_t)>& done = {});

// "WHAT: PER …  WER … on N words (…); decoded in … s = … words/s".
void print_rates(const std::string& what, const ErrorRates& rates, const Decoded& decoded);
// The `top` most frequent phoneme confusions, if any.
void print_confusions(const std::vector<Ids>& predictions, const std::vector<std::vector<Ids>>& references,
                      const Symbols& target, int64_t top);

// The report (SVG): error rates by word length, the confusions, a few test words' alignments.
std::string report_of(const std::string& title, G2PTransformer& model, const EvalSet& test,
                      const std::vector<Ids>& predictions, const Symbols& source, const Symbols& target);

// decode_all's peak, in bytes, over `words` words of up to `longest_word` letters (and max_extra more
// phonemes than letters) in batches of batch_size × beam rows: each of its workers' (decoding_workers)
// batch (Note [memory estimate] in train.cpp), and the copies of the model (`parameters` f32 each)
// of all but one.
double all_decoding_bytes(const ModelConfig& c, int64_t parameters, int64_t words, int64_t batch_size, int64_t beam,
                          int64_t longest_word, int64_t max_extra);

// Refuses decoding `sources` in batches of `batch_size` words × `beam` rows that would not fit
// (tasks::check_memory_quietly), before decoding; `batch_setting` names the batch in the message.
void check_decoding_memory(const std::string& command, const G2PTransformer& model, const std::vector<Ids>& sources,
                           int64_t beam, int64_t max_extra, int64_t batch_size, const std::string& batch_setting,
                           int64_t max_memory_mb);

}  // namespace ag::g2p
