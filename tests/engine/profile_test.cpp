// The profiler's table: every recorded node and every backward node counted once under its op, the
// products' FLOPs from their shapes (2 per multiply-add, the backward twice the forward), the
// allocations of each op, a section for work that records nothing, and the observers restored.
#include "engine/profile.h"

#include <gtest/gtest.h>

#include <map>

#include "engine/ops/arithmetic.h"
#include "engine/ops/attention.h"
#include "engine/ops/matmul.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"

namespace ag {
namespace {

std::map<std::string, Profiler::Row> rows_by_op(const Profiler& profiler) {
  std::map<std::string, Profiler::Row> rows;
  for (const Profiler::Row& row : profiler.rows()) rows[row.op] = row;
  return rows;
}

TEST(Profiler, CountsEachOpAndTheProductsFlops) {
  const Tensor x = ones({8, 3, 5}).requires_grad_(), w = ones({4, 5}).requires_grad_(), b = ones({4});
  const Tensor y = ones({5, 6}).requires_grad_();
  std::map<std::string, Profiler::Row> rows;
  {
    Profiler profiler;
    for (int step = 0; step < 2; ++step) {
      const Tensor h = linear(x, w, b);  // (8, 3, 4): 2·24·5·4 FLOPs
      Generator drops(1);
      const Tensor r = linear_relu_dropout(x, w, b, 0.5, true, drops);  // as many
      const Tensor a = linear_add(x, w, b, h);                          // as many
      const Tensor z = matmul(reshape(x, {24, 5}), y);                  // (24, 6): 2·24·5·6 FLOPs
      sum(add(add(add(sum(h), sum(r)), sum(a)), sum(z))).backward();
      profiler.section("(between steps)", [&] { Tensor(zeros({1000})); });
    }
    rows = rows_by_op(profiler);
    EXPECT_NE(profiler.table(2).find("page faults per step"), std::string::npos);
  }
  EXPECT_EQ(rows.at("Linear").calls, 2);
  EXPECT_EQ(rows.at("LinearBackward").calls, 2);
  EXPECT_DOUBLE_EQ(rows.at("Linear").flops, 2 * 2.0 * 24 * 5 * 4);
  EXPECT_DOUBLE_EQ(rows.at("LinearBackward").flops, 2 * 2 * 2.0 * 24 * 5 * 4);
  EXPECT_DOUBLE_EQ(rows.at("LinearReluDropout").flops, 2 * 2.0 * 24 * 5 * 4);
  EXPECT_DOUBLE_EQ(rows.at("LinearReluDropoutBackward").flops, 2 * 2 * 2.0 * 24 * 5 * 4);
  EXPECT_DOUBLE_EQ(rows.at("LinearAdd").flops, 2 * 2.0 * 24 * 5 * 4);
  EXPECT_DOUBLE_EQ(rows.at("LinearAddBackward").flops, 2 * 2 * 2.0 * 24 * 5 * 4);
  EXPECT_DOUBLE_EQ(rows.at("Matmul").flops, 2 * 2.0 * 24 * 5 * 6);
  EXPECT_DOUBLE_EQ(rows.at("MatmulBackward").flops, 2 * 2 * 2.0 * 24 * 5 * 6);
  EXPECT_EQ(rows.at("Sum").calls, 10);
  EXPECT_EQ(rows.at("Add").flops, 0);
  EXPECT_EQ(rows.at("(between steps)").calls, 2);
  EXPECT_GE(rows.at("(between steps)").bytes_allocated, 2 * 4000.0);
  EXPECT_GE(rows.at("Linear").bytes_allocated, 2 * 24 * 4 * 4.0);  // its (24, 4) f32 output at least
  EXPECT_EQ(forward_observer(), nullptr);                          // gone with the profiler
  EXPECT_EQ(backward_observer(), nullptr);
}

// The attention's two products, q kᵀ and W v, counted dense: scaled_dot_product_attention on (N, H,
// T, d) heads, and the packed projections' ops on qkv (N, T, 3E), or q (N, T, E) and kv (N, S, 2E),
// as on their split heads: 2·N·T·S·2E FLOPs a forward, whatever the number of heads.
TEST(Profiler, CountsTheAttentionsProductsFlops) {
  const int64_t N = 2, T = 5, S = 7, E = 8, H = 2;
  const Tensor qkv = ones({N, T, 3 * E}).requires_grad_(), q = ones({N, T, E}).requires_grad_(),
               kv = ones({N, S, 2 * E}).requires_grad_(), heads = ones({N, H, T, E / H}).requires_grad_();
  std::map<std::string, Profiler::Row> rows;
  {
    Profiler profiler;
    sum(packed_self_attention(qkv, H).output).backward();
    sum(packed_cross_attention(q, kv, H).output).backward();
    sum(scaled_dot_product_attention(heads, heads, heads).output).backward();
    rows = rows_by_op(profiler);
  }
  const double self = 2.0 * N * T * T * 2 * E, cross = 2.0 * N * T * S * 2 * E;
  EXPECT_DOUBLE_EQ(rows.at("PackedAttention").flops, self + cross);
  EXPECT_DOUBLE_EQ(rows.at("PackedAttentionBackward").flops, 2 * (self + cross));
  EXPECT_DOUBLE_EQ(rows.at("ScaledDotProductAttention").flops, self);
  EXPECT_DOUBLE_EQ(rows.at("ScaledDotProductAttentionBackward").flops, 2 * self);
}

// Profiling does not change what the walk does: a leaf takes the gradient an op made for it alone
// (no copy, nothing allocated under AccumulateGrad), and one gradient reaching two leaves is still
// copied for the second, so their .grad never share memory.
TEST(Profiler, LeavesTakeTheirGradientsAsWithoutIt) {
  const Tensor x = ones({64, 32}), w = ones({16, 32}).requires_grad_(), b = ones({16}).requires_grad_();
  const Tensor u = ones({8}).requires_grad_(), v = ones({8}).requires_grad_();
  std::map<std::string, Profiler::Row> rows;
  {
    Profiler profiler;
    sum(linear(x, w, b)).backward();
    rows = rows_by_op(profiler);
    sum(mul(add(u, v), 2.0)).backward();  // AddBackward sends one gradient to both
  }
  EXPECT_EQ(rows.at("AccumulateGrad").calls, 2);
  EXPECT_EQ(rows.at("AccumulateGrad").bytes_allocated, 0);
  EXPECT_NE(u.grad().raw_data(), v.grad().raw_data());
  EXPECT_EQ(u.grad().data<float>()[0], 2.0f);
  EXPECT_EQ(v.grad().data<float>()[0], 2.0f);
}

}  // namespace
}  // namespace ag
