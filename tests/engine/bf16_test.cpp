// bf16 mixed precision: the conversions against PyTorch (tools/golden/bf16.py), the products under
// AutocastGuard against f64 within bf16's bound for their K, and the autocast policy as a table.
// Whatever needs AVX512_BF16 skips, saying so, on a CPU without it.
#include "engine/kernels/bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

#include "engine/autocast.h"
#include "engine/autograd.h"
#include "engine/graph.h"
#include "engine/inspect.h"
#include "engine/kernels/copy.h"
#include "engine/kernels/softmax.h"
#include "engine/ops.h"
#include "engine/threads.h"
#include "nn/gpt.h"
#include "nn/optim.h"
#include "tests/golden_util.h"
#include "tests/test_util.h"

namespace ag {
namespace {

#define SKIP_WITHOUT_AVX512_BF16()                                                                        \
  if (!cpu_has_avx512_bf16())                                                                             \
  GTEST_SKIP() << "this CPU lacks AVX512_BF16 (lscpu flag avx512_bf16): bf16 products are refused here, " \
                  "as AutocastGuard's refusal test checks"

std::vector<uint16_t> bits_of(const Tensor& bf16) {
  std::vector<uint16_t> bits(bf16.numel());
  std::memcpy(bits.data(), bf16.raw_data(), bits.size() * sizeof(uint16_t));
  return bits;
}

TEST(Bf16Conversion, MatchesPyTorchBitForBitSpecialsIncluded) {
  const Golden golden("bf16");
  for (const std::string set : {"special", "random"}) {
    const Tensor in = golden[set + ".f32"];
    const std::vector<uint16_t> expected = bits_of(golden[set + ".bf16"]);
    const std::vector<uint16_t> vectorised = bits_of(to(in, DType::bf16));  // engine/kernels/bf16.cpp
    ASSERT_EQ(vectorised.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      uint32_t input;
      std::memcpy(&input, in.data<float>() + i, 4);
      EXPECT_EQ(vectorised[i], expected[i]) << set << " element " << i << ": f32 bits " << std::hex << input;
      EXPECT_EQ(bf16_bits_from_f32(in.data<float>()[i]), expected[i]) << set << " element " << i << " (scalar)";
    }
  }
}

// A strided copy into bf16 rounds whole runs of short rows per call: the heads of one projection of
// a packed (N, L, 3E) source, split (N, H, L, d) at 1 and 2 threads (ranges cutting runs), and a
// 2-d and a 1-d window, give to(x, bf16)'s bits of the same elements.
TEST(Bf16Conversion, StridedCopiesRoundAsTo) {
  Generator gen(11);
  const int64_t N = 3, L = 37, H = 4, d = 5, E = H * d;
  const Tensor source = randn({N, L, 3 * E}, DType::f32, gen);
  const Tensor k_heads = transpose(reshape(narrow(source, 2, E, E), {N, L, H, d}), 1, 2);  // (N, H, L, d)
  const std::vector<uint16_t> expected = bits_of(to(k_heads, DType::bf16));
  const int threads = get_num_threads();
  for (const int t : {1, 2}) {
    set_num_threads(t);
    const Tensor out = empty({N, H, L, d}, DType::bf16);
    copy_window_to_bf16(source, {E, {L * 3 * E, d, 3 * E, 1}}, out, whole(out), out.shape());
    EXPECT_EQ(bits_of(out), expected) << t << " threads";
  }
  set_num_threads(threads);
  const Tensor first = reshape(narrow(source, 0, 0, 1), {L, 3 * E});  // (L, 3E)
  const Tensor rows = empty({L, 3}, DType::bf16), row = empty({7}, DType::bf16);
  copy_window_to_bf16(source, {2, {3 * E, 1}}, rows, whole(rows), rows.shape());
  EXPECT_EQ(bits_of(rows), bits_of(to(narrow(first, 1, 2, 3), DType::bf16)));
  copy_window_to_bf16(source, {4, {1}}, row, whole(row), row.shape());
  EXPECT_EQ(bits_of(row), bits_of(to(narrow(reshape(narrow(first, 0, 0, 1), {3 * E}), 0, 4, 7), DType::bf16)));
}

TEST(Bf16Conversion, WideningIsExactAndRoundTripsEveryPattern) {
  Tensor all = empty({65536}, DType::bf16);
  for (uint32_t b = 0; b < 65536; ++b) all.data<BFloat16>()[b].bits = static_cast<uint16_t>(b);
  const Tensor wide = to(all, DType::f32);
  const Tensor back = to(wide, DType::bf16);
  for (uint32_t b = 0; b < 65536; ++b) {
    uint32_t f;
    std::memcpy(&f, wide.data<float>() + b, 4);
    ASSERT_EQ(f, b << 16) << "bf16 " << b;
    const bool nan = (b & 0x7F80) == 0x7F80 && (b & 0x7F) != 0;
    ASSERT_EQ(back.data<BFloat16>()[b].bits, nan ? 0xFFFF : b) << "bf16 " << b;
  }
}

// rounded_product (attention's dropped weights as a bf16 operand) against its composition, over
// sizes that end mid-chunk, with zeros, infinities and NaN among the factors.
TEST(Bf16Conversion, RoundedProductIsTheRoundedMul) {
  Generator gen(12);
  for (const int64_t n : {1, 4095, 4096, 10001}) {
    Tensor a = randn({n}, DType::f32, gen), b = randn({n}, DType::f32, gen);
    a.set({0}, INFINITY);
    b.set({n - 1}, NAN);
    if (n > 2) b.set({1}, 0.0);
    EXPECT_EQ(bits_of(rounded_product(a, b)), bits_of(to(mul(a, b), DType::bf16))) << n << " elements";
  }
  expect_error([] { rounded_product(zeros({3}), zeros({4})); }, {"rounded_product", "(3)", "(4)"});
}

// softmax_backward_to_bf16 (attention's dS as a bf16 operand) against its composition, on short and
// long rows (the two row kernels), with and without the dropout mask.
TEST(Bf16Conversion, SoftmaxBackwardToBf16IsTheRoundedComposition) {
  Generator gen(13);
  for (const int64_t size : {1, 7, 64, 130}) {
    const Tensor y = softmax(randn({3, 5, size}, DType::f32, gen), -1);
    const Tensor g = randn({3, 5, size}, DType::f32, gen);
    const Tensor keep = mul(to(gt(rand({3, 5, size}, DType::f32, gen), 0.25), DType::f32), 1 / 0.75);
    EXPECT_EQ(bits_of(softmax_backward_to_bf16(y, g, {})), bits_of(to(softmax_backward(y, g, -1), DType::bf16)))
        << size;
    EXPECT_EQ(bits_of(softmax_backward_to_bf16(y, g, keep)),
              bits_of(to(softmax_backward(y, mul(g, keep), -1), DType::bf16)))
        << size << " with keep";
  }
}

// softmax_rows_in_place_with_bf16 (attention's weights and their bf16 operand in one pass) against its
// composition: the softmax's bits on short rows (its sum in the same order), within 4 ulp on long
// ones, and the operand as the weights (times keep) rounded; with masked (-inf) keys, a row all
// -inf and a row with a NaN: NaN rows, as PyTorch's softmax gives them (oneDNN's, which our softmax
// takes past 16 keys, leaves the other entries of a NaN's row finite).
TEST(Bf16Conversion, SoftmaxRowsWithBf16AreTheSoftmaxAndItsRoundedProduct) {
  Generator gen(14);
  for (const int64_t size : {1, 7, 16, 17, 64, 130}) {
    SCOPED_TRACE(fmt::format("rows of {}", size));
    Tensor x = randn({15, size}, DType::f32, gen);
    x.set({0, size - 1}, -INFINITY);
    for (int64_t j = 0; j < size; ++j) x.set({1, j}, -INFINITY);
    x.set({2, 0}, NAN);
    const Tensor keep = mul(to(gt(rand({15, size}, DType::f32, gen), 0.25), DType::f32), 1 / 0.75);
    const Tensor want = softmax(x, -1);
    for (const bool with_keep : {false, true}) {
      Tensor y = clone(x);
      Tensor operand = empty(x.shape(), DType::bf16);
      softmax_rows_in_place_with_bf16(y.data<float>(), with_keep ? keep.data<float>() : nullptr,
                                      operand.data<BFloat16>(), 15, size);
      const std::vector<double> got = y.to_vector(), expected = want.to_vector();
      for (size_t i = 0; i < got.size(); ++i) {
        if (std::isnan(expected[i]) || i / size == 2) {  // all -inf, or a NaN: the whole row NaN, as in PyTorch
          EXPECT_TRUE(std::isnan(got[i])) << "element " << i;
        } else if (size <= 16) {
          EXPECT_EQ(got[i], expected[i]) << "element " << i;
        } else {
          EXPECT_NEAR(got[i], expected[i], 4 * std::ldexp(std::abs(expected[i]), -23) + 1e-30) << "element " << i;
        }
      }
      EXPECT_EQ(bits_of(operand), bits_of(to(with_keep ? mul(y, keep) : y, DType::bf16))) << "keep " << with_keep;
    }
  }
}

// x with every element rounded to bf16 and widened again, in f64.
Tensor rounded_f64(const Tensor& x) { return to(to(to(x.detach(), DType::bf16), DType::f32), DType::f64); }

// |got − want| ≤ bound elementwise (all f64 tensors of one shape); returns the worst ratio.
double worst_ratio(const Tensor& got, const Tensor& want, const Tensor& bound, const std::string& what) {
  const std::vector<double> g = got.to_vector(), w = want.to_vector(), b = bound.to_vector();
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double ratio = std::abs(g[i] - w[i]) / b[i];
    worst = std::max(worst, ratio);
    EXPECT_LE(ratio, 1.0) << what << " element " << i << ": " << g[i] << " vs " << w[i] << ", bound " << b[i];
  }
  return worst;
}

// A product under AutocastGuard, forward and both gradients, against f64:
// - within bf16's bound of the exact product of the f32 operands: each operand rounded (relative
//   error ≤ 2⁻⁸ each, so ≤ 2·2⁻⁸ + 2⁻¹⁶ per term), plus f32 summation over K (≤ K·2⁻²⁴ / (1 − K·2⁻²⁴)),
//   both relative to Σ_k |x_k|·|y_k|;
// - and within the f32 summation bound alone of the exact product of the bf16-rounded operands:
//   it did take bf16 operands (an f32 product would miss this by far more).
void check_product(int64_t M, int64_t K, int64_t N, bool ta, bool tb) {
  SCOPED_TRACE(fmt::format("M {} K {} N {} ta {} tb {}", M, K, N, ta, tb));
  Generator gen(K + M);
  const Tensor a = randn(ta ? Shape{K, M} : Shape{M, K}, DType::f32, gen).requires_grad_();
  const Tensor b = randn(tb ? Shape{N, K} : Shape{K, N}, DType::f32, gen).requires_grad_();
  const Tensor w = randn({M, N}, DType::f32, gen);  // the loss's weights: the gradient arriving is w
  Tensor out;
  {
    AutocastGuard autocast;
    out = matmul(a, b, ta, tb);
    sum(mul(out, w)).backward();
  }
  ASSERT_EQ(out.dtype(), DType::f32);
  ASSERT_EQ(a.grad().dtype(), DType::f32);
  const double f32_sum = K * std::ldexp(1.0, -24) / (1 - K * std::ldexp(1.0, -24));
  const double bf16_terms = 2 * std::ldexp(1.0, -8) + std::ldexp(1.0, -16) + f32_sum;
  // Each of out, dA, dB is a product x @ y of two f64 tensors; its bounds come from |x| @ |y|.
  auto check = [&](const std::string& what, const Tensor& got, const Tensor& x, const Tensor& y, bool tx, bool ty) {
    const Tensor x64 = to(x.detach(), DType::f64), y64 = to(y.detach(), DType::f64);
    const Tensor magnitude = matmul(abs(x64), abs(y64), tx, ty);
    const Tensor got64 = to(got, DType::f64);
    worst_ratio(got64, matmul(x64, y64, tx, ty), add(mul(magnitude, bf16_terms), 1e-30), what + " vs exact");
    const Tensor rounded = matmul(rounded_f64(x), rounded_f64(y), tx, ty);
    const Tensor rounded_magnitude = matmul(abs(rounded_f64(x)), abs(rounded_f64(y)), tx, ty);
    worst_ratio(got64, rounded, add(mul(rounded_magnitude, f32_sum), 1e-30), what + " vs bf16 operands");
  };
  check("out", out, a, b, ta, tb);
  // dA = G @ Bᵀ (stored transposed: B @ Gᵀ); dB = Aᵀ @ G (stored transposed: Gᵀ @ A).
  if (ta)
    check("da", a.grad(), b, w, tb, true);
  else
    check("da", a.grad(), w, b, false, !tb);
  if (tb)
    check("db", b.grad(), w, a, true, ta);
  else
    check("db", b.grad(), a, w, !ta, false);
}

TEST(Bf16Products, MatmulForwardAndBothGradientsWithinBf16BoundOfF64) {
  SKIP_WITHOUT_AVX512_BF16();
  for (const int64_t K : {16, 64, 384, 1536})  // below and above oneDNN's threshold
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) check_product(48, K, 40, ta, tb);
}

// scaled_dot_product_attention under AutocastGuard, output and the three gradients, against f64.
void check_attention(const Shape& shape, AttentionKernel kernel, bool causal) {  // shape (B, H, T, d)
  SCOPED_TRACE(fmt::format("shape {} kernel {} causal {}", shape_str(shape),
                           kernel == AttentionKernel::streaming ? "streaming" : "materialising", causal));
  Generator gen(5);
  std::vector<Tensor> in32, in64;
  for (int i = 0; i < 3; ++i) {
    in32.push_back(randn(shape, DType::f32, gen).requires_grad_());
    in64.push_back(to(in32.back().detach(), DType::f64).requires_grad_());
  }
  const Tensor g = randn(shape, DType::f32, gen);
  Tensor out;
  {
    AutocastGuard autocast;
    out = scaled_dot_product_attention(in32[0], in32[1], in32[2], {.is_causal = causal, .kernel = kernel}).output;
    out.backward(g);
  }
  ASSERT_NE(op_of(*out.grad_fn()).find("[bf16]"), std::string::npos);
  const Tensor exact = scaled_dot_product_attention(in64[0], in64[1], in64[2], {.is_causal = causal}).output;
  exact.backward(to(g, DType::f64));
  // Two products of unit-scale values over K = d and S through a softmax: a few bf16 ulps of
  // the outputs' scale (2⁻⁸ relative); f32 alone would agree to ~1e-6.
  auto max_error = [](const Tensor& x, const Tensor& y) {
    const Tensor d = abs(sub(to(x, DType::f64), y));
    return max(d).item() / std::max(1.0, max(abs(y)).item());
  };
  const double bound = 8 * std::ldexp(1.0, -8);
  EXPECT_LE(max_error(out, exact), bound);
  for (int i = 0; i < 3; ++i) EXPECT_LE(max_error(in32[i].grad(), in64[i].grad()), bound) << "input " << i;
  EXPECT_GT(max_error(out, exact), 1e-5) << "as close as f32: were the operands rounded to bf16?";
}

TEST(Bf16Products, AttentionProductsWithinBf16BoundOfTheF32Op) {
  SKIP_WITHOUT_AVX512_BF16();
  check_attention({2, 3, 64, 32}, AttentionKernel::materialising, true);
  // The streaming kernel's AVX512_BF16 block products: whole 64-row blocks and ragged ones (T, S
  // not multiples of 16, an odd d padded to pairs).
  for (const bool causal : {false, true}) {
    check_attention({2, 3, 64, 32}, AttentionKernel::streaming, causal);
    check_attention({1, 2, 150, 33}, AttentionKernel::streaming, causal);
  }
}

// The autocast policy, PyTorch's CPU recipe (engine/README.md, "Mixed precision"): which ops take
// bf16 operands. Every op a GPT step and the other common ops record must be listed.
const std::map<std::string, bool> kRunsInBf16 = {{"matmul", true},
                                                 {"linear", true},
                                                 {"linear_add", true},
                                                 {"scaled_dot_product_attention", true},
                                                 {"packed_attention", true},
                                                 {"embedding", false},
                                                 {"add", false},
                                                 {"layer_norm", false},
                                                 {"gelu", false},
                                                 {"softmax", false},
                                                 {"log_softmax", false},
                                                 {"cross_entropy", false},
                                                 {"mse_loss", false},
                                                 {"sum", false},
                                                 {"mean", false},
                                                 {"mul", false},
                                                 {"reshape", false},
                                                 {"transpose", false},
                                                 {"permute", false},
                                                 {"slice", false},
                                                 {"dropout", false},
                                                 {"leaf", false}};

TEST(Bf16Autocast, PolicyTable) {
  SKIP_WITHOUT_AVX512_BF16();
  manual_seed(3);
  nn::GPT gpt({.vocab_size = 11, .block_size = 8, .n_layer = 1, .n_head = 2, .n_embd = 16});
  Generator gen(4);
  const Tensor idx = randint(0, 11, {2, 8}, gen);
  Tensor loss;
  {
    AutocastGuard autocast;
    const Tensor logits = gpt.forward(idx);  // (2, 8, 11)
    const Tensor x = reshape(logits, {16, 11});
    // gelu on its own (the GPT's MLP runs it inside linear), and the common ops beside the step's
    loss = add(cross_entropy(x, reshape(idx, {16})), mean(mse_loss(softmax(x, -1), log_softmax(gelu(x), -1))));
  }
  const Graph graph = capture_graph(loss, parameter_names(gpt.named_parameters()));
  std::map<std::string, int> seen;
  for (const GraphNode& n : graph.nodes) {
    const bool bf16 = n.op.ends_with("[bf16]");
    const std::string op = bf16 ? n.op.substr(0, n.op.size() - 6) : n.op;
    ++seen[op];
    if (!kRunsInBf16.contains(op)) {
      ADD_FAILURE() << op << " is not in the autocast policy table: add it";
      continue;
    }
    EXPECT_EQ(bf16, kRunsInBf16.at(op)) << op << (bf16 ? " ran in bf16" : " ran in f32");
    EXPECT_EQ(n.dtype, DType::f32) << op << ": every output stays f32";
  }
  for (const char* op :
       {"linear", "linear_add", "matmul", "packed_attention", "layer_norm", "gelu", "cross_entropy", "softmax"})
    EXPECT_GT(seen[op], 0) << op << " did not run: the table test covers less than it says";
  loss.backward();
  for (const auto& [name, p] : gpt.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_EQ(p.dtype(), DType::f32) << name << ": master weights stay f32";
    EXPECT_EQ(p.grad().dtype(), DType::f32) << name;
  }
}

TEST(Bf16Autocast, OffByDefaultAndOffAgainAfterTheGuard) {
  SKIP_WITHOUT_AVX512_BF16();
  Generator gen(1);
  const Tensor a = randn({4, 5}, DType::f32, gen).requires_grad_(), b = randn({5, 3}, DType::f32, gen);
  EXPECT_FALSE(autocast_enabled());
  EXPECT_EQ(op_of(*matmul(a, b).grad_fn()), "matmul");
  {
    AutocastGuard autocast;
    AutocastGuard off(false);  // leaves it as it is
    EXPECT_TRUE(autocast_enabled());
    EXPECT_EQ(op_of(*matmul(a, b).grad_fn()), "matmul[bf16]");
    const Tensor a64 = to(a, DType::f64);  // f64 products stay f64
    EXPECT_EQ(op_of(*matmul(a64, to(b, DType::f64)).grad_fn()), "matmul");
  }
  EXPECT_FALSE(autocast_enabled());
  EXPECT_EQ(op_of(*matmul(a, b).grad_fn()), "matmul");
}

TEST(Bf16Autocast, AWeightIsConvertedOncePerVersion) {
  SKIP_WITHOUT_AVX512_BF16();
  Generator gen(2);
  Tensor w = randn({6, 4}, DType::f32, gen).requires_grad_();
  const Tensor x = randn({3, 4}, DType::f32, gen);
  AutocastGuard autocast;
  const Tensor first = autocast_operand(w);
  EXPECT_EQ(autocast_operand(w).raw_data(), first.raw_data()) << "a second use converted it again";
  // An activation shares its copy while something holds it (a node that saved it), never keeps it.
  const std::weak_ptr<TensorImpl> unheld = autocast_operand(x).impl_ptr();
  EXPECT_TRUE(unheld.expired()) << "a copy nothing held was kept";
  {
    const Tensor held = autocast_operand(x);
    EXPECT_EQ(autocast_operand(x).raw_data(), held.raw_data()) << "a held copy was made again";
  }
  {
    NoGradGuard no_grad;
    w.add_(ones({6, 4}), 1.0);  // an optimizer step: a new version
  }
  const Tensor second = autocast_operand(w);
  EXPECT_NE(second.raw_data(), first.raw_data());
  EXPECT_EQ(bits_of(second), bits_of(to(w.detach(), DType::bf16)));
}

// x (f32, under autocast) carries a bf16 copy that lives without anything else holding it, and
// autocast_operand gives it: the bits to(x, DType::bf16) would give. Returns the copy.
Tensor expect_keeps_its_bf16_copy(const Tensor& x, const std::string& what) {
  const std::weak_ptr<TensorImpl> unheld = autocast_operand(x).impl_ptr();
  EXPECT_FALSE(unheld.expired()) << what << " kept no bf16 copy";
  const Tensor copy = autocast_operand(x);
  EXPECT_EQ(copy.dtype(), DType::bf16) << what;
  EXPECT_EQ(bits_of(copy), bits_of(to(x.detach(), DType::bf16))) << what;
  return copy;
}

// GELU's output under autocast carries its bf16 copy, written in GELU's own pass: the next
// product takes it instead of converting again, and it holds the bits a conversion would give,
// for values on both sides of zero and past erf's tails. A new version of the output drops it.
TEST(Bf16Autocast, GeluWritesItsOutputsBf16CopyInItsOwnPass) {
  SKIP_WITHOUT_AVX512_BF16();
  Generator gen(3);
  const Tensor x = mul(randn({37, 29}, DType::f32, gen), full({}, 4.0));  // odd sizes: vector tails
  AutocastGuard autocast;
  Tensor y = gelu(x);
  const Tensor copy = expect_keeps_its_bf16_copy(y, "GELU's output");
  {
    NoGradGuard no_grad;
    y.mul_(2.0);  // a new version: the copy no longer holds y's values
  }
  const Tensor after = autocast_operand(y);
  EXPECT_NE(after.raw_data(), copy.raw_data());
  EXPECT_EQ(bits_of(after), bits_of(to(y.detach(), DType::bf16)));
}

// Dropout's output under autocast carries its bf16 copy, written in the pass that draws the mask
// (the next Linear's operand): the bits a conversion would give, and the same output and mask as
// without autocast; the residual form (add_dropout, read by a layer norm) writes none.
TEST(Bf16Autocast, DropoutWritesItsOutputsBf16CopyInItsOwnPass) {
  SKIP_WITHOUT_AVX512_BF16();
  Generator gen(4);
  const Tensor x = randn({37, 29}, DType::f32, gen);  // odd sizes: vector tails
  Generator plain_gen(8), autocast_gen(8);
  const Tensor plain = dropout(x, 0.3, true, plain_gen);
  AutocastGuard autocast;
  const Tensor y = dropout(x, 0.3, true, autocast_gen);
  EXPECT_EQ(y.to_vector(), plain.to_vector());
  expect_keeps_its_bf16_copy(y, "dropout's output");
  const Tensor sum_out = add_dropout(x, x, 0.3, true, autocast_gen);
  EXPECT_FALSE(sum_out.impl()->bf16_copy) << "add_dropout's output";
}

// Adam's step writes a weight's next bf16 copy in its own pass: the next product's operand holds the
// bits a conversion of the new weight would give, in the old copy's memory when nothing else holds
// that (else a new copy, the held one left as it was); the weight's own update is the same bits
// as without autocast. A weight no product read under autocast gets no copy.
TEST(Bf16Autocast, AdamWritesAWeightsNextBf16CopyInItsOwnPass) {
  SKIP_WITHOUT_AVX512_BF16();
  Generator gen(5);
  const Tensor init = randn({37, 29}, DType::f32, gen);  // odd sizes: vector tails
  const Tensor x = randn({6, 29}, DType::f32, gen);
  Tensor w = clone(init).requires_grad_(), w_plain = clone(init).requires_grad_();
  Tensor unused = randn({5}, DType::f32, gen).requires_grad_();
  nn::Adam adam({w, unused}, {.lr = 0.1}), adam_plain({w_plain}, {.lr = 0.1});
  AutocastGuard autocast;
  for (int step = 0; step < 3; ++step) {
    sum(linear(x, w)).backward();
    w_plain.set_grad(clone(w.grad()));
    unused.set_grad(ones({5}));
    const void* old_copy = autocast_operand(w).raw_data();
    const Tensor held = step == 2 ? autocast_operand(w) : Tensor();  // as a live graph's node would
    const std::vector<uint16_t> held_bits = held.defined() ? bits_of(held) : std::vector<uint16_t>();
    adam.step();
    adam_plain.step();
    ASSERT_EQ(w.to_vector(), w_plain.to_vector()) << "step " << step;
    const Tensor copy = autocast_operand(w);
    EXPECT_EQ(bits_of(copy), bits_of(to(w.detach(), DType::bf16))) << "step " << step;
    if (held.defined()) {
      EXPECT_NE(copy.raw_data(), old_copy) << "a held copy was overwritten";
      EXPECT_EQ(bits_of(held), held_bits) << "a held copy was overwritten";
    } else {
      EXPECT_EQ(copy.raw_data(), old_copy) << "step " << step << ": the copy was converted again, not written by Adam";
    }
    EXPECT_FALSE(weight_bf16_copy_to_fill(unused).defined()) << "a weight no product read got a copy";
    w.set_grad({});
  }
}

// A decoder's cache grown by a position, or with its rows picked, carries its bf16 copy built from
// the parts' copies (so a step converts the new position alone): the same bits as converting the
// result, kept by the result; with grad mode, the plain ops.
TEST(Bf16Autocast, ACacheGrownOrPickedKeepsItsBf16Copy) {
  SKIP_WITHOUT_AVX512_BF16();
  Generator gen(4);
  const Tensor cached = randn({3, 2, 5, 4}, DType::f32, gen), step = randn({3, 2, 1, 4}, DType::f32, gen);
  const Tensor rows = full({4}, 0.0, DType::i64);
  rows.data<int64_t>()[0] = 2, rows.data<int64_t>()[2] = 1;  // rows 2, 0, 1, 0
  AutocastGuard autocast;
  {
    NoGradGuard no_grad;
    const Tensor grown = cat_keeping_bf16_copy({cached, step}, 2);  // (3, 2, 6, 4)
    const Tensor picked = index_select_keeping_bf16_copy(grown, 0, rows);
    EXPECT_EQ(grown.to_vector(), cat({cached, step}, 2).to_vector());
    EXPECT_EQ(picked.to_vector(), index_select(grown, 0, rows).to_vector());
    expect_keeps_its_bf16_copy(grown, "the grown cache");
    expect_keeps_its_bf16_copy(picked, "the picked rows");
  }
  const Tensor recorded = cat_keeping_bf16_copy({cached, step}, 2);  // grad mode: no copy kept
  const std::weak_ptr<TensorImpl> unheld = autocast_operand(recorded).impl_ptr();
  EXPECT_TRUE(unheld.expired()) << "a copy was kept with grad mode on";
}

TEST(Bf16Autocast, SecondOrderThroughABf16ProductIsRefused) {
  SKIP_WITHOUT_AVX512_BF16();
  Generator gen(3);
  const Tensor a = randn({4, 5}, DType::f32, gen).requires_grad_(), b = randn({5, 3}, DType::f32, gen);
  Tensor out;
  {
    AutocastGuard autocast;
    out = sum(matmul(a, b));
  }
  expect_error([&] { out.backward({}, false, /*create_graph=*/true); }, {"bf16", "create_graph", "f32"});
}

// The materialising attention keeps its products' bf16 operands for the backward, so its backward
// cannot be recorded either: refused as matmul's is, naming the op.
TEST(Bf16Autocast, SecondOrderThroughBf16AttentionIsRefused) {
  SKIP_WITHOUT_AVX512_BF16();
  Generator gen(3);
  const Tensor q = randn({1, 2, 4, 8}, DType::f32, gen).requires_grad_();
  const Tensor k = randn({1, 2, 4, 8}, DType::f32, gen), v = randn({1, 2, 4, 8}, DType::f32, gen);
  Tensor out;
  {
    AutocastGuard autocast;
    out = sum(scaled_dot_product_attention(q, k, v, {.kernel = AttentionKernel::materialising}, gen).output);
  }
  expect_error([&] { out.backward({}, false, /*create_graph=*/true); },
               {"scaled_dot_product_attention", "bf16", "create_graph", "f32"});
}

TEST(Bf16Autocast, RefusedWithoutAvx512Bf16NamingTheFeature) {
  if (cpu_has_avx512_bf16()) GTEST_SKIP() << "this CPU has AVX512_BF16: the refusal cannot happen here";
  expect_error([] { AutocastGuard autocast; }, {"AVX512_BF16", "avx512_bf16", "f32"});
}

}  // namespace
}  // namespace ag
