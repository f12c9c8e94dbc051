// scaled_dot_product_attention equals the unfused composition of engine ops (matmul, masked_fill,
// softmax, dropout, matmul) in values and gradients, with every kind of mask, in f64 and f32
// (tiny shapes on the loops, large ones on oneDNN); its streaming kernel equals the materialising
// one, over several blocks, with fully masked rows, bit for bit at any thread count; the packed
// projections' ops equal it on the split heads bit for bit, under autocast and at the second order
// too; and the errors name what is wrong.
#include "engine/ops/attention.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "engine/autocast.h"
#include "engine/autograd.h"
#include "engine/kernels/bf16.h"
#include "engine/kernels/onednn.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/attention_node.h"
#include "engine/ops/dropout.h"
#include "engine/ops/mask.h"
#include "engine/ops/matmul.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "engine/ops/softmax.h"
#include "engine/threads.h"
#include "tests/test_util.h"

namespace ag {
namespace {

struct Masks {
  bool causal = false;
  bool bool_mask = false;  // a b8 (T, S) attn_mask
  bool additive = false;   // an additive (1, H, T, S) attn_mask
  bool padding = false;    // a (B, S) key_padding_mask
  double dropout_p = 0;
};

struct Inputs {
  Tensor q, k, v, attn_mask, padding;
};

// Random q (B, H, T, d), k (B, H, S, d), v (B, H, S, dv) and the masks; key 0 is never masked,
// so no row is all -inf.
Inputs make_inputs(int64_t B, int64_t H, int64_t T, int64_t S, int64_t d, int64_t dv, const Masks& m, DType dtype) {
  Generator gen(21);
  Inputs in{randn({B, H, T, d}, dtype, gen), randn({B, H, S, d}, dtype, gen), randn({B, H, S, dv}, dtype, gen), {}, {}};
  if (m.bool_mask) in.attn_mask = gt(rand({T, S}, DType::f64, gen), 0.6);  // (T, S)
  if (m.additive) in.attn_mask = randn({1, H, T, S}, dtype, gen);          // (1, H, T, S)
  if (m.padding) in.padding = gt(rand({B, S}, DType::f64, gen), 0.6);      // (B, S)
  NoGradGuard no_grad;
  for (int64_t i = 0; m.bool_mask && i < T; ++i) in.attn_mask.set({i, 0}, 0);
  for (int64_t b = 0; m.padding && b < B; ++b) in.padding.set({b, 0}, 0);
  for (Tensor* t : {&in.q, &in.k, &in.v}) t->requires_grad_();
  return in;
}

// The composition the fused op replaces, in engine ops.
Tensor composed(const Inputs& in, const Masks& m, Generator& gen) {
  const int64_t T = in.q.size(2), S = in.k.size(2);
  Tensor scores = mul(matmul(in.q, in.k, false, true), 1 / std::sqrt(double(in.q.size(3))));  // (B, H, T, S)
  if (m.causal) scores = masked_fill(scores, triu(ones({T, S}, DType::b8), 1), -INFINITY);
  if (m.bool_mask) scores = masked_fill(scores, in.attn_mask, -INFINITY);
  if (m.additive) scores = add(scores, in.attn_mask);
  if (m.padding) {
    const Tensor pad = reshape(in.padding, {in.q.size(0), 1, 1, S});  // (B, 1, 1, S)
    scores = masked_fill(scores, pad, -INFINITY);
  }
  const Tensor weights = dropout(softmax(scores, -1), m.dropout_p, m.dropout_p > 0, gen);  // (B, H, T, S)
  return matmul(weights, in.v);                                                            // (B, H, T, dv)
}

Tensor fused_with(const Inputs& in, const Masks& m, Generator& gen, AttentionKernel kernel) {
  // in.attn_mask, when b8, is true where masked (as masked_fill); sdpa's is true where the key takes part.
  const Tensor attn_mask = m.bool_mask ? logical_not(in.attn_mask) : in.attn_mask;
  return scaled_dot_product_attention(in.q, in.k, in.v,
                                      {.attn_mask = attn_mask,
                                       .key_padding_mask = in.padding,
                                       .is_causal = m.causal,
                                       .dropout_p = m.dropout_p,
                                       .kernel = kernel},
                                      gen)
      .output;
}
Tensor fused(const Inputs& in, const Masks& m, Generator& gen) {
  return fused_with(in, m, gen, AttentionKernel::automatic);
}
Tensor streaming(const Inputs& in, const Masks& m, Generator& gen) {
  return fused_with(in, m, gen, AttentionKernel::streaming);
}
Tensor materialising(const Inputs& in, const Masks& m, Generator& gen) {
  return fused_with(in, m, gen, AttentionKernel::materialising);
}

// Output and the gradients of q, k, v under a random upstream gradient.
std::vector<Tensor> run(Tensor (*f)(const Inputs&, const Masks&, Generator&), const Inputs& in, const Masks& m) {
  Generator gen(5);
  const Tensor out = f(in, m, gen);
  for (const Tensor* t : {&in.q, &in.k, &in.v}) t->set_grad({});
  Generator ggen(6);
  out.backward(randn(out.shape(), out.dtype(), ggen));
  return {out, in.q.grad(), in.k.grad(), in.v.grad()};
}

void expect_same(const std::vector<Tensor>& a, const std::vector<Tensor>& b, double tol, const std::string& what) {
  const char* names[] = {"output", "dq", "dk", "dv"};
  for (size_t i = 0; i < a.size(); ++i) {
    const std::vector<double> x = a[i].to_vector(), y = b[i].to_vector();
    ASSERT_EQ(x.size(), y.size());
    double worst = 0;
    for (size_t j = 0; j < x.size(); ++j) worst = std::max(worst, std::abs(x[j] - y[j]) / (1 + std::abs(y[j])));
    std::printf("%s %s %s max rel diff %.3g\n", worst <= tol ? "OK" : "NOT OK", what.c_str(), names[i], worst);
    EXPECT_LE(worst, tol) << what << " " << names[i];
  }
}

struct Case {
  std::string name;
  Masks masks;
};

const std::vector<Case> kCases = {{"plain", {}},
                                  {"causal", {.causal = true}},
                                  {"bool mask", {.bool_mask = true}},
                                  {"additive mask", {.additive = true}},
                                  {"padding", {.padding = true}},
                                  {"causal+padding+dropout", {.causal = true, .padding = true, .dropout_p = 0.25}},
                                  {"everything", {true, true, false, true, 0.1}}};

TEST(Attention, EqualsTheCompositionInF64) {
  for (const Case& c : kCases) {
    const Inputs in = make_inputs(2, 3, 5, 6, 4, 3, c.masks, DType::f64);
    expect_same(run(fused, in, c.masks), run(composed, in, c.masks), 1e-12, "f64 " + c.name);
  }
}

TEST(Attention, EqualsTheCompositionInF32AtTinyAndLargeSizes) {
  for (const Case& c : kCases) {
    const Inputs tiny = make_inputs(1, 2, 6, 6, 8, 8, c.masks, DType::f32);  // seed 003's sizes: the loops
    expect_same(run(fused, tiny, c.masks), run(composed, tiny, c.masks), 1e-5, "f32 tiny " + c.name);
    const Inputs large = make_inputs(4, 4, 128, 128, 32, 32, c.masks, DType::f32);  // on oneDNN
    expect_same(run(fused, large, c.masks), run(composed, large, c.masks), 1e-4, "f32 large " + c.name);
  }
}

// Sizes with partial blocks in every direction (64-row blocks; d and dv not multiples of a vector).
TEST(Attention, StreamingEqualsMaterialisingOverSeveralBlocks) {
  for (const Case& c : kCases) {
    if (c.masks.dropout_p > 0) continue;  // streaming does not drop
    const Inputs in64 = make_inputs(2, 2, 150, 130, 20, 36, c.masks, DType::f64);
    expect_same(run(streaming, in64, c.masks), run(materialising, in64, c.masks), 1e-12, "f64 streaming " + c.name);
    const Inputs in32 = make_inputs(2, 2, 150, 130, 20, 36, c.masks, DType::f32);
    expect_same(run(streaming, in32, c.masks), run(materialising, in32, c.masks), 1e-5, "f32 streaming " + c.name);
  }
  const Masks causal{.causal = true};
  const Inputs square = make_inputs(1, 3, 256, 256, 64, 64, causal, DType::f32);  // whole AVX-512 strips
  expect_same(run(streaming, square, causal), run(materialising, square, causal), 1e-5, "f32 streaming 256x64");
}

// Batch 1's keys are all padding: NaN rows (PyTorch's sense) or zero rows, and no gradient from them,
// from the streaming kernel as from the materialising one (within tol), T queries over S keys of d.
void expect_fully_masked_rows_as_materialising(int64_t T, int64_t S, int64_t d, DType dtype, bool bf16, double tol) {
  for (const MaskedRows policy : {MaskedRows::nan, MaskedRows::zero}) {
    const Inputs in = make_inputs(2, 2, T, S, d, d, {}, dtype);
    Tensor padding = zeros({2, S}, DType::b8);
    for (int64_t s = 0; s < S; ++s) padding.set({1, s}, 1);
    std::vector<std::vector<double>> results[2];
    for (const AttentionKernel kernel : {AttentionKernel::streaming, AttentionKernel::materialising}) {
      for (const Tensor* t : {&in.q, &in.k, &in.v}) t->set_grad({});
      const AutocastGuard autocast(bf16);
      const AttentionOptions o{.key_padding_mask = padding, .masked_rows = policy, .kernel = kernel};
      const Tensor out = scaled_dot_product_attention(in.q, in.k, in.v, o).output;
      out.backward(ones(out.shape(), out.dtype()));
      results[kernel == AttentionKernel::streaming].assign(
          {out.to_vector(), in.q.grad().to_vector(), in.k.grad().to_vector(), in.v.grad().to_vector()});
    }
    for (size_t t = 0; t < 4; ++t)
      for (size_t e = 0; e < results[0][t].size(); ++e) {
        const double a = results[1][t][e], b = results[0][t][e];
        ASSERT_TRUE(std::isnan(a) == std::isnan(b) && (std::isnan(a) || std::abs(a - b) <= tol * (1 + std::abs(b))))
            << "tensor " << t << " element " << e << ": streaming " << a << ", materialising " << b;
      }
    EXPECT_EQ(std::isnan(results[1][0].back()), policy == MaskedRows::nan);  // the last row is batch 1's
  }
}

TEST(Attention, StreamingFullyMaskedRowsAsMaterialising) {
  expect_fully_masked_rows_as_materialising(70, 70, 8, DType::f64, false, 1e-12);
}

// The streaming kernel's output and gradients on one thread and on two, bit for bit.
void expect_same_bits_on_one_and_two_threads(const Inputs& in, const Masks& m) {
  const int threads = get_num_threads();
  set_num_threads(1);
  const std::vector<Tensor> one = run(streaming, in, m);
  set_num_threads(2);
  const std::vector<Tensor> two = run(streaming, in, m);
  set_num_threads(threads);
  for (size_t t = 0; t < one.size(); ++t) EXPECT_EQ(one[t].to_vector(), two[t].to_vector()) << "tensor " << t;
}

TEST(Attention, StreamingRepeatsBitForBitAtAnyThreadCount) {
  const Masks m{.causal = true, .padding = true};
  expect_same_bits_on_one_and_two_threads(make_inputs(2, 3, 200, 200, 32, 32, m, DType::f32), m);
}

// Note [bf16 head kernel] (engine/kernels/flash_attention.h): under autocast, heads of at most 64
// queries and keys stream through their own kernel; it equals the materialising kernel's bf16
// products (both against f64) within a few bf16 roundings, at sizes that fill its vectors exactly and
// sizes it pads, with every mask, and repeats bit for bit on one thread and two.
TEST(Attention, Bf16HeadKernelAsTheMaterialisingOneUnderAutocast) {
  if (!cpu_has_avx512_bf16()) GTEST_SKIP() << "this CPU lacks AVX512_BF16 (lscpu flag avx512_bf16): no autocast here";
  struct Sizes {
    int64_t B, H, T, S, d, dv;
  };
  for (const Sizes& z : {Sizes{2, 3, 64, 64, 32, 32}, Sizes{1, 2, 5, 7, 8, 12}, Sizes{2, 2, 37, 64, 20, 36},
                         Sizes{1, 1, 1, 17, 16, 16}, Sizes{1, 2, 64, 3, 48, 8}})
    for (const Case& c : kCases) {
      if (c.masks.dropout_p > 0) continue;  // streaming does not drop
      const Inputs in = make_inputs(z.B, z.H, z.T, z.S, z.d, z.dv, c.masks, DType::f32);
      const std::string what = fmt::format("bf16 heads T {} S {} d {} dv {} {}", z.T, z.S, z.d, z.dv, c.name);
      const std::vector<Tensor> exact =
          run(composed, make_inputs(z.B, z.H, z.T, z.S, z.d, z.dv, c.masks, DType::f64), c.masks);
      const AutocastGuard autocast;
      const std::vector<Tensor> heads = run(streaming, in, c.masks), weights = run(materialising, in, c.masks);
      expect_same(heads, weights, 1e-2, what + " vs materialising");
      expect_same(heads, exact, 3e-2, what + " vs f64");
    }
  const Masks m{.causal = true, .padding = true};
  const AutocastGuard autocast;
  expect_same_bits_on_one_and_two_threads(make_inputs(2, 3, 64, 64, 32, 32, m, DType::f32), m);
}

// Queries whose keys are all padding under the bf16 head kernel, as under the materialising one.
TEST(Attention, Bf16HeadKernelFullyMaskedRowsAsMaterialising) {
  if (!cpu_has_avx512_bf16()) GTEST_SKIP() << "this CPU lacks AVX512_BF16 (lscpu flag avx512_bf16): no autocast here";
  expect_fully_masked_rows_as_materialising(9, 11, 16, DType::f32, true, 3e-2);
}

// Note [a causal attn_mask]: causal_mask(T)'s additive mask, or its b8 form, runs as is_causal: the
// same output, weights and gradients, to the bit, through scaled_dot_product_attention and the packed
// op, square or not, on both kernels; a mask one value away from it runs as given (its last query
// loses key 0, or its score against it is shifted), and so differs.
TEST(Attention, ACausalAttnMaskRunsAsIsCausal) {
  for (const auto& [T, S] : {std::pair<int64_t, int64_t>{6, 6}, {4, 7}, {7, 4}})
    for (const AttentionKernel kernel : {AttentionKernel::materialising, AttentionKernel::streaming}) {
      Generator gen(3);
      const Tensor q = randn({2, 2, T, 4}, DType::f64, gen).requires_grad_();
      const Tensor k = randn({2, 2, S, 4}, DType::f64, gen).requires_grad_();
      const Tensor v = randn({2, 2, S, 3}, DType::f64, gen).requires_grad_();
      const Tensor u = randn({2, 2, T, 3}, DType::f64, gen);
      const auto run = [&](AttentionOptions o) {
        o.kernel = kernel;
        o.need_weights = kernel == AttentionKernel::materialising;
        for (const Tensor* t : {&q, &k, &v}) t->set_grad({});
        const Attention a = scaled_dot_product_attention(q, k, v, o);
        sum(mul(a.output, u)).backward();
        return std::vector<std::vector<double>>{a.output.to_vector(),
                                                o.need_weights ? a.weights.to_vector() : std::vector<double>(),
                                                q.grad().to_vector(), k.grad().to_vector(), v.grad().to_vector()};
      };
      const auto causal_additive = [&] {
        Tensor m = zeros({T, S}, DType::f64);
        for (int64_t i = 0; i < T; ++i)
          for (int64_t j = i + 1; j < S; ++j) m.set({i, j}, -INFINITY);
        return m;
      };
      const Tensor additive = causal_additive();
      Tensor takes_part = zeros({T, S}, DType::b8);
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j <= std::min(i, S - 1); ++j) takes_part.set({i, j}, 1);
      SCOPED_TRACE(fmt::format("T {} S {} kernel {}", T, S, static_cast<int>(kernel)));
      const auto taken_as_causal = [&](const Tensor& mask) {
        AttentionOptions o{.attn_mask = mask};
        plan_shapes(q.shape(), k.shape(), v.shape(), DType::f64, o);
        return o.is_causal && !o.attn_mask.defined();
      };
      EXPECT_TRUE(taken_as_causal(additive) && taken_as_causal(takes_part));
      const auto flag = run(AttentionOptions{.is_causal = true});
      EXPECT_EQ(run(AttentionOptions{.attn_mask = additive}), flag);
      EXPECT_EQ(run(AttentionOptions{.attn_mask = reshape(additive, {1, 1, T, S})}), flag);
      EXPECT_EQ(run(AttentionOptions{.attn_mask = takes_part}), flag);
      Tensor hides_more = causal_additive(), shifted = causal_additive();
      hides_more.set({T - 1, 0}, -INFINITY);
      shifted.set({T - 1, 0}, -1.0);
      EXPECT_FALSE(taken_as_causal(hides_more) || taken_as_causal(shifted));
      EXPECT_NE(run(AttentionOptions{.attn_mask = hides_more})[0], flag[0]);
      EXPECT_NE(run(AttentionOptions{.attn_mask = shifted})[0], flag[0]);
    }
  // The mask is read only once the operands are checked: an undefined q is named, not dereferenced.
  expect_error(
      [] {
        scaled_dot_product_attention(Tensor(), zeros({1, 1, 2, 2}), zeros({1, 1, 2, 2}), {.attn_mask = zeros({2, 2})});
      },
      {"scaled_dot_product_attention", "q"});
  Generator gen(4);
  const Tensor qkv = randn({2, 5, 12}, DType::f64, gen);
  Tensor additive = zeros({5, 5}, DType::f64);
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = i + 1; j < 5; ++j) additive.set({i, j}, -INFINITY);
  EXPECT_EQ(packed_self_attention(qkv, 2, {.attn_mask = additive}).output.to_vector(),
            packed_self_attention(qkv, 2, {.is_causal = true}).output.to_vector());
}

TEST(Attention, ReturnsTheWeightsOnRequest) {
  const Inputs in = make_inputs(2, 2, 4, 4, 3, 3, {.causal = true}, DType::f64);
  const Attention a = scaled_dot_product_attention(in.q, in.k, in.v, {.is_causal = true, .need_weights = true});
  ASSERT_EQ(a.weights.shape(), Shape({2, 2, 4, 4}));
  EXPECT_EQ(a.weights.at({1, 1, 0, 3}), 0.0);  // a future key: weight exactly 0
  EXPECT_NEAR(sum(a.weights, {3}).to_vector()[5], 1.0, 1e-12);
  EXPECT_FALSE(a.weights.requires_grad());
  EXPECT_FALSE(scaled_dot_product_attention(in.q, in.k, in.v).weights.defined());
}

TEST(Attention, MaskedKeysGetExactlyZeroGradient) {
  const Masks m{.padding = true};
  const Inputs in = make_inputs(2, 2, 4, 5, 3, 3, m, DType::f64);
  run(fused, in, m);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t s = 0; s < 5; ++s)
      if (in.padding.at({b, s}) != 0)
        for (int64_t h = 0; h < 2; ++h)
          for (int64_t j = 0; j < 3; ++j) {
            EXPECT_EQ(in.k.grad().at({b, h, s, j}), 0.0);
            EXPECT_EQ(in.v.grad().at({b, h, s, j}), 0.0);
          }
}

// In a data-parallel step (a BatchShardGuard), dropout on the weights gives an example the same
// output and gradients over its real queries and keys whether its batch is padded with more
// (masked) keys and more queries, or cut into shards.
TEST(Attention, DropoutInADataParallelStepDependsOnNeitherPaddingNorSplit) {
  constexpr int64_t B = 2, H = 2, T = 3, S = 4, d = 5;
  Generator init(3);
  const Tensor q = randn({B, H, T, d}, DType::f64, init), k = randn({B, H, S, d}, DType::f64, init);
  const Tensor v = randn({B, H, S, d}, DType::f64, init), g = randn({B, H, T, d}, DType::f64, init);
  // Rows [first, first + rows) padded to T + more_t queries and S + more_s keys: the output, dq, dk
  // and dv over the real queries and keys.
  auto step = [&](int64_t first, int64_t rows, int64_t more_t, int64_t more_s) {
    auto rows_padded = [&](const Tensor& x, int64_t more) {
      const Tensor part = narrow(x, 0, first, rows);
      const Tensor padded = more > 0 ? cat({part, zeros({rows, H, more, d}, DType::f64)}, 2) : part;
      return padded.detach().requires_grad_();
    };
    const Tensor qp = rows_padded(q, more_t), kp = rows_padded(k, more_s), vp = rows_padded(v, more_s);
    Tensor padding = zeros({rows, S + more_s}, DType::b8);  // true at the added keys
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = S; j < S + more_s; ++j) padding.set({r, j}, 1);
    Generator gen(9);
    BatchShardGuard batch(B);
    batch.select(first, rows);
    const Tensor out =
        scaled_dot_product_attention(qp, kp, vp, {.key_padding_mask = padding, .dropout_p = 0.3}, gen).output;
    out.backward(rows_padded(g, more_t).detach());
    return std::vector<Tensor>{narrow(out, 2, 0, T), narrow(qp.grad(), 2, 0, T), narrow(kp.grad(), 2, 0, S),
                               narrow(vp.grad(), 2, 0, S)};
  };
  const std::vector<Tensor> whole = step(0, B, 0, 0);
  expect_same(step(0, B, 2, 3), whole, 1e-12, "padded");
  std::vector<Tensor> second_row;
  for (const Tensor& t : whole) second_row.push_back(narrow(t, 0, 1, 1));
  expect_same(step(1, 1, 1, 2), second_row, 1e-12, "the second row alone, padded");
}

TEST(Attention, CreatesNoPrimitiveInTheSteadyState) {
  const Inputs in = make_inputs(4, 4, 128, 128, 32, 32, {.causal = true}, DType::f32);
  auto step = [&] { sum(fused(in, {.causal = true}, default_generator())).backward(); };
  step();
  const int64_t after_first = onednn::primitives_created();
  for (int i = 0; i < 10; ++i) step();
  EXPECT_EQ(onednn::primitives_created(), after_first);
}

TEST(Attention, ErrorsNameTheProblem) {
  const Tensor q = zeros({2, 3, 4, 5}), k = zeros({2, 3, 6, 5}), v = zeros({2, 3, 6, 7});
  expect_error(
      [&] {
        scaled_dot_product_attention(zeros({3, 4, 5}), k, v);
      },
      {"scaled_dot_product_attention", "q", "(B, H, T, d)", "(3,4,5)"});
  expect_error([&] { scaled_dot_product_attention(q, zeros({2, 3, 6, 4}), v); }, {"(2,3,4,5)", "(2,3,6,4)"});
  expect_error(
      [&] {
        scaled_dot_product_attention(q, k, v, {.attn_mask = zeros({4, 5}, DType::b8)});
      },
      {"attn_mask", "(4,5)", "(2,3,4,6)"});
  expect_error(
      [&] {
        scaled_dot_product_attention(q, k, v, {.key_padding_mask = zeros({2, 4}, DType::b8)});
      },
      {"key_padding_mask", "(2,6)", "(2,4)"});
  expect_error([&] { scaled_dot_product_attention(q, k, v, {.dropout_p = 1.5}); }, {"dropout_p", "[0, 1]"});
  expect_error([&] { scaled_dot_product_attention(q, k, zeros({2, 3, 6, 7}, DType::f64)); }, {"dtypes differ"});
  expect_error(
      [&] { scaled_dot_product_attention(q, k, v, {.need_weights = true, .kernel = AttentionKernel::streaming}); },
      {"streaming", "need_weights"});
  expect_error([&] { scaled_dot_product_attention(q, k, v, {.dropout_p = 0.5, .kernel = AttentionKernel::streaming}); },
               {"streaming", "dropout"});
}

// ---- packed_self_attention / packed_cross_attention against scaled_dot_product_attention on the heads
// split from the packed projections with recorded ops.

constexpr int64_t kHeads = 4;

// The slot's heads of a source (N, L, slots·E): (N, H, L, E/H).
Tensor split_heads(const Tensor& source, int64_t slot, int64_t E) {
  const Tensor projection = narrow(source, 2, slot * E, E);                                           // (N, L, E)
  return transpose(reshape(projection, {source.size(0), source.size(1), kHeads, E / kHeads}), 1, 2);  // (N, H, L, d)
}

struct PackedCase {
  bool cross;
  AttentionKernel kernel;
  AttentionOptions options;
};

// Whether the heads of the output are merged (N, T, E): by the packed op (merge_heads option), or
// after it by merge_heads().
enum class Merge { no, in_op, after };

// Output and source gradients of the packed op (packed = true) or of sdpa on the split heads.
std::vector<Tensor> run_packed(const PackedCase& c, bool packed, DType dtype, bool bf16, Merge merge = Merge::no) {
  const int64_t N = 2, T = 5, S = c.cross ? 7 : 5, E = 16;
  Generator gen(31);
  std::vector<Tensor> sources =
      c.cross ? std::vector<Tensor>{randn({N, T, E}, dtype, gen), randn({N, S, 2 * E}, dtype, gen)}
              : std::vector<Tensor>{randn({N, T, 3 * E}, dtype, gen)};
  for (Tensor& s : sources) s.requires_grad_();
  AttentionOptions o = c.options;
  o.kernel = c.kernel;
  o.merge_heads = merge == Merge::in_op;
  AutocastGuard autocast(bf16);
  Generator dropout_gen(5);
  Tensor out;
  if (packed) {
    out = c.cross ? packed_cross_attention(sources[0], sources[1], kHeads, o, dropout_gen).output
                  : packed_self_attention(sources[0], kHeads, o, dropout_gen).output;
  } else {
    const Tensor& kv = sources.back();
    const int64_t kv_slot = c.cross ? 0 : 1;
    out = scaled_dot_product_attention(split_heads(sources[0], 0, E), split_heads(kv, kv_slot, E),
                                       split_heads(kv, kv_slot + 1, E), o, dropout_gen)
              .output;
  }
  if (merge == Merge::after) out = merge_heads(out);
  Generator ggen(6);
  out.backward(randn(out.shape(), out.dtype(), ggen));
  std::vector<Tensor> results{out};
  for (const Tensor& s : sources) results.push_back(s.grad());
  return results;
}

std::vector<PackedCase> packed_cases() {
  Generator gen(8);
  const Tensor padding = gt(rand({2, 7}, DType::f64, gen), 0.6);  // (N, S) for cross, sliced for self
  std::vector<PackedCase> cases;
  for (bool cross : {false, true}) {
    const Tensor pad = cross ? padding : slice(padding, 1, 0, 5);
    cases.push_back({cross, AttentionKernel::materialising, {}});
    cases.push_back({cross, AttentionKernel::streaming, {.is_causal = true}});
    cases.push_back({cross, AttentionKernel::materialising, {.key_padding_mask = pad, .dropout_p = 0.3}});
    cases.push_back({cross, AttentionKernel::streaming, {.key_padding_mask = pad, .masked_rows = MaskedRows::zero}});
    // Every key of the second sequence hidden: its rows' NaN weights reach dv through the
    // materialising formulas (Note [fully masked rows]).
    Tensor hidden = zeros(pad.shape(), DType::b8);
    for (int64_t j = 0; j < pad.size(1); ++j) hidden.set({1, j}, 1);
    cases.push_back({cross, AttentionKernel::streaming, {.key_padding_mask = hidden}});
  }
  return cases;
}

void expect_same_bits(const std::vector<Tensor>& packed, const std::vector<Tensor>& split, size_t case_index) {
  ASSERT_EQ(packed.size(), split.size());
  for (size_t i = 0; i < packed.size(); ++i) {
    ASSERT_TRUE(packed[i].defined() && split[i].defined()) << "case " << case_index << " result " << i;
    EXPECT_EQ(packed[i].shape(), split[i].shape()) << "case " << case_index << " result " << i;
    const std::vector<double> a = packed[i].to_vector(), b = split[i].to_vector();
    size_t differ = 0;
    for (size_t j = 0; j < a.size(); ++j) differ += !(a[j] == b[j] || (std::isnan(a[j]) && std::isnan(b[j])));
    EXPECT_EQ(differ, 0u) << "case " << case_index << ": result " << i << " (0 = output, then the sources' gradients)";
  }
}

TEST(PackedAttention, EqualsAttentionOnTheSplitHeadsBitForBit) {
  const std::vector<PackedCase> cases = packed_cases();
  for (size_t i = 0; i < cases.size(); ++i)
    for (DType dtype : {DType::f64, DType::f32})
      expect_same_bits(run_packed(cases[i], true, dtype, false), run_packed(cases[i], false, dtype, false), i);
}

TEST(PackedAttention, EqualsAttentionOnTheSplitHeadsUnderAutocast) {
  if (!cpu_has_avx512_bf16()) GTEST_SKIP() << "this CPU lacks AVX512_BF16 (lscpu flag avx512_bf16): no autocast here";
  const std::vector<PackedCase> cases = packed_cases();
  for (size_t i = 0; i < cases.size(); ++i)
    expect_same_bits(run_packed(cases[i], true, DType::f32, true), run_packed(cases[i], false, DType::f32, true), i);
}

// merge_heads: the output merged (N, T, E) by the op, as merge_heads() merges the heads' output, and
// the same gradients, to the bit: f64, f32 and under autocast (the bf16 head kernel writes it merged
// and reads its gradient so, the other kernels merge with recorded ops).
TEST(PackedAttention, MergedHeadsAsMergeHeadsOfTheOutputBitForBit) {
  const std::vector<PackedCase> cases = packed_cases();
  for (size_t i = 0; i < cases.size(); ++i) {
    for (DType dtype : {DType::f64, DType::f32})
      expect_same_bits(run_packed(cases[i], true, dtype, false, Merge::in_op),
                       run_packed(cases[i], true, dtype, false, Merge::after), i);
    if (cpu_has_avx512_bf16())
      expect_same_bits(run_packed(cases[i], true, DType::f32, true, Merge::in_op),
                       run_packed(cases[i], true, DType::f32, true, Merge::after), i);
  }
  expect_error(
      [] {
        scaled_dot_product_attention(zeros({1, 1, 2, 4}), zeros({1, 1, 2, 4}), zeros({1, 1, 2, 4}),
                                     {.merge_heads = true});
      },
      {"scaled_dot_product_attention", "merge_heads", "packed_self_attention"});
}

// create_graph: the gradient of Σ (d source · u) is the split composition's, at both kernels.
TEST(PackedAttention, SecondOrderEqualsTheSplitComposition) {
  for (AttentionKernel kernel : {AttentionKernel::materialising, AttentionKernel::streaming}) {
    std::vector<Tensor> second;
    for (bool packed : {true, false}) {
      Generator gen(41);
      const int64_t E = 8;
      const Tensor qkv = randn({2, 3, 3 * E}, DType::f64, gen).requires_grad_();
      const AttentionOptions o{.is_causal = true, .kernel = kernel};
      const Tensor out = packed ? packed_self_attention(qkv, kHeads, o).output
                                : scaled_dot_product_attention(split_heads(qkv, 0, E), split_heads(qkv, 1, E),
                                                               split_heads(qkv, 2, E), o)
                                      .output;
      const Tensor first = grad({sum(mul(out, out))}, {qkv}, {}, true)[0];  // (N, L, 3E)
      second.push_back(grad({sum(mul(first, randn(first.shape(), DType::f64, gen)))}, {qkv})[0]);
    }
    const std::vector<double> a = second[0].to_vector(), b = second[1].to_vector();
    for (size_t j = 0; j < a.size(); ++j) ASSERT_NEAR(a[j], b[j], 1e-12 * (1 + std::abs(b[j]))) << "element " << j;
  }
}

// Under autocast, unless the weights are returned (need_weights), the materialising kernel writes
// their bf16 operand (after dropout) in the softmax's pass and its backward reads it: the same bits as
// the composition, output and gradient, with dropout, padding and rows without keys (MaskedRows::zero).
TEST(PackedAttention, DroppedWeightsRoundedInOnePassUnderAutocast) {
  if (!cpu_has_avx512_bf16()) GTEST_SKIP() << "this CPU lacks AVX512_BF16 (lscpu flag avx512_bf16): no autocast here";
  for (const bool padded : {false, true}) {
    std::vector<std::vector<double>> results;  // output, then qkv's gradient, for need_weights true and false
    for (const bool need_weights : {true, false}) {
      Generator gen(9);
      const Tensor qkv = randn({2, 16, 3 * 32}, DType::f32, gen).requires_grad_();
      Tensor padding = zeros({2, 16}, DType::b8);  // (N, S): all of the second sequence's keys hidden
      for (int64_t j = 0; padded && j < 16; ++j) padding.set({1, j}, 1);
      AttentionOptions o{.dropout_p = 0.2, .need_weights = need_weights, .kernel = AttentionKernel::materialising};
      if (padded) o.key_padding_mask = padding, o.masked_rows = MaskedRows::zero, o.is_causal = true;
      Generator dropout_gen(3);
      Tensor out;
      {
        const AutocastGuard autocast;
        out = packed_self_attention(qkv, kHeads, o, dropout_gen).output;
      }
      out.backward(randn(out.shape(), DType::f32, gen));
      results.push_back(out.to_vector());
      results.push_back(qkv.grad().to_vector());
    }
    EXPECT_EQ(results[0], results[2]) << "output, padded " << padded;
    EXPECT_EQ(results[1], results[3]) << "gradient, padded " << padded;
  }
}

// Under autocast the bf16 head kernel's merged output carries its bf16 copy, written in the kernel's
// pass: what out_proj's product reads (autocast_operand takes it), with to(out, bf16)'s bits, rows
// without keys (NaN or zero) included.
TEST(PackedAttention, MergedOutputCarriesItsBf16CopyUnderAutocast) {
  if (!cpu_has_avx512_bf16()) GTEST_SKIP() << "this CPU lacks AVX512_BF16 (lscpu flag avx512_bf16): no autocast here";
  for (const MaskedRows rows : {MaskedRows::nan, MaskedRows::zero}) {
    Generator gen(12);
    const Tensor qkv = randn({2, 16, 3 * 32}, DType::f32, gen);
    Tensor padding = zeros({2, 16}, DType::b8);  // (N, S): all of the second sequence's keys hidden
    for (int64_t j = 0; j < 16; ++j) padding.set({1, j}, 1);
    const AttentionOptions o{.key_padding_mask = padding, .masked_rows = rows, .merge_heads = true};
    const AutocastGuard autocast;
    const Tensor out = packed_self_attention(qkv, kHeads, o).output;  // (N, T, E)
    ASSERT_NE(out.impl()->bf16_copy, nullptr) << "no copy attached";
    const Tensor copy = autocast_operand(out);
    EXPECT_EQ(copy.impl(), out.impl()->bf16_copy.get());
    const Tensor rounded = to(out, DType::bf16);
    EXPECT_EQ(std::memcmp(copy.raw_data(), rounded.raw_data(), 2 * out.numel()), 0);
  }
}

TEST(PackedAttention, ErrorsNameTheProblem) {
  expect_error(
      [] {
        packed_self_attention(zeros({2, 3, 10}), 2);
      },
      {"packed_self_attention", "qkv", "(N, L, 3·E)", "(2,3,10)"});
  expect_error([] { packed_self_attention(zeros({2, 3, 12}), 0); }, {"packed_self_attention", "heads", "0"});
  expect_error(
      [] {
        packed_cross_attention(zeros({2, 3, 4}), zeros({2, 5, 12}), 2);
      },
      {"packed_cross_attention", "(N, S, 2E)", "(2,3,4)", "(2,5,12)"});
  expect_error([] { packed_cross_attention(zeros({2, 3, 4}), zeros({3, 5, 8}), 2); }, {"(2,3,4)", "(3,5,8)"});
}

}  // namespace
}  // namespace ag
