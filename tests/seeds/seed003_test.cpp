// The attention classes: seed 003's printed numbers as test vectors, and the properties every
// attention must have — causality, masked keys with exactly zero weight and gradient, no NaN
// from -inf, and padding that never changes a sequence's outputs.
#include "seeds/seed003.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>

#include "engine/autograd.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/attention.h"
#include "engine/ops/mask.h"
#include "engine/ops/matmul.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "engine/ops/softmax.h"
#include "nn/transformer.h"
#include "tests/golden_util.h"
#include "tests/test_util.h"

namespace ag::seeds {
namespace {

// The seed printed its weights to 4 decimals, so results agree to about 2e-4 (DESIGN.md, Testing).
constexpr double kPrinted = 2e-4;

TEST(SeedVectors, Seed003SelfAttentionV1WithPrintedWeights) {
  SelfAttention_v1 attention(3, 2);
  attention.load_state_dict({{"w_query", tensor({0.2961, 0.5166, 0.2517, 0.6886, 0.0740, 0.8665}, {3, 2})},
                             {"w_key", tensor({0.1366, 0.1025, 0.1841, 0.7264, 0.3153, 0.6871}, {3, 2})},
                             {"w_value", tensor({0.0756, 0.1966, 0.3164, 0.4017, 0.1186, 0.8274}, {3, 2})}});
  const Tensor out = attention(seed003_inputs());
  // attn_scores_2 = query_2 @ keys.T, with the seed's own steps.
  const Tensor queries = matmul(seed003_inputs(), attention.w_query);
  const Tensor keys = matmul(seed003_inputs(), attention.w_key);
  expect_close(slice(matmul(queries, keys, false, true), 0, 1, 2),
               tensor({1.2705, 1.8524, 1.8111, 1.0795, 0.5577, 1.5440}, {1, 6}), "attn_scores_2", kPrinted, kPrinted);
  expect_close(slice(attention.last_attention_weights, 0, 1, 2),
               tensor({0.1500, 0.2264, 0.2199, 0.1311, 0.0906, 0.1820}, {1, 6}), "attn_weights_2", kPrinted, 0);
  expect_close(slice(out, 0, 1, 2), tensor({0.3061, 0.8210}, {1, 2}), "context_vec_2", kPrinted, 0);
  expect_close(
      out,
      tensor({0.2996, 0.8053, 0.3061, 0.8210, 0.3058, 0.8203, 0.2948, 0.7939, 0.2927, 0.7891, 0.2990, 0.8040}, {6, 2}),
      "SelfAttention_v1 output", kPrinted, 0);
}

// Seed 003's toy multi-head example: x (1, 3, 6), exact 6×6 wq, wk, wv (used as x @ w), 2 heads.
struct ToyExample {
  Tensor x = tensor({1, 2, 3, 4, 5, 6, 6, 5, 4, 3, 2, 1, 1, 1, 1, 1, 1, 1}, {1, 3, 6});
  Tensor wq =
      tensor({0.6323,  -0.2366, 1.2455, 0.3465,  1.2458,  0.3229,  0.6571,  -0.2378, -0.5311, -0.2610, -1.4819, -1.6418,
              -0.2990, 0.4216,  0.2114, -0.0271, -0.5682, 0.6937,  -1.1291, -1.0102, 0.6946,  0.1094,  0.5130,  -0.8669,
              0.3480,  0.2593,  0.4412, 1.0017,  -0.3913, -0.2878, 0.2484,  0.2846,  -0.3386, -0.6164, 1.2722,  0.5754},
             {6, 6});
  Tensor wk =
      tensor({-0.3703, 0.5431,  -0.0372, -0.4406, 0.4103, -0.1773, 1.5993,  -0.2777, -1.1909, -0.4301, 0.6927, -1.3304,
              1.2470,  -0.1872, -0.1670, 1.4302,  1.2927, 0.4822,  -0.0984, -0.8983, 0.3334,  -0.6312, 0.1022, -1.0715,
              -0.7647, -0.1734, 0.6305,  1.0155,  0.8474, 0.1454,  -1.5085, -0.4529, 0.0997,  -0.1084, 0.8046, 0.3459},
             {6, 6});
  Tensor wv =
      tensor({1.6395,  1.1234,  -0.1001, 0.5021, -1.0590, 0.1412,  -0.4271, 0.5681, 0.4164,  -1.2534, 1.3061,  0.3610,
              -0.2824, -0.4314, 1.2358,  0.1181, -1.2467, 0.1893,  1.3440,  0.1487, -0.6174, 0.8890,  -0.3282, 1.4662,
              0.1814,  -0.4761, -0.0402, 0.7326, 0.7654,  -0.1080, -0.8974, 0.6786, 0.5602,  -0.2443, -0.4883, 1.3996},
             {6, 6});
  // The seed's printed attn_score = queries_grp @ keys_grp.transpose(2, 3): (1, 2, 3, 3).
  Tensor printed_scores = tensor({13.4968, -17.5172, -0.5743, 19.3111, -4.1464, 2.1664, 4.6869, -3.0948, 0.2274,
                                  79.2289, 80.8105, 22.8628, 26.4688, 50.7943, 11.0376, 15.0997, 18.8007, 4.8429},
                                 {1, 2, 3, 3});
};

// (1, 3, 6) → (1, 3, 2, 3) → (1, 2, 3, 3): the seed's steps 5 and 6.
Tensor group_heads(const Tensor& t) { return transpose(reshape(t, {1, 3, 2, 3}), 1, 2); }

TEST(SeedVectors, Seed003ToyMultiHeadExample) {
  const ToyExample toy;
  const Tensor keys = matmul(toy.x, toy.wk);     // (1, 3, 6)
  const Tensor queries = matmul(toy.x, toy.wq);  // (1, 3, 6)
  const Tensor values = matmul(toy.x, toy.wv);   // (1, 3, 6)
  expect_close(keys,
               tensor({-6.6988, -7.7515, 2.1643, 4.8921, 15.1472, -2.8751, 7.4296, -2.3733, -4.4848, 0.9557, 13.9021,
                       -8.3648, 0.1044, -1.4464, -0.3315, 0.8354, 4.1499, -1.6057},
                      {1, 3, 6}),
               "toy keys", 1e-4, 1e-5);
  expect_close(queries,
               tensor({-0.2365, -0.4841, 3.7703, 1.4909, 4.3061, -2.3338, 3.4404, -3.1496, 8.2907, 2.3808, -0.1789,
                       -6.0977, 0.4577, -0.5191, 1.7230, 0.5531, 0.5896, -1.2045},
                      {1, 3, 6}),
               "toy queries", 1e-4, 1e-5);
  expect_close(values,
               tensor({0.8367, 3.2513, 5.1307, 4.1028, -2.6025, 15.1535, 10.0693, 8.0278, 5.0522, 1.1059, -4.7524,
                       8.9916, 1.5580, 1.6113, 1.4547, 0.7441, -1.0507, 3.4493},
                      {1, 3, 6}),
               "toy values", 1e-4, 1e-5);
  expect_close(matmul(group_heads(queries), group_heads(keys), false, true), toy.printed_scores, "toy attn_score", 1e-4,
               1e-5);
}

// The same toy through MultiHeadAttention (Linear weights are wᵀ): its causal weights are the
// softmax of the seed's masked scores / √head_dim (the seed's own print is dropout-corrupted).
TEST(SeedVectors, Seed003ToyExampleThroughMultiHeadAttention) {
  const ToyExample toy;
  MultiHeadAttention attention(6, 6, 3, 0.0, 2);
  attention.W_query->weight.detach().copy_(transpose(toy.wq, 0, 1));
  attention.W_key->weight.detach().copy_(transpose(toy.wk, 0, 1));
  attention.W_value->weight.detach().copy_(transpose(toy.wv, 0, 1));
  attention(toy.x);
  const Tensor expected = softmax(masked_fill(toy.printed_scores, causal_mask(3), -INFINITY) / std::sqrt(3.0), -1);
  expect_close(attention.last_attention_weights, expected, "toy causal attention weights", 1e-4, 1e-4);
}

// ---- Properties -------------------------------------------------------------------------------

using Factory = std::function<std::shared_ptr<AttentionModule>()>;

constexpr int64_t kFeatures = 4, kTokens = 6;

struct NamedFactory {
  std::string name;
  Factory make;
  bool causal;
};

std::vector<NamedFactory> all_attentions() {
  return {
      {"SelfAttention", [] { return std::make_shared<SelfAttention>(kFeatures, 3, 3, 5); }, false},
      {"SelfAttention_v1", [] { return std::make_shared<SelfAttention_v1>(kFeatures, 3); }, false},
      {"SelfAttention_v2", [] { return std::make_shared<SelfAttention_v2>(kFeatures, 3, true); }, false},
      {"CausalAttention", [] { return std::make_shared<CausalAttention>(kFeatures, 3, 8, 0.0, true); }, true},
      {"MultiHeadAttention", [] { return std::make_shared<MultiHeadAttention>(kFeatures, 6, 8, 0.0, 2, true); }, true},
  };
}

std::vector<NamedFactory> causal_attentions() {
  std::vector<NamedFactory> out;
  for (auto& f : all_attentions())
    if (f.causal) out.push_back(f);
  return out;
}

// x with the tokens from `start` on replaced by fresh noise.
Tensor replace_tokens_from(const Tensor& x, int64_t start, Generator& gen) {
  const Tensor noise = randn({x.size(0), x.size(1) - start, x.size(2)}, DType::f32, gen);
  return cat({slice(x, 1, 0, start), noise}, 1);
}

std::vector<double> tokens_of(const Tensor& out, int64_t batch_index, int64_t begin, int64_t end) {
  return slice(slice(out, 0, batch_index, batch_index + 1), 1, begin, end).to_vector();
}

bool all_finite(const Tensor& t) {
  for (double v : t.to_vector())
    if (!std::isfinite(v)) return false;
  return true;
}

// Changing tokens after t leaves every output at or before t bit-identical.
TEST(AttentionProperties, CausalOutputsIgnoreTheFuture) {
  Generator gen(7);
  for (const auto& [name, make, causal] : causal_attentions()) {
    auto attention = make();
    const Tensor x = randn({2, kTokens, kFeatures}, DType::f32, gen);
    const Tensor out = (*attention)(x);
    for (int64_t t = 0; t + 1 < kTokens; ++t) {
      const Tensor changed = (*attention)(replace_tokens_from(x, t + 1, gen));
      for (int64_t b = 0; b < 2; ++b)
        EXPECT_EQ(tokens_of(changed, b, 0, t + 1), tokens_of(out, b, 0, t + 1)) << name << ": t = " << t;
    }
  }
}

// The test above has teeth: seed 003's CausalAttention computes masked_fill and drops the result,
// so its forward is this unmasked attention — and under it the future does change the past.
TEST(AttentionProperties, CausalityTestFailsOnTheSeedsUnmaskedCausalAttention) {
  Generator gen(8);
  CausalAttention attention(kFeatures, 3, 8, 0.0);
  auto seed_forward = [&](const Tensor& x) {
    const Tensor keys = attention.w_key->forward(x);                                     // (B, T, 3)
    const Tensor scores = matmul(attention.w_query->forward(x), keys, false, true);      // (B, T, T)
    return matmul(softmax(scores / std::sqrt(3.0), -1), attention.w_value->forward(x));  // (B, T, 3)
  };
  const Tensor x = randn({1, kTokens, kFeatures}, DType::f32, gen);
  const Tensor changed = replace_tokens_from(x, 1, gen);
  EXPECT_NE(tokens_of(seed_forward(changed), 0, 0, 1), tokens_of(seed_forward(x), 0, 0, 1));
  EXPECT_EQ(tokens_of(attention(changed), 0, 0, 1), tokens_of(attention(x), 0, 0, 1));
}

// Gradient flows backwards in time only: the loss on token t reaches no input after t.
TEST(AttentionProperties, CausalGradientsReachNoFutureToken) {
  Generator gen(9);
  for (const auto& [name, make, causal] : causal_attentions()) {
    auto attention = make();
    for (int64_t t = 0; t < kTokens; ++t) {
      Tensor x = randn({2, kTokens, kFeatures}, DType::f32, gen).requires_grad_();
      sum(slice((*attention)(x), 1, t, t + 1)).backward();
      for (int64_t b = 0; b < 2; ++b)
        for (double g : tokens_of(x.grad(), b, t + 1, kTokens)) EXPECT_EQ(g, 0.0) << name << ": t = " << t;
      EXPECT_TRUE(all_finite(x.grad())) << name;
    }
  }
}

// Padded keys get zero weight in the modules too, and a loss on the real tokens sends no
// gradient to the padding.
TEST(AttentionProperties, PaddingGetsZeroWeightAndZeroGradient) {
  Generator gen(11);
  const Tensor padding = tensor({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, {2, kTokens}, DType::b8);  // sequence 2: 4 tokens
  for (const auto& [name, make, causal] : all_attentions()) {
    auto attention = make();
    Tensor x = randn({2, kTokens, kFeatures}, DType::f32, gen).requires_grad_();
    const Tensor out = (*attention)(x, padding);
    sum(mul(slice(out, 1, 0, 4), randn({2, 4, out.size(2)}, DType::f32, gen))).backward();
    for (double g : tokens_of(x.grad(), 1, 4, kTokens)) EXPECT_EQ(g, 0.0) << name << ": gradient of a padded token";
    EXPECT_TRUE(all_finite(x.grad())) << name;
    const Tensor weights = attention->last_attention_weights;  // (2, T, T), or (2, H, T, T)
    for (double w : slice(slice(weights, 0, 1, 2), -1, 4, kTokens).to_vector())
      EXPECT_EQ(w, 0.0) << name << ": weight of a padded key";
  }
}

// Note [fully masked rows]: a sequence that is all padding gets zero weights and a zero context
// (for MultiHeadAttention: out_proj's bias), no NaN, and its tokens get zero gradient; the other
// sequence of the batch is untouched.
TEST(AttentionProperties, FullyPaddedSequenceGivesZerosNotNaN) {
  Generator gen(12);
  const Tensor padding = tensor({0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1}, {2, kTokens}, DType::b8);
  for (const auto& [name, make, causal] : all_attentions()) {
    auto attention = make();
    Tensor x = randn({2, kTokens, kFeatures}, DType::f32, gen).requires_grad_();
    const Tensor out = (*attention)(x, padding);
    sum(mul(out, randn(out.shape(), DType::f32, gen))).backward();
    EXPECT_TRUE(all_finite(out) && all_finite(x.grad())) << name;
    for (double w : slice(attention->last_attention_weights, 0, 1, 2).to_vector()) EXPECT_EQ(w, 0.0) << name;
    for (double g : tokens_of(x.grad(), 1, 0, kTokens)) EXPECT_EQ(g, 0.0) << name;
    EXPECT_EQ(tokens_of(out, 0, 0, kTokens), tokens_of((*attention)(slice(x.detach(), 0, 0, 1)), 0, 0, kTokens))
        << name;
  }
}

// torch.nn.MultiheadAttention gives NaN for a sequence whose keys are all padding (checked with
// torch 1.13, training and eval); PackedMultiheadAttention does too by default, and zeros (the
// output projection's bias) under MaskedRows::zero. The other sequence is the same either way.
TEST(AttentionProperties, MultiheadAttentionFollowsItsMaskedRowsPolicy) {
  Generator gen(15);
  nn::PackedMultiheadAttention mha(4, 2, 0.0, gen);
  const Tensor x = randn({2, 3, 4}, DType::f32, gen);
  const Tensor padding = tensor({0, 0, 0, 1, 1, 1}, {2, 3}, DType::b8);  // sequence 1: all padding
  const Tensor nan_rows = mha(x, x, x, padding);
  for (double v : slice(nan_rows, 0, 1, 2).to_vector()) EXPECT_TRUE(std::isnan(v));
  EXPECT_TRUE(all_finite(slice(nan_rows, 0, 0, 1)));
  mha.masked_rows = MaskedRows::zero;
  const Tensor zero_rows = mha(x, x, x, padding);
  const Tensor bias = broadcast_to(mha.out_proj->bias, {1, 3, 4});
  EXPECT_EQ(slice(zero_rows, 0, 1, 2).to_vector(), bias.to_vector());
  EXPECT_EQ(slice(zero_rows, 0, 0, 1).to_vector(), slice(nan_rows, 0, 0, 1).to_vector());
}

// Left padding under a causal mask: the first query sees only a padded key, so its row is fully
// masked (zeros); the later tokens attend to the real ones only.
TEST(AttentionProperties, LeftPaddingUnderACausalMaskHasNoNaN) {
  Generator gen(13);
  const Tensor padding = tensor({1, 1, 0, 0, 0, 0}, {1, kTokens}, DType::b8);
  for (const auto& [name, make, causal] : causal_attentions()) {
    auto attention = make();
    Tensor x = randn({1, kTokens, kFeatures}, DType::f32, gen).requires_grad_();
    const Tensor out = (*attention)(x, padding);
    sum(out).backward();
    EXPECT_TRUE(all_finite(out) && all_finite(x.grad())) << name;
    const Tensor real = (*attention)(slice(x.detach(), 1, 2, kTokens));
    const std::vector<double> padded_run = tokens_of(out, 0, 2, kTokens), alone = real.to_vector();
    for (size_t i = 0; i < alone.size(); ++i) EXPECT_NEAR(padded_run[i], alone[i], 1e-6) << name << " at " << i;
  }
}

// A sequence of 4 tokens alone, and padded to 6 in a batch beside a full sequence: the same
// outputs at its real tokens. Whatever the padded tokens hold, the real outputs are bit-identical.
TEST(AttentionProperties, PaddingNeverChangesASequencesOutputs) {
  Generator gen(14);
  const Tensor padding = tensor({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, {2, kTokens}, DType::b8);
  for (const auto& [name, make, causal] : all_attentions()) {
    auto attention = make();
    const Tensor x = randn({2, kTokens, kFeatures}, DType::f32, gen);
    const Tensor out = (*attention)(x, padding);
    const Tensor alone = (*attention)(slice(slice(x, 0, 1, 2), 1, 0, 4));  // (1, 4, d_out)
    const std::vector<double> padded_run = tokens_of(out, 1, 0, 4), alone_run = alone.to_vector();
    for (size_t i = 0; i < alone_run.size(); ++i) EXPECT_NEAR(padded_run[i], alone_run[i], 1e-6) << name << " at " << i;
    const Tensor other_padding = cat({slice(x, 0, 0, 1), replace_tokens_from(slice(x, 0, 1, 2), 4, gen)}, 0);
    const Tensor changed = (*attention)(other_padding, padding);
    for (int64_t b = 0; b < 2; ++b) EXPECT_EQ(tokens_of(changed, b, 0, 4), tokens_of(out, b, 0, 4)) << name;
  }
}

// ---- Names and errors -------------------------------------------------------------------------

std::vector<std::string> names_of(const nn::Module& module) {
  std::vector<std::string> names;
  for (const auto& [name, _] : module.state_dict()) names.push_back(name);
  return names;
}

// True if the graph behind t has a node of that name.
bool graph_has(const Tensor& t, std::string_view name) {
  std::vector<Node*> stack{t.grad_fn().get()};
  std::set<Node*> seen;
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    if (node == nullptr || !seen.insert(node).second) continue;
    if (node->name == name) return true;
    for (const auto& next : node->next) stack.push_back(next.get());
  }
  return false;
}

// Every class runs the fused kernel, with and without key padding, in training and eval: the
// policy for fully masked rows lives in one place (Note [fully masked rows] in engine/ops/attention.h).
TEST(AttentionProperties, EveryClassRunsTheFusedOp) {
  Generator gen(11);
  const Tensor x = randn({2, kTokens, kFeatures}, DType::f32, gen);
  Tensor padding = zeros({2, kTokens}, DType::b8);
  padding.set({1, kTokens - 1}, 1);
  for (const Tensor& mask : {Tensor(), padding}) {
    for (const auto& [name, make, causal] : all_attentions()) {
      auto attention = make();
      for (bool training : {true, false}) {
        attention->train(training);
        const Tensor out = attention->forward(clone(x).requires_grad_(), mask);
        EXPECT_TRUE(graph_has(out, "ScaledDotProductAttentionBackward")) << name;
      }
    }
  }
}

TEST(Attention, StateDictNamesAreTheSeeds) {
  EXPECT_EQ(names_of(SelfAttention(16, 24, 24, 28)), (std::vector<std::string>{"W_q", "W_k", "W_v"}));
  EXPECT_EQ(SelfAttention(16, 24, 24, 28).W_v.shape(), (Shape{28, 16}));
  EXPECT_EQ(names_of(SelfAttention_v1(3, 2)), (std::vector<std::string>{"w_query", "w_key", "w_value"}));
  EXPECT_EQ(names_of(CausalAttention(3, 2, 6, 0.0, true)),
            (std::vector<std::string>{"mask", "w_query.weight", "w_query.bias", "w_key.weight", "w_key.bias",
                                      "w_value.weight", "w_value.bias"}));
  const MultiHeadAttention mha(6, 6, 3, 0.0, 2);
  EXPECT_EQ(names_of(mha), (std::vector<std::string>{"mask", "W_query.weight", "W_key.weight", "W_value.weight",
                                                     "out_proj.weight", "out_proj.bias"}));
  EXPECT_EQ(mha.mask.to_vector(), (std::vector<double>{0, 1, 1, 0, 0, 1, 0, 0, 0}));
}

TEST(Attention, BadArgumentsAreErrorsNamingTheModule) {
  expect_error([] { SelfAttention(4, 3, 5, 2); }, {"SelfAttention", "d_q must equal d_k", "d_q=3 d_k=5"});
  expect_error([] { MultiHeadAttention(4, 6, 8, 0.0, 4); }, {"MultiHeadAttention", "divisible", "d_out=6 num_heads=4"});
  SelfAttention_v2 v2(4, 3);
  expect_error([&] { v2(zeros({5, 3})); }, {"SelfAttention_v2", "d_in = 4", "(5,3)"});
  CausalAttention causal(4, 3, 6, 0.0);
  expect_error([&] { causal(zeros({6, 4})); }, {"CausalAttention", "(B, T, d_in)", "(6,4)"});
  expect_error([&] { causal(zeros({1, 7, 4})); }, {"CausalAttention", "7 tokens", "context_length = 6"});
  expect_error([&] { causal(zeros({2, 5, 4}), zeros({2, 5})); }, {"CausalAttention", "key_padding_mask", "b8", "f32"});
  expect_error(
      [&] {
        causal(zeros({2, 5, 4}), zeros({5}, DType::b8));
      },
      {"CausalAttention", "key_padding_mask", "(2,5)", "(5)"});
}

}  // namespace
}  // namespace ag::seeds
