#include "tasks/sentiment/data.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/error.h"
#include "tasks/common/text.h"

namespace ag::sentiment {

namespace {

// The code point of the well-formed UTF-8 sequence at text[i] and its length in bytes, or
// {-1, 1} for a byte that does not start one.
std::pair<int32_t, size_t> next_code_point(const std::string& text, size_t i) {
  const auto byte = static_cast<unsigned char>(text[i]);
  const size_t length = byte < 0x80 ? 1 : (byte >> 5) == 0x6 ? 2 : (byte >> 4) == 0xE ? 3 : (byte >> 3) == 0x1E ? 4 : 0;
  if (length == 0 || i + length > text.size()) return {-1, 1};
  int32_t code = length == 1 ? byte : byte & (0x7F >> length);
  for (size_t k = 1; k < length; ++k) {
    const auto continuation = static_cast<unsigned char>(text[i + k]);
    if ((continuation >> 6) != 0x2) return {-1, 1};
    code = (code << 6) | (continuation & 0x3F);
  }
  return {code, length};
}

}  // namespace

std::vector<Example> parse_tsv(const std::string& text, const std::string& source) {
  std::vector<Example> examples;
  int number = 0;
  for (const std::string& line : tasks::split_lines(tasks::as_text(text, source))) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    const size_t tab = line.find('\t');
    AG_CHECK(tab != std::string::npos, "{}:{}: expected 'label<TAB>text', found no tab", source, number);
    const std::string label = line.substr(0, tab);
    AG_CHECK(!label.empty(), "{}:{}: the label (before the tab) is empty; expected 0 or 1", source, number);
    AG_CHECK(label == "0" || label == "1", "{}:{}: label must be 0 or 1, got '{}'", source, number,
             tasks::printable(label.substr(0, 20)));
    Example example{line.substr(tab + 1), label == "1"};
    AG_CHECK(!words_of(example.text, Tokenizer::seed002, fmt::format("{}:{}", source, number)).empty(),
             "{}:{}: the text has no words", source, number);
    examples.push_back(std::move(example));
  }
  AG_CHECK(!examples.empty(), "{}: no examples (expected lines 'label<TAB>text')", source);
  return examples;
}

int64_t count_from(const std::vector<Example>& examples, const std::string& source) {
  return std::count_if(examples.begin(), examples.end(),
                       [&](const Example& e) { return source.empty() || e.source == source; });
}

std::vector<std::vector<int64_t>> batches_by_length(std::vector<int64_t> order, const std::vector<size_t>& lengths,
                                                    const BatchLimits& limits) {
  AG_CHECK(limits.max_rows >= 1 && limits.heads >= 1, "batches_by_length: max_rows and heads must be ≥ 1");
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return lengths[a] < lengths[b]; });
  std::vector<std::vector<int64_t>> batches;
  for (const int64_t row : order) {
    const size_t t = std::max<size_t>(1, lengths[row]);  // the longest so far: rows come sorted
    const bool fits = !batches.empty() && batches.back().size() < limits.max_rows &&
                      (batches.back().size() + 1) * t * t <= limits.max_cells / limits.heads;
    if (!fits) batches.emplace_back();
    batches.back().push_back(row);
  }
  return batches;
}

std::vector<Example> read_tsv(const std::string& path) { return parse_tsv(tasks::read_data_file(path), path); }

namespace {

// A text's words as a tokenizer finds them, refused as soon as there are more than kMaxWords or a
// word grows past kMaxWordBytes: a runaway line costs no more memory than the caps allow.
class WordList {
 public:
  void extend_word(std::string_view bytes) {
    current_ += bytes;
    AG_CHECK(current_.size() <= kMaxWordBytes, "a word is longer than the {} bytes a word may have", kMaxWordBytes);
  }
  void end_word() {
    if (current_.empty()) return;
    AG_CHECK(words_.size() < kMaxWords, "the text has more than the {} words a text may have", kMaxWords);
    words_.push_back(std::move(current_));
    current_.clear();
  }
  std::vector<std::string> finish() {
    end_word();
    return std::move(words_);
  }

 private:
  std::vector<std::string> words_;
  std::string current_;
};

std::vector<std::string> seed002_words(const std::string& text) {
  WordList words;
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (std::isspace(byte)) {
      words.end_word();
    } else if (byte >= 0x80 || std::isalnum(byte) || c == '_') {
      words.extend_word(std::string(1, static_cast<char>(std::tolower(byte))));
    }  // other ASCII punctuation is dropped
  }
  return words.finish();
}

// Python's str.isalnum() on the code points that matter (see Tokenizer::words), and the apostrophe.
bool is_word_code_point(int32_t code) {
  if (code < 0) return true;  // a stray byte
  if (code < 0x80) return std::isalnum(code) || code == '\'';
  if (code < 0xC0) {  // C1 controls, Latin-1 punctuation and symbols; these few are letters or digits
    for (int32_t alnum : {0xAA, 0xB2, 0xB3, 0xB5, 0xB9, 0xBA, 0xBC, 0xBD, 0xBE})
      if (code == alnum) return true;
    return false;
  }
  if (code < 0x100) return code != 0xD7 && code != 0xF7;  // × and ÷ among the Latin-1 letters
  constexpr std::pair<int32_t, int32_t> kNotLetters[] = {
      {0x2000, 0x2BFF},    // punctuation (’ “ ” – — …), currency, arrows, maths, shapes
      {0x3000, 0x303F},    // CJK punctuation
      {0xFE00, 0xFE0F},    // variation selectors
      {0xFEFF, 0xFEFF},    // byte order mark
      {0x1F000, 0x1FAFF},  // emoji
  };
  for (const auto& [first, last] : kNotLetters)
    if (code >= first && code <= last) return false;
  return true;
}

// A-Z and the Latin-1 capitals À-Þ (but ×) in lower case; other code points as they are.
int32_t lower_case(int32_t code) {
  const bool capital = (code >= 'A' && code <= 'Z') || (code >= 0xC0 && code <= 0xDE && code != 0xD7);
  return capital ? code + 0x20 : code;
}

std::vector<std::string> letter_runs(const std::string& text) {
  WordList words;
  for (size_t i = 0; i < text.size();) {
    const auto [code, length] = next_code_point(text, i);
    if (!is_word_code_point(code)) {
      words.end_word();
    } else if (code < 0) {
      words.extend_word(std::string_view(text).substr(i, 1));
    } else {
      words.extend_word(tasks::encode_utf8(std::u32string(1, static_cast<char32_t>(lower_case(code)))));
    }
    i += length;
  }
  return words.finish();
}

}  // namespace

std::string_view tokenizer_name(Tokenizer tokenizer) { return tokenizer == Tokenizer::words ? "words" : "seed002"; }

Tokenizer tokenizer_named(const std::string& name) {
  for (Tokenizer tokenizer : {Tokenizer::seed002, Tokenizer::words})
    if (tokenizer_name(tokenizer) == name) return tokenizer;
  fail("unknown tokenizer '{}' (expected 'seed002' or 'words')", name);
}

std::vector<std::string> tokenize(const std::string& text, Tokenizer tokenizer) {
  return tokenizer == Tokenizer::words ? letter_runs(text) : seed002_words(text);
}

std::vector<std::string> words_of(const std::string& text, Tokenizer tokenizer, const std::string& where) {
  try {
    return tokenize(text, tokenizer);
  } catch (const Error& e) {
    fail("{}: {}", where, e.what());
  }
}

Vocabulary::Vocabulary(const std::vector<Example>& training, Tokenizer tokenizer, int64_t min_count) {
  AG_CHECK(min_count >= 1, "vocabulary: the minimum count must be at least 1, got {}", min_count);
  std::map<std::string, int64_t> counts;  // sorted by word
  for (const Example& e : training)
    for (std::string& w : sentiment::tokenize(e.text, tokenizer)) ++counts[std::move(w)];
  std::vector<std::string> ordered = {"<pad>", "<unk>"};
  for (auto& [word, count] : counts)
    if (count >= min_count) ordered.push_back(word);
  *this = Vocabulary(std::move(ordered), tokenizer);
}

Vocabulary::Vocabulary(std::vector<std::string> words, Tokenizer tokenizer)
    : words_(std::move(words)), tokenizer_(tokenizer) {
  AG_CHECK(words_.size() >= 2 && words_[kPad] == "<pad>" && words_[kUnk] == "<unk>",
           "vocabulary: expected '<pad>' and '<unk>' first");
  for (size_t i = 0; i < words_.size(); ++i)
    AG_CHECK(index_.emplace(words_[i], static_cast<int64_t>(i)).second, "vocabulary: the word '{}' appears twice",
             words_[i]);
}

int64_t Vocabulary::index(const std::string& word) const {
  auto it = index_.find(word);
  return it == index_.end() ? kUnk : it->second;
}

std::vector<int64_t> Vocabulary::indices(const std::string& text) const {
  std::vector<int64_t> row;
  for (const std::string& w : words_of(text, tokenizer_, "encode")) row.push_back(index(w));
  if (row.empty()) row.push_back(kUnk);
  return row;
}

std::pair<Tensor, Tensor> Vocabulary::pad(const std::vector<const std::vector<int64_t>*>& rows) {
  size_t longest = 1;
  for (const std::vector<int64_t>* row : rows) longest = std::max(longest, row->size());
  const auto n = static_cast<int64_t>(rows.size()), t = static_cast<int64_t>(longest);
  Tensor indices = full({n, t}, static_cast<double>(kPad), DType::i64);
  Tensor padding = full({n, t}, 1, DType::b8);
  for (int64_t i = 0; i < n; ++i)
    for (size_t j = 0; j < rows[i]->size(); ++j) {
      indices.data<int64_t>()[i * t + j] = (*rows[i])[j];
      padding.data<bool>()[i * t + j] = false;
    }
  return {indices, padding};
}

std::pair<Tensor, Tensor> Vocabulary::encode(const std::vector<std::string>& texts) const {
  std::vector<std::vector<int64_t>> rows;
  for (const std::string& text : texts) rows.push_back(indices(text));
  std::vector<const std::vector<int64_t>*> pointers;
  for (const std::vector<int64_t>& row : rows) pointers.push_back(&row);
  return pad(pointers);
}

}  // namespace ag::sentiment
