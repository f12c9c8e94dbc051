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

// The whole document: PER and WER by word length (lines) with the words per length (bars), the
// confusions (bars), and one heatmap per alignment (rows: phonemes, columns: letters).
std::string report_svg(const ReportData& data);

}  // namespace ag::g2p
