// G2P's error rates, defined as the PyTorch peer defines them (../shared/peer/g2p_torch.py): each
// prediction is scored against the nearest of its word's pronunciations (Levenshtein distance;
// ties go to the first in file order). WER = % of words whose prediction equals none of them;
// PER = 100 · total edits / total length of the nearest references. And the phoneme confusions
// those nearest alignments show.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tasks/g2p/data.h"

namespace ag::g2p {

using Ids = std::vector<int64_t>;

// Levenshtein distance: unit-cost insertions, deletions and substitutions.
int64_t edit_distance(std::span<const int64_t> a, std::span<const int64_t> b);

// A prediction against its nearest reference.
struct WordScore {
  int64_t edits = 0, ref_length = 0, ref_index = 0;  // ref_index: which reference (the first of equals)
};
WordScore nearest(std::span<const int64_t> prediction, const std::vector<Ids>& references);

struct ErrorRates {
  int64_t words = 0, wrong = 0, edits = 0, ref_length = 0;
  double per() const;  // 100 · edits / ref_length (NaN before any word)
  double wer() const;  // 100 · wrong / words (NaN before any word)
  void add(const WordScore& score);
  ErrorRates& operator+=(const ErrorRates& other);  // both sets of words together
};

// predictions[k] scored against references[k] (all of word k's pronunciations).
ErrorRates score(const std::vector<Ids>& predictions, const std::vector<std::vector<Ids>>& references);

// The same, per source length (source_lengths[k]: word k's characters), lengths ascending.
std::map<int64_t, ErrorRates> rates_by_length(const std::vector<Ids>& predictions,
                                              const std::vector<std::vector<Ids>>& references,
                                              const std::vector<int64_t>& source_lengths);

// What a deletion is predicted as, and what an insertion stands for.
inline constexpr std::string_view kNothing = "∅";

struct Confusion {
  std::string reference, predicted;  // a substitution, or kNothing on one side
  int64_t count = 0;
  bool operator==(const Confusion&) const = default;
};

// The `top` most frequent confusions in the alignments of each prediction with its nearest
// reference (one minimal alignment, the same every time: from the ends, a match or substitution
// first, then a deletion, then an insertion). Ties in count: by reference, then prediction symbol.
std::vector<Confusion> top_confusions(const std::vector<Ids>& predictions,
                                      const std::vector<std::vector<Ids>>& references, const Symbols& target,
                                      int64_t top);

}  // namespace ag::g2p
