#include "tasks/g2p/report.h"

#include <fmt/format.h>

#include "engine/error.h"
#include "tasks/common/svg.h"

namespace ag::g2p {

namespace {

// PER and WER by length, rare lengths pooled: each point named with its lengths and words.
std::string rates_chart(const ReportData& data) {
  std::vector<double> per, wer;
  std::vector<std::string> names;
  for (const LengthGroup& g : pool_lengths(data.by_length, kMinWordsPerPoint)) {
    per.push_back(g.rates.per());
    wer.push_back(g.rates.wer());
    names.push_back(fmt::format("{}\n{}",
                                g.first == g.last ? fmt::format("{}", g.first) : fmt::format("{}–{}", g.first, g.last),
                                g.rates.words));
  }
  return plot::line_chart(
      data.title + ": error rates by word length", "letters in the word (below: how many words)", "%",
      {{"PER", per}, {"WER", wer}}, 1, names,
      fmt::format(
          "Lengths with fewer than {0} words are pooled with the next longer ones, shortest first, until a "
          "point has {0} (a last point short of {0} joins the one before): a rate over a few words says little.",
          kMinWordsPerPoint));
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

std::vector<LengthGroup> pool_lengths(const std::map<int64_t, ErrorRates>& by_length, int64_t min_words) {
  std::vector<LengthGroup> groups;
  bool open = false;  // the last group still takes lengths
  for (const auto& [length, rates] : by_length) {
    AG_CHECK(length >= 1, "g2p report: a word length of {}", length);
    if (!open) groups.push_back({length, length, {}});
    groups.back().last = length;
    groups.back().rates += rates;
    open = groups.back().rates.words < min_words;
  }
  if (open && groups.size() > 1) {
    const LengthGroup short_last = groups.back();
    groups.pop_back();
    groups.back().last = short_last.last;
    groups.back().rates += short_last.rates;
  }
  return groups;
}

std::string report_svg(const ReportData& data) {
  std::vector<std::string> parts = {rates_chart(data), words_chart(data), confusions_chart(data)};
  for (const Alignment& a : data.alignments) parts.push_back(alignment_heatmap(a));
  return plot::stack(parts);
}

}  // namespace ag::g2p
