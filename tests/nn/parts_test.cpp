// ag::run_parts, a step split by thread: its gradients against the whole batch's (the same sum
// in another order), against itself on one thread (bit for bit: every part's ops run on one
// thread whatever the count), under autocast, with hooks, and its refusals.
#include "engine/parts.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "engine/autocast.h"
#include "engine/autograd.h"
#include "engine/kernels/bf16.h"
#include "engine/ops.h"
#include "engine/threads.h"
#include "nn/transformer.h"
#include "tests/test_util.h"

namespace ag {
namespace {

constexpr int64_t kBatch = 6, kTokens = 5, kWidth = 16;

// A small Transformer's training step on kBatch sequences, whole or in parts by run_parts.
class SplitStep {
 public:
  SplitStep()
      : model_([] {
          manual_seed(7);
          return nn::TransformerOptions{.d_model = kWidth,
                                        .nhead = 2,
                                        .num_encoder_layers = 1,
                                        .num_decoder_layers = 1,
                                        .dim_feedforward = 32,
                                        .dropout = 0.0};
        }()),
        src_(randn({kBatch, kTokens, kWidth})),
        tgt_(randn({kBatch, kTokens, kWidth})),
        target_(randn({kBatch, kTokens, kWidth})) {
    masks_.tgt_mask = causal_mask(kTokens);
  }

  // Every parameter's gradient after one backward of the mean loss over the batch.
  std::vector<Tensor> gradients(int parts) {
    model_.zero_grad();
    if (parts == 0) {
      loss_of(0, kBatch).backward();
    } else {
      run_parts(parts, [&](int part) {
        const int64_t begin = kBatch * part / parts, end = kBatch * (part + 1) / parts;
        mul(loss_of(begin, end), static_cast<double>(end - begin) / kBatch).backward();
      });
    }
    std::vector<Tensor> grads;
    for (const Tensor& p : model_.parameters()) grads.push_back(p.grad());
    return grads;
  }

  Tensor loss_of(int64_t begin, int64_t end) {
    return mse_loss(model_(slice(src_, 0, begin, end), slice(tgt_, 0, begin, end), masks_),
                    slice(target_, 0, begin, end));
  }

  nn::Transformer& model() { return model_; }

 private:
  nn::Transformer model_;
  Tensor src_, tgt_, target_;
  nn::TransformerMasks masks_;
};

class ThreadCount {
 public:
  explicit ThreadCount(int n) : previous_(get_num_threads()) { set_num_threads(n); }
  ~ThreadCount() { set_num_threads(previous_); }

 private:
  int previous_;
};

void expect_same_bits(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(a[i].defined() && b[i].defined()) << "parameter " << i;
    EXPECT_EQ(a[i].to_vector(), b[i].to_vector()) << "parameter " << i;
  }
}

double largest_relative_difference(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const std::vector<double> x = a[i].to_vector(), y = b[i].to_vector();
    double scale = 0, diff = 0;
    for (size_t j = 0; j < x.size(); ++j) {
      scale = std::max(scale, std::abs(y[j]));
      diff = std::max(diff, std::abs(x[j] - y[j]));
    }
    worst = std::max(worst, diff / std::max(scale, 1e-30));
  }
  return worst;
}

TEST(RunParts, GradientsAreTheWholeBatchsSummedInParts) {
  SplitStep step;
  const ThreadCount threads(2);
  const std::vector<Tensor> whole = step.gradients(0);
  for (const int parts : {1, 2, 3}) {
    const double difference = largest_relative_difference(step.gradients(parts), whole);
    std::printf("%d parts: largest relative difference %.3g\n", parts, difference);
    EXPECT_LT(difference, 1e-5) << parts << " parts";
  }
}

TEST(RunParts, SameBitsOnOneThreadAndOnTwo) {
  SplitStep step;
  std::vector<Tensor> one, two;
  {
    const ThreadCount threads(1);
    one = step.gradients(2);
  }
  {
    const ThreadCount threads(2);
    two = step.gradients(2);
  }
  expect_same_bits(one, two);
}

TEST(RunParts, PartsOnOtherThreadsRunUnderTheCallersAutocast) {
  if (!cpu_has_avx512_bf16()) GTEST_SKIP() << "this CPU lacks AVX512_BF16 (lscpu flag avx512_bf16)";
  SplitStep step;
  std::vector<Tensor> f32, whole, one, two;
  {
    const ThreadCount threads(2);
    f32 = step.gradients(2);
  }
  const AutocastGuard autocast;
  {
    const ThreadCount threads(2);
    whole = step.gradients(0);
  }
  {
    const ThreadCount threads(1);  // both parts on this thread, under its autocast
    one = step.gradients(2);
  }
  {
    const ThreadCount threads(2);  // part 1 on another thread: the same bits only if it casts too
    two = step.gradients(2);
  }
  expect_same_bits(one, two);
  const double from_f32 = largest_relative_difference(two, f32), from_whole = largest_relative_difference(two, whole);
  std::printf("bf16 parts against f32 parts: largest relative difference %.3g; against the whole batch in bf16 %.3g\n",
              from_f32, from_whole);
  EXPECT_GT(from_f32, 1e-3);  // the products did round their operands to bf16
  EXPECT_LT(from_whole, 1e-4);
}

TEST(RunParts, LeafHooksRunOnceOnTheSum) {
  SplitStep step;
  const ThreadCount threads(2);
  const std::vector<Tensor> plain = step.gradients(2);
  const Tensor weight = step.model().parameters().front();
  int hook_calls = 0, post_calls = 0;
  weight.register_hook([&](const Tensor& grad) {
    ++hook_calls;
    return mul(grad, 2.0);
  });
  weight.register_post_accumulate_grad_hook([&](const Tensor&) { ++post_calls; });
  const std::vector<Tensor> hooked = step.gradients(2);
  EXPECT_EQ(hook_calls, 1);
  EXPECT_EQ(post_calls, 1);
  EXPECT_EQ(hooked.front().to_vector(), mul(plain.front(), 2.0).to_vector());
}

TEST(RunParts, RefusesAGraphRecordedBeforeTheParts) {
  const Tensor w = randn({3, 3}).requires_grad_();
  const Tensor shared = mul(w, 2.0);  // recorded here, outside the parts
  const ThreadCount threads(2);
  expect_error([&] { run_parts(2, [&](int) { sum(mul(shared, shared)).backward(); }); },
               {"part of a step split by thread", "recorded before the parts began", "MulScalarBackward",
                "Compute it inside each part"});
  EXPECT_FALSE(w.grad().defined());
}

TEST(RunParts, RethrowsAPartsErrorAndAccumulatesNothing) {
  const Tensor w = randn({3, 3}).requires_grad_();
  const ThreadCount threads(2);
  EXPECT_THROW(run_parts(2,
                         [&](int part) {
                           sum(mul(w, w)).backward();
                           if (part == 1) throw std::runtime_error("part 1 failed");
                         }),
               std::runtime_error);
  EXPECT_FALSE(w.grad().defined());
  expect_error([] { run_parts(0, [](int) {}); }, {"run_parts", "at least 1 part, got 0"});
}

}  // namespace
}  // namespace ag
