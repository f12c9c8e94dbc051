// The UCI sentiment corpus: the JSON reader and its errors, DESIGN.md's hash split against the
// PyTorch peer's (an excerpt of its split file is committed), the peer's tokenizer, and the split
// and vocabulary sizes of RESULTS.md §8 on the cached corpus (tools/fetch_data.sh fetches it; a
// missing file fails these tests with corpus_path's message saying so).
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "engine/hash.h"
#include "tasks/sentiment/report.h"
#include "tasks/sentiment/uci.h"
#include "tests/test_util.h"

namespace ag::sentiment {
namespace {

// The lines of a committed golden file, '#' comments dropped, each cut at its first `fields - 1`
// tabs (the text, last, may hold anything but a tab).
std::vector<std::vector<std::string>> golden_rows(const std::string& name, size_t fields) {
  std::ifstream in(std::string(ATTOGRAD_SOURCE_DIR) + "/tests/golden/" + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> row;
    for (size_t k = 1; k < fields; ++k) {
      const size_t tab = line.find('\t');
      row.push_back(line.substr(0, tab));
      line = tab == std::string::npos ? "" : line.substr(tab + 1);
    }
    row.push_back(line);
    rows.push_back(row);
  }
  return rows;
}

TEST(SentimentUci, SplitKeyAndHashFollowDesignMd) {
  EXPECT_EQ(uci::split_key("  Great   for the\tJAWBONE. \r\n"), "great for the jawbone.");
  EXPECT_EQ(uci::split_key("Caf\xc3\x89 \xc3\xa9t\xc3\xa9"), "caf\xc3\x89 \xc3\xa9t\xc3\xa9");  // only ASCII is lowered
  // FNV-1a 64 values computed in Python from the rule's constants.
  EXPECT_EQ(fnv1a64(""), 14695981039346656037ULL);
  EXPECT_EQ(fnv1a64(uci::split_key("Good case, Excellent value.")), 12010671649332884379ULL);
  EXPECT_EQ(fnv1a64(uci::split_key("  Great   for the\tJAWBONE. ")), 10619316770685840356ULL);
  EXPECT_EQ(uci::split_of("Good case, Excellent value."), uci::Split::train);  // % 10 == 9
}

TEST(SentimentUci, HashSplitAgreesWithThePeersSplitFile) {
  const auto rows = golden_rows("uci_split_excerpt.tsv", 4);
  ASSERT_GT(rows.size(), 40u);
  std::map<std::string, int> seen;
  for (const auto& row : rows) {
    if (row[0] == "split") continue;  // the header
    const uci::Split expected = row[0] == "test"  ? uci::Split::test
                                : row[0] == "val" ? uci::Split::validation
                                                  : uci::Split::train;
    EXPECT_EQ(uci::split_of(row[3]), expected) << row[3];
    ++seen[row[0]];
  }
  EXPECT_GE(seen["train"], 12);
  EXPECT_GE(seen["val"], 12);
  EXPECT_GE(seen["test"], 12);
}

TEST(SentimentUci, TokenizerMatchesThePeerOnTheCorpusHardCases) {
  const auto rows = golden_rows("uci_tokens.tsv", 2);
  ASSERT_GT(rows.size(), 30u);
  for (const auto& row : rows) {
    std::string joined;
    for (const std::string& w : tokenize(row[0], Tokenizer::words)) joined += (joined.empty() ? "" : " ") + w;
    EXPECT_EQ(joined, row[1]) << row[0];
  }
  EXPECT_EQ(tokenize("Don't -- it's a MUST-have, 10/10 \xc3\x89T\xc3\x89!", Tokenizer::words),
            (std::vector<std::string>{"don't", "it's", "a", "must", "have", "10", "10", "\xc3\xa9t\xc3\xa9"}));
  EXPECT_EQ(tokenize("snake_case \xe2\x80\x99quoted\xe2\x80\x99 \xff", Tokenizer::words),
            (std::vector<std::string>{"snake", "case", "quoted", "\xff"}));  // _ and ’ separate; a stray byte stays
}

TEST(SentimentUci, ParseDropsTheJunkRecordAndCountsIt) {
  const uci::SourceFile file = uci::parse_source(
      R"([{"text": "Great phone.", "class": 1}, {"text": "Broke in a day.", "class": 0},
          {"text": "Maybe.", "class": 2}, {"text": "", "class": null}])",
      "amazon", "amazon.json");
  ASSERT_EQ(file.examples.size(), 2u);
  EXPECT_EQ(file.dropped, 2);
  EXPECT_EQ(file.examples[0].text, "Great phone.");
  EXPECT_EQ(file.examples[0].label, 1);
  EXPECT_EQ(file.examples[1].label, 0);
  EXPECT_EQ(file.examples[1].source, "amazon");
}

TEST(SentimentUci, MalformedFilesNameTheFileAndRecord) {
  expect_error([] { uci::parse_source("[{\"text\": \"a\", ", "imdb", "/x/imdb.json"); },
               {"/x/imdb.json", "not valid JSON", "\"class\": 0 or 1"});
  expect_error([] { uci::parse_source("{\"text\": \"a\"}", "imdb", "imdb.json"); },
               {"imdb.json", "expected a JSON list", "object"});
  expect_error([] { uci::parse_source(R"([{"text": "ok", "class": 1}, {"text": 5, "class": 1}])", "imdb", "i.json"); },
               {"i.json", "record 1", "not a {\"text\": string"});
  expect_error([] { uci::parse_source(R"([{"text": "", "class": null}])", "yelp", "y.json"); },
               {"y.json", "no sentences"});
  std::string long_text;
  for (size_t i = 0; i <= kMaxWords; ++i) long_text += "w ";
  expect_error([&] { uci::parse_source("[{\"text\": \"" + long_text + "\", \"class\": 1}]", "yelp", "y.json"); },
               {"y.json", "record 0", "more than the 1000 words"});
}

TEST(SentimentUci, TheCachedCorpusGivesResultsMdsSplitAndVocabulary) {
  const uci::Corpus corpus = uci::read_corpus();
  EXPECT_EQ(corpus.dropped, (std::map<std::string, int64_t>{{"amazon", 1}, {"imdb", 1}, {"yelp", 1}}));
  EXPECT_EQ(corpus.train.size(), 2430u);
  EXPECT_EQ(corpus.validation.size(), 277u);
  EXPECT_EQ(corpus.test.size(), 293u);
  EXPECT_EQ(Vocabulary(corpus.train, Tokenizer::words).size(), 4710 + 2);
  EXPECT_LT(Vocabulary(corpus.train, Tokenizer::words, 2).size(), 4710 + 2);
  // A text (duplicates included) never sits in two splits.
  std::map<std::string, std::set<int>> splits_of;
  int split = 0;
  for (const auto* part : {&corpus.train, &corpus.validation, &corpus.test}) {
    for (const Example& e : *part) splits_of[uci::split_key(e.text)].insert(split);
    ++split;
  }
  for (const auto& [key, splits] : splits_of) EXPECT_EQ(splits.size(), 1u) << key;
  EXPECT_LT(splits_of.size(), 3000u);  // the corpus holds duplicated texts
}

TEST(SentimentUci, ReportCountsPerSourceAndRanksMistakesByConfidence) {
  const Predictions p{{{"a", 1, "amazon"}, {"b", 0, "amazon"}, {"c", 1, "yelp"}, {"d", 0, "yelp"}},
                      {0.9, 0.8, 0.4, 0.01}};
  EXPECT_DOUBLE_EQ(accuracy(p), 0.5);
  EXPECT_DOUBLE_EQ(accuracy(p, "amazon"), 0.5);
  EXPECT_DOUBLE_EQ(accuracy(p, "yelp"), 0.5);
  EXPECT_EQ(most_confident_mistakes(p, 10), (std::vector<size_t>{1, 2}));  // 0.8 is surer than 0.4
  const std::string svg = report_svg(p, "t");
  EXPECT_NE(svg.find("P(positive) = 0.800, labelled negative (amazon)"), std::string::npos);
  EXPECT_NE(svg.find("50.00%"), std::string::npos);
}

}  // namespace
}  // namespace ag::sentiment
