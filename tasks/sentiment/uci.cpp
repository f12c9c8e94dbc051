#include "tasks/sentiment/uci.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/hash.h"
#include "engine/json.h"
#include "tasks/common/corpus.h"
#include "tasks/common/text.h"

namespace ag::sentiment::uci {

namespace {

// A record's label, or -1 if its class is not the number 0 or 1 (the junk record's is null).
int label_of(const nlohmann::json& record) {
  const auto it = record.find("class");
  if (it == record.end() || !it->is_number_integer()) return -1;
  const auto label = it->get<int64_t>();
  return label == 0 || label == 1 ? static_cast<int>(label) : -1;
}

}  // namespace

SourceFile parse_source(const std::string& json_text, const std::string& source, const std::string& file_name) {
  nlohmann::json records;
  try {
    records = parse_json(tasks::as_text(json_text, file_name), file_name);
  } catch (const Error& e) {
    fail("{}; expected a list of {{\"text\": …, \"class\": 0 or 1}} records", e.what());
  }
  AG_CHECK(records.is_array(), "{}: expected a JSON list of {{\"text\": …, \"class\": 0 or 1}} records, found a {}",
           file_name, records.type_name());
  SourceFile file;
  for (size_t i = 0; i < records.size(); ++i) {
    const nlohmann::json& record = records[i];
    AG_CHECK(record.is_object() && record.contains("text") && record["text"].is_string(),
             "{}: record {} is not a {{\"text\": string, \"class\": 0 or 1}} object: {:.60}", file_name, i,
             record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    Example example{record["text"].get<std::string>(), label_of(record), source};
    if (example.text.empty() || example.label < 0) {
      ++file.dropped;
      continue;
    }
    words_of(example.text, Tokenizer::words, fmt::format("{}: record {}", file_name, i));  // within the caps
    file.examples.push_back(std::move(example));
  }
  AG_CHECK(!file.examples.empty(), "{}: no sentences with a text and a class of 0 or 1", file_name);
  return file;
}

std::string split_key(const std::string& text) {
  std::string key;
  bool space = false;
  for (char c : text) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      space = !key.empty();  // leading runs vanish; inner ones become one space
      continue;
    }
    if (space) key += ' ';
    space = false;
    key += c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  }
  return key;  // a trailing run never wrote its space
}

Split split_of(const std::string& text) {
  const uint64_t bucket = fnv1a64(split_key(text)) % 10;
  return bucket == 0 ? Split::test : bucket == 1 ? Split::validation : Split::train;
}

Corpus split_corpus(const std::vector<Example>& sentences) {
  Corpus corpus;
  for (const Example& e : sentences) {
    const Split split = split_of(e.text);
    (split == Split::test ? corpus.test : split == Split::validation ? corpus.validation : corpus.train).push_back(e);
  }
  return corpus;
}

Corpus read_corpus() {
  std::vector<Example> sentences;
  std::map<std::string, int64_t> dropped;
  for (const std::string source : kSources) {
    const std::string name = "uci-sentiment/" + source + ".json";
    SourceFile file = parse_source(tasks::read_corpus(name), source, tasks::corpus_path(name));
    dropped[source] = file.dropped;
    sentences.insert(sentences.end(), file.examples.begin(), file.examples.end());
  }
  Corpus corpus = split_corpus(sentences);
  corpus.dropped = std::move(dropped);
  return corpus;
}

}  // namespace ag::sentiment::uci
