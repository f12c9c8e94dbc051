// Character-level text for `train charlm`: the vocabulary (the sorted code points of the training
// text), encoding with a clear error for characters outside it, and nanoGPT's split.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ag::charlm {

// The most distinct characters a vocabulary holds: every CJK text's characters in common use, while
// the embedding, the output layer and each step's logits (all growing with it) stay within memory.
inline constexpr int64_t kMaxVocabulary = 16384;

class Vocabulary {
 public:
  // Sorted, each code point once; more than kMaxVocabulary is an error naming `source`.
  static Vocabulary of_text(std::u32string_view text, const std::string& source);
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

// The text a run reads, decoded: `data`, else Moby-Dick from the data cache.
struct Text {
  std::string path;
  std::u32string chars;
  std::string sha256;  // of the file's bytes: recorded in config.json, compared by --resume and eval
};
Text load_text(const std::string& data);

}  // namespace ag::charlm
