// The linear layer's kernels: relu?(x @ wᵀ + bias) with its epilogue fused on oneDNN (or the
// product, then one pass for the bias and the activation), and the backward's one pass over the
// output gradient.
#include "engine/kernels/linear.h"

#include <algorithm>
#include <vector>

#include "engine/kernels/bf16.h"
#include "engine/kernels/dnnl_compat.h"
#include "engine/kernels/onednn.h"
#include "engine/kernels/parallel.h"

namespace ag {

namespace {

// out (rows, N) = relu?(x (rows, K) @ wᵀ + bias) on oneDNN, w stored (N, K); false if oneDNN does
// not take this problem.
bool linear_onednn(const Tensor& x, const Tensor& w, const Tensor& bias, Activation activation, Tensor& out) {
  const int64_t rows = x.size(0), K = x.size(1), N = w.size(0);
  const bool bf16 = x.dtype() == DType::bf16;
  const onednn::Dims src_dims{rows, K}, weights_dims{K, N}, weights_strides{1, K}, dst_dims{rows, N};
  const bool relu = activation == Activation::relu;
  onednn::Key key{static_cast<int64_t>(onednn::Op::linear), bf16, bias.defined(), relu, rows, K, N};
  onednn::Primitive* primitive = onednn::cached(std::move(key), rows * K * N, [&] {
    auto operand = [bf16](const onednn::Dims& dims, const onednn::Dims& strides) {
      return bf16 ? onednn::bf16_desc(dims, strides) : onednn::f32_desc(dims, strides);
    };
    const dnnl::memory::desc bias_desc = bias.defined() ? onednn::f32_desc({1, N}) : dnnl::memory::desc();
    return onednn::make_linear(operand(src_dims, contiguous_strides(src_dims)), operand(weights_dims, weights_strides),
                               bias_desc, onednn::f32_desc(dst_dims), relu);
  });
  if (primitive == nullptr) return false;
  onednn::execute(*primitive, {{DNNL_ARG_SRC, x.raw_data()},
                               {DNNL_ARG_WEIGHTS, w.raw_data()},
                               {DNNL_ARG_BIAS, bias.defined() ? bias.raw_data() : nullptr},
                               {DNNL_ARG_DST, out.raw_data()}});
  return true;
}

// The epilogue after a product: out (rows, N) += bias, then relu, in place and in one pass.
template <typename T>
void add_bias_and_activate(T* out, const T* bias, int64_t rows, int64_t N, Activation activation) {
  const bool relu = activation == Activation::relu;
  parallel_for_ranges(rows, N, [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) {
      T* row = out + r * N;
      if (bias != nullptr)
        for (int64_t j = 0; j < N; ++j) row[j] += bias[j];
      if (relu)
        for (int64_t j = 0; j < N; ++j) row[j] = row[j] > 0 ? row[j] : T(0);
    }
  });
}

}  // namespace

Tensor linear_forward(const Tensor& x, const Tensor& w, const Tensor& bias, Activation activation) {
  const MatmulPlan plan = plan_matmul(x, w, false, true);
  const bool onednn_dtype = x.dtype() == DType::f32 || x.dtype() == DType::bf16;
  if (onednn_dtype && plan.m * plan.k * plan.n >= kOneDnnMatmulMin && plan.m > kFewRowsMax) {
    Tensor out = empty(plan.out_shape, DType::f32);
    if (linear_onednn(x, w, bias, activation, out)) return out;
  }
  Tensor out = run_matmul(x, w, plan, 1.0);
  if (!bias.defined() && activation == Activation::none) return out;
  dispatch_floating(out.dtype(), "linear", [&]<typename T>() {
    add_bias_and_activate(out.data<T>(), bias.defined() ? bias.data<T>() : nullptr, plan.m, plan.n, activation);
  });
  return out;
}

namespace {

// One row's columns of linear_output_gradient: gz = g where out > 0 (or g), added to the f64 sums.
[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void output_gradient_row(const float* g,
                                                                                             const float* out,
                                                                                             float* gz, double* sums,
                                                                                             int64_t width) {
  for (int64_t j = 0; j < width; ++j) gz[j] = out && !(out[j] > 0) ? 0.0f : g[j];
  if (sums)
    for (int64_t j = 0; j < width; ++j) sums[j] += gz[j];
}

}  // namespace

LinearOutputGradient linear_output_gradient(const Tensor& g, const Tensor& out, bool bf16, bool bias) {
  const int64_t rows = g.size(0), n = g.size(1);
  LinearOutputGradient result{empty({rows, n}, bf16 ? DType::bf16 : DType::f32), bias ? empty({n}) : Tensor()};
  const float* pg = g.data<float>();
  const float* po = out.defined() ? out.data<float>() : nullptr;
  // Parallel over ranges of columns, each walking the rows in order (sum_kernel's order for a column).
  parallel_for_ranges(n, rows, [&](int64_t begin, int64_t end) {
    const int64_t width = end - begin;
    std::vector<double> sums(bias ? width : 0, 0.0);
    std::vector<float> gz(width);
    for (int64_t r = 0; r < rows; ++r) {
      const float* g_row = pg + r * n + begin;
      const float* out_row = po ? po + r * n + begin : nullptr;
      output_gradient_row(g_row, out_row, gz.data(), bias ? sums.data() : nullptr, width);
      if (bf16) round_to_bf16(gz.data(), result.operand.data<BFloat16>() + r * n + begin, width);
      if (!bf16) std::copy(gz.begin(), gz.end(), result.operand.data<float>() + r * n + begin);
    }
    for (int64_t j = 0; j < static_cast<int64_t>(sums.size()); ++j)
      result.bias.data<float>()[begin + j] = static_cast<float>(sums[j]);
  });
  return result;
}

}  // namespace ag
