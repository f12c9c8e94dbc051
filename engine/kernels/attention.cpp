// The fused attention's kernels: the streaming (FlashAttention) forward and backward through
// engine/kernels/flash_attention.h, and the materialising path's masked weights and products,
// built from the matmul, softmax and mask kernels. The op, its node and its one backward formula
// are in engine/ops/attention.cpp.
#include "engine/kernels/attention.h"

#include <algorithm>
#include <limits>

#include "engine/kernels/bf16.h"
#include "engine/kernels/flash_attention.h"
#include "engine/kernels/mask.h"
#include "engine/kernels/matmul.h"
#include "engine/kernels/parallel.h"
#include "engine/kernels/softmax.h"

namespace ag {

namespace {

// The kernels' view of the plan and the masks (pointers into the tensors and into p).
template <typename F>
kernels::FlashProblem<F> flash_problem(const AttentionPlan& p, const Tensor& attn_mask,
                                       const Tensor& key_padding_mask) {
  kernels::FlashProblem<F> f{.B = p.B, .H = p.H, .T = p.T, .S = p.S, .d = p.d, .dv = p.dv};
  f.scale = static_cast<F>(p.scale);
  f.causal = p.causal;
  f.zero_masked_rows = p.zero_masked_rows;
  f.bf16 = p.bf16;
  if (key_padding_mask.defined()) f.padded = key_padding_mask.data<bool>();
  if (attn_mask.defined()) {
    if (attn_mask.dtype() == DType::b8) f.takes_part = attn_mask.data<bool>();
    if (attn_mask.dtype() != DType::b8) f.added = attn_mask.data<F>();
    f.mask_strides = p.mask_strides.data();
  }
  return f;
}

// Row `row` of scores (B·H·T rows of S) masked in place; true if every key is then masked.
template <typename T>
bool mask_row(const kernels::FlashProblem<T>& problem, const AttentionPlan& p, T* scores, int64_t row) {
  T* s = scores + row * p.S;  // (S)
  kernels::mask_scores(problem, s, row / (p.T * p.H), row / p.T % p.H, row % p.T, 0, p.S);
  return std::all_of(s, s + p.S, [](T v) { return v == -std::numeric_limits<T>::infinity(); });
}

// scores (B, H, T, S) in place: -inf where causal (j > i), padded (key_padding_mask[b, j]) or a
// b8 attn_mask is false; + attn_mask where it is additive. With find_empty_rows, returns (B, H, T, 1)
// b8, true for the queries whose scores are then all -inf (Note [fully masked rows]), found in the
// same pass; undefined when there are none (or when not asked).
template <typename T>
Tensor apply_masks(T* scores, const AttentionPlan& p, const Tensor& attn_mask, const Tensor& key_padding_mask,
                   bool find_empty_rows) {
  const kernels::FlashProblem<T> problem = flash_problem<T>(p, attn_mask, key_padding_mask);
  const int64_t rows = p.B * p.H * p.T;
  Tensor empty_rows = find_empty_rows ? empty({p.B, p.H, p.T, 1}, DType::b8) : Tensor();
  bool* empty_row = find_empty_rows ? empty_rows.data<bool>() : nullptr;
  parallel_for(rows, p.S, [&](int64_t row) {
    const bool empty = mask_row(problem, p, scores, row);
    if (empty_row != nullptr) empty_row[row] = empty;
  });
  if (empty_row == nullptr || std::none_of(empty_row, empty_row + rows, [](bool e) { return e; })) return {};
  return empty_rows;
}

}  // namespace

Tensor attention_product(const AttentionPlan& p, const Tensor& x, const Tensor& y, bool tx, bool ty, double scale) {
  if (!p.bf16) return matmul_forward(x, y, tx, ty, scale);
  return matmul_forward(converted(x, DType::bf16), converted(y, DType::bf16), tx, ty, scale);
}

bool bf16_head_kernel(const AttentionPlan& p) {
  return p.bf16 && p.streaming && kernels::bf16_heads_fit(p.T, p.S, p.d, p.dv);
}

bool bf16_heads(const AttentionPlan& p) { return p.bf16 && (!p.streaming || bf16_head_kernel(p)); }

namespace {

const uint16_t* bf16_bits(const Tensor& x) { return reinterpret_cast<const uint16_t*>(x.data<BFloat16>()); }

}  // namespace

Tensor bf16_head_attention_forward(const AttentionPlan& p, const AttentionTensors& t, const kernels::HeadsOut& out,
                                   const kernels::Bf16HeadsOut& out_bf16) {
  Tensor lse = empty({p.B, p.H, p.T}, DType::f32);  // (B, H, T)
  kernels::flash_attention_forward_bf16(flash_problem<float>(p, t.attn_mask, t.key_padding_mask), bf16_bits(t.q),
                                        bf16_bits(t.k), bf16_bits(t.v), out, lse.data<float>(), out_bf16);
  return lse;
}

void bf16_head_attention_backward(const AttentionPlan& p, const AttentionTensors& t, const Tensor& lse,
                                  const kernels::HeadsIn& dout, const kernels::HeadsOut& dq,
                                  const kernels::HeadsOut& dk, const kernels::HeadsOut& dv) {
  kernels::flash_attention_backward_bf16(flash_problem<float>(p, t.attn_mask, t.key_padding_mask), bf16_bits(t.q),
                                         bf16_bits(t.k), bf16_bits(t.v), lse.data<float>(), dout, dq, dk, dv);
}

Tensor attention_streaming_forward(const AttentionPlan& p, const AttentionTensors& t, Tensor& lse) {
  if (bf16_head_kernel(p)) {                                // Note [bf16 head kernel]
    Tensor out = empty({p.B, p.H, p.T, p.dv}, DType::f32);  // (B, H, T, dv)
    lse = bf16_head_attention_forward(p, t, kernels::contiguous_heads(out.data<float>(), p.H, p.T, p.dv));
    return out;
  }
  Tensor out = empty({p.B, p.H, p.T, p.dv}, t.q.dtype());  // (B, H, T, dv)
  lse = empty({p.B, p.H, p.T}, t.q.dtype());               // (B, H, T)
  dispatch_floating(t.q.dtype(), "scaled_dot_product_attention", [&]<typename F>() {
    kernels::flash_attention_forward(flash_problem<F>(p, t.attn_mask, t.key_padding_mask), t.q.data<F>(), t.k.data<F>(),
                                     t.v.data<F>(), out.data<F>(), lse.data<F>());
  });
  return out;
}

std::vector<Tensor> attention_backward_streaming(const AttentionPlan& p, const AttentionTensors& t, const Tensor& g,
                                                 const Tensor& out, const Tensor& lse, std::array<bool, 3> needs) {
  if (bf16_head_kernel(p)) {       // Note [bf16 head kernel]
    std::vector<Tensor> grads(3);  // dq, dk, dv, where asked for
    const Tensor* heads[3] = {&t.q, &t.k, &t.v};
    kernels::HeadsOut outs[3];
    for (int i = 0; i < 3; ++i)
      if (needs[i]) {
        grads[i] = empty(heads[i]->shape(), DType::f32);
        outs[i] = kernels::contiguous_heads(grads[i].data<float>(), p.H, grads[i].size(2), grads[i].size(3));
      }
    bf16_head_attention_backward(p, t, lse, kernels::contiguous_heads<const float*>(g.data<float>(), p.H, p.T, p.dv),
                                 outs[0], outs[1], outs[2]);
    return grads;
  }
  std::vector<Tensor> grads = {empty(t.q.shape(), g.dtype()), empty(t.k.shape(), g.dtype()),
                               empty(t.v.shape(), g.dtype())};  // dq, dk, dv
  dispatch_floating(g.dtype(), "scaled_dot_product_attention", [&]<typename F>() {
    kernels::flash_attention_backward(flash_problem<F>(p, t.attn_mask, t.key_padding_mask), t.q.data<F>(),
                                      t.k.data<F>(), t.v.data<F>(), out.data<F>(), lse.data<F>(), g.data<F>(),
                                      grads[0].data<F>(), grads[1].data<F>(), grads[2].data<F>());
  });
  for (int i = 0; i < 3; ++i)
    if (!needs[i]) grads[i] = Tensor();
  return grads;
}

// zero under MaskedRows::zero.
MaskedWeights attention_weights(const Tensor& q, const Tensor& k, const AttentionPlan& p, const Tensor& attn_mask,
                                const Tensor& key_padding_mask) {
  Tensor scores = attention_product(p, q, k, false, true, p.scale);  // (B, H, T, S)
  Tensor empty_rows;                                                 // (B, H, T, 1)
  if (p.causal || attn_mask.defined() || key_padding_mask.defined())
    dispatch_floating(scores.dtype(), "scaled_dot_product_attention", [&]<typename T>() {
      empty_rows = apply_masks(scores.data<T>(), p, attn_mask, key_padding_mask, true);
    });
  Tensor weights = softmax_forward(scores, -1, false);  // (B, H, T, S)
  if (p.zero_masked_rows && empty_rows.defined()) weights = masked_fill_kernel(weights, empty_rows, 0.0);
  return {weights, empty_rows, Tensor()};
}

MaskedWeights attention_weights_with_operand(const Tensor& q, const Tensor& k, const AttentionPlan& p,
                                             const Tensor& attn_mask, const Tensor& key_padding_mask,
                                             const Tensor& keep) {
  AG_CHECK(p.bf16 && (!keep.defined() || keep.dtype() == DType::f32),
           "attention_weights_with_operand: expected an autocast plan and an f32 dropout mask");
  Tensor weights = attention_product(p, q, k, false, true, p.scale);  // (B, H, T, S): the scores, then in place
  Tensor operand = empty(weights.shape(), DType::bf16);               // (B, H, T, S)
  const bool masked = p.causal || attn_mask.defined() || key_padding_mask.defined();
  const kernels::FlashProblem<float> problem = flash_problem<float>(p, attn_mask, key_padding_mask);
  const int64_t rows = p.B * p.H * p.T, S = p.S;
  Tensor empty_rows = masked ? empty({p.B, p.H, p.T, 1}, DType::b8) : Tensor();
  bool* empty_row = masked ? empty_rows.data<bool>() : nullptr;
  float* w = weights.data<float>();
  const float* kept = keep.defined() ? keep.data<float>() : nullptr;
  BFloat16* bits = operand.data<BFloat16>();
  const int64_t rows_at_once = std::max<int64_t>(1, 4096 / std::max<int64_t>(S, 1));  // masked while in L1
  parallel_for_ranges(rows, 8 * S, [&](int64_t first, int64_t last) {
    for (int64_t begin = first; begin < last; begin += rows_at_once) {
      const int64_t end = std::min(last, begin + rows_at_once);
      for (int64_t row = begin; masked && row < end; ++row) empty_row[row] = mask_row(problem, p, w, row);
      softmax_rows_in_place_with_bf16(w + begin * S, kept ? kept + begin * S : nullptr, bits + begin * S, end - begin,
                                      S);
      for (int64_t row = begin; masked && p.zero_masked_rows && row < end; ++row)
        if (empty_row[row]) {
          std::fill(w + row * S, w + (row + 1) * S, 0.0f);
          std::fill(bits + row * S, bits + (row + 1) * S, BFloat16());
        }
    }
  });
  if (!masked || std::none_of(empty_row, empty_row + rows, [](bool e) { return e; })) empty_rows = Tensor();
  return {weights, empty_rows, operand};
}

// The masks as one additive (B, H, T, S) tensor: 0, -inf where masked, or attn_mask's values.
Tensor additive_mask(const AttentionPlan& p, DType dtype, const Tensor& attn_mask, const Tensor& key_padding_mask) {
  Tensor mask = zeros({p.B, p.H, p.T, p.S}, dtype);
  dispatch_floating(dtype, "scaled_dot_product_attention",
                    [&]<typename T>() { apply_masks(mask.data<T>(), p, attn_mask, key_padding_mask, false); });
  return mask;
}

// (B, H, T, 1) b8, true where a row's logsumexp lse (B, H, T) is -inf (every key masked);
// undefined when there are none.
Tensor rows_without_keys(const Tensor& lse) {
  Tensor rows = empty({lse.size(0), lse.size(1), lse.size(2), 1}, DType::b8);
  const int64_t count = lse.numel();
  auto* hidden = reinterpret_cast<uint8_t*>(rows.data<bool>());  // bytes vectorise, bools do not
  int64_t found = 0;
  dispatch_floating(lse.dtype(), "scaled_dot_product_attention", [&]<typename T>() {
    const T* l = lse.data<T>();
    for (int64_t row = 0; row < count; ++row) {
      hidden[row] = l[row] == -std::numeric_limits<T>::infinity();
      found += hidden[row];
    }
  });
  return found > 0 ? rows : Tensor();
}

}  // namespace ag
