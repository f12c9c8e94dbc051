// Sentiment data: labelled sentences from a TSV file (label<TAB>text), the tokenizer and the
// vocabulary (<pad> = 0, <unk> = 1, then the training words in sorted order).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace ag::sentiment {

struct Example {
  std::string text;
  int label = 0;  // 1 positive, 0 negative
};

// The most words a text may have: attention is quadratic in it, so a runaway line (a whole file
// without newlines) is an error instead of a multi-gigabyte attention matrix.
inline constexpr size_t kMaxWords = 1000;

// Lines "0<TAB>text" or "1<TAB>text"; blank lines and lines starting with '#' are skipped.
// A malformed line (no tab, another label, text that is not UTF-8, has no words or more than
// kMaxWords) is an error naming the file, its line number and what was expected.
std::vector<Example> read_tsv(const std::string& path);
std::vector<Example> parse_tsv(const std::string& text, const std::string& source);

// Lower-cased, punctuation stripped (bytes ≥ 0x80 are kept: UTF-8 letters stay whole), split on
// white space.
std::vector<std::string> tokenize(const std::string& text);

class Vocabulary {
 public:
  static constexpr int64_t kPad = 0;
  static constexpr int64_t kUnk = 1;

  Vocabulary() = default;
  explicit Vocabulary(const std::vector<Example>& training);  // every word of the training texts
  explicit Vocabulary(std::vector<std::string> words);        // as stored in a checkpoint, in order

  int64_t size() const { return static_cast<int64_t>(words_.size()); }
  int64_t index(const std::string& word) const;  // kUnk if unknown
  const std::vector<std::string>& words() const { return words_; }

  // Token indices of each text, padded with kPad to the longest: (N, T) i64, and the key-padding
  // mask (N, T) b8, true at padding. Empty texts get one <unk> so no row is all padding. Bytes that
  // are not UTF-8 are words like any other (unknown ones); more than kMaxWords words is an error.
  std::pair<Tensor, Tensor> encode(const std::vector<std::string>& texts) const;

 private:
  std::vector<std::string> words_;
  std::map<std::string, int64_t> index_;
};

}  // namespace ag::sentiment
