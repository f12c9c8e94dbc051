// The packed projections' attention: packed_self_attention reads q, k and v from one (N, L, 3E)
// projection, packed_cross_attention q from one and k, v from a (N, S, 2E) one; the heads are split
// by strided copies and the attention node is scaled_dot_product_attention's (attention_node.h).
#include <algorithm>
#include <array>

#include "engine/autocast.h"
#include "engine/autograd.h"
#include "engine/kernels/check.h"
#include "engine/kernels/copy.h"
#include "engine/ops/attention.h"
#include "engine/ops/attention_node.h"
#include "engine/ops/shape.h"
#include "engine/registry.h"

namespace ag {

namespace {

// ---- Packed projections (packed_self_attention, packed_cross_attention)

// Where q, k or v sits: in which source, at which of its projections of E columns.
struct PackedPlace {
  size_t source;
  int64_t slot;
};
struct PackedLayout {
  int64_t heads;
  int64_t E;
  std::array<PackedPlace, 3> places;  // q, k, v, slots ascending within a source
};

// One projection's heads in its source (N, L, slots·E), read as (N, H, L, E/H).
Window heads_window(const Shape& source, int64_t slot, const PackedLayout& layout) {
  const int64_t L = source[1], C = source[2], d = layout.E / layout.heads;
  return {slot * layout.E, {L * C, d, C, 1}};
}

// The heads' shape (N, H, L, E/H) of a source (N, L, slots·E).
Shape heads_shape(const Tensor& source, const PackedLayout& layout) {
  return {source.size(0), layout.heads, source.size(1), layout.E / layout.heads};
}

// One projection's heads (N, H, L, E/H) from its source (N, L, slots·E): one strided copy that records
// nothing, in `dtype` (the source's, or bf16 for autocast's products: rounded in the same pass), or,
// when a backward is itself recorded (create_graph), recorded ops that can be differentiated again.
Tensor heads_of(const Tensor& source, int64_t slot, const PackedLayout& layout, DType dtype) {
  const Shape shape = heads_shape(source, layout);
  if (grad_enabled()) {
    const Tensor projection = narrow(source, 2, slot * layout.E, layout.E);                 // (N, L, E)
    return transpose(reshape(projection, {shape[0], shape[2], shape[1], shape[3]}), 1, 2);  // (N, H, L, d)
  }
  Tensor out = empty(shape, dtype);
  const Window from = heads_window(source.shape(), slot, layout);
  if (dtype == source.dtype()) copy_window(source, from, out, whole(out), shape);
  if (dtype != source.dtype()) copy_window_to_bf16(source, from, out, whole(out), shape);
  return out;
}

// A source's gradient (N, L, slots·E): its projections' head gradients (N, H, L, E/H each, in slot
// order) in their places; one strided copy each, or recorded ops under create_graph.
Tensor packed_gradient(const std::vector<Tensor>& head_grads, const Shape& source, const PackedLayout& layout) {
  if (grad_enabled()) {
    std::vector<Tensor> projections;  // (N, L, H, E/H) each
    for (const Tensor& g : head_grads) projections.push_back(transpose(g, 1, 2));
    return reshape(stack(projections, 2), source);  // (N, L, slots, H, E/H) → (N, L, slots·E)
  }
  Tensor out = empty(source, head_grads[0].dtype());
  for (size_t slot = 0; slot < head_grads.size(); ++slot)
    copy_window(head_grads[slot], whole(head_grads[slot]), out,
                heads_window(source, static_cast<int64_t>(slot), layout), head_grads[slot].shape());
  return out;
}

// Where the output's gradient g is: the heads (N, H, T, d), or with merge_heads merged (N, T, E).
kernels::HeadsIn gradient_rows(const Tensor& g, const PackedLayout& layout, bool merged) {
  const int64_t T = merged ? g.size(1) : g.size(2), d = layout.E / layout.heads;
  return merged ? kernels::merged_heads<const float*>(g.data<float>(), layout.heads, T, d)
                : kernels::contiguous_heads<const float*>(g.data<float>(), layout.heads, T, d);
}

// The bf16 head kernel's backward reading the output's gradient where it is (merged or not) and
// writing dq, dk, dv in their places of the sources' gradients (no copy to split or gather heads).
// Empty when it cannot serve: a recorded backward (create_graph, refused in bf16 by the node's own
// backward) or rows without keys whose NaN weights must reach dv.
std::vector<Tensor> in_place_backward(const AttentionPlan& plan, const PackedLayout& layout, bool merged,
                                      const BackwardContext& c) {
  const Tensor& lse = c.saved[kKeepOrLse];  // (N, H, T)
  if (!bf16_head_kernel(plan) || grad_enabled() || (!plan.zero_masked_rows && rows_without_keys(lse).defined()))
    return {};
  std::vector<Tensor> grads(c.inputs.size());  // each source's (N, L, slots·E): every column written
  for (size_t s = 0; s < grads.size(); ++s)
    if (c.needs_grad[s]) grads[s] = empty(c.inputs[s].shape, DType::f32);
  std::array<kernels::HeadsOut, 3> places;  // dq, dk, dv
  for (size_t i = 0; i < places.size(); ++i) {
    const PackedPlace& at = layout.places[i];
    const Window w = heads_window(c.inputs[at.source].shape, at.slot, layout);  // strides (L·C, d, C, 1)
    if (grads[at.source].defined())
      places[i] = {grads[at.source].data<float>() + w.offset, w.strides[0], w.strides[1], w.strides[2]};
  }
  const AttentionTensors heads{c.saved[kQ], c.saved[kK], c.saved[kV], c.saved[kAttnMask], c.saved[kKeyPadding]};
  bf16_head_attention_backward(plan, heads, lse, gradient_rows(c.grad, layout, merged), places[0], places[1],
                               places[2]);
  return grads;
}

// Note [what the packed node saves]
// Under autocast a node whose kernel reads bf16 heads (bf16_heads: the materialising kernel, the
// bf16 head kernel) keeps them, the products' operands (its backward cannot be differentiated
// again, so nothing else is needed). Otherwise the node keeps the sources instead of the heads
// (Saved's q, k and v left empty, the sources after kSavedCount): the backward splits the heads
// again, one strided copy each, or, under create_graph, with recorded ops so that the second order
// sees how q, k and v depend on the sources. Keeping both would hold each projection twice until
// the backward (3E more per position and layer than the split heads held).
std::vector<Tensor> packed_backward(const AttentionPlan& plan, const PackedLayout& layout, bool merged,
                                    const BackwardContext& c) {
  // q, k, v = the heads of their sources; out = attention(q, k, v), merged with merge_heads: Note [one
  // attention backward]
  std::vector<Tensor> saved(c.saved.begin(), c.saved.begin() + kSavedCount);
  const std::vector<Tensor> sources(c.saved.begin() + kSavedCount, c.saved.end());
  if (std::vector<Tensor> grads = in_place_backward(plan, layout, merged, c); !grads.empty()) return grads;
  Needs needs{};
  for (size_t i = 0; i < needs.size(); ++i) {
    const PackedPlace& at = layout.places[i];
    needs[i] = c.needs_grad[at.source];
    if (!saved[kQ + i].defined())
      saved[kQ + i] = heads_of(sources[at.source], at.slot, layout, sources[at.source].dtype());
  }
  // The output's gradient as heads (N, H, T, d): a merged one split like a source of one slot.
  const Tensor g = merged ? heads_of(c.grad, 0, layout, c.grad.dtype()) : c.grad;
  const std::vector<Tensor> head_grads = node_backward(plan, g, saved, needs);  // (N, H, L, d) each
  std::vector<Tensor> grads(c.needs_grad.size());                               // per source
  for (size_t s = 0; s < grads.size(); ++s) {
    if (!c.needs_grad[s]) continue;
    std::vector<Tensor> slots;
    for (size_t i = 0; i < head_grads.size(); ++i)
      if (layout.places[i].source == s) slots.push_back(head_grads[i]);
    grads[s] = packed_gradient(slots, c.inputs[s].shape, layout);
  }
  return grads;
}

// The bf16 head kernel's forward with its output written merged, (N, T, E), and with its bf16 copy,
// out_proj's operand under autocast (attach_bf16_copy), in the same pass: what the node saves is the
// streaming node's (the output itself is not needed by this kernel's backward).
AttentionForward merged_head_kernel_forward(const std::array<Tensor, 3>& heads, const AttentionOptions& o,
                                            const AttentionPlan& plan, const PackedLayout& layout) {
  Tensor out = empty({plan.B, plan.T, layout.E}, DType::f32);  // (N, T, E)
  const Tensor out_bf16 = empty(out.shape(), DType::bf16);     // (N, T, E)
  const Tensor lse = bf16_head_attention_forward(
      plan, {heads[0], heads[1], heads[2], o.attn_mask, o.key_padding_mask},
      kernels::merged_heads(out.data<float>(), layout.heads, plan.T, plan.dv),
      kernels::merged_heads(&out_bf16.data<BFloat16>()->bits, layout.heads, plan.T, plan.dv));  // (N, H, T)
  attach_bf16_copy(out, out_bf16);
  return {out,
          Tensor(),
          {heads[0], heads[1], heads[2], o.attn_mask, o.key_padding_mask, Tensor(), lse, Tensor(), Tensor()}};
}

Attention packed_attention(const std::vector<Tensor>& sources, const PackedLayout& layout,
                           const AttentionOptions& options, Generator& gen) {
  const Shape q_shape = heads_shape(sources.front(), layout), kv_shape = heads_shape(sources.back(), layout);
  AttentionOptions o = options;  // plan_shapes may take its mask as is_causal
  const AttentionPlan plan = plan_shapes(q_shape, kv_shape, kv_shape, sources.front().dtype(), o);
  // Under autocast the kernels' products read bf16 heads (bf16_heads): the split writes them.
  const DType dtype = bf16_heads(plan) ? DType::bf16 : sources.front().dtype();
  std::array<Tensor, 3> heads;  // q, k, v: (N, H, T|S, d)
  {
    NoGradGuard no_grad;  // copies: the node below records from the sources
    for (size_t i = 0; i < heads.size(); ++i)
      heads[i] = heads_of(sources[layout.places[i].source], layout.places[i].slot, layout, dtype);
  }
  // With merge_heads the bf16 head kernel writes the heads merged; the other kernels' output is
  // merged with recorded ops below.
  const bool merged = o.merge_heads && bf16_head_kernel(plan);
  AttentionForward f = merged ? merged_head_kernel_forward(heads, o, plan, layout)
                              : attention_forward(heads[0], heads[1], heads[2], o, plan, gen);
  if (needs_recording(sources)) {
    if (!bf16_heads(plan)) {  // Note [what the packed node saves]
      std::fill(f.saved.begin() + kQ, f.saved.begin() + kV + 1, Tensor());
      f.saved.insert(f.saved.end(), sources.begin(), sources.end());
    }
    attach_node(f.out,
                {"PackedAttentionBackward",
                 {.bf16 = plan.bf16,
                  .formula = "q, k, v = heads of the packed projections, out = attention(q, k, v)  →  dq, dk, dv as "
                             "scaled_dot_product_attention's, each written in its place of its source's gradient"}},
                sources, f.saved,
                [plan, layout, merged](const BackwardContext& c) { return packed_backward(plan, layout, merged, c); });
  }
  return {o.merge_heads && !merged ? merge_heads(f.out) : f.out, f.weights};
}

void check_packed_source(const char* op, const char* what, const Tensor& source, int64_t slots, int64_t heads) {
  AG_CHECK(heads > 0, "{}: expected a positive number of heads, got {}", op, heads);
  check_floating(op, what, source);
  AG_CHECK(source.dim() == 3 && source.size(2) % (slots * heads) == 0,
           "{}: expected {} of shape (N, L, {}·E) with E a multiple of the {} heads, got shape {}", op, what, slots,
           heads, shape_str(source.shape()));
}

}  // namespace

Attention packed_self_attention(const Tensor& qkv, int64_t heads, const AttentionOptions& o, Generator& gen) {
  check_packed_source("packed_self_attention", "qkv", qkv, 3, heads);
  const PackedLayout layout{heads, qkv.size(2) / 3, {{{0, 0}, {0, 1}, {0, 2}}}};
  return packed_attention({qkv}, layout, o, gen);
}

Attention packed_cross_attention(const Tensor& q, const Tensor& kv, int64_t heads, const AttentionOptions& o,
                                 Generator& gen) {
  check_packed_source("packed_cross_attention", "q", q, 1, heads);
  check_packed_source("packed_cross_attention", "kv", kv, 2, heads);
  check_same_dtype("packed_cross_attention", q, kv);
  AG_CHECK(kv.size(0) == q.size(0) && kv.size(2) == 2 * q.size(2),
           "packed_cross_attention: expected q (N, T, E) and kv (N, S, 2E), got q {} and kv {}", shape_str(q.shape()),
           shape_str(kv.shape()));
  const PackedLayout layout{heads, q.size(2), {{{0, 0}, {1, 0}, {1, 1}}}};
  return packed_attention({q, kv}, layout, o, gen);
}

void register_packed_attention_ops(Registry& registry) {
  // Packed projections, two heads: qkv (N, L, 3E) for self-attention, q (N, T, E) and kv (N, S, 2E) for
  // cross-attention.
  const std::vector<std::vector<Shape>> self_shapes = {{{2, 3, 12}}, {{1, 1, 6}}, {{1, 4, 6}}};
  const std::vector<std::vector<Shape>> cross_shapes = {
      {{2, 3, 4}, {2, 5, 8}}, {{1, 1, 2}, {1, 1, 4}}, {{1, 4, 6}, {1, 2, 12}}};
  auto packed = [](bool causal, double dropout_p = 0, AttentionKernel kernel = AttentionKernel::automatic) {
    return [=](const std::vector<Tensor>& in) {
      Generator gen(11);  // the same dropout mask on every call
      const AttentionOptions o{.is_causal = causal, .dropout_p = dropout_p, .kernel = kernel};
      return in.size() == 1 ? packed_self_attention(in[0], 2, o, gen).output
                            : packed_cross_attention(in[0], in[1], 2, o, gen).output;
    };
  };
  registry.add({"packed_self_attention", packed(false), real_inputs(), self_shapes});
  registry.add({"packed_self_attention_causal", packed(true), real_inputs(), self_shapes});
  registry.add({"packed_cross_attention", packed(false), real_inputs(), cross_shapes});
  const AttentionKernel streaming = AttentionKernel::streaming;
  const std::string split_heads_op =
      "the op above through the streaming kernel, or with dropout: no PyTorch counterpart; "
      "tests/engine/attention_test.cpp checks it equals scaled_dot_product_attention on the split heads";
  registry.add({.name = "packed_self_attention_streaming",
                .fn = packed(true, 0, streaming),
                .make_inputs = real_inputs(),
                .shape_sets = self_shapes,
                .differs_from_pytorch = split_heads_op});
  registry.add({.name = "packed_cross_attention_streaming",
                .fn = packed(false, 0, streaming),
                .make_inputs = real_inputs(),
                .shape_sets = cross_shapes,
                .differs_from_pytorch = split_heads_op});
  registry.add({.name = "packed_self_attention_dropout",
                .fn = packed(true, 0.3),
                .make_inputs = real_inputs(),
                .shape_sets = self_shapes,
                .differs_from_pytorch = split_heads_op});
}

}  // namespace ag
