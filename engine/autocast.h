// Mixed precision, PyTorch's CPU autocast recipe: while an AutocastGuard lives on a thread, the
// products of f32 tensors (matmul, and so Linear, and the attention products) take bf16 operands
// and give f32 results, forward and backward; every other op stays f32 (engine/README.md, "Mixed
// precision", has the table).
#pragma once

#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace ag {

// Turns autocast on (or, with enabled = false, leaves it as it is) for this thread while it lives;
// guards nest. Refuses, naming the missing CPU feature, on a CPU without AVX512_BF16: bf16
// products would be emulated there, slower than f32.
class AutocastGuard {
 public:
  explicit AutocastGuard(bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool enabled_;
};

bool autocast_enabled();

// True when a product of these f32 operands runs in bf16: autocast is on and both are f32.
bool autocast_products(const Tensor& a, const Tensor& b);

// x (f32) rounded to bf16 (round-to-nearest-even, as to(x, DType::bf16)), converted once per version
// while the outermost guard lives: a leaf that requires grad (a weight) keeps its copy, so every use
// in a step shares it and the optimizer's in-place step (a new version) makes the next one; any other
// tensor shares its copy while something else holds it (the q, k and v projections of one input, whose
// nodes save it), never keeping it alive itself.
Tensor autocast_operand(const Tensor& x);

// For an op whose f32 output is a product's operand under autocast (GELU's, before the MLP's second
// Linear): x's bf16 copy, written by the op in the pass that wrote x, taken by autocast_operand while
// x keeps its version. x keeps it as long as x lives.
void attach_bf16_copy(const Tensor& x, const Tensor& copy);

// For an optimizer's in-place step of weight x (a leaf that requires grad; its version already
// counted): when autocast keeps x's bf16 copy, a bf16 tensor shaped as x for the step to write x's
// new values into, rounded, in its own pass (the old copy itself when nothing else holds it, else a
// new one); undefined otherwise. After the step, keep_weight_bf16_copy(x, copy) makes it x's copy
// for the new version, so the next forward's products convert nothing.
Tensor weight_bf16_copy_to_fill(const Tensor& x);
void keep_weight_bf16_copy(const Tensor& x, const Tensor& copy);

// The (weight, bf16 copy) pairs this thread's autocast keeps, current ones only: the parts of a
// step split by thread (engine/parts.h) keep them too, each on its thread, and convert nothing.
std::vector<std::pair<Tensor, Tensor>> kept_weight_bf16_copies();

// A decoder's cache, grown by a position (cat) or with its rows picked (index_select), without grad
// mode: under autocast the result carries its bf16 copy, built from the inputs' copies (a part's
// attached copy, or the part converted), so each step converts the new position alone and not the
// whole cache again. Otherwise, and with grad mode, the plain ops.
Tensor cat_keeping_bf16_copy(const std::vector<Tensor>& parts, int64_t dim);
Tensor index_select_keeping_bf16_copy(const Tensor& x, int64_t dim, const Tensor& index);

}  // namespace ag
