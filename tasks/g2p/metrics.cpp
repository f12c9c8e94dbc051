#include "tasks/g2p/metrics.h"

#include <algorithm>
#include <cmath>

#include "engine/error.h"

namespace ag::g2p {

namespace {

// The Levenshtein table of reference (rows) against prediction (columns), row-major, (n+1)×(m+1).
std::vector<int64_t> distance_table(std::span<const int64_t> reference, std::span<const int64_t> prediction) {
  const size_t n = reference.size(), m = prediction.size(), width = m + 1;
  std::vector<int64_t> d((n + 1) * width);
  for (size_t j = 0; j <= m; ++j) d[j] = static_cast<int64_t>(j);
  for (size_t i = 1; i <= n; ++i) {
    d[i * width] = static_cast<int64_t>(i);
    for (size_t j = 1; j <= m; ++j)
      d[i * width + j] = std::min({d[(i - 1) * width + j] + 1, d[i * width + j - 1] + 1,
                                   d[(i - 1) * width + j - 1] + (reference[i - 1] != prediction[j - 1])});
  }
  return d;
}

void check_sizes(const std::vector<Ids>& predictions, const std::vector<std::vector<Ids>>& references) {
  AG_CHECK(predictions.size() == references.size(), "g2p scoring: {} predictions for {} words", predictions.size(),
           references.size());
}

}  // namespace

int64_t edit_distance(std::span<const int64_t> a, std::span<const int64_t> b) {
  std::vector<int64_t> previous(b.size() + 1), current(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = static_cast<int64_t>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = static_cast<int64_t>(i);
    for (size_t j = 1; j <= b.size(); ++j)
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(previous, current);
  }
  return previous[b.size()];
}

WordScore nearest(std::span<const int64_t> prediction, const std::vector<Ids>& references) {
  AG_CHECK(!references.empty(), "g2p scoring: a word without any reference pronunciation");
  WordScore best;
  for (size_t r = 0; r < references.size(); ++r) {
    const int64_t edits = edit_distance(prediction, references[r]);
    if (r == 0 || edits < best.edits)
      best = {edits, static_cast<int64_t>(references[r].size()), static_cast<int64_t>(r)};
  }
  return best;
}

double ErrorRates::per() const {
  return words == 0 ? NAN : 100.0 * static_cast<double>(edits) / static_cast<double>(ref_length);
}
double ErrorRates::wer() const {
  return words == 0 ? NAN : 100.0 * static_cast<double>(wrong) / static_cast<double>(words);
}

void ErrorRates::add(const WordScore& score) {
  ++words;
  wrong += score.edits > 0;
  edits += score.edits;
  ref_length += score.ref_length;
}

ErrorRates& ErrorRates::operator+=(const ErrorRates& other) {
  words += other.words;
  wrong += other.wrong;
  edits += other.edits;
  ref_length += other.ref_length;
  return *this;
}

ErrorRates score(const std::vector<Ids>& predictions, const std::vector<std::vector<Ids>>& references) {
  check_sizes(predictions, references);
  ErrorRates rates;
  for (size_t k = 0; k < predictions.size(); ++k) rates.add(nearest(predictions[k], references[k]));
  return rates;
}

std::map<int64_t, ErrorRates> rates_by_length(const std::vector<Ids>& predictions,
                                              const std::vector<std::vector<Ids>>& references,
                                              const std::vector<int64_t>& source_lengths) {
  check_sizes(predictions, references);
  AG_CHECK(source_lengths.size() == predictions.size(), "g2p scoring: {} source lengths for {} words",
           source_lengths.size(), predictions.size());
  std::map<int64_t, ErrorRates> rates;
  for (size_t k = 0; k < predictions.size(); ++k) rates[source_lengths[k]].add(nearest(predictions[k], references[k]));
  return rates;
}

std::vector<Confusion> top_confusions(const std::vector<Ids>& predictions,
                                      const std::vector<std::vector<Ids>>& references, const Symbols& target,
                                      int64_t top) {
  check_sizes(predictions, references);
  std::map<std::pair<std::string, std::string>, int64_t> counts;
  for (size_t k = 0; k < predictions.size(); ++k) {
    const Ids& prediction = predictions[k];
    const Ids& reference = references[k][static_cast<size_t>(nearest(prediction, references[k]).ref_index)];
    const std::vector<int64_t> d = distance_table(reference, prediction);
    const size_t width = prediction.size() + 1;
    // Walk back from the ends along one minimal path.
    for (size_t i = reference.size(), j = prediction.size(); i > 0 || j > 0;) {
      const int64_t here = d[i * width + j];
      if (i > 0 && j > 0 && here == d[(i - 1) * width + j - 1] + (reference[i - 1] != prediction[j - 1])) {
        if (reference[i - 1] != prediction[j - 1])
          ++counts[{target.symbol(reference[i - 1]), target.symbol(prediction[j - 1])}];
        --i, --j;
      } else if (i > 0 && here == d[(i - 1) * width + j] + 1) {
        ++counts[{target.symbol(reference[i - 1]), std::string(kNothing)}];
        --i;
      } else {
        ++counts[{std::string(kNothing), target.symbol(prediction[j - 1])}];
        --j;
      }
    }
  }
  std::vector<Confusion> confusions;
  for (const auto& [pair, count] : counts) confusions.push_back({pair.first, pair.second, count});
  // The map is ordered by (reference, predicted): a stable sort by count keeps that order for ties.
  std::stable_sort(confusions.begin(), confusions.end(),
                   [](const Confusion& a, const Confusion& b) { return a.count > b.count; });
  confusions.resize(std::min(confusions.size(), static_cast<size_t>(std::max<int64_t>(top, 0))));
  return confusions;
}

}  // namespace ag::g2p
