// G2P's error rates and confusions against the PyTorch peer's Levenshtein self-test and cases
// worked out by hand (several references, ties).
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "tasks/g2p/metrics.h"
#include "tasks/g2p/report.h"
#include "tests/test_util.h"

namespace ag::g2p {
namespace {

Ids bytes_of(const std::string& text) { return Ids(text.begin(), text.end()); }

TEST(G2pMetrics, LevenshteinMatchesThePeersSelfTest) {
  const Symbols target =
      Symbols::from_list({"<pad>", "<bos>", "<eos>", "AE", "AH", "EH", "HH", "K", "L", "OW", "S", "T"}, "test");
  const auto phones = [&](const Pronunciation& p) { return target.encode_phonemes(p, "case"); };
  const std::vector<std::tuple<Ids, Ids, int64_t>> cases = {
      {bytes_of("kitten"), bytes_of("sitting"), 3},
      {bytes_of("flaw"), bytes_of("lawn"), 2},
      {bytes_of("intention"), bytes_of("execution"), 5},
      {bytes_of(""), bytes_of(""), 0},
      {bytes_of(""), bytes_of("ab"), 2},
      {bytes_of("abc"), bytes_of("abc"), 0},
      {bytes_of("abc"), bytes_of(""), 3},
      {bytes_of("ab"), bytes_of("ba"), 2},
      {phones({"HH", "AH", "L", "OW"}), phones({"HH", "EH", "L", "OW"}), 1},
      {phones({"K", "AE", "T"}), phones({"AE", "K", "T", "S"}), 3}};
  for (const auto& [a, b, d] : cases) {
    EXPECT_EQ(edit_distance(a, b), d);
    EXPECT_EQ(edit_distance(b, a), d);
  }
}

// Ids 3..6 stand for A B C D.
constexpr int64_t A = 3, B = 4, C = 5, D = 6;
const Symbols& abcd() {
  static const Symbols symbols = Symbols::from_list({"<pad>", "<bos>", "<eos>", "A", "B", "C", "D"}, "test");
  return symbols;
}

// Five words, by hand:
//  1. ABC against ABD (1 edit) and ABCD (1 edit): a tie, the first wins: 1 edit of 3.
//  2. AB  against CD (2) and AB (0): right, 0 of 2 (the second reference).
//  3. ()  against ABC: 3 deletions of 3.
//  4. DA  against A (1: D inserted) and AD (2): 1 of 1.
//  5. AC  against AD: 1 of 2.
// WER = 4 wrong / 5 = 80%; PER = 100 · (1+0+3+1+1) / (3+2+3+1+2) = 600/11 %.
const std::vector<Ids> kPredictions = {{A, B, C}, {A, B}, {}, {D, A}, {A, C}};
const std::vector<std::vector<Ids>> kReferences = {
    {{A, B, D}, {A, B, C, D}}, {{C, D}, {A, B}}, {{A, B, C}}, {{A}, {A, D}}, {{A, D}}};

TEST(G2pMetrics, NearestReferenceTiesGoToTheFirst) {
  const WordScore tie = nearest(kPredictions[0], kReferences[0]);
  EXPECT_EQ(tie.edits, 1);
  EXPECT_EQ(tie.ref_length, 3);
  EXPECT_EQ(tie.ref_index, 0);
  const WordScore second = nearest(kPredictions[1], kReferences[1]);
  EXPECT_EQ(second.edits, 0);
  EXPECT_EQ(second.ref_index, 1);
  expect_error([] { nearest(Ids{A}, {}); }, {"without any reference"});
}

TEST(G2pMetrics, PerAndWerByHand) {
  const ErrorRates rates = score(kPredictions, kReferences);
  EXPECT_EQ(rates.words, 5);
  EXPECT_EQ(rates.wrong, 4);
  EXPECT_EQ(rates.edits, 6);
  EXPECT_EQ(rates.ref_length, 11);
  EXPECT_DOUBLE_EQ(rates.wer(), 80.0);
  EXPECT_DOUBLE_EQ(rates.per(), 600.0 / 11);
  EXPECT_TRUE(std::isnan(ErrorRates{}.per()));
  EXPECT_TRUE(std::isnan(ErrorRates{}.wer()));
  expect_error([] { score({{A}}, {}); }, {"1 predictions for 0 words"});

  // Words 1-5 have 3, 2, 3, 1 and 3 letters: lengths 1 (word 4), 2 (word 2), 3 (words 1, 3, 5).
  const auto by_length = rates_by_length(kPredictions, kReferences, {3, 2, 3, 1, 3});
  ASSERT_EQ(by_length.size(), 3u);
  EXPECT_EQ(by_length.at(1).wrong, 1);
  EXPECT_DOUBLE_EQ(by_length.at(2).wer(), 0.0);
  EXPECT_EQ(by_length.at(3).words, 3);
  EXPECT_DOUBLE_EQ(by_length.at(3).per(), 100.0 * 5 / 8);
}

TEST(G2pMetrics, ConfusionsFromTheNearestAlignment) {
  const std::string none(kNothing);
  // Word 1: D→C; word 3: A, B, C deleted; word 4: D inserted; word 5: D→C again.
  EXPECT_EQ(top_confusions(kPredictions, kReferences, abcd(), 10),
            (std::vector<Confusion>{{"D", "C", 2}, {"A", none, 1}, {"B", none, 1}, {"C", none, 1}, {none, "D", 1}}));
  EXPECT_EQ(top_confusions(kPredictions, kReferences, abcd(), 2).size(), 2u);
  // A swap is two substitutions (a match or substitution is preferred to a deletion).
  EXPECT_EQ(top_confusions({{B, A}}, {{{A, B}}}, abcd(), 5), (std::vector<Confusion>{{"A", "B", 1}, {"B", "A", 1}}));
  EXPECT_TRUE(top_confusions({{A, B}}, {{{A, B}}}, abcd(), 5).empty());
}

int count(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(G2pReport, SvgHoldsTheRatesConfusionsAndAlignments) {
  ReportData data;
  data.title = "g2p <small>";
  data.by_length = rates_by_length(kPredictions, kReferences, {3, 2, 3, 1, 5});
  data.confusions = top_confusions(kPredictions, kReferences, abcd(), 3);
  data.alignments = {{{"c", "a", "t"}, {"K", "AE", "T"}, {0.9, 0.1, 0, 0.05, 0.9, 0.05, 0, 0.2, 0.8}},
                     {{"o", "x"}, {"AA", "K", "S"}, {1, 0, 0.5, 0.5, 0, 1}}};
  const std::string svg = report_svg(data);
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_EQ(count(svg, "<svg "), 1 + 3 + 2);  // the whole, then three charts and two heatmaps
  EXPECT_EQ(count(svg, "</svg>"), count(svg, "<svg "));
  EXPECT_EQ(count(svg, "<text"), count(svg, "</text>"));
  EXPECT_NE(svg.find("g2p &lt;small&gt;: error rates by word length"), std::string::npos);
  EXPECT_EQ(count(svg, "<polyline"), 2);  // PER and WER
  for (const char* label : {"1 letter<", "2 letters", "3 letters", "5 letters", ">D → C<", ">A → ∅<",
                            "Cross-attention: cat → K AE T", "Cross-attention: ox → AA K S", ">0.90<", ">AE<"})
    EXPECT_NE(svg.find(label), std::string::npos) << label;
  EXPECT_EQ(svg.find("4 letters"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  // The nested documents sit one below the other: the whole is as tall as its parts.
  EXPECT_NE(svg.find("<svg x=\"0\" y=\"0\""), std::string::npos);

  data.alignments[0].weights.pop_back();
  expect_error([&] { report_svg(data); }, {"8 attention weights for 3 phonemes × 3 letters"});
}

// Words of lengths 1 to 7 (none of 6), each with the reference ABCD; a right prediction is ABCD, a
// wrong one ABC (one deletion): over a length's n words with w wrong, WER = 100·w/n, PER = 25·w/n.
//   length  1  2  3  4  5  7
//   words   2 12  5  6 20  3
//   wrong   2  3  0  1  4  3
// Pooled shortest first into groups of at least 10 words: 1–2 (14 words, 5 wrong), 3–4 (11, 1), 5
// (20, 4) and 7 (3, 3), which is short and the last, so joins 5: 5–7 (23, 7).
struct LengthCase {
  std::vector<Ids> predictions;
  std::vector<std::vector<Ids>> references;
  std::vector<int64_t> lengths;
};
LengthCase length_case() {
  LengthCase c;
  for (const auto& [length, words, wrong] :
       std::vector<std::tuple<int64_t, int, int>>{{1, 2, 2}, {2, 12, 3}, {3, 5, 0}, {4, 6, 1}, {5, 20, 4}, {7, 3, 3}})
    for (int k = 0; k < words; ++k) {
      c.predictions.push_back(k < wrong ? Ids{A, B, C} : Ids{A, B, C, D});
      c.references.push_back({{A, B, C, D}});
      c.lengths.push_back(length);
    }
  return c;
}

TEST(G2pReport, RareLengthsArePooledWithTheNextLongerOnes) {
  const LengthCase c = length_case();
  const std::vector<LengthGroup> groups =
      pool_lengths(rates_by_length(c.predictions, c.references, c.lengths), kMinWordsPerPoint);
  ASSERT_EQ(kMinWordsPerPoint, 10);
  const std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>> expected = {
      {1, 2, 14, 5}, {3, 4, 11, 1}, {5, 7, 23, 7}};  // first, last, words, wrong
  ASSERT_EQ(groups.size(), expected.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto [first, last, words, wrong] = expected[g];
    EXPECT_EQ(groups[g].first, first) << g;
    EXPECT_EQ(groups[g].last, last) << g;
    EXPECT_EQ(groups[g].rates.words, words) << g;
    EXPECT_EQ(groups[g].rates.wrong, wrong) << g;
    EXPECT_EQ(groups[g].rates.edits, wrong) << g;
    EXPECT_EQ(groups[g].rates.ref_length, 4 * words) << g;
    EXPECT_DOUBLE_EQ(groups[g].rates.wer(), 100.0 * static_cast<double>(wrong) / static_cast<double>(words)) << g;
    EXPECT_DOUBLE_EQ(groups[g].rates.per(), 25.0 * static_cast<double>(wrong) / static_cast<double>(words)) << g;
  }
  // Every length its own point when one word is enough; all in one when no group reaches the minimum.
  const auto by_length = rates_by_length(c.predictions, c.references, c.lengths);
  const std::vector<LengthGroup> single = pool_lengths(by_length, 1);
  ASSERT_EQ(single.size(), 6u);
  EXPECT_EQ(single[5].first, 7);
  EXPECT_EQ(single[5].rates.words, 3);
  const std::vector<LengthGroup> one = pool_lengths(by_length, 100);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].first, 1);
  EXPECT_EQ(one[0].last, 7);
  EXPECT_EQ(one[0].rates.words, 48);
  EXPECT_TRUE(pool_lengths({}, 10).empty());
  expect_error([] { pool_lengths({{0, ErrorRates{}}}, 10); }, {"a word length of 0"});
}

// The texts of the <text> elements at height `y` in `svg`, in order.
std::vector<std::string> texts_at(const std::string& svg, const std::string& y) {
  std::vector<std::string> out;
  const std::string key = " y=\"" + y + "\" text-anchor=\"middle\">";
  for (size_t at = svg.find(key); at != std::string::npos; at = svg.find(key, at + 1)) {
    const size_t start = at + key.size();
    out.push_back(svg.substr(start, svg.find("</text>", start) - start));
  }
  return out;
}

TEST(G2pReport, RatesChartNamesEachPointsLengthsAndWords) {
  const LengthCase c = length_case();
  ReportData data;
  data.title = "lengths";
  data.by_length = rates_by_length(c.predictions, c.references, c.lengths);
  const std::string svg = report_svg(data);
  const std::string rates = svg.substr(0, svg.find("</svg>"));  // the first chart
  // Under the plot (which ends at y = 370): the lengths, then each point's words.
  EXPECT_EQ(texts_at(rates, "388"), (std::vector<std::string>{"1–2", "3–4", "5–7"}));
  EXPECT_EQ(texts_at(rates, "402"), (std::vector<std::string>{"14", "11", "23"}));
  EXPECT_EQ(count(rates, "<circle"), 3 * 2);  // a dot per point, PER and WER
  EXPECT_NE(rates.find("fewer than 10 words are pooled"), std::string::npos);
  // The bars still show every length's own words.
  for (const char* bar : {"1 letter<", "7 letters<", ">20<"}) EXPECT_NE(svg.find(bar), std::string::npos) << bar;
  EXPECT_EQ(count(svg, "<text"), count(svg, "</text>"));
  EXPECT_EQ(count(svg, "<svg "), count(svg, "</svg>"));
  EXPECT_EQ(svg.find("nan"), std::string::npos);
}

}  // namespace
}  // namespace ag::g2p
