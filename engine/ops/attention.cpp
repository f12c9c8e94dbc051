// Fused scaled dot-product attention on (B, H, T, d) tensors, two ways (Note [streaming attention]
// in ops.h). Streaming: the FlashAttention kernels (engine/kernels/flash_attention.h) keep each
// row's logsumexp instead of the (T, S) weights. Materialising: scores through one matmul with
// the 1/√d scale fused, the masks applied in one pass (never as a oneDNN post-op: a
// batch-broadcast mask post-op drops oneDNN 2.6 to ref:any), softmax, dropout, then @V. One node
// each, and one backward formula for both (Note [one attention backward]).
#include "engine/ops/attention.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "engine/autocast.h"
#include "engine/autograd.h"
#include "engine/kernels/attention.h"
#include "engine/kernels/bf16.h"
#include "engine/kernels/broadcast.h"
#include "engine/kernels/check.h"
#include "engine/kernels/dropout.h"
#include "engine/kernels/flash_attention.h"
#include "engine/kernels/softmax.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/attention_node.h"
#include "engine/ops/mask.h"
#include "engine/ops/matmul.h"
#include "engine/ops/shape.h"
#include "engine/ops/softmax.h"
#include "engine/registry.h"

namespace ag {

namespace {

void check_operand(const char* what, const Tensor& t) {
  check_floating("scaled_dot_product_attention", what, t);
  AG_CHECK(t.dim() == 4,
           "scaled_dot_product_attention: expected {} as a floating (B, H, T, d) tensor, got {} of shape {}", what,
           dtype_name(t.dtype()), shape_str(t.shape()));
}

void check_masks(const AttentionPlan& p, DType dtype, const Tensor& attn_mask, const Tensor& key_padding_mask) {
  const Shape scores{p.B, p.H, p.T, p.S};
  if (attn_mask.defined()) {
    AG_CHECK(attn_mask.dtype() == DType::b8 || attn_mask.dtype() == dtype,
             "scaled_dot_product_attention: attn_mask must be b8 (true = takes part) or additive {} like q, got {}",
             dtype_name(dtype), dtype_name(attn_mask.dtype()));
    AG_CHECK(broadcasts_to(attn_mask.shape(), scores),
             "scaled_dot_product_attention: attn_mask of shape {} does not broadcast to the scores' shape {}",
             shape_str(attn_mask.shape()), shape_str(scores));
  }
  if (key_padding_mask.defined())
    AG_CHECK(
        key_padding_mask.dtype() == DType::b8 && key_padding_mask.shape() == Shape({p.B, p.S}),
        "scaled_dot_product_attention: key_padding_mask must be b8 (true = ignored) of shape (B, S) = {}, got {} of "
        "shape {}",
        shape_str({p.B, p.S}), dtype_name(key_padding_mask.dtype()), shape_str(key_padding_mask.shape()));
}

// Below this many scores per head (T·S) the materialising kernel is faster: its few large oneDNN
// calls beat per-block loops on small heads (tools/bench/README.md, "Streaming attention").
constexpr int64_t kStreamingMinScores = 128 * 128;

}  // namespace

bool attention_streams(int64_t T, int64_t S, const AttentionOptions& o) {
  if (o.kernel != AttentionKernel::automatic) return o.kernel == AttentionKernel::streaming;
  return o.dropout_p == 0 && !o.need_weights && T * S >= kStreamingMinScores;
}

namespace {

// attention_streams, and under autocast heads that fit the bf16 head kernel (Note [bf16 head
// kernel]): faster than the materialising kernel there (tools/bench/README.md, "bf16 heads").
bool streams(const AttentionOptions& o, const AttentionPlan& p) {
  const bool can_stream = o.dropout_p == 0 && !o.need_weights;
  AG_CHECK(can_stream || o.kernel != AttentionKernel::streaming,
           "scaled_dot_product_attention: the streaming kernel cannot {} (use kernel = automatic or materialising)",
           o.need_weights ? "return the weights (need_weights)" : "apply dropout (dropout_p > 0)");
  const bool bf16_head_kernel = p.bf16 && can_stream && kernels::bf16_heads_fit(p.T, p.S, p.d, p.dv);
  return attention_streams(p.T, p.S, o) || (o.kernel == AttentionKernel::automatic && bf16_head_kernel);
}

// Whether every value of mask (T, S) is what `causal(value, j > i)` accepts for its place.
template <typename T, typename Causal>
bool every_place(const T* mask, int64_t queries, int64_t keys, Causal causal) {
  for (int64_t i = 0; i < queries; ++i)
    for (int64_t j = 0; j < keys; ++j)
      if (!causal(mask[i * keys + j], j > i)) return false;
  return true;
}

bool is_causal_mask(const Tensor& mask, int64_t queries, int64_t keys, DType dtype) {
  const Shape& shape = mask.shape();
  if (shape.size() < 2 || shape[shape.size() - 2] != queries || shape.back() != keys || mask.numel() != queries * keys)
    return false;
  if (mask.dtype() == DType::b8)
    return every_place(mask.data<bool>(), queries, keys,
                       [](bool takes_part, bool future) { return takes_part != future; });
  if (mask.dtype() != dtype || (dtype != DType::f32 && dtype != DType::f64)) return false;
  bool causal = false;
  dispatch_floating(dtype, "scaled_dot_product_attention", [&]<typename F>() {
    causal = every_place(mask.data<F>(), queries, keys, [](F value, bool future) {
      return future ? value == -std::numeric_limits<F>::infinity() : value == 0;
    });
  });
  return causal;
}

}  // namespace

AttentionPlan plan_shapes(const Shape& q, const Shape& k, const Shape& v, DType dtype, AttentionOptions& o) {
  AG_CHECK(k[0] == q[0] && v[0] == q[0] && k[1] == q[1] && v[1] == q[1] && k[3] == q[3] && v[2] == k[2],
           "scaled_dot_product_attention: expected q (B, H, T, d), k (B, H, S, d), v (B, H, S, dv), got q {}, k {}, "
           "v {}",
           shape_str(q), shape_str(k), shape_str(v));
  AG_CHECK(o.dropout_p >= 0 && o.dropout_p <= 1, "scaled_dot_product_attention: expected dropout_p in [0, 1], got {}",
           o.dropout_p);
  AttentionPlan p;
  p.B = q[0], p.H = q[1], p.T = q[2], p.S = k[2], p.d = q[3];
  p.scale = 1 / std::sqrt(static_cast<double>(std::max<int64_t>(p.d, 1)));
  p.zero_masked_rows = o.masked_rows == MaskedRows::zero;
  check_masks(p, dtype, o.attn_mask, o.key_padding_mask);
  if (o.attn_mask.defined() && is_causal_mask(o.attn_mask, p.T, p.S, dtype)) {  // Note [a causal attn_mask]
    o.attn_mask = Tensor();
    o.is_causal = true;
  }
  p.causal = o.is_causal;
  if (o.attn_mask.defined()) p.mask_strides = broadcast_strides(o.attn_mask.shape(), {p.B, p.H, p.T, p.S});
  p.dv = v[3];
  p.bf16 = autocast_enabled() && dtype == DType::f32;
  p.streaming = streams(o, p);
  return p;
}

namespace {

AttentionPlan plan_attention(const Tensor& q, const Tensor& k, const Tensor& v, AttentionOptions& o) {
  check_operand("q", q);
  check_operand("k", k);
  check_operand("v", v);
  AG_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype(),
           "scaled_dot_product_attention: dtypes differ: q {}, k {}, v {}", dtype_name(q.dtype()),
           dtype_name(k.dtype()), dtype_name(v.dtype()));
  return plan_shapes(q.shape(), k.shape(), v.shape(), q.dtype(), o);
}

// {q, k, v, attn_mask, key_padding_mask} as the node saved them.
AttentionTensors saved_tensors(const std::vector<Tensor>& saved) {
  return {saved[kQ], saved[kK], saved[kV], saved[kAttnMask], saved[kKeyPadding]};
}

// scale · x @ y (flags as matmul's) in the backward: the kernel (bf16 operands under p.bf16), or,
// when the backward is itself recorded (create_graph), recorded ops that can be differentiated again.
Tensor backward_product(const AttentionPlan& p, const Tensor& x, const Tensor& y, bool tx, bool ty, double scale) {
  if (!grad_enabled()) return attention_product(p, x, y, tx, ty, scale);
  const Tensor xy = matmul(x, y, tx, ty);
  return scale == 1 ? xy : mul(xy, scale);
}

// x as a backward product's operand: under autocast its bf16 copy, made once for the products that
// share it; unchanged when the backward is recorded (create_graph: recorded products take f32).
Tensor backward_operand(const AttentionPlan& p, const Tensor& x) {
  return p.bf16 && !grad_enabled() ? converted(x, DType::bf16) : x;
}

// The weights W = softmax(scale · q @ kᵀ + masks) (B, H, T, S) as the backward reads them: the
// saved (or kernel-recomputed) `w` when nothing records it; under create_graph recomputed from q
// and k with recorded ops, since a saved W is a constant whose dependence on q and k the second
// order needs.
//
// A row without keys (empty_rows) is all -inf, whose softmax is NaN, and softmax's backward
// multiplies by its output: a NaN that would reach q and k at the second order, where the
// composition's masked_fill(scores, hidden, -inf) passes them no gradient. So its scores are
// replaced before the softmax (the values do not matter: the row's weights are set after) and its
// weights after it, NaN or zero as masked_rows says: the same values as the kernels', and no
// gradient of any order from that row to q or k.
Tensor backward_weights(const std::vector<Tensor>& saved, const AttentionPlan& p, const Tensor& w,
                        const Tensor& empty_rows) {
  if (!grad_enabled()) return w;
  const Tensor& q = saved[kQ];
  Tensor scores = backward_product(p, q, saved[kK], false, true, p.scale);  // (B, H, T, S)
  if (p.causal || saved[kAttnMask].defined() || saved[kKeyPadding].defined())
    scores = add(scores, additive_mask(p, q.dtype(), saved[kAttnMask], saved[kKeyPadding]));
  if (!empty_rows.defined()) return softmax(scores, -1);                     // (B, H, T, S)
  const Tensor weights = softmax(masked_fill(scores, empty_rows, 0.0), -1);  // (B, H, T, S)
  return masked_fill(weights, empty_rows, p.zero_masked_rows ? 0.0 : NAN);
}

// The weights after dropout, W ⊙ keep (or W without it): as the product's bf16 operand, rounded in
// the multiplying pass, when nothing records under autocast.
Tensor after_dropout(const AttentionPlan& p, const Tensor& w, const Tensor& keep) {
  if (!keep.defined()) return w;
  return p.bf16 && !grad_enabled() ? rounded_product(w, keep) : mul(w, keep);
}

// dS, the scores' gradient, from dWd = g @ vᵀ: dW = dWd ⊙ keep (Wd = W ⊙ keep), dS = softmax's backward
// (W = softmax(S)), zero on rows without keys (S = masked scores), as the products' operand (bf16
// under autocast). When nothing records under autocast and every row has keys, one kernel pass per
// row (softmax_backward_to_bf16).
Tensor score_gradient(const AttentionPlan& p, const Tensor& w, const Tensor& dwd, const Tensor& keep,
                      const Tensor& empty_rows) {
  if (p.bf16 && !grad_enabled() && !empty_rows.defined()) return softmax_backward_to_bf16(w, dwd, keep);
  const Tensor dw = keep.defined() ? mul(dwd, keep) : dwd;  // (B, H, T, S)
  Tensor ds = softmax_backward(w, dw, -1);                  // (B, H, T, S)
  if (empty_rows.defined()) ds = masked_fill(ds, empty_rows, 0.0);
  return backward_operand(p, ds);  // converted once for both products
}

// Note [one attention backward]
// The attention's derivative, written once for both kernels and both orders: the materialising
// node reads the weights it saved, the streaming node recomputes them where its own kernel cannot
// serve, and create_graph records every step (backward_product, backward_weights, and
// softmax_backward, an op of its own) so that the second order differentiates this same formula.
// The streaming kernel's fused backward (attention_backward_streaming) is this formula computed
// block by block without the (T, S) weights: an implementation detail, used when nothing records.
// `saved_operand`: the forward's bf16 Wd under autocast, if it kept it (undefined otherwise).
std::vector<Tensor> attention_backward(const Tensor& grad, const std::vector<Tensor>& saved, Needs needs,
                                       const AttentionPlan& p, const Tensor& saved_weights, const Tensor& keep,
                                       const Tensor& empty_rows, const Tensor& saved_operand) {
  // out = dropout(softmax(scale · q @ kᵀ + masks)) @ v, with W = softmax(…), Wd = W ⊙ keep
  const Tensor g = backward_operand(p, grad);                              // (B, H, T, dv), bf16 under autocast
  const Tensor w = backward_weights(saved, p, saved_weights, empty_rows);  // (B, H, T, S)
  const Tensor wd =
      saved_operand.defined() && !grad_enabled() ? saved_operand : after_dropout(p, w, keep);  // (B, H, T, S)
  const Tensor dwd = backward_product(p, g, saved[kV], false, true, 1.0);  // dWd = g @ vᵀ, (B, H, T, S)
  const Tensor ds = score_gradient(p, w, dwd, keep, empty_rows);           // dS (B, H, T, S), bf16 under autocast
  std::vector<Tensor> grads(3);
  if (needs[0]) grads[0] = backward_product(p, ds, saved[kK], false, false, p.scale);  // (B, H, T, d)
  if (needs[1]) grads[1] = backward_product(p, ds, saved[kQ], true, false, p.scale);   // (B, H, S, d)
  if (needs[2]) grads[2] = backward_product(p, wd, g, true, false, 1.0);               // (B, H, S, dv)
  return grads;
}

constexpr std::string_view kAttentionFormula =
    "out = softmax(s · q kᵀ + mask) v = P v  →  dv = Pᵀ g, dP = g vᵀ, dS = P ⊙ (dP − rowsum(dP ⊙ P)), dq = s · dS k, "
    "dk = s · dSᵀ q";

// A backward whose products took bf16 operands is not recorded (create_graph): refused, saying so.
void refuse_second_order_in_bf16(bool bf16) {
  AG_CHECK(!(bf16 && grad_enabled()),
           "scaled_dot_product_attention ran in bf16 (under AutocastGuard): its backward cannot be differentiated "
           "again (create_graph); compute higher-order gradients in f32");
}

// Streaming: out (B, H, T, dv) and each query row's logsumexp (B, H, T), no (T, S) weights. The bf16
// head kernel reads (and the node keeps) bf16 heads: the split heads' own, or copies made once.
AttentionForward streaming_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o,
                                   const AttentionPlan& plan) {
  const auto operand = [&plan](const Tensor& x) {
    return bf16_heads(plan) && x.dtype() != DType::bf16 ? autocast_operand(x) : x;
  };
  const Tensor q_op = operand(q), k_op = operand(k), v_op = operand(v);  // (B, H, T|S, d|dv)
  Tensor lse;                                                            // (B, H, T)
  Tensor out = attention_streaming_forward(plan, {q_op, k_op, v_op, o.attn_mask, o.key_padding_mask}, lse);
  return {out, Tensor(), {q_op, k_op, v_op, o.attn_mask, o.key_padding_mask, out, lse, Tensor(), Tensor()}};
}

std::vector<Tensor> streaming_backward(const AttentionPlan& plan, const Tensor& grad, const std::vector<Tensor>& saved,
                                       Needs needs) {
  // out = softmax(scale · q @ kᵀ + masks) @ v: Note [one attention backward]
  refuse_second_order_in_bf16(bf16_head_kernel(plan));
  const Tensor empty_rows = rows_without_keys(saved[kKeepOrLse]);  // (B, H, T, 1) or undefined
  // NaN weights (rows without keys) reach dv as PyTorch's do: only the weights carry them.
  const bool weights_needed = grad_enabled() || (empty_rows.defined() && !plan.zero_masked_rows);
  if (!weights_needed)
    return attention_backward_streaming(plan, saved_tensors(saved), grad, saved[kWeightsOrOut], saved[kKeepOrLse],
                                        needs);
  const Tensor w = grad_enabled() ? Tensor()
                                  : attention_weights(saved[kQ], saved[kK], plan, saved[kAttnMask], saved[kKeyPadding])
                                        .weights;  // (B, H, T, S)
  return attention_backward(grad, saved, needs, plan, w, {}, empty_rows, {});
}

// Materialising: the (B, H, T, S) weights, returned with need_weights.
AttentionForward materialising_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o,
                                       const AttentionPlan& plan, Generator& gen) {
  // Under autocast the products' operands are bf16 copies made once (autocast_operand: a decoder's
  // cached keys and values once, not every step): the forward's products read them and the node saves
  // them for the backward's, whose products would convert them again.
  const auto operand = [&plan](const Tensor& x) { return plan.bf16 ? autocast_operand(x) : x; };
  const Tensor q_op = operand(q), k_op = operand(k), v_op = operand(v);  // (B, H, T|S, d|dv)
  if (plan.bf16 && !o.need_weights) {  // the product's operand Wd written in the softmax's pass, kept for the backward
    const Tensor keep = o.dropout_p > 0
                            ? attention_dropout_mask({plan.B, plan.H, plan.T, plan.S}, DType::f32, o.dropout_p, gen)
                            : Tensor();  // (B, H, T, S)
    const MaskedWeights w = attention_weights_with_operand(q_op, k_op, plan, o.attn_mask, o.key_padding_mask, keep);
    Tensor out = attention_product(plan, w.operand, v_op, false, false, 1.0);  // (B, H, T, dv)
    return {
        out, Tensor(), {q_op, k_op, v_op, o.attn_mask, o.key_padding_mask, w.weights, keep, w.empty_rows, w.operand}};
  }
  const MaskedWeights masked = attention_weights(q_op, k_op, plan, o.attn_mask, o.key_padding_mask);
  const Tensor& weights = masked.weights;  // (B, H, T, S)
  Tensor keep;                             // (B, H, T, S)
  Tensor dropped = weights;
  if (o.dropout_p > 0) {
    keep = attention_dropout_mask(weights.shape(), weights.dtype(), o.dropout_p, gen);
    NoGradGuard no_grad;           // returned with need_weights; otherwise only the product reads it
    dropped = mul(weights, keep);  // (B, H, T, S)
  }
  Tensor out = attention_product(plan, dropped, v_op, false, false, 1.0);  // (B, H, T, dv)
  return {out,
          o.need_weights ? dropped : Tensor(),
          {q_op, k_op, v_op, o.attn_mask, o.key_padding_mask, weights, keep, masked.empty_rows, Tensor()}};
}

std::vector<Tensor> materialising_backward(const AttentionPlan& plan, const Tensor& grad,
                                           const std::vector<Tensor>& saved, Needs needs) {
  // out = dropout(softmax(scale · q @ kᵀ + masks)) @ v: Note [one attention backward]
  refuse_second_order_in_bf16(plan.bf16);
  return attention_backward(grad, saved, needs, plan, saved[kWeightsOrOut], saved[kKeepOrLse], saved[kEmptyRows],
                            saved[kWeightsOperand]);
}

}  // namespace

AttentionForward attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o,
                                   const AttentionPlan& plan, Generator& gen) {
  return plan.streaming ? streaming_forward(q, k, v, o, plan) : materialising_forward(q, k, v, o, plan, gen);
}

std::vector<Tensor> node_backward(const AttentionPlan& plan, const Tensor& grad, const std::vector<Tensor>& saved,
                                  Needs needs) {
  return plan.streaming ? streaming_backward(plan, grad, saved, needs)
                        : materialising_backward(plan, grad, saved, needs);
}

Attention scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                       const AttentionOptions& options, Generator& gen) {
  AG_CHECK(!options.merge_heads,
           "scaled_dot_product_attention: merge_heads is for packed_self_attention and packed_cross_attention (merge "
           "this op's heads with merge_heads())");
  AttentionOptions o = options;  // plan_attention may take its mask as is_causal
  const AttentionPlan plan = plan_attention(q, k, v, o);
  AttentionForward f = attention_forward(q, k, v, o, plan, gen);
  const std::array<Tensor, 3> inputs{q, k, v};
  if (needs_recording(inputs))
    attach_node(f.out, {"ScaledDotProductAttentionBackward", {.bf16 = plan.bf16, .formula = kAttentionFormula}}, inputs,
                f.saved, [plan](const BackwardContext& c) {
                  // out = dropout(softmax(scale · q @ kᵀ + masks)) @ v: Note [one attention backward]
                  return node_backward(plan, c.grad, c.saved, {c.needs_grad[0], c.needs_grad[1], c.needs_grad[2]});
                });
  return {f.out, f.weights};
}

Tensor merge_heads(const Tensor& heads) {
  AG_CHECK(heads.dim() == 4, "merge_heads: expected heads (N, H, T, d), got shape {}", shape_str(heads.shape()));
  const Tensor side_by_side = transpose(heads, 1, 2);  // (N, T, H, d)
  return reshape(side_by_side, {heads.size(0), heads.size(2), heads.size(1) * heads.size(3)});
}

void register_attention_ops(Registry& registry) {
  // Shapes: q (B, H, T, d), k (B, H, S, d), v (B, H, S, dv).
  const std::vector<std::vector<Shape>> shapes = {{{2, 2, 3, 4}, {2, 2, 3, 4}, {2, 2, 3, 4}},
                                                  {{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}},
                                                  {{1, 3, 4, 2}, {1, 3, 5, 2}, {1, 3, 5, 3}},
                                                  {{2, 1, 5, 3}, {2, 1, 5, 3}, {2, 1, 5, 1}}};
  // masks: random ones that leave key 0 visible to every query; emptied_rows: besides, query 0 sees no key,
  // nor does any query of the last batch, under MaskedRows::zero (Note [fully masked rows]).
  auto sdpa = [](bool causal, bool masks, double dropout_p, AttentionKernel kernel = AttentionKernel::automatic,
                 bool emptied_rows = false) {
    return [=](const std::vector<Tensor>& in) {
      Generator gen(11);  // the same dropout mask on every call (every finite-difference probe)
      const int64_t B = in[0].size(0), T = in[0].size(2), S = in[1].size(2);
      AttentionOptions o{.is_causal = causal, .dropout_p = dropout_p, .kernel = kernel};
      if (masks) {
        o.attn_mask = gt(rand({T, S}, DType::f64, gen), 0.3);         // (T, S) takes part, broadcast over B and H
        o.key_padding_mask = gt(rand({B, S}, DType::f64, gen), 0.7);  // (B, S) ignored
        for (int64_t i = 0; i < T; ++i) o.attn_mask.set({i, 0}, 1);   // key 0 stays visible: no row is all -inf
        for (int64_t b = 0; b < B; ++b) o.key_padding_mask.set({b, 0}, 0);
      }
      if (emptied_rows) {
        for (int64_t j = 0; j < S; ++j) {
          o.attn_mask.set({0, j}, 0);
          o.key_padding_mask.set({B - 1, j}, 1);
        }
        o.masked_rows = MaskedRows::zero;
      }
      return scaled_dot_product_attention(in[0], in[1], in[2], o, gen).output;
    };
  };
  registry.add({"scaled_dot_product_attention", sdpa(false, false, 0), real_inputs(), shapes});
  registry.add({"scaled_dot_product_attention_causal", sdpa(true, false, 0), real_inputs(), shapes});
  registry.add({"scaled_dot_product_attention_masked", sdpa(false, true, 0), real_inputs(), shapes});
  registry.add({.name = "scaled_dot_product_attention_dropout",
                .fn = sdpa(true, false, 0.3),
                .make_inputs = real_inputs(),
                .shape_sets = shapes,
                .differs_from_pytorch =
                    "no counterpart: its dropout mask comes from attograd's Generator, which "
                    "PyTorch's RNG cannot replay (the other entries check the op without dropout)"});
  // These shapes pick the materialising kernel; the same op forced onto the streaming one:
  const std::string same_op =
      "the op above through the streaming kernel (Note [streaming attention]): PyTorch has one op for both; "
      "tests/engine/attention_test.cpp checks the two kernels agree";
  const AttentionKernel streaming = AttentionKernel::streaming;
  registry.add({.name = "scaled_dot_product_attention_streaming",
                .fn = sdpa(false, false, 0, streaming),
                .make_inputs = real_inputs(),
                .shape_sets = shapes,
                .differs_from_pytorch = same_op});
  registry.add({.name = "scaled_dot_product_attention_streaming_causal",
                .fn = sdpa(true, false, 0, streaming),
                .make_inputs = real_inputs(),
                .shape_sets = shapes,
                .differs_from_pytorch = same_op});
  registry.add({.name = "scaled_dot_product_attention_streaming_masked",
                .fn = sdpa(true, true, 0, streaming),
                .make_inputs = real_inputs(),
                .shape_sets = shapes,
                .differs_from_pytorch = same_op});
  // A query that sees no key, under MaskedRows::zero: zero output and zero gradients at every order.
  registry.add({"scaled_dot_product_attention_masked_rows_zero",
                sdpa(false, true, 0, AttentionKernel::materialising, true), real_inputs(), shapes});
  registry.add({"scaled_dot_product_attention_streaming_masked_rows_zero", sdpa(true, true, 0, streaming, true),
                real_inputs(), shapes});
}

}  // namespace ag
