#include "tasks/sentiment/data.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "engine/error.h"

namespace ag::sentiment {

namespace {

// True if text is well-formed UTF-8.
bool valid_utf8(const std::string& text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const int extra = byte < 0x80 ? 0 : (byte >> 5) == 0x6 ? 1 : (byte >> 4) == 0xE ? 2 : (byte >> 3) == 0x1E ? 3 : -1;
    if (extra < 0 || (extra > 0 && i + extra >= text.size())) return false;
    for (int k = 1; k <= extra; ++k)
      if ((static_cast<unsigned char>(text[i + k]) >> 6) != 0x2) return false;
    i += extra + 1;
  }
  return true;
}

}  // namespace

std::vector<Example> parse_tsv(const std::string& text, const std::string& source) {
  std::vector<Example> examples;
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const size_t tab = line.find('\t');
    AG_CHECK(tab != std::string::npos, "{}:{}: expected 'label<TAB>text', found no tab", source, number);
    const std::string label = line.substr(0, tab);
    AG_CHECK(label == "0" || label == "1", "{}:{}: label must be 0 or 1, got '{}'", source, number,
             label.substr(0, 20));
    Example example{line.substr(tab + 1), label == "1"};
    AG_CHECK(valid_utf8(example.text), "{}:{}: the text is not valid UTF-8", source, number);
    const size_t words = tokenize(example.text).size();
    AG_CHECK(words > 0, "{}:{}: the text has no words", source, number);
    AG_CHECK(words <= kMaxWords, "{}:{}: the text has {} words, more than the {} a text may have", source, number,
             words, kMaxWords);
    examples.push_back(std::move(example));
  }
  AG_CHECK(!examples.empty(), "{}: no examples (expected lines 'label<TAB>text')", source);
  return examples;
}

std::vector<Example> read_tsv(const std::string& path) {
  AG_CHECK(!std::filesystem::is_directory(path), "{}: is a directory, expected a data file", path);
  // Before opening: reading a FIFO or a device could block or never end.
  AG_CHECK(!std::filesystem::exists(path) || std::filesystem::is_regular_file(path),
           "{}: is not a regular file, expected a data file", path);
  std::ifstream in(path, std::ios::binary);
  AG_CHECK(in.good(), "{}: cannot open the data file", path);
  std::ostringstream text;
  text << in.rdbuf();
  AG_CHECK(!in.bad(), "{}: cannot read the data file", path);
  return parse_tsv(text.str(), path);
}

std::vector<std::string> tokenize(const std::string& text) {
  std::vector<std::string> tokens;
  std::string current;
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (std::isspace(byte)) {
      if (!current.empty()) tokens.push_back(std::move(current));
      current.clear();
    } else if (byte >= 0x80 || std::isalnum(byte) || c == '_') {
      current += static_cast<char>(std::tolower(byte));
    }  // other ASCII punctuation is dropped
  }
  if (!current.empty()) tokens.push_back(std::move(current));
  return tokens;
}

Vocabulary::Vocabulary(const std::vector<Example>& training) {
  std::set<std::string> words;
  for (const Example& e : training)
    for (std::string& w : tokenize(e.text)) words.insert(std::move(w));
  std::vector<std::string> ordered = {"<pad>", "<unk>"};
  ordered.insert(ordered.end(), words.begin(), words.end());
  *this = Vocabulary(std::move(ordered));
}

Vocabulary::Vocabulary(std::vector<std::string> words) : words_(std::move(words)) {
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

std::pair<Tensor, Tensor> Vocabulary::encode(const std::vector<std::string>& texts) const {
  std::vector<std::vector<int64_t>> rows;
  size_t longest = 1;
  for (const std::string& text : texts) {
    std::vector<int64_t> row;
    for (const std::string& w : tokenize(text)) row.push_back(index(w));
    if (row.empty()) row.push_back(kUnk);
    AG_CHECK(row.size() <= kMaxWords, "encode: a text has {} words, more than the {} a text may have: '{}…'",
             row.size(), kMaxWords, text.substr(0, 40));
    longest = std::max(longest, row.size());
    rows.push_back(std::move(row));
  }
  const auto n = static_cast<int64_t>(rows.size()), t = static_cast<int64_t>(longest);
  Tensor indices = full({n, t}, static_cast<double>(kPad), DType::i64);
  Tensor padding = full({n, t}, 1, DType::b8);
  for (int64_t i = 0; i < n; ++i)
    for (size_t j = 0; j < rows[i].size(); ++j) {
      indices.data<int64_t>()[i * t + j] = rows[i][j];
      padding.data<bool>()[i * t + j] = false;
    }
  return {indices, padding};
}

}  // namespace ag::sentiment
