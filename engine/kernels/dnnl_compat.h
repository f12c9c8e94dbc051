// Every oneDNN primitive-descriptor construction of attograd, in one place. oneDNN 3.x drops
// the op descriptors (`matmul::desc` …) and moves output scales to runtime arguments, so a move
// to 3.x rewrites this file only. Each maker returns the primitive with the memory descriptors of
// its arguments; engine/kernels/onednn.h caches and runs them.
#pragma once

#include <dnnl.hpp>
#include <string>
#include <utility>
#include <vector>

namespace ag::onednn {

using Dims = dnnl::memory::dims;

// A built primitive: what runs, which oneDNN implementation it chose, and its arguments
// (DNNL_ARG_* id and memory descriptor; the data pointers are bound per call).
struct Built {
  dnnl::primitive primitive;
  std::string impl;
  std::vector<std::pair<int, dnnl::memory::desc>> args;
};

inline const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// Every primitive takes its scratchpad from its caller: engine/kernels/onednn.cpp gives each thread one buffer.
// oneDNN 2.6's own (scratchpad_mode::library) is per thread but freed after every call on a thread that built
// no primitive, an OpenMP worker: two threads each running a one-thread primitive paid an allocation per
// call and ran about 3x slower than one thread alone (tools/bench/README.md, "Products split by thread").
inline dnnl::primitive_attr caller_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// A built primitive from its descriptor and the memory descriptors of its data arguments, with the
// scratchpad argument when it needs one.
template <typename Primitive, typename Desc>
Built built_from(const Desc& pd, std::vector<std::pair<int, dnnl::memory::desc>> args) {
  const dnnl::memory::desc scratchpad = pd.scratchpad_desc();
  if (scratchpad.get_size() > 0) args.emplace_back(DNNL_ARG_SCRATCHPAD, scratchpad);
  return {Primitive(pd), pd.impl_info_str(), std::move(args)};
}

inline dnnl::memory::desc f32_desc(const Dims& dims, const Dims& strides) {
  return {dims, dnnl::memory::data_type::f32, strides};
}

inline dnnl::memory::desc bf16_desc(const Dims& dims, const Dims& strides) {
  return {dims, dnnl::memory::data_type::bf16, strides};
}

inline dnnl::memory::desc f32_desc(const Dims& dims) {
  Dims strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return f32_desc(dims, strides);
}

// dst = scale · (src @ weights); strides carry transposition and batch broadcasting. src and
// weights f32, or both bf16 (with an f32 dst: f32 accumulation).
inline Built make_matmul(const dnnl::memory::desc& src, const dnnl::memory::desc& weights,
                         const dnnl::memory::desc& dst, float scale) {
  dnnl::primitive_attr attr = caller_scratchpad();
  if (scale != 1.0f) attr.set_output_scales(0, {scale});
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, weights, dst), attr, cpu_engine());
  return built_from<dnnl::matmul>(pd, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}});
}

// The residual's argument in make_linear: the binary post-op's second source (after a ReLU's eltwise
// when there is one).
inline int linear_residual_arg(bool relu) { return DNNL_ARG_ATTR_MULTIPLE_POST_OP(relu ? 1 : 0) | DNNL_ARG_SRC_1; }

// dst = relu?(src @ weights + bias) (+ residual): a Linear layer's product with its epilogue, the bias
// (1, N) f32 added to the f32 accumulator, the ReLU as an eltwise post-op and, when its desc is not
// zero, the residual (dst's shape, f32) as a binary add post-op. src and weights f32, or both bf16,
// dst f32.
inline Built make_linear(const dnnl::memory::desc& src, const dnnl::memory::desc& weights,
                         const dnnl::memory::desc& bias, const dnnl::memory::desc& dst, bool relu,
                         const dnnl::memory::desc& residual = {}) {
  dnnl::primitive_attr attr = caller_scratchpad();
  dnnl::post_ops post_ops;
  if (relu) post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  if (!residual.is_zero()) post_ops.append_binary(dnnl::algorithm::binary_add, residual);
  attr.set_post_ops(post_ops);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, weights, bias, dst), attr, cpu_engine());
  std::vector<std::pair<int, dnnl::memory::desc>> args{
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}};
  if (!bias.is_zero()) args.emplace_back(DNNL_ARG_BIAS, bias);
  if (!residual.is_zero()) args.emplace_back(linear_residual_arg(relu), residual);
  return built_from<dnnl::matmul>(pd, std::move(args));
}

// softmax over `axis` of a dense tensor, inference (we keep the output ourselves). No
// log_softmax: oneDNN 2.6's loses accuracy (engine/ops/softmax.cpp).
inline Built make_softmax(const dnnl::memory::desc& data, int axis) {
  const auto prop = dnnl::prop_kind::forward_inference;
  const dnnl::softmax_forward::primitive_desc pd(dnnl::softmax_forward::desc(prop, data, axis), caller_scratchpad(),
                                                 cpu_engine());
  return built_from<dnnl::softmax_forward>(pd, {{DNNL_ARG_SRC, data}, {DNNL_ARG_DST, data}});
}

inline dnnl::normalization_flags layer_norm_flags(bool scale, bool shift) {
  auto flags = dnnl::normalization_flags::none;
  if (scale) flags |= dnnl::normalization_flags::use_scale;
  if (shift) flags |= dnnl::normalization_flags::use_shift;
  return flags;
}

inline dnnl::layer_normalization_forward::primitive_desc layer_norm_forward_pd(const dnnl::memory::desc& data,
                                                                               float eps, bool scale, bool shift) {
  const dnnl::memory::desc stats = f32_desc({data.dims()[0]});
  return {dnnl::layer_normalization_forward::desc(dnnl::prop_kind::forward_training, data, stats, eps,
                                                  layer_norm_flags(scale, shift)),
          caller_scratchpad(), cpu_engine()};
}

// Layer norm over the last dim of a (rows, cols) tensor; writes mean and variance (rows).
inline Built make_layer_norm_forward(const dnnl::memory::desc& data, float eps, bool scale, bool shift) {
  const auto pd = layer_norm_forward_pd(data, eps, scale, shift);
  const dnnl::memory::desc stats = f32_desc({data.dims()[0]});
  const dnnl::memory::desc affine = f32_desc({data.dims()[1]});
  std::vector<std::pair<int, dnnl::memory::desc>> args{
      {DNNL_ARG_SRC, data}, {DNNL_ARG_DST, data}, {DNNL_ARG_MEAN, stats}, {DNNL_ARG_VARIANCE, stats}};
  if (scale) args.emplace_back(DNNL_ARG_SCALE, affine);
  if (shift) args.emplace_back(DNNL_ARG_SHIFT, affine);
  return built_from<dnnl::layer_normalization_forward>(pd, std::move(args));
}

}  // namespace ag::onednn
