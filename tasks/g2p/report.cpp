#include "tasks/g2p/report.h"

#include <fmt/format.h>

#include <cmath>

#include "engine/error.h"
#include "tasks/common/svg.h"

namespace ag::g2p {

namespace {

// PER and WER by length; a length without words is a gap in the lines.
std::string rates_chart(const ReportData& data) {
  const int64_t longest = data.by_length.empty() ? 1 : data.by_length.rbegin()->first;
  std::vector<double> per(static_cast<size_t>(longest), NAN), wer(static_cast<size_t>(longest), NAN);
  for (const auto& [length, rates] : data.by_length) {
    AG_CHECK(length >= 1, "g2p report: a word length of {}", length);
    per[static_cast<size_t>(length - 1)] = rates.per();
    wer[static_cast<size_t>(length - 1)] = rates.wer();
  }
  return plot::line_chart(data.title + ": error rates by word length", "letters in the word", "%",
                          {{"PER", per}, {"WER", wer}});
}

std::string words_chart(const ReportData& data) {
  std::vector<std::string> labels;
  std::vector<double> words;
  for (const auto& [length, rates] : data.by_length) {
    labels.push_back(fmt::format("{} letter{}", length, length == 1 ? "" : "s"));
    words.push_back(static_cast<double>(rates.words));
  }
  return plot::bar_chart("Words per length", labels, words, "{:.0f}");
}

std::string confusions_chart(const ReportData& data) {
  std::vector<std::string> labels;
  std::vector<double> counts;
  for (const Confusion& c : data.confusions) {
    labels.push_back(c.reference + " → " + c.predicted);
    counts.push_back(static_cast<double>(c.count));
  }
  return plot::bar_chart("Most frequent confusions (reference → predicted, ∅: nothing)", labels, counts, "{:.0f}");
}

std::string alignment_heatmap(const Alignment& a) {
  AG_CHECK(a.weights.size() == a.letters.size() * a.phonemes.size(),
           "g2p report: {} attention weights for {} phonemes × {} letters", a.weights.size(), a.phonemes.size(),
           a.letters.size());
  std::string word, phonemes;
  for (const std::string& letter : a.letters) word += letter;
  for (const std::string& p : a.phonemes) phonemes += (phonemes.empty() ? "" : " ") + p;
  return plot::heatmap(fmt::format("Cross-attention: {} → {}", word, phonemes), a.phonemes, a.letters, a.weights);
}

}  // namespace

std::string report_svg(const ReportData& data) {
  std::vector<std::string> parts = {rates_chart(data), words_chart(data), confusions_chart(data)};
  for (const Alignment& a : data.alignments) parts.push_back(alignment_heatmap(a));
  return plot::stack(parts);
}

}  // namespace ag::g2p
