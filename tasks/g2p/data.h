// The data of `train g2p`: the CMU Pronouncing Dictionary as the npm package
// cmu-pronouncing-dictionary@3.0.0 ships it (package/index.js, cached by tools/fetch_data.sh),
// or a user's own `source<TAB>target` pairs; the hash split by word; the symbol tables of both
// sides. The rules (filter, drop reasons, merging, split) are the PyTorch peer's
// (../shared/peer/g2p_torch.py), so both programs train and score on the same words.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ag::g2p {

using Pronunciation = std::vector<std::string>;  // phoneme symbols, e.g. {"HH", "AH", "L", "OW"}

// How a lexicon's words are split, by a hash of the word's UTF-8 bytes, % 10: 0 test, 1 val, else
// train. `peer`: FNV-1a 64 as it is, the PyTorch peer's rule, kept for CMUdict so that both programs
// train and score on the same words. `mixed`: FNV-1a 64 through a finaliser first (ag::mix64), for a
// user's pairs: FNV-1a's lowest bit is the parity of the bytes' lowest bits (each step XORs a byte in,
// then multiplies by an odd prime; the offset basis is odd), and 10 is even, so under `peer` that
// parity alone decides whether a word can be a validation word (odd buckets) or a test word (even
// ones): words whose letters all have even codes ("bdf…") are never test words, words with one
// odd-coded letter among them ("abd…") never validation words, however many there are.
enum class SplitRule { peer, mixed };

struct Lexicon {
  std::string path;                               // the file it came from
  std::vector<std::string> words;                 // sorted by bytes, each once
  std::vector<std::vector<Pronunciation>> prons;  // per word, in file order, identical ones merged
  std::vector<std::string> summary;               // "data: …" lines for a person: counts, drops, merges
  SplitRule split_rule = SplitRule::peer;         // CMUdict's; read_pairs sets mixed
  int64_t pairs() const;                          // (word, pronunciation) pairs
};

// The npm package's index.js, parsed without a JavaScript engine. Entry lines are
// `  "word": "W ER1 D",` (the peer's regex); `word(N)` is an alternate, grouped under `word` in file
// order; a `# comment` in a value is cut off; lines that do not start with `"` are skipped (counted).
// A line that starts with `"` but is not an entry, an empty pronunciation or a phoneme that is not
// [A-Z]+ with an optional stress digit 0-2 is an error naming path:line. Words must match
// ^[a-z][a-z']*$ (the others are dropped and counted by reason: dot, digit, hyphen, leading
// apostrophe, other); stress digits are stripped unless `stress`; pronunciations of a word that
// are then identical are merged. The summary carries the file's sha256 and says whether it is the
// pinned one (the peer's figures hold for that file only).
Lexicon read_cmudict(const std::string& path, bool stress);
// The same rules on a file's bytes (`path` names it in messages and in Lexicon::path).
Lexicon parse_cmudict(std::string_view bytes, const std::string& path, bool stress);

// At most this many characters (code points) in a source, tokens in a target.
inline constexpr int64_t kMaxSourceChars = 64;
inline constexpr int64_t kMaxTargetTokens = 64;

// A user's pairs: UTF-8 lines `source<TAB>target` (a BOM, CRLF and CR endings taken as
// tasks::read_text_file does); the target is tokens separated by spaces, the source is taken
// character by character. Lines with the same source are its alternatives, in file order
// (identical ones merged). An error names path:line for a line without exactly one tab, an empty
// side, a control character, a Unicode space in the target (tasks::is_unicode_space: never taken
// into a phoneme's name), a target token "<pad>", "<bos>" or "<eos>", or a side longer than the
// limits above; an empty file or invalid UTF-8 is an error too.
Lexicon read_pairs(const std::string& path);
Lexicon parse_pairs(std::string_view bytes, const std::string& path);

enum class Split { train, val, test };

Split split_of(std::string_view word, SplitRule rule = SplitRule::peer);
std::string_view split_name(Split split);  // "train", "val", "test"

// Indices into lexicon.words of the words in `split`, in the words' order.
std::vector<int64_t> words_in(const Lexicon& lexicon, Split split);

// The peer's g2p_split.tsv: one line per word, in byte order, `word<TAB>split<TAB>p1|p2|…`, each
// pronunciation its phonemes joined by spaces.
std::string split_table(const Lexicon& lexicon);

// Symbol ids. Both sides have <pad> = 0; the target side has <bos> = 1 and <eos> = 2 as well.
inline constexpr int64_t kPad = 0, kBos = 1, kEos = 2;

class Symbols {
 public:
  // "<pad>" + the sorted distinct characters (code points, as UTF-8) of all the lexicon's words.
  static Symbols source_of(const Lexicon& lexicon);
  // "<pad>", "<bos>", "<eos>" + the sorted distinct phonemes of all the lexicon's pronunciations.
  static Symbols target_of(const Lexicon& lexicon);
  // A stored table (a checkpoint's; `source` names it in errors): non-empty, distinct symbols,
  // "<pad>" first, then either "<bos>", "<eos>" and target tokens, or single characters.
  static Symbols from_list(const std::vector<std::string>& symbols, const std::string& source);
  std::string to_json() const;  // a JSON array of the symbols, for a checkpoint's metadata
  static Symbols from_json(const std::string& json, const std::string& source);

  int64_t size() const { return static_cast<int64_t>(symbols_.size()); }
  const std::string& symbol(int64_t id) const;
  const std::vector<std::string>& list() const { return symbols_; }
  bool contains(const std::string& symbol) const { return id_of(symbol) >= 0; }

  // The ids of a word's characters; characters not in the table are an error naming them and
  // `where` (e.g. "predict: the word 'naïve'").
  std::vector<int64_t> encode_word(std::string_view word, const std::string& where) const;
  // The ids of phonemes (no <bos>/<eos> added); an unknown one is an error naming it and `where`.
  std::vector<int64_t> encode_phonemes(const Pronunciation& phonemes, const std::string& where) const;
  // The symbols of `ids` joined by `sep` ("" for a word, " " for phonemes).
  std::string decode(const std::vector<int64_t>& ids, const std::string& sep) const;

 private:
  explicit Symbols(std::vector<std::string> symbols, const std::string& source);
  int64_t id_of(const std::string& symbol) const;  // -1 if absent
  std::vector<std::string> symbols_;
  std::unordered_map<std::string, int64_t> ids_;
};

}  // namespace ag::g2p
