// Sentences as the classifier reads them, shared by `train sentiment` (its epochs' metrics, the end
// of a run) and `eval` / `predict`: labelled sentences encoded once with a vocabulary, their logits
// in batches of similar length, and what is counted from them.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"
#include "tasks/sentiment/data.h"
#include "tasks/sentiment/model.h"
#include "tasks/sentiment/report.h"

namespace ag::sentiment {

// Seed 002's sentences, built into the program: "train.tsv" or "test.tsv".
std::vector<Example> seed_sentences(const std::string& file);

// Labelled sentences with their word indices, encoded once.
struct EncodedSentences {
  EncodedSentences(std::vector<Example> all, const Vocabulary& vocab) : examples(std::move(all)) {
    for (const Example& e : examples) {
      indices.push_back(vocab.indices(e.text));
      lengths.push_back(indices.back().size());
    }
  }
  int64_t size() const { return static_cast<int64_t>(examples.size()); }

  // (indices, padding) of these rows, padded to the longest of them.
  std::pair<Tensor, Tensor> batch(const std::vector<int64_t>& rows) const {
    std::vector<const std::vector<int64_t>*> chosen;
    for (int64_t i : rows) chosen.push_back(&indices[i]);
    return Vocabulary::pad(chosen);
  }
  Tensor labels(const std::vector<int64_t>& rows) const {
    std::vector<double> values;
    for (int64_t i : rows) values.push_back(examples[i].label);
    return tensor(values, {static_cast<int64_t>(values.size())});
  }

  std::vector<Example> examples;
  std::vector<std::vector<int64_t>> indices;
  std::vector<size_t> lengths;  // of each row of indices
};

// 0, 1, …, n - 1: every row of a set of n.
std::vector<int64_t> all_rows(size_t n);

// The logits of these sentences (in their order), as a forward pass would give them: the caller
// sets eval mode and no grad. The sentences go in batches of similar length under the memory
// budget, so a long sentence pads only its neighbours (attention is quadratic in the padded length).
Tensor logits_of(SentimentClassifier& model, const EncodedSentences& sentences, const std::vector<int64_t>& rows);
Tensor all_logits(SentimentClassifier& model, const EncodedSentences& sentences);

// How many of the logits (one per row) are on the side of their sentence's label.
int64_t correct_count(const Tensor& logits, const EncodedSentences& sentences, const std::vector<int64_t>& rows);
int64_t correct_count(const Tensor& logits, const EncodedSentences& sentences);
double accuracy_of(const Tensor& logits, const EncodedSentences& sentences);

// The sentences with the probability (the sigmoid of its logit) of each being positive.
Predictions predictions_of(const Tensor& logits, const EncodedSentences& sentences);

}  // namespace ag::sentiment
