#include "tasks/sentiment/model.h"

#include <cmath>

#include "engine/autograd.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "tasks/sentiment/data.h"

namespace ag::sentiment {

SentimentClassifier::SentimentClassifier(const ClassifierConfig& config, Generator& gen) : heads(config.heads) {
  const int64_t dim = config.dim;
  AG_CHECK(heads >= 0, "SentimentClassifier: heads must be ≥ 0 (0: SelfAttention), got {}", heads);
  AG_CHECK(config.embedding_std > 0, "SentimentClassifier: the embeddings' std must be > 0, got {}",
           config.embedding_std);
  embed = register_module("embed", std::make_shared<nn::Embedding>(config.vocab_size, dim, Vocabulary::kPad, gen));
  {
    // Unit-scale embeddings of rare words barely move at lr 1e-3 (RESULTS.md §8, note 1).
    NoGradGuard no_grad;
    embed->weight.mul_(config.embedding_std);
  }
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(config.dropout, gen));
  if (heads > 0) {
    attention = register_module(
        "attention", std::make_shared<seeds::MultiHeadAttention>(dim, dim, kContextLength, 0.0, heads, false, gen));
  } else {
    auto self_attention = std::make_shared<seeds::SelfAttention>(dim, dim, dim, dim, gen);
    // Seed 002 draws W_q, W_k, W_v from N(0, 1): scores of size ~dim saturate the softmax from the
    // first step. Scale them to nn.Linear's initial variance (1 / (3·dim)), as the peer does.
    NoGradGuard no_grad;
    for (Tensor w : {self_attention->W_q, self_attention->W_k, self_attention->W_v}) w.mul_(1.0 / std::sqrt(3.0 * dim));
    attention = register_module("attention", self_attention);
  }
  fc = register_module("fc", std::make_shared<nn::Linear>(dim, 1, true, gen));
}

Tensor SentimentClassifier::forward(const Tensor& indices, const Tensor& padding) {
  Tensor h = (*attention)((*dropout)((*embed)(indices)), padding);  // (N, T, dim)
  Tensor keep = unsqueeze(1.0 - to(padding, h.dtype()), -1);        // (N, T, 1): 1 at real tokens
  Tensor pooled = div(sum(mul(h, keep), {1}), sum(keep, {1}));      // (N, dim): mean over real tokens
  return squeeze((*fc)(pooled), -1);                                // (N)
}

}  // namespace ag::sentiment
