// Properties of the encoder-decoders: seed 004's decoders and the Transformer's are causal (a
// later target point never changes an earlier output, bit for bit), hidden keys get exactly zero
// weight, and padding never changes a sequence's outputs at its real positions.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/autograd.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/attention.h"
#include "engine/ops/mask.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "nn/transformer.h"
#include "seeds/seed004.h"
#include "tests/golden_util.h"
#include "tests/test_util.h"

namespace ag::nn {
namespace {

namespace seed004 = seeds::seed004;

// Row-major values of x[:, from:to] (dim 1).
std::vector<double> positions(const Tensor& x, int64_t from, int64_t to) { return slice(x, 1, from, to).to_vector(); }

// Values of x[n, from:to] (dims 0 and 1).
std::vector<double> positions_of(const Tensor& x, int64_t n, int64_t from, int64_t to) {
  return slice(slice(x, 0, n, n + 1), 1, from, to).to_vector();
}

// x with the points at positions [from, end) of dim 1 replaced by fresh random ones.
Tensor with_new_future(const Tensor& x, int64_t from, Generator& gen) {
  Tensor future = randn({x.size(0), x.size(1) - from, x.size(2)}, DType::f32, gen);
  return cat({slice(x, 1, 0, from), future}, 1);
}

// (N, L) b8, true at positions ≥ length of each row.
Tensor padding_mask(const std::vector<int64_t>& lengths, int64_t max_len) {
  Tensor mask = zeros({static_cast<int64_t>(lengths.size()), max_len}, DType::b8);
  for (size_t n = 0; n < lengths.size(); ++n)
    for (int64_t j = lengths[n]; j < max_len; ++j) mask.set({static_cast<int64_t>(n), j}, 1);
  return mask;
}

TEST(Seq2SeqProperties, Seed004DecoderIsCausal) {
  Generator gen(1);
  seed004::DecoderSelfAttn decoder(3, 4, 10, 2, gen);
  decoder.init_keys(randn({2, 3, 4}, DType::f32, gen));
  const Tensor query = randn({2, 5, 2}, DType::f32, gen);
  const Tensor out = decoder(query, Tensor(), causal_mask(5));
  for (int64_t t = 0; t < 4; ++t) {
    const Tensor changed = decoder(with_new_future(query, t + 1, gen), Tensor(), causal_mask(5));
    EXPECT_EQ(positions(changed, 0, t + 1), positions(out, 0, t + 1)) << "outputs ≤ " << t << " changed";
    EXPECT_NE(positions(changed, t + 1, 5), positions(out, t + 1, 5));
  }
  const Tensor alphas = decoder.self_attn_heads->alphas();  // (n_heads, N, T, T)
  for (int64_t j = 1; j < 5; ++j) EXPECT_EQ(alphas.at({2, 1, 0, j}), 0.0) << "key " << j << " is in the future";
}

TEST(Seq2SeqProperties, Seed004EncoderDecoderTeacherForcingIsCausal) {
  Generator gen(2);
  seed004::EncoderDecoderSelfAttn model(std::make_shared<seed004::EncoderSelfAttn>(3, 2, 10, 2, gen),
                                        std::make_shared<seed004::DecoderSelfAttn>(3, 2, 10, 2, gen), 2, 3);
  const Tensor X = randn({4, 5, 2}, DType::f32, gen);  // 2 source points, 3 target points
  const Tensor out = model(X);                         // (N, 3, F)
  for (int64_t t = 0; t < 2; ++t) {
    // Target point t is the decoder's input at step t + 1: it may change outputs t + 1 on, only.
    const Tensor changed = model(with_new_future(X, 2 + t, gen));
    EXPECT_EQ(positions(changed, 0, t + 1), positions(out, 0, t + 1)) << "target " << t << " leaked backwards";
  }
}

TEST(Seq2SeqProperties, Seed004HiddenSourcePointsChangeNoPrediction) {
  Generator gen(3);
  seed004::EncoderDecoderSelfAttn model(std::make_shared<seed004::EncoderSelfAttn>(3, 2, 10, 2, gen),
                                        std::make_shared<seed004::DecoderSelfAttn>(3, 2, 10, 2, gen), 3, 2);
  model.eval();
  Tensor source_mask = zeros({2, 1, 3}, DType::b8);  // (N, 1, L): hides source point 0 of sequence 0
  source_mask.set({0, 0, 0}, 1);
  const Tensor X = randn({2, 3, 2}, DType::f32, gen);
  const Tensor out = model(X, source_mask);
  const Tensor cross = model.decoder->cross_attn_heads->alphas();  // (n_heads, N, T, L)
  for (int64_t head = 0; head < 3; ++head) EXPECT_EQ(cross.at({head, 0, 1, 0}), 0.0);
  Tensor changed = clone(X);
  changed.set({0, 0, 0}, 5.0);
  changed.set({0, 0, 1}, -7.0);
  EXPECT_EQ(model(changed, source_mask).to_vector(), out.to_vector());
}

// Note [fully masked rows]: seed 004's heads take MaskedRows::zero, so a query that sees no key
// gets zero weights and a zero context (the seed's -1e9 fill gave uniform weights), and no NaN.
TEST(Seq2SeqProperties, Seed004AQueryWithEveryKeyHiddenGetsZeros) {
  Generator gen(4);
  seed004::Attention attention(3, 2, false, gen);
  const Tensor keys = randn({2, 4, 2}, DType::f32, gen);
  attention.init_keys(keys);
  Tensor hidden = zeros({2, 1, 4}, DType::b8);  // (N, 1, L): sequence 1 hides every key
  for (int64_t j = 0; j < 4; ++j) hidden.set({1, 0, j}, 1);
  const Tensor out = attention(randn({2, 3, 2}, DType::f32, gen), hidden);  // (N, T, 2): values are the keys
  for (double v : positions_of(out, 1, 0, 3)) EXPECT_EQ(v, 0.0);
  for (double w : slice(attention.alphas(), 0, 1, 2).to_vector()) EXPECT_EQ(w, 0.0);
  for (double v : positions_of(out, 0, 0, 3)) EXPECT_TRUE(std::isfinite(v));
}

Transformer small_transformer(Generator& gen) {
  TransformerOptions options;
  options.d_model = 8;
  options.nhead = 2;
  options.num_encoder_layers = 2;
  options.num_decoder_layers = 2;
  options.dim_feedforward = 16;
  options.dropout = 0.0;
  return Transformer(options, gen);
}

TEST(Seq2SeqProperties, TransformerDecoderIsCausal) {
  Generator gen(4);
  Transformer model = small_transformer(gen);
  const Tensor src = randn({2, 4, 8}, DType::f32, gen);
  const Tensor tgt = randn({2, 5, 8}, DType::f32, gen);
  TransformerMasks masks;
  masks.tgt_mask = causal_mask(5);
  const Tensor out = model.forward(src, tgt, masks);
  for (int64_t t = 0; t < 4; ++t) {
    const Tensor changed = model.forward(src, with_new_future(tgt, t + 1, gen), masks);
    EXPECT_EQ(positions(changed, 0, t + 1), positions(out, 0, t + 1)) << "outputs ≤ " << t << " changed";
    EXPECT_NE(positions(changed, t + 1, 5), positions(out, t + 1, 5));
  }
}

// Decoding step by step (DecoderCache) gives the causal forward's rows, and still does after the
// projections' weights change in place (an optimizer step between evaluations): the decoder's
// projections, sliced once per version of in_proj_weight and in_proj_bias, are sliced again.
TEST(Seq2SeqProperties, TransformerDecoderStepsGiveTheForwardsRowsAfterAWeightUpdate) {
  Generator gen(6);
  Transformer model = small_transformer(gen);
  model.eval();
  const Tensor memory = randn({2, 4, 8}, DType::f32, gen);
  const Tensor tgt = randn({2, 5, 8}, DType::f32, gen);
  NoGradGuard no_grad;
  for (const char* when : {"before", "after"}) {
    const Tensor full = model.decoder->forward(tgt, memory, causal_mask(5));  // (2, 5, 8)
    DecoderCache cache = model.decoder->start(memory);
    for (int64_t t = 0; t < 5; ++t)
      expect_close(model.decoder->forward_step(slice(tgt, 1, t, t + 1), cache), slice(full, 1, t, t + 1),
                   std::string(when) + " the update, position " + std::to_string(t), 1e-5);
    for (auto& layer : *model.decoder->layers) {
      layer->self_attn->in_proj_weight.add_(mul(ones_like(layer->self_attn->in_proj_weight), 0.05), 1.0);
      layer->multihead_attn->in_proj_bias.add_(mul(ones_like(layer->multihead_attn->in_proj_bias), -0.1), 1.0);
    }
  }
}

// Sequence 0 has 3 source and 4 target points, sequence 1 the full 5 and 5: the padding masks
// hide sequence 0's tail everywhere (encoder, decoder and cross-attention).
TransformerMasks padded_masks() {
  TransformerMasks masks;
  masks.tgt_mask = causal_mask(5);
  masks.src_key_padding_mask = masks.memory_key_padding_mask = padding_mask({3, 5}, 5);
  masks.tgt_key_padding_mask = padding_mask({4, 5}, 5);
  return masks;
}

TEST(Seq2SeqProperties, TransformerPaddingContentChangesNoRealPosition) {
  Generator gen(5);
  Transformer model = small_transformer(gen);
  const Tensor src = randn({2, 5, 8}, DType::f32, gen);
  const Tensor tgt = randn({2, 5, 8}, DType::f32, gen);
  const Tensor out = model.forward(src, tgt, padded_masks());
  Tensor other_src = clone(src), other_tgt = clone(tgt);
  for (int64_t j = 0; j < 8; ++j) {
    other_src.set({0, 3, j}, 9.0);
    other_src.set({0, 4, j}, -9.0);
    other_tgt.set({0, 4, j}, 4.0);
  }
  const Tensor changed = model.forward(other_src, other_tgt, padded_masks());
  EXPECT_EQ(positions_of(changed, 0, 0, 4), positions_of(out, 0, 0, 4));
  EXPECT_EQ(positions_of(changed, 1, 0, 5), positions_of(out, 1, 0, 5));
}

TEST(Seq2SeqProperties, TransformerPaddedEqualsUnpadded) {
  Generator gen(6);
  Transformer model = small_transformer(gen);
  const Tensor src = randn({2, 5, 8}, DType::f32, gen);
  const Tensor tgt = randn({2, 5, 8}, DType::f32, gen);
  const Tensor padded = model.forward(src, tgt, padded_masks());  // (2, 5, 8)
  TransformerMasks alone;
  alone.tgt_mask = causal_mask(4);
  const Tensor src0 = slice(slice(src, 0, 0, 1), 1, 0, 3);  // (1, 3, 8)
  const Tensor tgt0 = slice(slice(tgt, 0, 0, 1), 1, 0, 4);  // (1, 4, 8)
  const std::vector<double> a = positions_of(padded, 0, 0, 4), b = model.forward(src0, tgt0, alone).to_vector();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << "element " << i;
}

TEST(Seq2SeqProperties, TransformerPaddingGetsZeroWeightAndZeroGradient) {
  Generator gen(7);
  Transformer model = small_transformer(gen);
  const Tensor src = randn({2, 5, 8}, DType::f32, gen).requires_grad_();
  const Tensor tgt = randn({2, 5, 8}, DType::f32, gen);
  model.eval();  // keeps the attention weights
  const Tensor out = model.forward(src, tgt, padded_masks());
  const Tensor weights = (*model.decoder->layers)[1].multihead_attn->attention_weights();  // (N, H, T, S)
  ASSERT_TRUE(weights.defined());
  for (int64_t t = 0; t < 5; ++t) EXPECT_EQ(weights.at({0, 1, t, 3}) + weights.at({0, 1, t, 4}), 0.0);
  sum(out).backward();
  for (double g : positions_of(src.grad(), 0, 3, 5)) ASSERT_EQ(g, 0.0);
  for (double g : positions_of(src.grad(), 1, 3, 5)) EXPECT_NE(g, 0.0);  // sequence 1 is not padded
}

TEST(Seq2SeqProperties, ErrorsNameTheModuleAndShapes) {
  Generator gen(9);
  seed004::Attention attention(4, 2, false, gen);
  expect_error([&] { attention(randn({1, 3, 2})); }, {"Attention", "init_keys"});
  attention.init_keys(randn({1, 3, 2}));
  expect_error([&] { attention(randn({1, 3, 5})); }, {"Attention", "(N, L, 2)", "(1,3,5)"});
  Transformer model = small_transformer(gen);
  TransformerMasks masks;
  masks.tgt_mask = causal_mask(3);
  expect_error(
      [&] {
        model.forward(randn({1, 4, 8}), randn({1, 5, 8}), masks);
      },
      {"Transformer", "tgt_mask", "(5,5)", "(3,3)"});
  expect_error([&] { model.forward(randn({1, 4, 8}), randn({2, 5, 8})); }, {"Transformer", "same N"});
}

}  // namespace
}  // namespace ag::nn
