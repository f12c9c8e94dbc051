// Seed 002's sentiment classifier, corrected: one learned Embedding → SelfAttention with a
// key-padding mask → masked mean over tokens → Linear → logit. With heads ≥ 1 the attention is
// seed 003's MultiHeadAttention instead (split heads, output projection; causal, as in the seed:
// a token attends to itself and the tokens before it, up to kContextLength tokens).
#pragma once

#include <memory>

#include "nn/layers.h"
#include "seeds/seed003.h"

namespace ag::sentiment {

struct ClassifierConfig {
  int64_t vocab_size = 0;
  int64_t dim = 16;
  int64_t heads = 0;         // 0: SelfAttention; N: MultiHeadAttention with N heads (dividing dim)
  double dropout = 0;        // on the embeddings, in training
  double embedding_std = 1;  // embeddings drawn from N(0, embedding_std²); 1 is nn.Embedding's own
};

class SentimentClassifier : public nn::Callable<SentimentClassifier> {
 public:
  static constexpr int64_t kContextLength = 256;  // the longest text MultiHeadAttention takes

  explicit SentimentClassifier(const ClassifierConfig& config, Generator& gen = default_generator());
  // indices (N, T) i64, padding (N, T) b8 → logits (N).
  Tensor forward(const Tensor& indices, const Tensor& padding);
  std::string type_name() const override { return "SentimentClassifier"; }

  std::shared_ptr<nn::Embedding> embed;
  std::shared_ptr<nn::Dropout> dropout;
  std::shared_ptr<seeds::AttentionModule> attention;
  std::shared_ptr<nn::Linear> fc;
  int64_t heads = 0;  // as configured: 0 for SelfAttention
};

}  // namespace ag::sentiment
