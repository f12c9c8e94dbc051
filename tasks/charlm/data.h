// Character-level text for `train charlm`: the vocabulary (the sorted code points of the training
// text), encoding with a clear error for characters outside it, and nanoGPT's split.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ag::charlm {

class Vocabulary {
 public:
  static Vocabulary of_text(std::u32string_view text);  // sorted, each code point once
  // The vocabulary as stored in a checkpoint: its characters in order, UTF-8.
  static Vocabulary from_utf8(const std::string& characters, const std::string& source);
  std::string to_utf8() const;

  int64_t size() const { return static_cast<int64_t>(chars_.size()); }
  // Token ids of `text`. A character outside the vocabulary is an error listing every such
  // character (`source` names the text), or, with drop_unknown, is left out.
  std::vector<int64_t> encode(std::u32string_view text, const std::string& source, bool drop_unknown = false) const;
  std::string decode(int64_t id) const;  // one character, UTF-8

 private:
  std::u32string chars_;  // sorted
};

// nanoGPT's split: the first int(0.9 · N) tokens train, the rest validate.
struct Split {
  std::vector<int64_t> train, val;
};
Split split_90_10(const std::vector<int64_t>& ids);

}  // namespace ag::charlm
