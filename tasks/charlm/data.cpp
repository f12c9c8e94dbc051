#include "tasks/charlm/data.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "engine/error.h"
#include "tasks/common/corpus.h"
#include "tasks/common/text.h"

namespace ag::charlm {

namespace {

void check_size(size_t distinct, const std::string& source) {
  AG_CHECK(distinct <= static_cast<size_t>(kMaxVocabulary),
           "{}: {} distinct characters, more than a charlm vocabulary's limit of {} (the embedding, the output layer "
           "and every step's logits grow with it)",
           source, distinct, kMaxVocabulary);
}

}  // namespace

Vocabulary Vocabulary::of_text(std::u32string_view text, const std::string& source) {
  const std::set<char32_t> unique(text.begin(), text.end());
  check_size(unique.size(), source);
  Vocabulary vocabulary;
  vocabulary.chars_.assign(unique.begin(), unique.end());
  return vocabulary;
}

Vocabulary Vocabulary::from_utf8(const std::string& characters, const std::string& source) {
  Vocabulary vocabulary;
  vocabulary.chars_ = tasks::decode_utf8(characters, source + " (its vocabulary)");
  check_size(vocabulary.chars_.size(), source + " (its vocabulary)");
  AG_CHECK(!vocabulary.chars_.empty() && std::is_sorted(vocabulary.chars_.begin(), vocabulary.chars_.end()) &&
               std::adjacent_find(vocabulary.chars_.begin(), vocabulary.chars_.end()) == vocabulary.chars_.end(),
           "{}: the stored vocabulary is not a sorted list of distinct characters", source);
  return vocabulary;
}

std::string Vocabulary::to_utf8() const { return tasks::encode_utf8(chars_); }

std::vector<int64_t> Vocabulary::encode(std::u32string_view text, const std::string& source, bool drop_unknown) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  std::set<char32_t> unknown;
  for (const char32_t c : text) {
    const auto it = std::lower_bound(chars_.begin(), chars_.end(), c);
    if (it != chars_.end() && *it == c) {
      ids.push_back(it - chars_.begin());
    } else {
      unknown.insert(c);
    }
  }
  if (unknown.empty()) return ids;
  constexpr size_t kListed = 5;  // a summary, not a flood: a text in another script lacks thousands
  std::string listed;
  size_t count = 0;
  for (auto it = unknown.begin(); it != unknown.end() && count < kListed; ++it, ++count) {
    if (count > 0) listed += ' ';
    listed += tasks::describe_char(*it);
  }
  if (unknown.size() > kListed) listed += fmt::format(" and {} more", unknown.size() - kListed);
  AG_CHECK(drop_unknown,
           "{}: {} character(s) the model's vocabulary does not have: {} (--drop-unknown leaves them out)", source,
           unknown.size(), listed);
  fmt::print(stderr,
             "{}: --drop-unknown left out {} of its {} characters ({} the model's vocabulary does not have: {})\n",
             source, text.size() - ids.size(), text.size(), unknown.size(), listed);
  return ids;
}

std::string Vocabulary::decode(int64_t id) const {
  AG_CHECK(id >= 0 && id < size(), "charlm: token id {} is outside the vocabulary of {}", id, size());
  return tasks::encode_utf8(std::u32string(1, chars_[static_cast<size_t>(id)]));
}

Split split_90_10(const std::vector<int64_t>& ids) {
  const auto n_train = static_cast<size_t>(0.9 * static_cast<double>(ids.size()));  // Python's int(0.9 * N)
  return {{ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n_train)},
          {ids.begin() + static_cast<std::ptrdiff_t>(n_train), ids.end()}};
}

Text load_text(const std::string& data) {
  constexpr const char* kMobyDick = "moby-dick.txt";
  Text text{data.empty() ? tasks::corpus_path(kMobyDick) : data, {}, {}};
  const std::string bytes = data.empty() ? tasks::read_corpus(kMobyDick) : tasks::read_data_file(data);
  text.sha256 = tasks::data_file_sha256(text.path);
  text.chars = tasks::decode_utf8(tasks::as_text(bytes, text.path), text.path);
  AG_CHECK(!text.chars.empty(), "{}: the text is empty, expected UTF-8 text to train on", text.path);
  return text;
}

}  // namespace ag::charlm
