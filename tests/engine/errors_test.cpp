// Bad input from the API: every case throws ag::Error naming the op and what was wrong.
// Nothing asserts, aborts or crashes.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/autograd.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/dropout.h"
#include "engine/ops/index.h"
#include "engine/ops/loss.h"
#include "engine/ops/mask.h"
#include "engine/ops/matmul.h"
#include "engine/ops/norm.h"
#include "engine/ops/pointwise.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "engine/ops/softmax.h"
#include "tests/test_util.h"

namespace ag {
namespace {

const Tensor a23 = ones({2, 3});
const Tensor a45 = ones({4, 5});

// Element counts are formed by one checked helper: a product past int64 or a negative size is an
// error, and a tensor larger than the machine's memory is refused before anything is allocated.
TEST(Errors, SizesAreCheckedBeforeAnythingIsAllocated) {
  EXPECT_EQ(numel({3, 0, int64_t{1} << 62}), 0);
  EXPECT_EQ(numel({int64_t{1} << 31, int64_t{1} << 31}), int64_t{1} << 62);
  expect_error([] { numel({3, 6148914691236517206}); }, {"(3,6148914691236517206)", "more elements than a tensor"});
  expect_error([] { numel({2, -1}); }, {"negative size -1"});
  expect_error(
      [] {
        zeros({int64_t{1} << 40, int64_t{1} << 20});
      },
      {"(1099511627776,1048576)", "needs more memory than this machine has"});
  expect_error([] { empty({int64_t{1} << 62, 4}, DType::f64); }, {"more elements than a tensor"});
}

// An AllocationBudget caps what this thread allocates and holds while it lives; it nests and ends.
TEST(Errors, AnAllocationBudgetStopsAllocationsBeyondIt) {
  {
    AllocationBudget budget(1024, "building the model");
    const Tensor small = zeros({100});  // 400 bytes, 512 as allocated
    expect_error([] { zeros({200}); }, {"building the model", "more than 1024 bytes"});
    {
      AllocationBudget inner(64, "inner");
      expect_error([] { zeros({17}); }, {"inner"});
    }
    const Tensor more = zeros({100});  // the outer budget again: 1024 bytes in all
    expect_error([] { zeros({1}); }, {"building the model"});
  }
  EXPECT_EQ(zeros({1 << 20}).numel(), 1 << 20);  // no budget once it ended
  {
    AllocationBudget budget(1024, "building the model");
    for (int i = 0; i < 10; ++i) EXPECT_EQ(zeros({200}).numel(), 200);  // each freed: its 800 bytes come back
    const Tensor kept = zeros({200});
    expect_error([] { zeros({100}); }, {"building the model"});  // 832 held + 512 > 1024
  }
}

TEST(Errors, MatmulInnerDimensions) {
  expect_error([] { matmul(a23, a45); }, {"matmul", "(2,3)", "(4,5)"});
}
TEST(Errors, MatmulZeroDim) {
  expect_error([] { matmul(scalar(1), a23); }, {"matmul", "()"});
}
TEST(Errors, MatmulBatchDims) {
  expect_error([] { matmul(ones({2, 3, 4}), ones({5, 4, 6})); }, {"matmul", "(2,3,4)", "(5,4,6)"});
}
TEST(Errors, MatmulDtypes) {
  expect_error([] { matmul(a23, ones({3, 2}, DType::f64)); }, {"matmul", "f32", "f64"});
}
TEST(Errors, AddNotBroadcastable) {
  expect_error([] { add(a23, a45); }, {"add", "(2,3)", "(4,5)", "broadcast"});
}
TEST(Errors, MulDtypes) {
  expect_error([] { mul(a23, ones({2, 3}, DType::f64)); }, {"mul", "f32", "f64"});
}
TEST(Errors, ExpOfIntegers) {
  expect_error([] { exp(randint(0, 3, {2})); }, {"exp", "i64"});
}
TEST(Errors, SoftmaxDimOutOfRange) {
  expect_error([] { softmax(a23, 2); }, {"softmax", "dim 2", "out of range"});
}
TEST(Errors, SumDimOutOfRange) {
  expect_error([] { sum(a23, {-3}); }, {"sum", "-3", "out of range"});
}
TEST(Errors, SumRepeatedDim) {
  expect_error([] { sum(a23, {1, -1}); }, {"sum", "twice"});
}
TEST(Errors, ReshapeWrongCount) {
  expect_error([] { reshape(a23, {4, 2}); }, {"reshape", "(4,2)", "(2,3)"});
}
TEST(Errors, ReshapeTwoInferred) {
  expect_error([] { reshape(a23, {-1, -1}); }, {"reshape", "-1"});
}
TEST(Errors, TransposeDim) {
  expect_error([] { transpose(a23, 0, 5); }, {"transpose", "5"});
}
TEST(Errors, PermuteNotAPermutation) {
  expect_error([] { permute(a23, {0, 0}); }, {"permute"});
}
TEST(Errors, CatShapes) {
  expect_error([] { cat({a23, a45}, 0); }, {"cat", "(2,3)", "(4,5)"});
}
TEST(Errors, CatEmpty) {
  expect_error([] { cat({}, 0); }, {"cat"});
}
TEST(Errors, StackShapes) {
  expect_error([] { stack({a23, ones({3, 2})}, 0); }, {"stack", "(2,3)", "(3,2)"});
}
TEST(Errors, SliceStep) {
  expect_error([] { slice(a23, 1, 0, 2, 0); }, {"slice", "step"});
}
TEST(Errors, NarrowOutOfRange) {
  expect_error([] { narrow(a23, 1, 2, 5); }, {"narrow"});
}
TEST(Errors, SplitSize) {
  expect_error([] { split(a23, 0, 1); }, {"split"});
}
TEST(Errors, IndexSelectOutOfRange) {
  expect_error([] { index_select(a23, 0, tensor({0, 2}, {2}, DType::i64)); }, {"index_select", "2"});
}
TEST(Errors, IndexSelectFloatIndex) {
  expect_error([] { index_select(a23, 0, tensor({0}, {1})); }, {"index_select", "i64", "f32"});
}
TEST(Errors, EmbeddingIndexOutOfRange) {
  expect_error([] { embedding(ones({5, 3}), tensor({1, 7}, {2}, DType::i64)); }, {"embedding", "7", "5"});
}
TEST(Errors, EmbeddingWeightNot2D) {
  expect_error([] { embedding(ones({5}), tensor({1}, {1}, DType::i64)); }, {"embedding", "(5)"});
}
TEST(Errors, MaskedFillWrongMaskDtype) {
  expect_error([] { masked_fill(a23, ones({2, 3}), 0); }, {"masked_fill", "b8", "f32"});
}
TEST(Errors, MaskedFillMaskShape) {
  expect_error([] { masked_fill(a23, causal_mask(4), 0); }, {"masked_fill", "(4,4)", "(2,3)"});
}
TEST(Errors, WhereConditionDtype) {
  expect_error([] { where(a23, a23, a23); }, {"where", "b8"});
}
TEST(Errors, TriuOfAVector) {
  expect_error([] { triu(ones({3})); }, {"triu", "(3)"});
}
TEST(Errors, CausalMaskNegative) {
  expect_error([] { causal_mask(-1); }, {"causal_mask", "-1"});
}
TEST(Errors, LayerNormShape) {
  expect_error([] { layer_norm(a23, {4}); }, {"layer_norm", "(4)", "(2,3)"});
}
TEST(Errors, LayerNormWeightShape) {
  expect_error([] { layer_norm(a23, {3}, ones({2})); }, {"layer_norm", "(2)", "(3)"});
}
TEST(Errors, DropoutProbability) {
  expect_error([] { dropout(a23, 1.5, true); }, {"dropout", "1.5"});
}
TEST(Errors, MseShapes) {
  expect_error([] { mse_loss(a23, ones({3})); }, {"mse_loss", "(2,3)", "(3)"});
}
TEST(Errors, BceShapes) {
  expect_error(
      [] {
        binary_cross_entropy_with_logits(a23, ones({2, 2}));
      },
      {"binary_cross_entropy_with_logits", "(2,2)"});
}
TEST(Errors, CrossEntropyTargetOutOfRange) {
  expect_error([] { cross_entropy(a23, tensor({0, 3}, {2}, DType::i64)); }, {"cross_entropy", "3"});
}
TEST(Errors, CrossEntropyTargetDtype) {
  expect_error([] { cross_entropy(a23, tensor({0, 1}, {2})); }, {"cross_entropy", "i64"});
}
TEST(Errors, ClampBounds) {
  expect_error([] { clamp(a23, NAN, 1); }, {"clamp", "NaN"});
}
TEST(Errors, TensorValueCount) {
  expect_error([] { tensor({1, 2, 3}, {2, 2}); }, {"tensor", "3", "(2,2)"});
}
TEST(Errors, NegativeShape) {
  expect_error([] { zeros({2, -1}); }, {"negative", "(2,-1)"});
}
TEST(Errors, ItemOfAVector) {
  expect_error([] { a23.item(); }, {"item", "(2,3)"});
}
TEST(Errors, ElementIndexOutOfRange) {
  expect_error([] { a23.at({0, 3}); }, {"at", "3", "size 3"});
}
TEST(Errors, WrongDataType) {
  expect_error([] { a23.data<double>(); }, {"f32", "f64"});
}
TEST(Errors, BackwardOfANonScalarWithoutAGradient) {
  expect_error([] { mul(ones({2}).requires_grad_(), 2.0).backward(); }, {"backward", "(2)", "gradient"});
}
TEST(Errors, BackwardWithAWrongShapedGradient) {
  expect_error([] { mul(ones({2}).requires_grad_(), 2.0).backward(ones({3})); }, {"backward", "(3)", "(2)"});
}
TEST(Errors, BackwardOfATensorThatNeedsNoGrad) {
  expect_error([] { sum(ones({2})).backward(); }, {"backward", "requires_grad"});
}
TEST(Errors, SecondBackward) {
  Tensor y = sum(exp(ones({2}).requires_grad_()));
  y.backward();
  expect_error([&] { y.backward(); }, {"ExpBackward", "second time"});
}
TEST(Errors, InPlaceChangeOfASavedTensor) {
  Tensor x = ones({2}).requires_grad_();
  Tensor h = mul(x, 2.0);
  Tensor y = sum(mul(h, h));
  {
    NoGradGuard no_grad;
    h.add_(ones({2}));
  }
  expect_error([&] { y.backward(); }, {"MulBackward", "in-place", "version"});
}
TEST(Errors, RequiresGradOnIntegers) {
  expect_error([] { randint(0, 2, {2}).requires_grad_(); }, {"requires_grad", "i64"});
}
TEST(Errors, RequiresGradOnANonLeaf) {
  expect_error([] { mul(ones({2}).requires_grad_(), 2.0).requires_grad_(false); }, {"requires_grad_", "leaf"});
}
TEST(Errors, HookReturningTheWrongShape) {
  Tensor x = ones({2}).requires_grad_();
  Tensor h = mul(x, 2.0);
  h.register_hook([](const Tensor&) { return ones({3}); });
  expect_error([&] { sum(h).backward(); }, {"hook", "(3)", "(2)"});
}
TEST(Errors, UndefinedInput) {
  expect_error([] { exp(Tensor()); }, {"exp", "undefined"});
}
TEST(Errors, PowNonFiniteExponent) {
  expect_error([] { pow(a23, NAN); }, {"pow", "exponent"});
}

}  // namespace
}  // namespace ag
