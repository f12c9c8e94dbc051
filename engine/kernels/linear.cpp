// The linear layer's kernels: relu?(x @ wᵀ + bias) with its epilogue fused on oneDNN (or the
// product, then one pass for the bias and the activation), and the backward's one pass over the
// output gradient.
#include "engine/kernels/linear.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "engine/kernels/bf16.h"
#include "engine/kernels/check.h"
#include "engine/kernels/dnnl_compat.h"
#include "engine/kernels/onednn.h"
#include "engine/kernels/parallel.h"
#include "engine/kernels/reduce.h"

namespace ag {

namespace {

// out (rows, N) = relu?(x (rows, K) @ wᵀ + bias) (+ residual, rows of N) on oneDNN, w stored (N, K), x,
// out and the residual contiguous rows; false if oneDNN does not take this problem.
bool linear_primitive(const void* x, const Tensor& w, const Tensor& bias, Activation activation, int64_t rows,
                      bool bf16, const float* residual, float* out) {
  const int64_t K = w.size(1), N = w.size(0);
  const onednn::Dims src_dims{rows, K}, weights_dims{K, N}, weights_strides{1, K}, dst_dims{rows, N};
  const bool relu = activation == Activation::relu;
  onednn::Key key{
      static_cast<int64_t>(onednn::Op::linear), bf16, bias.defined(), relu, residual != nullptr, rows, K, N};
  onednn::Primitive* primitive = onednn::cached(std::move(key), rows * K * N, [&] {
    auto operand = [bf16](const onednn::Dims& dims, const onednn::Dims& strides) {
      return bf16 ? onednn::bf16_desc(dims, strides) : onednn::f32_desc(dims, strides);
    };
    const dnnl::memory::desc bias_desc = bias.defined() ? onednn::f32_desc({1, N}) : dnnl::memory::desc();
    return onednn::make_linear(operand(src_dims, contiguous_strides(src_dims)), operand(weights_dims, weights_strides),
                               bias_desc, onednn::f32_desc(dst_dims), relu,
                               residual ? onednn::f32_desc(dst_dims) : dnnl::memory::desc());
  });
  if (primitive == nullptr) return false;
  onednn::execute(*primitive, {{DNNL_ARG_SRC, x},
                               {DNNL_ARG_WEIGHTS, w.raw_data()},
                               {DNNL_ARG_BIAS, bias.defined() ? bias.raw_data() : nullptr},
                               {onednn::linear_residual_arg(relu), residual},
                               {DNNL_ARG_DST, out}});
  return true;
}

// linear_primitive over x's rows, shared out by thread when that pays (Note [products split by
// thread], matmul.h).
bool linear_onednn(const Tensor& x, const Tensor& w, const Tensor& bias, Activation activation, const Tensor& residual,
                   Tensor& out) {
  const int64_t rows = x.size(0), K = x.size(1), N = w.size(0);
  const bool bf16 = x.dtype() == DType::bf16;
  const auto* x_bytes = static_cast<const char*>(x.raw_data());
  const float* pr = residual.defined() ? residual.data<float>() : nullptr;
  float* po = out.data<float>();
  if (!products_split_by_thread(rows, 16, rows * K * N))
    return linear_primitive(x_bytes, w, bias, activation, rows, bf16, pr, po);
  const int64_t element = bf16 ? 2 : 4;
  return shares_by_thread(rows, 16, [&](int64_t first, int64_t last) {
    return linear_primitive(x_bytes + first * K * element, w, bias, activation, last - first, bf16,
                            pr ? pr + first * N : nullptr, po + first * N);
  });
}

// The epilogue after a product: out (rows, N) += bias, then relu, then += residual, in place and in
// one pass.
template <typename T>
void add_bias_and_activate(T* out, const T* bias, int64_t rows, int64_t N, Activation activation, const T* residual) {
  const bool relu = activation == Activation::relu;
  parallel_for_ranges(rows, N, [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) {
      T* row = out + r * N;
      if (bias != nullptr)
        for (int64_t j = 0; j < N; ++j) row[j] += bias[j];
      if (relu)
        for (int64_t j = 0; j < N; ++j) row[j] = row[j] > 0 ? row[j] : T(0);
      if (residual != nullptr)
        for (int64_t j = 0; j < N; ++j) row[j] += residual[r * N + j];
    }
  });
}

}  // namespace

Tensor linear_forward(const Tensor& x, const Tensor& w, const Tensor& bias, Activation activation,
                      const Tensor& residual) {
  AG_CHECK(activation != Activation::gelu, "linear_forward: expected no activation or relu, got gelu");
  const MatmulPlan plan = plan_matmul(x, w, false, true);
  const DType out_dtype = x.dtype() == DType::bf16 ? DType::f32 : x.dtype();
  AG_CHECK(!residual.defined() || (residual.shape() == plan.out_shape && residual.dtype() == out_dtype),
           "linear_forward: expected a residual of the result's shape {} and dtype {}, got {} {}",
           shape_str(plan.out_shape), dtype_name(out_dtype), shape_str(residual.shape()), dtype_name(residual.dtype()));
  const bool onednn_dtype = x.dtype() == DType::f32 || x.dtype() == DType::bf16;
  if (onednn_dtype && plan.m * plan.k * plan.n >= kOneDnnMatmulMin && plan.m > kFewRowsMax) {
    Tensor out = empty(plan.out_shape, DType::f32);
    if (linear_onednn(x, w, bias, activation, residual, out)) return out;
  }
  Tensor out = run_matmul(x, w, plan, 1.0);
  if (!bias.defined() && activation == Activation::none && !residual.defined()) return out;
  dispatch_floating(out.dtype(), "linear", [&]<typename T>() {
    add_bias_and_activate(out.data<T>(), bias.defined() ? bias.data<T>() : nullptr, plan.m, plan.n, activation,
                          residual.defined() ? residual.data<T>() : nullptr);
  });
  return out;
}

namespace {

// What multiplies g in linear_output_gradient: nothing, a ReLU's mask (g · scale where the saved
// output > 0), or a GELU's saved derivative (g · gelu′(z)).
enum class Factor { none, relu_mask, derivative };

// One row's columns of linear_output_gradient in one loop: gz = g times its factor, written as the
// operand (rounded to bf16, or f32) and added to the f64 sums. A template per case, so each loop is
// branch-free and vectorised.
template <Factor kFactor, bool kSums, typename Out>
[[gnu::always_inline]] inline void output_gradient_row(const float* __restrict g, const float* __restrict saved,
                                                       Out* __restrict gz, double* __restrict sums, int64_t width,
                                                       float scale) {
  for (int64_t j = 0; j < width; ++j) {
    float v = g[j];
    if constexpr (kFactor == Factor::relu_mask) {
      // g read whatever out is: read only where out > 0, its vector load waited on out's compare
      // (a masked load, 3.5% of a bf16 Transformer step on the one relu layer's pass)
      const float scaled = g[j] * scale;
      v = saved[j] > 0 ? scaled : 0.0f;
    }
    if constexpr (kFactor == Factor::derivative) v = g[j] * saved[j];
    if constexpr (kSums) sums[j] += v;
    if constexpr (std::is_same_v<Out, uint16_t>) gz[j] = bf16_bits_from_f32(v);
    if constexpr (std::is_same_v<Out, float>) gz[j] = v;
  }
}

// The rows [first, last) of columns [begin, end) (g's, saved's and gz's rows n wide), each row's gz
// added to sums (end − begin of them) when given.
template <Factor kFactor, bool kSums, typename Out>
[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void output_gradient_rows(
    const float* g, const float* saved, Out* gz, double* sums, int64_t n, int64_t first, int64_t last, int64_t begin,
    int64_t end, float scale) {
  for (int64_t r = first; r < last; ++r)
    output_gradient_row<kFactor, kSums>(g + r * n + begin, kFactor != Factor::none ? saved + r * n + begin : nullptr,
                                        gz + r * n + begin, sums, end - begin, scale);
}

template <typename Out>
void output_gradient_rows(Factor factor, const float* g, const float* saved, Out* gz, double* sums, int64_t n,
                          int64_t first, int64_t last, int64_t begin, int64_t end, float scale) {
  const auto run = [&]<Factor kFactor>() {
    if (sums != nullptr)
      return output_gradient_rows<kFactor, true, Out>(g, saved, gz, sums, n, first, last, begin, end, scale);
    output_gradient_rows<kFactor, false, Out>(g, saved, gz, sums, n, first, last, begin, end, scale);
  };
  switch (factor) {
    case Factor::none:
      return run.template operator()<Factor::none>();
    case Factor::relu_mask:
      return run.template operator()<Factor::relu_mask>();
    case Factor::derivative:
      return run.template operator()<Factor::derivative>();
  }
}

}  // namespace

LinearOutputGradient linear_output_gradient(const Tensor& g, const Tensor& saved, Activation activation, bool bf16,
                                            bool bias, double relu_scale) {
  const int64_t rows = g.size(0), n = g.size(1);
  LinearOutputGradient result{empty({rows, n}, bf16 ? DType::bf16 : DType::f32), bias ? empty({n}) : Tensor()};
  const float* pg = g.data<float>();
  const float* ps = activation != Activation::none ? saved.data<float>() : nullptr;
  const Factor factor = activation == Activation::relu   ? Factor::relu_mask
                        : activation == Activation::gelu ? Factor::derivative
                                                         : Factor::none;
  const auto scale = static_cast<float>(relu_scale);
  const auto pass = [&](int64_t first, int64_t last, int64_t begin, int64_t end, double* sums) {
    if (bf16)
      output_gradient_rows(factor, pg, ps, reinterpret_cast<uint16_t*>(result.operand.data<BFloat16>()), sums, n, first,
                           last, begin, end, scale);
    else
      output_gradient_rows(factor, pg, ps, result.operand.data<float>(), sums, n, first, last, begin, end, scale);
  };
  if (!bias) {  // each element on its own: ranges of rows, each thread's memory contiguous
    parallel_for_ranges(rows, n, [&](int64_t first, int64_t last) { pass(first, last, 0, n, nullptr); });
    return result;
  }
  // Note [column sums in row blocks], as sum_kernel sums gz down its rows.
  const std::vector<double> sums = column_sums_in_row_blocks(
      1, rows, n, 1, n, [&](int64_t, int64_t first, int64_t last, int64_t begin, int64_t end, double* block_sums) {
        pass(first, last, begin, end, block_sums + begin);
      });
  std::transform(sums.begin(), sums.end(), result.bias.data<float>(), [](double v) { return static_cast<float>(v); });
  return result;
}

}  // namespace ag
