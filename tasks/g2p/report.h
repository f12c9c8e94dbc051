// report.svg of a G2P run: error rates by word length, the most frequent phoneme confusions, and
// the cross-attention of a few words (which letters each predicted phoneme looked at).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tasks/g2p/metrics.h"

namespace ag::g2p {

// One word's cross-attention: weights[p · letters.size() + l] is how much predicted phoneme p
// attended to letter l (e.g. averaged over heads, from the last decoder layer), each in [0, 1].
struct Alignment {
  std::vector<std::string> letters, phonemes;
  std::vector<double> weights;  // phonemes × letters, row-major
};

struct ReportData {
  std::string title;                        // e.g. "g2p small, epoch 20, test (greedy)"
  std::map<int64_t, ErrorRates> by_length;  // rates_by_length
  std::vector<Confusion> confusions;        // top_confusions, most frequent first
  std::vector<Alignment> alignments;        // a few words
};

// A rate over a few words says little (one word of a length: 0% or 100%): the report pools word
// lengths until each point of its chart has this many words.
inline constexpr int64_t kMinWordsPerPoint = 10;

// Word lengths first..last and the rates of their words together.
struct LengthGroup {
  int64_t first = 0, last = 0;
  ErrorRates rates;
};

// The lengths, shortest first, pooled into groups of at least `min_words` words: a group takes the
// next length until it has that many; a last group with fewer joins the one before (if any).
std::vector<LengthGroup> pool_lengths(const std::map<int64_t, ErrorRates>& by_length, int64_t min_words);

// The whole document: PER and WER by word length (lines; lengths pooled by pool_lengths with
// kMinWordsPerPoint, each point named with its lengths and words) with the words per length (bars),
// the confusions (bars), and one heatmap per alignment (rows: phonemes, columns: letters).
std::string report_svg(const ReportData& data);

}  // namespace ag::g2p
