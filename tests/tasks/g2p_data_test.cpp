// G2P data: the CMUdict reader's counts, split and symbol tables against the PyTorch peer's
// printed figures (../shared/peer/G2P.md) and its split file, the reader's errors on files made
// here, and a user's own pairs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "engine/hash.h"
#include "tasks/common/corpus.h"
#include "tasks/common/text.h"
#include "tasks/g2p/data.h"
#include "tests/test_util.h"

namespace ag::g2p {
namespace {

const std::string kIndexJs = "cmudict/index.js";

// The cached corpus, parsed once per process; null (and the reason) when the cache lacks it.
const Lexicon* cached_cmudict(bool stress, std::string& why_missing) {
  static std::unique_ptr<Lexicon> lexicons[2];
  const std::string path = tasks::data_cache_dir() + "/" + kIndexJs;
  if (!std::filesystem::is_regular_file(path)) {
    why_missing = path + " is absent: run tools/fetch_data.sh";
    return nullptr;
  }
  if (!lexicons[stress]) lexicons[stress] = std::make_unique<Lexicon>(read_cmudict(path, stress));
  return lexicons[stress].get();
}

#define CMUDICT_OR_SKIP(name, stress)                        \
  std::string why_missing;                                   \
  const Lexicon* name = cached_cmudict(stress, why_missing); \
  if (name == nullptr) GTEST_SKIP() << why_missing;

void write(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

int64_t pairs_of(const Lexicon& lexicon, const std::vector<int64_t>& indices) {
  int64_t n = 0;
  for (const int64_t k : indices) n += static_cast<int64_t>(lexicon.prons[static_cast<size_t>(k)].size());
  return n;
}

TEST(G2pData, FnvAndSplitRule) {
  EXPECT_EQ(fnv1a64("hello"), 0xa430d84680aabd0bULL);  // the peer's start-up check
  // 0xa430d84680aabd0b % 10 = 11831194018420276491 % 10 = 1.
  EXPECT_EQ(split_of("hello"), Split::val);
  EXPECT_EQ(split_of("hello", SplitRule::mixed), split_of("hello", SplitRule::mixed));  // a rule, not a draw
  EXPECT_EQ(split_name(Split::train), "train");
  EXPECT_EQ(split_name(Split::val), "val");
  EXPECT_EQ(split_name(Split::test), "test");
}

// FNV-1a's lowest bit is the parity of the bytes' lowest bits, so under the peer's rule words of one
// odd-coded letter ('a') and even-coded ones are never validation words (bucket 1); a user's pairs are
// split on mixed bits.
TEST(G2pData, UserPairsAreSplitOnMixedBits) {
  int64_t peer_val = 0, mixed[3] = {0, 0, 0};
  const std::string even = "bdfhjlnprtvxz";
  for (const char a : even)
    for (const char b : even)
      for (const char c : even) {
        const std::string word{'a', a, b, c};
        peer_val += split_of(word) == Split::val;
        ++mixed[static_cast<int>(split_of(word, SplitRule::mixed))];
      }
  EXPECT_EQ(peer_val, 0);
  const double words = 13.0 * 13 * 13;  // about 80% train, 10% validation, 10% test
  EXPECT_NEAR(mixed[static_cast<int>(Split::train)] / words, 0.8, 0.05);
  EXPECT_NEAR(mixed[static_cast<int>(Split::val)] / words, 0.1, 0.03);
  EXPECT_NEAR(mixed[static_cast<int>(Split::test)] / words, 0.1, 0.03);
  TempDir dir;
  const std::string path = (dir / "pairs.tsv").string();
  write(path, "bdf\tF D B\n");
  EXPECT_EQ(read_pairs(path).split_rule, SplitRule::mixed);
}

TEST(G2pData, CmudictCountsAndSplitAreThePeers) {
  CMUDICT_OR_SKIP(lexicon, false);
  // The peer's `data:` lines (G2P.md: 135,155 entries, 9,109 alternates, 22 comments, the drops).
  const std::vector<std::string> expected = {
      "data: 135158 lines, 135155 entries (9109 alternates 'word(N)'), 3 other lines skipped, 22 '#' comments "
      "stripped",
      "data: dropped (dot               ):   127 entries,   114 words",
      "data: dropped (digit             ):     0 entries,     0 words",
      "data: dropped (hyphen            ):  1066 entries,  1012 words",
      "data: dropped (leading_apostrophe):    15 entries,    15 words",
      "data: dropped (other             ):     0 entries,     0 words",
      "data: dropped total: 1208 entries, 1141 words",
      "data: kept 124905 words, 133644 (word, pronunciation) pairs; 303 duplicate pronunciations merged (identical "
      "once stress is stripped)"};
  ASSERT_EQ(lexicon->summary.size(), expected.size() + 1);
  EXPECT_NE(lexicon->summary[0].find("ef8b2b976d2e5801b7541ebcc7714f538d1ffa0ebb28645259536e2666bd2948 (cmu-"),
            std::string::npos)
      << lexicon->summary[0];
  for (size_t k = 0; k < expected.size(); ++k) EXPECT_EQ(lexicon->summary[k + 1], expected[k]);
  EXPECT_EQ(lexicon->words.size(), 124905u);
  EXPECT_EQ(lexicon->pairs(), 133644);
  EXPECT_TRUE(std::is_sorted(lexicon->words.begin(), lexicon->words.end()));
  EXPECT_TRUE(std::adjacent_find(lexicon->words.begin(), lexicon->words.end()) == lexicon->words.end());

  const auto train = words_in(*lexicon, Split::train), val = words_in(*lexicon, Split::val),
             test = words_in(*lexicon, Split::test);
  EXPECT_EQ(train.size(), 100026u);
  EXPECT_EQ(pairs_of(*lexicon, train), 107051);
  EXPECT_EQ(val.size(), 12446u);
  EXPECT_EQ(pairs_of(*lexicon, val), 13346);
  EXPECT_EQ(test.size(), 12433u);
  EXPECT_EQ(pairs_of(*lexicon, test), 13247);
  EXPECT_TRUE(std::is_sorted(test.begin(), test.end()));

  const Symbols source = Symbols::source_of(*lexicon), target = Symbols::target_of(*lexicon);
  EXPECT_EQ(source.size(), 28);  // <pad> ' a-z
  EXPECT_EQ(source.symbol(1), "'");
  EXPECT_EQ(source.symbol(27), "z");
  EXPECT_EQ(target.size(), 42);  // <pad> <bos> <eos> + 39 phonemes
  EXPECT_EQ(target.symbol(3), "AA");
  EXPECT_EQ(target.symbol(41), "ZH");

  // The peer's g2p_split.tsv: its published sha256, and word for word where the file is at hand.
  const std::string table = split_table(*lexicon);
  EXPECT_EQ(tasks::sha256_hex(table), "558d3f498b9fdde17b70ba91a470abc578c6fea005ed9c74af537f4712dc9748");
  const std::string peer_file = std::string(ATTOGRAD_SOURCE_DIR) + "/../shared/peer/g2p_split.tsv";
  if (!std::filesystem::is_regular_file(peer_file)) GTEST_SKIP() << peer_file << " is absent: compared by sha256 only";
  const std::vector<std::string> ours = tasks::split_lines(table),
                                 peers = tasks::split_lines(tasks::read_data_file(peer_file));
  ASSERT_EQ(ours.size(), peers.size());
  for (size_t k = 0; k < ours.size(); ++k) ASSERT_EQ(ours[k], peers[k]) << "line " << k + 1;
}

TEST(G2pData, CmudictWithStressKeepsTheDigits) {
  CMUDICT_OR_SKIP(lexicon, true);
  EXPECT_EQ(lexicon->words.size(), 124905u);
  EXPECT_EQ(lexicon->pairs(), 133947);
  EXPECT_EQ(Symbols::target_of(*lexicon).size(), 3 + 69);
  const auto hello = std::lower_bound(lexicon->words.begin(), lexicon->words.end(), "hello");
  ASSERT_EQ(*hello, "hello");
  EXPECT_EQ(lexicon->prons[static_cast<size_t>(hello - lexicon->words.begin())][0],
            (Pronunciation{"HH", "AH0", "L", "OW1"}));
}

TEST(G2pData, CmudictGroupsAlternatesStripsCommentsAndMergesDuplicates) {
  TempDir dir;
  write(dir / "index.js",
        "/** @type {{ [word: string]: string }} */\n"
        "export const dictionary = {\n"
        "  \"zoo\": \"Z UW1\",\n"
        "  \"abc\": \"EY1 B IY1 S IY1\",\n"
        "  \"abc(2)\": \"EY2 B IY2 S IY1 # an acronym\",\n"
        "  \"zoo(2)\": \"Z OW1\",\n"
        "  \"zoo(3)\": \"Z UW0\",\n"
        "  \"a.b\": \"EY1 B IY1\",\n"
        "  \"x-ray\": \"EH1 K S R EY2\",\n"
        "  \"'tis\": \"T IH1 Z\",\n"
        "  \"b2b\": \"B IY1 T UW1 B IY1\"\n"
        "}\n");
  const Lexicon plain = read_cmudict((dir / "index.js").string(), false);
  EXPECT_EQ(plain.words, (std::vector<std::string>{"abc", "zoo"}));
  ASSERT_EQ(plain.prons.size(), 2u);
  EXPECT_EQ(plain.prons[0], (std::vector<Pronunciation>{{"EY", "B", "IY", "S", "IY"}}));  // the second merged
  EXPECT_EQ(plain.prons[1], (std::vector<Pronunciation>{{"Z", "UW"}, {"Z", "OW"}}));
  EXPECT_EQ(plain.pairs(), 3);
  EXPECT_NE(plain.summary[0].find("not the pinned"), std::string::npos);
  EXPECT_EQ(plain.summary[1],
            "data: 12 lines, 9 entries (3 alternates 'word(N)'), 3 other lines skipped, 1 '#' comments stripped");
  EXPECT_EQ(plain.summary[2], "data: dropped (dot               ):     1 entries,     1 words");
  EXPECT_EQ(plain.summary[3], "data: dropped (digit             ):     1 entries,     1 words");
  EXPECT_EQ(plain.summary[8],
            "data: kept 2 words, 3 (word, pronunciation) pairs; 2 duplicate pronunciations merged (identical once "
            "stress is stripped)");
  const Lexicon stressed = read_cmudict((dir / "index.js").string(), true);
  EXPECT_EQ(stressed.prons[0].size(), 2u);
  EXPECT_EQ(stressed.prons[1].size(), 3u);
  EXPECT_EQ(split_table(plain), "abc\tval\tEY B IY S IY\nzoo\ttrain\tZ UW|Z OW\n");
}

TEST(G2pData, CmudictMalformedLinesAreErrorsNamingTheLine) {
  TempDir dir;
  const auto file = [&](const std::string& entry) {
    write(dir / "index.js", "export const dictionary = {\n  \"ok\": \"OW1 K EY1\",\n" + entry + "\n}\n");
    return (dir / "index.js").string();
  };
  const std::string where = (dir / "index.js").string() + ":3";
  expect_error([&] { read_cmudict(file("  \"word\" \"W ER1 D\","), false); }, {where, "starts like an entry"});
  expect_error([&] { read_cmudict(file("  \"word\": \"W ER1 D\",,"), false); }, {where, "starts like an entry"});
  expect_error([&] { read_cmudict(file("  \"word\": \"W ER1 D"), false); }, {where, "starts like an entry"});
  expect_error([&] { read_cmudict(file("  \"word\": \"W ER3 D\","), false); }, {where, "bad phoneme 'ER3'"});
  expect_error([&] { read_cmudict(file("  \"word\": \"W er D\","), false); }, {where, "bad phoneme 'er'"});
  expect_error([&] { read_cmudict(file("  \"word\": \" # nothing\","), false); }, {where, "no phonemes"});
  expect_error([&] { read_cmudict(file("  \"x\xff\": \"EH1 K S\","), false); }, {":3", "invalid UTF-8"});
}

TEST(G2pData, PairsAreGroupedBySource) {
  TempDir dir;
  write(dir / "pairs.tsv",
        "\xEF\xBB\xBFna\xC3\xAFve\tn a i v\r\ncat\tk a t\r\nna\xC3\xAFve\tn a  e v \r\ncat\tk a t\r\n");
  const Lexicon lexicon = read_pairs((dir / "pairs.tsv").string());
  EXPECT_EQ(lexicon.words, (std::vector<std::string>{"cat", "na\xC3\xAFve"}));
  EXPECT_EQ(lexicon.prons[1], (std::vector<Pronunciation>{{"n", "a", "i", "v"}, {"n", "a", "e", "v"}}));
  EXPECT_EQ(lexicon.pairs(), 3);
  ASSERT_EQ(lexicon.summary.size(), 1u);
  EXPECT_NE(lexicon.summary[0].find("4 lines, 2 sources (1 with alternatives), 3 pairs; 1 duplicate lines merged"),
            std::string::npos)
      << lexicon.summary[0];
  const Symbols source = Symbols::source_of(lexicon);
  EXPECT_EQ(source.list(), (std::vector<std::string>{"<pad>", "a", "c", "e", "n", "t", "v", "\xC3\xAF"}));
  EXPECT_EQ(source.encode_word("na\xC3\xAFve", "here"), (std::vector<int64_t>{4, 1, 7, 6, 3}));
  EXPECT_EQ(source.decode({4, 1, 7, 6, 3}, ""), "na\xC3\xAFve");
}

TEST(G2pData, BadPairsAreErrorsNamingFileAndLine) {
  TempDir dir;
  const std::string path = (dir / "pairs.tsv").string();
  const auto expect_line_error = [&](const std::string& bad_line, const std::string& what) {
    write(path, "ok\to k\n" + bad_line + "\n");
    expect_error([&] { read_pairs(path); }, {path + ":2", what});
  };
  expect_line_error("no tab here", "exactly one tab");
  expect_line_error("a\tb\tc", "exactly one tab");
  expect_line_error("\tb", "source (before the tab) is empty");
  expect_line_error("a\t  ", "target (after the tab) has no tokens");
  expect_line_error("a\x07\tb", "control character U+0007");
  expect_line_error("a\tb <eos>", "reserved");
  expect_line_error(std::string(65, 'x') + "\tb", "65 characters; at most 64");
  std::string long_target = "t";
  for (int k = 0; k < 64; ++k) long_target += " t";
  expect_line_error("a\t" + long_target, "65 tokens; at most 64");
  expect_line_error("a\xC3\tb", "invalid UTF-8");
  expect_line_error("", "the line is blank");
  expect_line_error(" \t ", "the line is blank");
  write(path, "");
  expect_error([&] { read_pairs(path); }, {path, "empty"});
  // The limits are inclusive: 64 characters and 64 tokens are fine.
  write(path, std::string(64, 'x') + "\t" + long_target.substr(2) + "\n");
  EXPECT_EQ(read_pairs(path).prons[0][0].size(), 64u);
}

TEST(G2pData, SymbolsRoundTripAndRefuseBadTables) {
  const Symbols target = Symbols::from_list({"<pad>", "<bos>", "<eos>", "AH", "K", "T"}, "test");
  EXPECT_EQ(target.encode_phonemes({"K", "AH", "T"}, "cat"), (std::vector<int64_t>{4, 3, 5}));
  EXPECT_EQ(target.decode({4, 3, 5}, " "), "K AH T");
  const Symbols again = Symbols::from_json(target.to_json(), "checkpoint");
  EXPECT_EQ(again.list(), target.list());
  EXPECT_EQ(target.to_json(), R"(["<pad>","<bos>","<eos>","AH","K","T"])");
  expect_error([&] { target.encode_phonemes({"K", "OW"}, "the word 'co'"); }, {"the word 'co'", "'OW'"});
  expect_error([&] { target.encode_phonemes({"<eos>"}, "x"); }, {"'<eos>'"});

  const Symbols source = Symbols::from_list({"<pad>", "a", "b"}, "test");
  expect_error([&] { source.encode_word("abc\xC3\xA9", "predict: the word"); },
               {"predict: the word", "2 character(s)", "'c' (U+0063)", "U+00E9"});
  expect_error([&] { Symbols::from_list({"a", "<pad>"}, "ckpt"); }, {"ckpt", "start with <pad>"});
  expect_error([&] { Symbols::from_list({"<pad>", "a", "a"}, "ckpt"); }, {"ckpt", "twice"});
  expect_error([&] { Symbols::from_list({"<pad>", "ab"}, "ckpt"); }, {"ckpt", "not one character"});
  expect_error([&] { Symbols::from_list({"<pad>", ""}, "ckpt"); }, {"ckpt", "empty"});
  expect_error([&] { Symbols::from_list({"<pad>", "<bos>", "<eos>", "<pad>"}, "ckpt"); }, {"ckpt", "specials"});
  expect_error([&] { Symbols::from_json("{\"a\": 1}", "ckpt"); }, {"ckpt", "not a JSON array"});
  expect_error([&] { Symbols::from_json("[\"<pad>\", 3]", "ckpt"); }, {"ckpt", "expected strings"});
  expect_error([&] { target.symbol(6); }, {"symbol id 6"});
}

}  // namespace
}  // namespace ag::g2p
