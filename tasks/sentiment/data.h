// Sentiment data: labelled sentences from a TSV file (label<TAB>text), the two tokenizers and
// the vocabulary (<pad> = 0, <unk> = 1, then the training words in sorted order).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tensor.h"

namespace ag::sentiment {

struct Example {
  std::string text;
  int label = 0;            // 1 positive, 0 negative
  std::string source = "";  // where it came from ("amazon", "imdb", "yelp"); empty for a TSV line
};

// The most words a text may have: attention is quadratic in it, so a runaway line (a whole file
// without newlines) is an error instead of a multi-gigabyte attention matrix.
inline constexpr size_t kMaxWords = 1000;
// The longest word, in bytes: a line that is one endless word is refused before it costs memory.
inline constexpr size_t kMaxWordBytes = 100;

// How big one batch may be: at most max_rows rows, and at most max_cells attention weights, i.e.
// rows × T² × heads with T the batch's longest row (a row longer than that budget goes alone).
struct BatchLimits {
  size_t max_rows = 256;
  size_t max_cells = size_t{1} << 21;  // 8 MB of f32 per (N, T, T) tensor
  size_t heads = 1;
};

// The task's one way to batch: the rows of `order` stable-sorted by lengths[row] (rows of one
// length keep their order in `order`) and cut greedily under `limits`. Training cuts a shuffled
// order into batch_size rows and shuffles the batches; validation, eval and predict cut every row
// under the memory budget. Either way a short sentence is padded only to its neighbours' length.
std::vector<std::vector<int64_t>> batches_by_length(std::vector<int64_t> order, const std::vector<size_t>& lengths,
                                                    const BatchLimits& limits);

// How many of the examples come from `source` ("" counts them all).
int64_t count_from(const std::vector<Example>& examples, const std::string& source);

// Lines "0<TAB>text" or "1<TAB>text"; blank lines and lines starting with '#' are skipped.
// A malformed line (no tab, another label, text that is not UTF-8, has no words, more than
// kMaxWords or a word longer than kMaxWordBytes) is an error naming the file, its line number and
// what was expected.
std::vector<Example> read_tsv(const std::string& path);
std::vector<Example> parse_tsv(const std::string& text, const std::string& source);

// How a text becomes words; a checkpoint records which one its vocabulary was built with.
// - seed002 (seed 002's peer): lower-cased, ASCII punctuation dropped, split on white space
//   ("I've" → "ive", "must-have" → "musthave"; bytes ≥ 0x80 are kept, so UTF-8 letters stay whole).
// - words (the UCI peer's `(?:[^\W_]|')+` on text.lower()): maximal runs of letters, digits and
//   apostrophes ("I've" → "i've", "must-have" → "must" "have"). Letters are the ASCII ones and
//   non-ASCII letters (é, ê, å; every code point above U+00FF outside the punctuation, symbol and
//   emoji blocks); Latin-1 punctuation and the C1 controls (\x85 \x96 \x97: mojibake of … – —)
//   separate words. Upper-case ASCII and Latin-1 letters are lower-cased. A byte that is not
//   UTF-8 counts as a letter: stray bytes become (unknown) words.
enum class Tokenizer { seed002, words };

std::string_view tokenizer_name(Tokenizer tokenizer);
// The tokenizer of a name tokenizer_name gives; an error naming the known ones otherwise.
Tokenizer tokenizer_named(const std::string& name);

// The words of a text; more than kMaxWords words or a word of more than kMaxWordBytes bytes is an
// error as soon as the tokenizer reaches it (so a runaway line costs no more memory than that).
std::vector<std::string> tokenize(const std::string& text, Tokenizer tokenizer = Tokenizer::seed002);
// tokenize(), its error prefixed with `where` (a file and line, say).
std::vector<std::string> words_of(const std::string& text, Tokenizer tokenizer, const std::string& where);

class Vocabulary {
 public:
  static constexpr int64_t kPad = 0;
  static constexpr int64_t kUnk = 1;

  Vocabulary() = default;
  // Every word seen at least min_count times in the training texts.
  explicit Vocabulary(const std::vector<Example>& training, Tokenizer tokenizer = Tokenizer::seed002,
                      int64_t min_count = 1);
  // As stored in a checkpoint, in order.
  explicit Vocabulary(std::vector<std::string> words, Tokenizer tokenizer = Tokenizer::seed002);

  int64_t size() const { return static_cast<int64_t>(words_.size()); }
  int64_t index(const std::string& word) const;  // kUnk if unknown
  const std::vector<std::string>& words() const { return words_; }
  Tokenizer tokenizer() const { return tokenizer_; }
  std::vector<std::string> tokenize(const std::string& text) const { return sentiment::tokenize(text, tokenizer_); }

  // The word indices of a text; an empty text gets one <unk>, so no row is all padding. Bytes that
  // are not UTF-8 are words like any other (unknown ones); the caps of tokenize() apply.
  std::vector<int64_t> indices(const std::string& text) const;
  // Rows of word indices padded with kPad to the longest: (N, T) i64, and the key-padding mask
  // (N, T) b8, true at padding.
  static std::pair<Tensor, Tensor> pad(const std::vector<const std::vector<int64_t>*>& rows);
  // indices() of each text, padded.
  std::pair<Tensor, Tensor> encode(const std::vector<std::string>& texts) const;

 private:
  std::vector<std::string> words_;
  std::map<std::string, int64_t> index_;
  Tokenizer tokenizer_ = Tokenizer::seed002;
};

}  // namespace ag::sentiment
