// The UCI "Sentiment Labelled Sentences" corpus (Kotzias et al., KDD 2015) as the npm package
// sentiment@5.0.2 ships it: amazon.json, imdb.json and yelp.json, each a JSON list of
// {"text": "…", "class": 0 or 1} (tools/fetch_data.sh caches them), and DESIGN.md's hash split,
// which any program in any language can reproduce from the text alone.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tasks/sentiment/data.h"

namespace ag::sentiment::uci {

inline constexpr std::array<const char*, 3> kSources = {"amazon", "imdb", "yelp"};

// One file's sentences, and how many records were dropped: every file ends with a junk record
// {"text": "", "class": null}. Records with an empty text or a class other than 0 or 1 are
// dropped; anything else that is not a list of {"text": string, "class": …} objects, or a text of
// more than kMaxWords words, is an error naming the file (and the record).
struct SourceFile {
  std::vector<Example> examples;  // each with .source = source
  int64_t dropped = 0;
};
SourceFile parse_source(const std::string& json_text, const std::string& source, const std::string& file_name);

enum class Split { train, validation, test };

// The text the split hashes: ASCII A-Z lower-cased (other bytes unchanged), runs of spaces, tabs,
// CR and LF collapsed to one space, trimmed.
std::string split_key(const std::string& text);
// FNV-1a 64 of split_key(text): % 10 == 0 → test, 1 → validation, else train.
Split split_of(const std::string& text);

struct Corpus {
  std::vector<Example> train, validation, test;
  std::map<std::string, int64_t> dropped;  // by source
};

// Splits sentences by split_of, keeping their order within each split.
Corpus split_corpus(const std::vector<Example>& sentences);
// The three cached files (tasks::corpus_path("uci-sentiment/<source>.json")), parsed and split.
Corpus read_corpus();

}  // namespace ag::sentiment::uci
