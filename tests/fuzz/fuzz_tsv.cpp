// Fuzz target: the sentiment TSV reader, then what training does with what it accepts (the
// vocabulary, token indices and padding masks). ag::Error is the only acceptable failure.
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/error.h"
#include "tasks/sentiment/data.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const std::vector<ag::sentiment::Example> examples =
        ag::sentiment::parse_tsv(std::string(reinterpret_cast<const char*>(data), size), "fuzz.tsv");
    const ag::sentiment::Vocabulary vocab(examples);
    std::vector<std::string> texts;
    for (const ag::sentiment::Example& e : examples) texts.push_back(e.text);
    vocab.encode(texts);
  } catch (const ag::Error&) {
  }
  return 0;
}
