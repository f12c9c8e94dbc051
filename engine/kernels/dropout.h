// Dropout masks, many draws at once: Generator's splitmix64 is counter-based, so the draws of a
// row are independent and the loop vectorises (AVX-512, AVX2 clones), with the same bits as
// drawing them one by one with Generator::uniform().
#pragma once

#include <cstdint>
#include <vector>

#include "engine/generator.h"
#include "engine/tensor.h"

namespace ag::kernels {

// mask[i] = scale if draw i + 1 after `counter` (Generator::State::counter) is kept, else 0, where
// a draw is kept when its uniform() >= p. Done with integers: uniform() is k·2⁻⁵³ for the draw's
// top 53 bits k, and k·2⁻⁵³ >= p exactly when k >= ⌈p·2⁵³⌉.
// Given `apply`, the mask is used in the same pass instead of written: keep[i] = whether draw i is
// kept, out[i] = x[i]·mask[i], plus residual[i] if residual is not null (rounded as the separate mul
// and add would round it: no fused multiply-add), and out[i] rounded to bf16 in out_bf16[i] if that is
// not null (f32 without a residual); `mask` may then be null. Without a residual keep may be null:
// nothing but out (and out_bf16) is written, and out may be x (in place).
template <typename T>
struct DropoutApply {
  const T* x;
  const T* residual;  // may be null
  T* out;
  bool* keep;
  uint16_t* out_bf16 = nullptr;
};
void dropout_mask_row(uint64_t counter, double p, float scale, float* mask, int64_t n,
                      const DropoutApply<float>* apply = nullptr);
void dropout_mask_row(uint64_t counter, double p, double scale, double* mask, int64_t n,
                      const DropoutApply<double>* apply = nullptr);

// grad[i] · (keep[i] ? scale : 0): dropout's backward from its b8 keep mask, with the numbers of
// grad ⊙ the scaled mask.
void dropout_backward_row(const float* grad, const bool* keep, float scale, float* out, int64_t n);
void dropout_backward_row(const double* grad, const bool* keep, double scale, double* out, int64_t n);

// Where weight (h, i, j) of an example's attention weights (H, T, S) draws in the example's stream,
// whatever T and S (so padding the queries or the keys leaves the real weights' draws): the pairs
// (i, j) go shell by shell, max(i, j) = m taking places m² to m² + 2m, and the heads interleave.
constexpr uint64_t attention_draw(int64_t h, int64_t i, int64_t j, int64_t heads) {
  const auto ui = static_cast<uint64_t>(i), uj = static_cast<uint64_t>(j);
  const uint64_t pair = j < i ? ui * ui + uj : uj * uj + uj + ui;
  return pair * static_cast<uint64_t>(heads) + static_cast<uint64_t>(h);
}
// The counter offsets of one head's weights (T, S), at i·S + j: (attention_draw(0, i, j, heads) + 1) ·
// Generator::kIncrement; head h's are these + h·kIncrement (the heads interleave). Computed once for
// all the rows of a batch, so that drawing a row's weights vectorises over the whole (T, S) plane.
std::vector<uint64_t> attention_draw_offsets(int64_t heads, int64_t queries, int64_t keys);
// out (H, T, S) = scale if draw attention_draw(h, i, j, H) + 1 after `counter` is kept, else 0, given
// the offsets above for the plane of `weights` = T·S.
void attention_dropout_mask_row(uint64_t counter, double p, float scale, float* out, int64_t heads,
                                const uint64_t* offsets, int64_t weights);
void attention_dropout_mask_row(uint64_t counter, double p, double scale, double* out, int64_t heads,
                                const uint64_t* offsets, int64_t weights);

}  // namespace ag::kernels

namespace ag {

// Dropout's scaled keep-mask: 1/(1-p) where kept, 0 where dropped (everywhere if p = 1), one
// draw from gen per element in row-major order (in a data-parallel step, per row from the row's
// own stream, so only the dimension after the batch's may be padded: (B, T, D)); with
// RngStyle::torch, PyTorch's bernoulli draws.
Tensor dropout_mask(const Shape& shape, DType dtype, double p, Generator& gen);
// What a kept element's mask holds: 1/(1 − p) in the dtype (PyTorch's style divides in the dtype,
// attograd's in double and rounds), 0 for p = 1.
double dropout_scale(DType dtype, double p, RngStyle style);
// out = x ⊙ mask (+ residual, of x's shape, if defined) with mask = dropout_mask(x.shape(),
// x.dtype(), p, gen), drawn and applied in one pass, and keep = mask ≠ 0 (b8), all the backward
// needs (a quarter of an f32 mask's bytes). Not for PyTorch's generator (its draws are sequential):
// draw its mask with dropout_mask and apply it with mul and add.
struct AppliedDropout {
  Tensor out, keep;
  Tensor out_bf16;  // with bf16_copy: out rounded to bf16, written in the same pass
};
// bf16_copy (an f32 x without a residual): also out's bf16 copy, the next product's operand under
// autocast.
AppliedDropout apply_dropout(const Tensor& x, const Tensor& residual, double p, Generator& gen, bool bf16_copy = false);
// x ⊙ mask in place, the mask drawn as apply_dropout draws it, and with bf16_copy (f32 x) x's bf16
// copy written in the same pass, returned; no keep mask: for an op whose backward can tell the kept
// elements from its output (linear_relu_dropout: after a ReLU, out > 0 exactly where a positive
// value was kept).
Tensor apply_dropout_in_place(const Tensor& x, double p, Generator& gen, bool bf16_copy = false);
// grad ⊙ keep · scale (keep b8 of grad's shape), recording nothing: dropout's backward.
Tensor dropout_backward_data(const Tensor& grad, const Tensor& keep, double scale);
// The same for attention weights (B, H, T, S); in a data-parallel step, weight (h, i, j) of each row
// draws at kernels::attention_draw, so its mask depends neither on the split nor on the padding.
Tensor attention_dropout_mask(const Shape& shape, DType dtype, double p, Generator& gen);

}  // namespace ag
