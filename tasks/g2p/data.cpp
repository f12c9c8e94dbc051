#include "tasks/g2p/data.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "engine/error.h"
#include "engine/hash.h"
#include "tasks/common/corpus.h"
#include "tasks/common/text.h"

namespace ag::g2p {

namespace {

// cmu-pronouncing-dictionary@3.0.0's package/index.js (tools/fetch_data.sh pins the same digest).
constexpr std::string_view kCmudictSha256 = "ef8b2b976d2e5801b7541ebcc7714f538d1ffa0ebb28645259536e2666bd2948";
constexpr std::array<std::string_view, 3> kSpecials = {"<pad>", "<bos>", "<eos>"};

// Words and their pronunciations as a file lists them; finish() sorts the words.
class LexiconBuilder {
 public:
  explicit LexiconBuilder(std::string path) { lexicon_.path = std::move(path); }

  // Adds one pronunciation of `word`; false if the word already had it (merged).
  bool add(const std::string& word, Pronunciation pron) {
    const auto [it, added] = index_.try_emplace(word, static_cast<int64_t>(lexicon_.words.size()));
    if (added) {
      lexicon_.words.push_back(word);
      lexicon_.prons.emplace_back();
    }
    std::vector<Pronunciation>& prons = lexicon_.prons[static_cast<size_t>(it->second)];
    if (std::find(prons.begin(), prons.end(), pron) != prons.end()) return false;
    prons.push_back(std::move(pron));
    return true;
  }

  std::vector<std::string>& summary() { return lexicon_.summary; }

  Lexicon finish() {
    std::vector<size_t> order(lexicon_.words.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return lexicon_.words[a] < lexicon_.words[b]; });
    Lexicon sorted{lexicon_.path, {}, {}, std::move(lexicon_.summary)};
    for (const size_t k : order) {
      sorted.words.push_back(std::move(lexicon_.words[k]));
      sorted.prons.push_back(std::move(lexicon_.prons[k]));
    }
    return sorted;
  }

 private:
  Lexicon lexicon_;
  std::unordered_map<std::string, int64_t> index_;
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_upper(char c) { return c >= 'A' && c <= 'Z'; }
bool is_lower(char c) { return c >= 'a' && c <= 'z'; }

// The pieces of an entry line `"key": "value",` (the peer's ENTRY_RE: JSON-like strings whose
// backslash escapes are kept as written), or false if the line is not one.
bool parse_entry(std::string_view line, std::string_view& key, std::string_view& value) {
  size_t at = 0;
  const auto skip_spaces = [&] {
    while (at < line.size() && is_space(line[at])) ++at;
  };
  const auto quoted = [&](std::string_view& out) {
    if (at >= line.size() || line[at] != '"') return false;
    const size_t begin = ++at;
    while (at < line.size() && line[at] != '"') at += line[at] == '\\' ? 2 : 1;
    if (at >= line.size()) return false;
    out = line.substr(begin, at++ - begin);
    return true;
  };
  skip_spaces();
  if (!quoted(key)) return false;
  skip_spaces();
  if (at >= line.size() || line[at++] != ':') return false;
  skip_spaces();
  if (!quoted(value)) return false;
  skip_spaces();
  if (at < line.size() && line[at] == ',') ++at;
  skip_spaces();
  return at == line.size();
}

// `word(N)` → `word` (the peer's ALT_RE), else the key itself.
std::string_view base_word(std::string_view key, bool& alternate) {
  alternate = false;
  if (!key.ends_with(')')) return key;
  const size_t open = key.rfind('(');
  if (open == std::string_view::npos || open + 2 >= key.size()) return key;
  const std::string_view number = key.substr(open + 1, key.size() - open - 2);
  if (!std::all_of(number.begin(), number.end(), is_digit)) return key;
  alternate = true;
  return key.substr(0, open);
}

// The first reason (in the peer's order) that a word failing ^[a-z][a-z']*$ is dropped.
constexpr std::array<std::string_view, 5> kDropReasons = {"dot", "digit", "hyphen", "leading_apostrophe", "other"};
size_t drop_reason(std::string_view word) {
  if (word.find('.') != std::string_view::npos) return 0;
  if (std::any_of(word.begin(), word.end(), is_digit)) return 1;
  if (word.find('-') != std::string_view::npos) return 2;
  if (word.starts_with('\'')) return 3;
  return 4;
}

bool is_kept_word(std::string_view word) {
  return !word.empty() && is_lower(word[0]) &&
         std::all_of(word.begin(), word.end(), [](char c) { return is_lower(c) || c == '\''; });
}

// Splits at runs of spaces (and, for CMUdict values, tabs), as Python's str.split().
std::vector<std::string> tokens_of(std::string_view text) {
  std::vector<std::string> tokens;
  size_t at = 0;
  while (true) {
    while (at < text.size() && is_space(text[at])) ++at;
    if (at == text.size()) return tokens;
    const size_t begin = at;
    while (at < text.size() && !is_space(text[at])) ++at;
    tokens.emplace_back(text.substr(begin, at - begin));
  }
}

// One CMUdict phoneme checked ([A-Z]+ then an optional 0, 1 or 2), its stress digit dropped unless
// `stress`.
std::string phoneme(const std::string& token, bool stress, const std::string& path, size_t line) {
  const size_t letters = std::find_if_not(token.begin(), token.end(), is_upper) - token.begin();
  const bool digit = letters + 1 == token.size() && token.back() >= '0' && token.back() <= '2';
  AG_CHECK(letters > 0 && (letters == token.size() || digit),
           "{}:{}: bad phoneme '{}': expected ARPAbet letters A-Z and an optional stress digit 0, 1 or 2", path, line,
           tasks::printable(token));
  return stress ? token : token.substr(0, letters);
}

}  // namespace

int64_t Lexicon::pairs() const {
  int64_t n = 0;
  for (const auto& p : prons) n += static_cast<int64_t>(p.size());
  return n;
}

Lexicon read_cmudict(const std::string& path, bool stress) {
  return parse_cmudict(tasks::read_data_file(path), path, stress);
}

Lexicon parse_cmudict(std::string_view bytes, const std::string& path, bool stress) {
  const std::string sha = tasks::sha256_hex(bytes);
  const std::vector<std::string> lines = tasks::split_lines(tasks::as_text(bytes, path));
  LexiconBuilder builder(path);
  int64_t entries = 0, alternates = 0, other = 0, comments = 0, merged = 0;
  std::array<int64_t, kDropReasons.size()> dropped_entries{};
  std::array<std::set<std::string>, kDropReasons.size()> dropped_words;
  for (size_t n = 0; n < lines.size(); ++n) {
    const std::string& line = lines[n];
    std::string_view key, value;
    if (!parse_entry(line, key, value)) {
      const size_t first = std::find_if_not(line.begin(), line.end(), is_space) - line.begin();
      AG_CHECK(first == line.size() || line[first] != '"',
               "{}:{}: a line that starts like an entry but is not one: {}; expected `\"word\": \"PH ON EMES\",`", path,
               n + 1, tasks::printable(line));
      ++other;
      continue;
    }
    ++entries;
    bool alternate = false;
    const std::string word(base_word(key, alternate));
    alternates += alternate;
    if (const size_t hash = value.find('#'); hash != std::string_view::npos) {
      value = value.substr(0, hash);
      ++comments;
    }
    Pronunciation pron;
    for (const std::string& token : tokens_of(value)) pron.push_back(phoneme(token, stress, path, n + 1));
    AG_CHECK(!pron.empty(), "{}:{}: the entry '{}' has no phonemes", path, n + 1, tasks::printable(key));
    if (!is_kept_word(word)) {
      const size_t reason = drop_reason(word);
      ++dropped_entries[reason];
      dropped_words[reason].insert(word);
      continue;
    }
    merged += !builder.add(word, std::move(pron));
  }

  std::vector<std::string>& summary = builder.summary();
  summary.push_back(fmt::format("data: {} sha256 {}{}", path, sha,
                                sha == kCmudictSha256 ? " (cmu-pronouncing-dictionary@3.0.0)"
                                                      : "; not the pinned cmu-pronouncing-dictionary@3.0.0 index.js, "
                                                        "so the peer's figures do not apply"));
  summary.push_back(
      fmt::format("data: {} lines, {} entries ({} alternates 'word(N)'), {} other lines skipped, {} "
                  "'#' comments stripped",
                  lines.size(), entries, alternates, other, comments));
  int64_t total_entries = 0, total_words = 0;
  for (size_t r = 0; r < kDropReasons.size(); ++r) {
    summary.push_back(fmt::format("data: dropped ({:18}): {:>5} entries, {:>5} words", kDropReasons[r],
                                  dropped_entries[r], dropped_words[r].size()));
    total_entries += dropped_entries[r];
    total_words += static_cast<int64_t>(dropped_words[r].size());
  }
  summary.push_back(fmt::format("data: dropped total: {} entries, {} words", total_entries, total_words));
  Lexicon lexicon = builder.finish();
  lexicon.summary.push_back(
      fmt::format("data: kept {} words, {} (word, pronunciation) pairs; {} duplicate pronunciations merged{}",
                  lexicon.words.size(), lexicon.pairs(), merged, stress ? "" : " (identical once stress is stripped)"));
  return lexicon;
}

Lexicon read_pairs(const std::string& path) { return parse_pairs(tasks::read_data_file(path), path); }

Lexicon parse_pairs(std::string_view bytes, const std::string& path) {
  const std::vector<std::string> lines = tasks::split_lines(tasks::as_text(bytes, path));
  AG_CHECK(!lines.empty(), "{}: the file is empty; expected lines `source<TAB>target tokens`", path);
  LexiconBuilder builder(path);
  int64_t merged = 0;
  for (size_t n = 0; n < lines.size(); ++n) {
    const std::string& line = lines[n];
    const std::string where = fmt::format("{}:{}", path, n + 1);
    AG_CHECK(line.find_first_not_of(" \t") != std::string::npos,
             "{}: the line is blank; expected `source<TAB>target tokens`", where);
    const size_t tab = line.find('\t');
    AG_CHECK(tab != std::string::npos && line.find('\t', tab + 1) == std::string::npos,
             "{}: expected `source<TAB>target tokens` with exactly one tab, got {}", where, tasks::printable(line));
    const std::u32string characters = tasks::decode_utf8(line, where);
    for (const char32_t c : characters)
      AG_CHECK(c == U'\t' || !tasks::is_control(c), "{}: the control character {} is not allowed in a pair", where,
               tasks::describe_char(c));
    const std::string source = line.substr(0, tab);
    for (const char32_t c : std::u32string_view(characters).substr(characters.find(U'\t') + 1))
      AG_CHECK(!tasks::is_unicode_space(c),
               "{}: the target has the Unicode space {}, which would join or hide phonemes; separate the target's "
               "tokens with ASCII spaces",
               where, tasks::describe_char(c));
    Pronunciation target;
    for (std::string& token : tokens_of(std::string_view(line).substr(tab + 1))) {
      AG_CHECK(std::find(kSpecials.begin(), kSpecials.end(), token) == kSpecials.end(),
               "{}: the target token '{}' is reserved (one of <pad> <bos> <eos>)", where, token);
      target.push_back(std::move(token));
    }
    AG_CHECK(!source.empty(), "{}: the source (before the tab) is empty", where);
    AG_CHECK(!target.empty(), "{}: the target (after the tab) has no tokens", where);
    const auto source_chars = static_cast<int64_t>(tasks::decode_utf8(source, where).size());
    AG_CHECK(source_chars <= kMaxSourceChars, "{}: the source has {} characters; at most {} are allowed", where,
             source_chars, kMaxSourceChars);
    AG_CHECK(static_cast<int64_t>(target.size()) <= kMaxTargetTokens,
             "{}: the target has {} tokens; at most {} are allowed", where, target.size(), kMaxTargetTokens);
    merged += !builder.add(source, std::move(target));
  }
  Lexicon lexicon = builder.finish();
  lexicon.split_rule = SplitRule::mixed;  // a user's words: Note at SplitRule
  int64_t with_alternatives = 0;
  for (const auto& prons : lexicon.prons) with_alternatives += prons.size() > 1;
  lexicon.summary.push_back(
      fmt::format("data: {}: {} lines, {} sources ({} with alternatives), {} pairs; {} "
                  "duplicate lines merged",
                  path, lines.size(), lexicon.words.size(), with_alternatives, lexicon.pairs(), merged));
  return lexicon;
}

Split split_of(std::string_view word, SplitRule rule) {
  const uint64_t hash = fnv1a64(word);
  const uint64_t bucket = (rule == SplitRule::peer ? hash : mix64(hash)) % 10;
  return bucket == 0 ? Split::test : bucket == 1 ? Split::val : Split::train;
}

std::string_view split_name(Split split) {
  return split == Split::train ? "train" : split == Split::val ? "val" : "test";
}

std::vector<int64_t> words_in(const Lexicon& lexicon, Split split) {
  std::vector<int64_t> indices;
  for (size_t k = 0; k < lexicon.words.size(); ++k)
    if (split_of(lexicon.words[k], lexicon.split_rule) == split) indices.push_back(static_cast<int64_t>(k));
  return indices;
}

std::string split_table(const Lexicon& lexicon) {
  std::string table;
  for (size_t k = 0; k < lexicon.words.size(); ++k) {
    table += lexicon.words[k];
    table += '\t';
    table += split_name(split_of(lexicon.words[k], lexicon.split_rule));
    table += '\t';
    for (size_t p = 0; p < lexicon.prons[k].size(); ++p) {
      if (p > 0) table += '|';
      table += fmt::format("{}", fmt::join(lexicon.prons[k][p], " "));
    }
    table += '\n';
  }
  return table;
}

Symbols::Symbols(std::vector<std::string> symbols, const std::string& source) : symbols_(std::move(symbols)) {
  AG_CHECK(!symbols_.empty() && symbols_[0] == kSpecials[0], "{}: the symbol table must start with <pad>", source);
  const bool target = symbols_.size() >= 3 && symbols_[1] == kSpecials[1] && symbols_[2] == kSpecials[2];
  for (size_t id = 0; id < symbols_.size(); ++id) {
    const std::string& symbol = symbols_[id];
    AG_CHECK(!symbol.empty(), "{}: symbol {} is empty", source, id);
    const bool special = id < (target ? 3 : 1);
    AG_CHECK(special || std::find(kSpecials.begin(), kSpecials.end(), symbol) == kSpecials.end(),
             "{}: symbol {} is {}, which only the specials at the start may be", source, id, symbol);
    AG_CHECK(special || target || tasks::decode_utf8(symbol, source).size() == 1,
             "{}: symbol {} '{}' of a source table is not one character", source, id, tasks::printable(symbol));
    AG_CHECK(ids_.emplace(symbol, static_cast<int64_t>(id)).second, "{}: symbol '{}' appears twice", source,
             tasks::printable(symbol));
  }
}

Symbols Symbols::source_of(const Lexicon& lexicon) {
  std::set<char32_t> characters;
  for (const std::string& word : lexicon.words) {
    const std::u32string decoded = tasks::decode_utf8(word, lexicon.path);
    characters.insert(decoded.begin(), decoded.end());
  }
  std::vector<std::string> symbols{std::string(kSpecials[0])};
  for (const char32_t c : characters) symbols.push_back(tasks::encode_utf8(std::u32string(1, c)));
  return Symbols(std::move(symbols), lexicon.path);
}

Symbols Symbols::target_of(const Lexicon& lexicon) {
  std::set<std::string> phonemes;
  for (const auto& prons : lexicon.prons)
    for (const Pronunciation& pron : prons) phonemes.insert(pron.begin(), pron.end());
  std::vector<std::string> symbols(kSpecials.begin(), kSpecials.end());
  symbols.insert(symbols.end(), phonemes.begin(), phonemes.end());
  return Symbols(std::move(symbols), lexicon.path);
}

Symbols Symbols::from_list(const std::vector<std::string>& symbols, const std::string& source) {
  return Symbols(symbols, source);
}

std::string Symbols::to_json() const { return nlohmann::json(symbols_).dump(); }

Symbols Symbols::from_json(const std::string& json, const std::string& source) {
  const nlohmann::json parsed = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  AG_CHECK(parsed.is_array(), "{}: the symbol table is not a JSON array", source);
  std::vector<std::string> symbols;
  for (const nlohmann::json& symbol : parsed) {
    AG_CHECK(symbol.is_string(), "{}: the symbol table holds {}, expected strings", source, symbol.dump());
    symbols.push_back(symbol.get<std::string>());
  }
  return Symbols(std::move(symbols), source);
}

const std::string& Symbols::symbol(int64_t id) const {
  AG_CHECK(id >= 0 && id < size(), "g2p: symbol id {} is outside the table of {}", id, size());
  return symbols_[static_cast<size_t>(id)];
}

int64_t Symbols::id_of(const std::string& symbol) const {
  const auto it = ids_.find(symbol);
  return it == ids_.end() ? -1 : it->second;
}

std::vector<int64_t> Symbols::encode_word(std::string_view word, const std::string& where) const {
  std::vector<int64_t> ids;
  std::set<char32_t> unknown;
  for (const char32_t c : tasks::decode_utf8(word, where)) {
    const int64_t id = id_of(tasks::encode_utf8(std::u32string(1, c)));  // never <pad>: that is no character
    if (id < 0) unknown.insert(c);
    ids.push_back(id);
  }
  if (!unknown.empty()) {
    std::vector<std::string> named;
    for (const char32_t c : unknown) named.push_back(tasks::describe_char(c));
    fail("{}: {} character(s) the model has never seen: {}", where, unknown.size(), fmt::join(named, " "));
  }
  return ids;
}

std::vector<int64_t> Symbols::encode_phonemes(const Pronunciation& phonemes, const std::string& where) const {
  std::vector<int64_t> ids;
  for (const std::string& p : phonemes) {
    const int64_t id = id_of(p);
    AG_CHECK(id > kEos, "{}: the phoneme '{}' is not in the model's table of {} symbols", where, tasks::printable(p),
             size());
    ids.push_back(id);
  }
  return ids;
}

std::string Symbols::decode(const std::vector<int64_t>& ids, const std::string& sep) const {
  std::string text;
  for (size_t k = 0; k < ids.size(); ++k) {
    if (k > 0) text += sep;
    text += symbol(ids[k]);
  }
  return text;
}

}  // namespace ag::g2p
