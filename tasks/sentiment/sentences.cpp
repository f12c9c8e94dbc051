#include "tasks/sentiment/sentences.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "engine/ops/pointwise.h"
#include "tasks/common/embedded.h"

namespace ag::sentiment {

std::vector<Example> seed_sentences(const std::string& file) {
  const std::string name = "sentiment/" + file;
  return parse_tsv(std::string(tasks::embedded_file(name)), name + " (built in)");
}

std::vector<int64_t> all_rows(size_t n) {
  std::vector<int64_t> rows(n);
  std::iota(rows.begin(), rows.end(), 0);
  return rows;
}

Tensor logits_of(SentimentClassifier& model, const EncodedSentences& sentences, const std::vector<int64_t>& rows) {
  const BatchLimits limits{.heads = static_cast<size_t>(std::max<int64_t>(1, model.heads))};
  std::vector<size_t> lengths(rows.size());  // by position in `rows`
  for (size_t k = 0; k < rows.size(); ++k) lengths[k] = sentences.lengths[rows[k]];
  std::vector<double> logits(rows.size());
  for (const std::vector<int64_t>& positions : batches_by_length(all_rows(rows.size()), lengths, limits)) {
    std::vector<int64_t> batch;
    for (const int64_t k : positions) batch.push_back(rows[k]);
    auto [indices, padding] = sentences.batch(batch);
    const Tensor out = model(indices, padding);
    for (size_t k = 0; k < positions.size(); ++k) logits[positions[k]] = out.at({static_cast<int64_t>(k)});
  }
  return tensor(logits, {static_cast<int64_t>(logits.size())});
}

Tensor all_logits(SentimentClassifier& model, const EncodedSentences& sentences) {
  return logits_of(model, sentences, all_rows(sentences.examples.size()));
}

int64_t correct_count(const Tensor& logits, const EncodedSentences& sentences, const std::vector<int64_t>& rows) {
  int64_t correct = 0;
  for (size_t i = 0; i < rows.size(); ++i)
    correct += (logits.at({static_cast<int64_t>(i)}) > 0) == sentences.examples[rows[i]].label;
  return correct;
}

int64_t correct_count(const Tensor& logits, const EncodedSentences& sentences) {
  return correct_count(logits, sentences, all_rows(sentences.examples.size()));
}

double accuracy_of(const Tensor& logits, const EncodedSentences& sentences) {
  return static_cast<double>(correct_count(logits, sentences)) / static_cast<double>(sentences.size());
}

Predictions predictions_of(const Tensor& logits, const EncodedSentences& sentences) {
  const Tensor probabilities = sigmoid(logits);
  Predictions out{sentences.examples, {}};
  for (int64_t i = 0; i < sentences.size(); ++i) out.probabilities.push_back(probabilities.at({i}));
  return out;
}

}  // namespace ag::sentiment
