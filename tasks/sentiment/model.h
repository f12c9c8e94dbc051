// Seed 002's sentiment classifier, corrected: one learned Embedding → SelfAttention with a
// key-padding mask → masked mean over tokens → Linear → logit.
#pragma once

#include <memory>

#include "nn/attention.h"
#include "nn/layers.h"

namespace ag::sentiment {

class SentimentClassifier : public nn::Module {
 public:
  SentimentClassifier(int64_t vocab_size, int64_t dim, Generator& gen = default_generator());
  // indices (N, T) i64, padding (N, T) b8 → logits (N).
  Tensor forward(const Tensor& indices, const Tensor& padding);
  std::string type_name() const override { return "SentimentClassifier"; }

  std::shared_ptr<nn::Embedding> embed;
  std::shared_ptr<nn::SelfAttention> attention;
  std::shared_ptr<nn::Linear> fc;
};

}  // namespace ag::sentiment
