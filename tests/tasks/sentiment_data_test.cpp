// Sentiment data: the TSV reader's errors, the tokenizer, the vocabulary and padding.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "engine/io.h"
#include "tasks/common/embedded.h"
#include "tasks/common/text.h"
#include "tasks/sentiment/data.h"
#include "tests/test_util.h"

namespace ag::sentiment {
namespace {

TEST(SentimentData, TokenizerMatchesThePeer) {
  // The peer: re.sub(r"[^\w\s]", "", s.lower()).split()
  EXPECT_EQ(tokenize("Fantastic product, works perfectly"),
            (std::vector<std::string>{"fantastic", "product", "works", "perfectly"}));
  EXPECT_EQ(tokenize("One of the worst purchases I've made"),
            (std::vector<std::string>{"one", "of", "the", "worst", "purchases", "ive", "made"}));
  EXPECT_EQ(tokenize("A must-have!"), (std::vector<std::string>{"a", "musthave"}));
  EXPECT_EQ(tokenize("  \t "), std::vector<std::string>{});
}

TEST(SentimentData, TheSeedsSentencesGiveTheSeedsVocabulary) {
  const std::vector<Example> train = read_tsv(std::string(ATTOGRAD_SOURCE_DIR) + "/tasks/sentiment/train.tsv");
  ASSERT_EQ(train.size(), 50u);
  EXPECT_EQ(train[0].text, "I love this product");
  EXPECT_EQ(train[0].label, 1);
  EXPECT_EQ(Vocabulary(train).size(), 107 + 2);  // RESULTS.md: 107 words plus <pad> and <unk>
  EXPECT_EQ(read_tsv(std::string(ATTOGRAD_SOURCE_DIR) + "/tasks/sentiment/test.tsv").size(), 5u);
}

TEST(SentimentData, TheProgramCarriesTheDataFilesAsTheyAre) {
  for (const char* name : {"sentiment/train.tsv", "sentiment/test.tsv"}) {
    std::ifstream in(std::string(ATTOGRAD_SOURCE_DIR) + "/tasks/" + name, std::ios::binary);
    const std::string on_disk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(on_disk.empty()) << name;
    EXPECT_EQ(tasks::embedded_file(name), on_disk) << name;
  }
  expect_error([] { tasks::embedded_file("sentiment/none.tsv"); },
               {"no embedded file 'sentiment/none.tsv'", "train.tsv"});
}

TEST(SentimentData, EncodePadsAndMasks) {
  const Vocabulary vocab(std::vector<Example>{{"good movie", 1}, {"bad", 0}});
  auto [indices, padding] = vocab.encode({"Good movie!", "bad unknownword worse", ""});
  EXPECT_EQ(indices.shape(), (Shape{3, 3}));
  EXPECT_EQ(indices.to_vector(), (std::vector<double>{3, 4, 0, 2, 1, 1, 1, 0, 0}));
  EXPECT_EQ(padding.to_vector(), (std::vector<double>{0, 0, 1, 0, 0, 0, 0, 1, 1}));
}

TEST(SentimentData, MalformedLinesNameTheirLine) {
  expect_error([] { parse_tsv("1\tfine\nno tab here\n", "d.tsv"); }, {"d.tsv:2", "no tab"});
  expect_error([] { parse_tsv("# c\n2\tbad label\n", "d.tsv"); }, {"d.tsv:2", "0 or 1", "'2'"});
  expect_error([] { parse_tsv("1\t\xff\xfe\n", "d.tsv"); }, {"d.tsv:1", "UTF-8"});
  expect_error([] { parse_tsv("1\t ,.! \n", "d.tsv"); }, {"d.tsv:1", "no words"});
  expect_error([] { parse_tsv("\n# only comments\n", "d.tsv"); }, {"d.tsv", "no examples"});
  expect_error([] { read_tsv("/nonexistent/data.tsv"); }, {"/nonexistent/data.tsv", "cannot open"});
  expect_error([] { read_tsv("/tmp"); }, {"/tmp", "directory"});
  expect_error([] { read_tsv("/dev/null"); }, {"/dev/null", "not a regular file"});
  EXPECT_EQ(parse_tsv("1\tcaf\xc3\xa9 ok\r\n", "d.tsv")[0].text, "caf\xc3\xa9 ok");
}

// Attention is quadratic in the words: a runaway text is an error naming its line, and the
// longest allowed one still loads.
TEST(SentimentData, TextsAreCappedAtKMaxWords) {
  std::string longest;
  for (size_t i = 0; i < kMaxWords; ++i) longest += "w ";
  EXPECT_EQ(tokenize(parse_tsv("1\t" + longest + "\n", "d.tsv")[0].text).size(), kMaxWords);
  expect_error([&] { parse_tsv("0\tok\n1\t" + longest + "one more\n", "d.tsv"); },
               {"d.tsv:2", "more than the 1000 words"});
  const Vocabulary vocab(std::vector<std::string>{"<pad>", "<unk>", "w"});
  EXPECT_EQ(vocab.encode({longest}).first.size(1), static_cast<int64_t>(kMaxWords));
  expect_error([&] { vocab.encode({longest + "w"}); }, {"encode", "more than the 1000 words"});
}

// A line that is one endless word is refused at the cap, whichever tokenizer reads it; the longest
// allowed word is kept whole.
TEST(SentimentData, WordsAreCappedAtKMaxWordBytes) {
  const std::string longest(kMaxWordBytes, 'a');
  for (Tokenizer tokenizer : {Tokenizer::seed002, Tokenizer::words}) {
    EXPECT_EQ(tokenize("ok " + longest + " ok", tokenizer), (std::vector<std::string>{"ok", longest, "ok"}));
    expect_error([&] { tokenize(longest + "a", tokenizer); }, {"longer than the 100 bytes a word may have"});
  }
  expect_error([&] { parse_tsv("1\tfine\n0\t" + std::string(1 << 20, 'x') + "\n", "d.tsv"); },
               {"d.tsv:2", "longer than the 100 bytes"});
}

// Rows sorted by length (ties in the given order), cut at max_rows; the attention budget
// (rows × T² × heads) cuts earlier, and a row longer than the budget goes alone.
TEST(SentimentData, BatchesByLengthSortStablyAndCutAtTheLimits) {
  const std::vector<size_t> lengths = {5, 1, 3, 1, 5, 2, 3};
  const std::vector<int64_t> order = {4, 3, 2, 1, 0, 5, 6};
  using Batches = std::vector<std::vector<int64_t>>;
  EXPECT_EQ(batches_by_length(order, lengths, {.max_rows = 3}), (Batches{{3, 1, 5}, {2, 6, 4}, {0}}));
  EXPECT_EQ(batches_by_length(order, lengths, {.max_rows = 100}), (Batches{{3, 1, 5, 2, 6, 4, 0}}));
  // Row 2 would make 4 rows of length 3, 36 cells: over a budget of 26, so it starts a batch.
  EXPECT_EQ(batches_by_length(order, lengths, {.max_rows = 100, .max_cells = 26}),
            (Batches{{3, 1, 5}, {2, 6}, {4}, {0}}));
  EXPECT_EQ(batches_by_length(order, lengths, {.max_rows = 100, .max_cells = 52, .heads = 2}),
            (Batches{{3, 1, 5}, {2, 6}, {4}, {0}}));
  EXPECT_EQ(batches_by_length(order, lengths, {.max_rows = 100, .max_cells = 4}),
            (Batches{{3, 1}, {5}, {2}, {6}, {4}, {0}}));
  EXPECT_EQ(batches_by_length({}, lengths, {}), Batches{});
}

// Text to predict is not checked for UTF-8: stray bytes become (unknown) words, never a crash.
TEST(SentimentData, BytesThatAreNotUtf8AreWordsLikeAnyOther) {
  EXPECT_EQ(tokenize("bad \xff\xfe film"), (std::vector<std::string>{"bad", "\xff\xfe", "film"}));
  const Vocabulary vocab(std::vector<std::string>{"<pad>", "<unk>", "bad"});
  EXPECT_EQ(vocab.encode({"bad \xff\xfe"}).first.to_vector(), (std::vector<double>{2, 1}));
}

}  // namespace
// Text files as people have them (tasks/common/text.h): one reading for every task.
TEST(TasksText, LineEndingsAndAByteOrderMarkReadAsPlainLines) {
  EXPECT_EQ(tasks::as_text("a\rb\r\nc\nd", "t"), "a\nb\nc\nd");
  EXPECT_EQ(tasks::as_text("\xef\xbb\xbfhi\r", "t"), "hi\n");
  EXPECT_EQ(tasks::as_text("x\xef\xbb\xbf", "t"), "x\xef\xbb\xbf");  // only a leading mark is dropped
  EXPECT_EQ(tasks::split_lines("a\n\nb\n"), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(tasks::split_lines("a"), (std::vector<std::string>{"a"}));
  // split_lines reads the three line ends itself (predict's stdin is split without as_text).
  EXPECT_EQ(tasks::split_lines("a\rb\r\nc\n\r\r\nd\r"), (std::vector<std::string>{"a", "b", "c", "", "", "d"}));
  // 50 CR-only lines are 50 examples, not one.
  std::string cr_only;
  for (int i = 0; i < 50; ++i) cr_only += (i % 2 ? "1\tgood " : "0\tbad ") + std::to_string(i) + "\r";
  EXPECT_EQ(parse_tsv(cr_only, "cr.tsv").size(), 50u);
  const std::string bom_line = std::string("\xef\xbb\xbf") + "1\tfine\r\n";  // apart: "\xbf1" is one escape
  EXPECT_TRUE(parse_tsv(bom_line, "bom.tsv")[0].label);
}

TEST(TasksText, InvalidUtf8IsNamedByFileLineAndOffsetWhateverTheLineEndings) {
  expect_error([] { tasks::as_text("ok\rstill ok\r\nbad \xff", "f.txt"); },
               {"f.txt:3: invalid UTF-8 at byte offset 17 (byte 0xff)"});
  expect_error([] { tasks::as_text("\xef\xbb\xbf\xc3", "g.txt"); }, {"g.txt:1:", "byte offset 3"});
  expect_error([] { parse_tsv("1\tfine\n0\tnot \xc3\x28 fine\n", "d.tsv"); }, {"d.tsv:2: invalid UTF-8", "offset 13"});
}

TEST(TasksText, PrintableShowsControlBytesAndBytesThatAreNotUtf8) {
  EXPECT_EQ(tasks::printable(std::string("a\0b\x1b[1m\t\xff caf\xc3\xa9", 15)),
            "a\\x00b\\x1b[1m\\x09\\xff caf\xc3\xa9");
  expect_error([] { parse_tsv(std::string("1\x00x\tbad\n", 8), "n.tsv"); }, {"got '1\\x00x'"});
}

// Data read is an input of the command (Note [inputs are not outputs] in engine/io.h): writing over it
// is refused.
TEST(TasksText, DataReadIsAnInput) {
  const TempDir dir;
  write_bytes(dir / "in.txt", "1\tgood\n");
  tasks::read_text_file(dir / "in.txt");
  expect_error([&] { write_file_atomically(dir / "in.txt", "report"); }, {"in.txt: is the same file as"});
  EXPECT_EQ(read_bytes(dir / "in.txt"), "1\tgood\n");
}

}  // namespace ag::sentiment
