#include "tasks/g2p/pronouncer.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "nn/checkpoint.h"
#include "tasks/common/checkpoint_config.h"
#include "tasks/common/embedded.h"
#include "tasks/common/text.h"
#include "tasks/g2p/decode.h"
#include "tasks/g2p/evaluation.h"
#include "tasks/g2p/task.h"

namespace ag::g2p {

namespace {

constexpr const char* kShippedModel = "g2p/shipped/model.safetensors";
constexpr const char* kShippedRecord = "g2p/shipped/model.json";

// "the shipped model (DESCRIPTION: test PER …%, WER …%)", from what model.json records of it.
std::string shipped_name() {
  const std::string_view text = tasks::embedded_file(kShippedRecord);
  const nlohmann::json record = nlohmann::json::parse(text.begin(), text.end());
  return fmt::format("the shipped model ({}: test PER {:.2f}%, WER {:.2f}%)",
                     record.at("description").get<std::string>(), record.at("test_per").get<double>(),
                     record.at("test_wer").get<double>());
}

}  // namespace

double Pronounced::score() const { return std::accumulate(scores.begin(), scores.end(), end_score); }

Pronouncer::Pronouncer(std::unique_ptr<G2PTransformer> model, Symbols source, Symbols target, nlohmann::json config,
                       std::string name)
    : model_(std::move(model)),
      source_(std::move(source)),
      target_(std::move(target)),
      config_(std::move(config)),
      max_extra_(tasks::config_whole(config_, "max_extra", name, 10)),
      name_(std::move(name)) {}

Pronouncer Pronouncer::load(const std::string& path) { return from_checkpoint(nn::read_checkpoint(path), path); }

Pronouncer Pronouncer::shipped() {
  return from_checkpoint(nn::parse_checkpoint(tasks::embedded_file(kShippedModel), kShippedModel), shipped_name());
}

// The model a checkpoint holds, with its symbol tables and config, built within the memory its
// tensors take (nn::build_from_config) and loaded strictly, in eval mode.
Pronouncer Pronouncer::from_checkpoint(const nn::Checkpoint& checkpoint, const std::string& name) {
  const std::string& path = checkpoint.path;
  nlohmann::json config = checkpoint.settings;
  tasks::check_checkpoint_task(config, "g2p", path);
  for (const char* key : {"source_symbols", "target_symbols"})
    AG_CHECK(checkpoint.metadata.count(key), "{}: the checkpoint has no {}", path, key);
  Symbols source = Symbols::from_json(checkpoint.metadata.at("source_symbols"), path);
  Symbols target = Symbols::from_json(checkpoint.metadata.at("target_symbols"), path);
  const G2POptions run = tasks::from_json(settings(), config, path, G2POptions{});
  AG_CHECK(run.model.source_vocab == source.size() && run.model.target_vocab == target.size(),
           "{}: the config's vocabularies ({}, {}) differ from the symbols it stores ({}, {})", path,
           run.model.source_vocab, run.model.target_vocab, source.size(), target.size());
  auto model = nn::build_from_config(checkpoint, path, [&] { return build_model(run, source, target); });
  nn::load(checkpoint, *model);
  model->eval();
  return Pronouncer(std::move(model), std::move(source), std::move(target), std::move(config), name);
}

// Not empty, UTF-8, short enough to decode (its letters, then up to max_extra phonemes and <eos>,
// in the model's max_len positions), each character one the model has seen once ASCII capitals it
// does not know are lowered where it knows the small letter (an error quotes the word and names the characters).
Ids Pronouncer::encode(const std::string& word, const std::string& origin) const {
  AG_CHECK(!word.empty(), "{} is empty; expected a word to spell out", origin);
  const int64_t longest = model_->config.max_len - max_extra_ - 1;
  const size_t characters = tasks::decode_utf8(word, origin).size();
  AG_CHECK(static_cast<int64_t>(characters) <= longest,
           "{} has {} characters, more than the {} this model decodes (its {} positions, less the run's "
           "--max-extra {} and one for the end)",
           origin, characters, longest, model_->config.max_len, max_extra_);
  std::string read = word;
  for (char& c : read)
    if (const char small = static_cast<char>(c - 'A' + 'a');
        c >= 'A' && c <= 'Z' && !source_.contains(std::string(1, c)) && source_.contains(std::string(1, small)))
      c = small;
  return source_.encode_word(read, fmt::format("{} '{}'", origin, tasks::printable(word)));
}

std::vector<Pronounced> Pronouncer::pronounce(const std::vector<std::string>& words, const PronounceOptions& options) {
  std::vector<Ids> sources;
  for (size_t i = 0; i < words.size(); ++i) sources.push_back(encode(words[i], fmt::format("word {}", i + 1)));
  return pronounce_encoded(words, sources, options);
}

std::vector<Pronounced> Pronouncer::pronounce_encoded(const std::vector<std::string>& words,
                                                      const std::vector<Ids>& sources,
                                                      const PronounceOptions& options) {
  AG_CHECK(words.size() == sources.size(), "Pronouncer: {} words but {} encoded sources", words.size(), sources.size());
  check_decoding_memory("predict", *model_, sources, options.beam, max_extra_, options.batch_size,
                        fmt::format("{} words at once", options.batch_size), options.max_memory_mb);
  const std::vector<Ids> outputs =
      decode_all(*model_, sources, {.beam = options.beam, .max_extra = max_extra_}, options.batch_size);
  std::vector<Pronounced> out(words.size());
  for (size_t i = 0; i < words.size(); ++i) {
    out[i].word = words[i];
    for (const int64_t id : outputs[i]) out[i].phonemes.push_back(target_.symbol(id));
  }
  if (!options.scores) return out;
  for (size_t first = 0; first < words.size(); first += static_cast<size_t>(options.batch_size)) {
    const auto last = std::min(words.size(), first + static_cast<size_t>(options.batch_size));
    const auto at = [&](const auto& v) { return std::vector(v.begin() + first, v.begin() + last); };
    const std::vector<std::vector<double>> scores = output_log_probabilities(*model_, at(sources), at(outputs));
    for (size_t i = first; i < last; ++i) {
      out[i].scores = scores[i - first];
      out[i].end_score = out[i].scores.back();
      out[i].scores.pop_back();
    }
  }
  return out;
}

}  // namespace ag::g2p
