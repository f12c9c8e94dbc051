// A trained G2P model ready to pronounce words, from C++: load one (a `train g2p` checkpoint or a
// model file of `attograd export`) or take the model shipped inside attograd (tasks/g2p/shipped/),
// then pronounce words in batches, greedily or with a beam, each phoneme with its log-probability.
// `attograd predict g2p` and `eval g2p` use it; tests/install/pronounce.cpp shows it from outside:
//
//   ag::g2p::Pronouncer pronouncer = ag::g2p::Pronouncer::shipped();
//   for (const ag::g2p::Pronounced& p : pronouncer.pronounce({"attograd", "kubernetes"}, {.beam = 5}))
//     fmt::print("{}: {} ({:.2f})\n", p.word, fmt::join(p.phonemes, " "), p.score());
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nn/checkpoint.h"
#include "tasks/g2p/data.h"
#include "tasks/g2p/metrics.h"
#include "tasks/g2p/model.h"

namespace ag::g2p {

// One word's pronunciation.
struct Pronounced {
  std::string word;                   // as given
  std::vector<std::string> phonemes;  // the model's symbols (the shipped model's: ARPAbet without stress)
  // With PronounceOptions::scores: per phoneme, its natural log-probability given the word and the
  // phonemes before it; end_score, the log-probability of ending after the last phoneme.
  std::vector<double> scores;
  double end_score = 0;
  double score() const;  // the pronunciation's log-probability: the scores and end_score summed
};

struct PronounceOptions {
  int64_t beam = 1;           // 1: greedy; more: beam search, length-normalised as the PyTorch peer's
  bool scores = true;         // fill Pronounced::scores (one teacher-forced decoder pass per batch)
  int64_t batch_size = 512;   // words decoded at once
  int64_t max_memory_mb = 0;  // a batch whose estimated peak is above this is refused (0: the memory available)
};

class Pronouncer {
 public:
  // A checkpoint of `train g2p` or a model file of `attograd export`, checked as a checkpoint is
  // (damaged or hostile files are an ag::Error naming the file and what is wrong).
  static Pronouncer load(const std::string& path);
  // The model compiled into attograd: tasks/g2p/shipped/README.md says how it was trained and how
  // well it does.
  static Pronouncer shipped();

  // Where the model came from: the file's path, or "the shipped model (…: test PER …, WER …)".
  const std::string& name() const { return name_; }

  // The pronunciation of each word, in the words' order. ASCII capitals the model does not know are
  // read as small letters. A word the model cannot read (empty, not UTF-8, longer than its positions,
  // a character it has never seen) is an ag::Error naming it ("word 2 'naïve' …").
  std::vector<Pronounced> pronounce(const std::vector<std::string>& words, const PronounceOptions& options = {});

  // The parts of pronounce, for callers that name where words come from: one word's ids (an
  // ag::Error naming `origin`, e.g. "line 3 of stdin", when the model cannot read it), and the
  // pronunciations of words already encoded.
  Ids encode(const std::string& word, const std::string& origin) const;
  std::vector<Pronounced> pronounce_encoded(const std::vector<std::string>& words, const std::vector<Ids>& sources,
                                            const PronounceOptions& options);

  G2PTransformer& model() { return *model_; }
  const Symbols& source_symbols() const { return source_; }
  const Symbols& target_symbols() const { return target_; }
  const nlohmann::json& config() const { return config_; }  // the run's settings, as config.json
  int64_t max_extra() const { return max_extra_; }          // decoding: at most letters + this phonemes

 private:
  Pronouncer(std::unique_ptr<G2PTransformer> model, Symbols source, Symbols target, nlohmann::json config,
             std::string name);
  static Pronouncer from_checkpoint(const nn::Checkpoint& checkpoint, const std::string& name);

  std::unique_ptr<G2PTransformer> model_;
  Symbols source_, target_;
  nlohmann::json config_;
  int64_t max_extra_;
  std::string name_;
};

}  // namespace ag::g2p
