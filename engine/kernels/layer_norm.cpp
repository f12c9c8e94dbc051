// layer_norm's kernels: the forward on oneDNN or in reference loops (in double), and the backward in
// one pass of our own: dx per row, dw and db summed in double.
#include "engine/kernels/layer_norm.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <utility>

#include "engine/kernels/dnnl_compat.h"
#include "engine/kernels/onednn.h"
#include "engine/kernels/parallel.h"
#include "engine/kernels/reduce.h"

namespace ag {

namespace {

// 1 / sqrt(var + eps) from a stored variance, in T, as oneDNN's forward computes it (a square root
// and a division: a powf per row cost 0.6% of a charlm step).
template <typename T>
T rstd_of(T variance, double eps) {
  return T(1) / std::sqrt(variance + static_cast<T>(eps));
}

// The reference kernel: out, mean and variance per row of (rows, cols), statistics in double.
void layer_norm_reference(const NormProblem& p, const Tensor& x, const Tensor& weight, const Tensor& bias,
                          LayerNormForward& f) {
  dispatch_floating(x.dtype(), "layer_norm", [&]<typename T>() {
    const T* px = x.data<T>();
    const T* pw = weight.defined() ? weight.data<T>() : nullptr;
    const T* pb = bias.defined() ? bias.data<T>() : nullptr;
    T* po = f.out.data<T>();
    T* pm = f.mean.data<T>();
    T* pv = f.variance.data<T>();
    const int64_t cols = p.cols;
    parallel_for(p.rows, 4 * cols, [&](int64_t r) {
      const T* row = px + r * cols;
      double mean = 0;
      for (int64_t j = 0; j < cols; ++j) mean += row[j];
      mean /= static_cast<double>(cols);
      double var = 0;  // biased, two passes: no cancellation for large means
      for (int64_t j = 0; j < cols; ++j) var += (row[j] - mean) * (row[j] - mean);
      var /= static_cast<double>(cols);
      const double rstd = 1.0 / std::sqrt(var + p.eps);
      pm[r] = static_cast<T>(mean);
      pv[r] = static_cast<T>(var);
      T* orow = po + r * cols;
      for (int64_t j = 0; j < cols; ++j) {
        double v = (row[j] - mean) * rstd;  // xhat
        if (pw) v *= pw[j];
        if (pb) v += pb[j];
        orow[j] = static_cast<T>(v);
      }
    });
  });
}

// One row's share of dw and db: sum_w += g ⊙ (x - mean) · rstd and sum_b += g over n columns
// (vectorised per CPU: the engine is built for baseline x86-64).
template <typename T>
void add_affine_row_of(const T* g, const T* x, double mean, double rstd, double* sum_w, double* sum_b, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    const double gv = g[j];
    sum_w[j] += gv * (x[j] - mean) * rstd;
    sum_b[j] += gv;
  }
}

[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void add_affine_row(const float* g, const float* x,
                                                                                        double mean, double rstd,
                                                                                        double* sum_w, double* sum_b,
                                                                                        int64_t n) {
  add_affine_row_of(g, x, mean, rstd, sum_w, sum_b, n);
}

[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void add_affine_row(const double* g,
                                                                                        const double* x, double mean,
                                                                                        double rstd, double* sum_w,
                                                                                        double* sum_b, int64_t n) {
  add_affine_row_of(g, x, mean, rstd, sum_w, sum_b, n);
}

// Eight T side by side, as GCC's vector extension (the type of `vector_size` cannot be a template's T).
template <typename T>
struct EightOf;
template <>
struct EightOf<float> {
  using type = float __attribute__((vector_size(32)));
};
template <>
struct EightOf<double> {
  using type = double __attribute__((vector_size(64)));
};

// One row of dx = rstd (h − mean(h) − xhat mean(h xhat)), h = w g (or g), xhat = (x − mean) rstd,
// all in double (in T the cancellation in the bracket costs up to 5× PyTorch's f32 error: the
// parity suite), the row's two sums in eight lanes added in a fixed order (lanes_total): vectors of
// eight, so every CPU and clone gives the same bits.
template <typename T, bool kScale>
[[gnu::always_inline]] inline void input_gradient_row_of(const T* __restrict g, const T* __restrict x,
                                                         const T* __restrict w, double mean, double rstd,
                                                         T* __restrict dx, int64_t n) {
  constexpr int64_t kLanes = 8;
  using Lanes = typename EightOf<T>::type;
  using Doubles = EightOf<double>::type;
  const auto h = [&](int64_t j) { return kScale ? static_cast<double>(g[j]) * w[j] : static_cast<double>(g[j]); };
  const auto xhat = [&](int64_t j) { return (x[j] - mean) * rstd; };
  Doubles sum_h = {}, sum_hx = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    Lanes gv, xv, wv;
    std::memcpy(&gv, g + j, sizeof(gv));
    std::memcpy(&xv, x + j, sizeof(xv));
    Doubles hv = __builtin_convertvector(gv, Doubles);
    if constexpr (kScale) {  // h = w g
      std::memcpy(&wv, w + j, sizeof(wv));
      hv *= __builtin_convertvector(wv, Doubles);
    }
    sum_h += hv;
    sum_hx += hv * ((__builtin_convertvector(xv, Doubles) - mean) * rstd);
  }
  for (int64_t l = 0; j < n; ++j, ++l) sum_h[l] += h(j), sum_hx[l] += h(j) * xhat(j);
  const double mean_h = lanes_total(sum_h) / static_cast<double>(n),
               mean_hx = lanes_total(sum_hx) / static_cast<double>(n);
  for (j = 0; j < n; ++j) dx[j] = static_cast<T>(rstd * (h(j) - mean_h - xhat(j) * mean_hx));
}

template <typename T>
[[gnu::always_inline]] inline void input_gradient_row_in(const T* g, const T* x, const T* w, double mean, double rstd,
                                                         T* dx, int64_t n) {
  if (w != nullptr) return input_gradient_row_of<T, true>(g, x, w, mean, rstd, dx, n);
  input_gradient_row_of<T, false>(g, x, w, mean, rstd, dx, n);
}
[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void input_gradient_row(
    const float* g, const float* x, const float* w, double mean, double rstd, float* dx, int64_t n) {
  input_gradient_row_in(g, x, w, mean, rstd, dx, n);
}
[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void input_gradient_row(
    const double* g, const double* x, const double* w, double mean, double rstd, double* dx, int64_t n) {
  input_gradient_row_in(g, x, w, mean, rstd, dx, n);
}

// Below this many elements the loops beat oneDNN's ~1 µs per call (tools/bench: BM_LayerNorm).
constexpr int64_t kOneDnnLayerNormMin = 1;
// oneDNN 2.6 sums a row's statistics in f32: past this many normalised elements it falls behind
// PyTorch's f32 accuracy (7× at 1,240: tests/engine/parity_test.cpp), so longer rows take the
// reference kernel, whose statistics are in double.
constexpr int64_t kOneDnnLayerNormMaxCols = 512;

// Whether the problem goes to oneDNN (which may still refuse it).
bool onednn_takes(const NormProblem& p, const Tensor& x) {
  return x.dtype() == DType::f32 && x.numel() >= kOneDnnLayerNormMin && p.cols <= kOneDnnLayerNormMaxCols;
}

// Everything a layer_norm primitive depends on, as the primitive cache's key.
onednn::Key norm_key(const NormProblem& p, onednn::Op op) {
  return {
      static_cast<int64_t>(op), p.rows, p.cols, p.scale, p.shift, std::bit_cast<int32_t>(static_cast<float>(p.eps))};
}

// out, mean and variance (rows) on oneDNN; false if oneDNN does not take it.
bool layer_norm_forward_onednn(const NormProblem& p, const Tensor& x, const Tensor& w, const Tensor& b,
                               LayerNormForward& f) {
  onednn::Primitive* primitive = onednn::cached(norm_key(p, onednn::Op::layer_norm_forward), p.rows * p.cols, [&] {
    return onednn::make_layer_norm_forward(onednn::f32_desc({p.rows, p.cols}), static_cast<float>(p.eps), p.scale,
                                           p.shift);
  });
  if (primitive == nullptr) return false;
  onednn::execute(*primitive, {{DNNL_ARG_SRC, x.data<float>()},
                               {DNNL_ARG_DST, f.out.data<float>()},
                               {DNNL_ARG_MEAN, f.mean.data<float>()},
                               {DNNL_ARG_VARIANCE, f.variance.data<float>()},
                               {DNNL_ARG_SCALE, p.scale ? w.data<float>() : nullptr},
                               {DNNL_ARG_SHIFT, p.shift ? b.data<float>() : nullptr}});
  return true;
}

}  // namespace

LayerNormForward layer_norm_forward(const NormProblem& p, const Tensor& x, const Tensor& weight, const Tensor& bias,
                                    const Shape& stat_shape) {
  LayerNormForward f{empty(x.shape(), x.dtype()), empty(stat_shape, x.dtype()), empty(stat_shape, x.dtype())};
  if (!(onednn_takes(p, x) && layer_norm_forward_onednn(p, x, weight, bias, f)))
    layer_norm_reference(p, x, weight, bias, f);
  return f;
}

// The backward in one pass over x and g: each row's dx, and dw = Σ_rows g ⊙ xhat, db = Σ_rows g summed
// in double in row blocks (Note [column sums in row blocks]: deterministic, the rows split between
// threads). oneDNN 2.6 sums dw and db in f32, up to 6× behind PyTorch's accuracy
// (tests/engine/parity_test.cpp), and its backward computed them even when only dx was taken.
std::array<Tensor, 3> layer_norm_backward_data(const NormProblem& p, const Tensor& g, const Tensor& x,
                                               const Tensor& weight, const Tensor& mean, const Tensor& variance,
                                               std::array<bool, 3> wanted) {
  const int64_t rows = p.rows, cols = p.cols;
  std::array<Tensor, 3> grads;
  if (wanted[0]) grads[0] = empty(x.shape(), x.dtype());
  const bool affine = wanted[1] || wanted[2];
  dispatch_floating(x.dtype(), "layer_norm_backward", [&]<typename T>() {
    const T *px = x.data<T>(), *pg = g.data<T>(), *pm = mean.data<T>(), *pv = variance.data<T>();
    const T* pw = weight.defined() ? weight.data<T>() : nullptr;
    T* pd = wanted[0] ? grads[0].data<T>() : nullptr;
    // Without dw and db the blocks sum no columns and only compute dx.
    const std::vector<double> sums = column_sums_in_row_blocks(
        1, rows, affine ? cols : 0, 2, 8 * cols,
        [&](int64_t, int64_t first, int64_t last, int64_t begin, int64_t end, double* s) {
          for (int64_t r = first; r < last; ++r) {
            const T rstd = rstd_of(pv[r], p.eps);
            if (pd != nullptr && begin == 0)  // the whole row, once (a row wider than a chunk has several)
              input_gradient_row(pg + r * cols, px + r * cols, pw, pm[r], rstd, pd + r * cols, cols);
            if (affine)
              add_affine_row(pg + r * cols + begin, px + r * cols + begin, pm[r], rstd, s + begin, s + cols + begin,
                             end - begin);
          }
        });
    for (int64_t k = 1; k <= 2; ++k)
      if (wanted[k]) {
        grads[k] = empty({cols}, x.dtype());
        std::transform(sums.begin() + (k - 1) * cols, sums.begin() + k * cols, grads[k].data<T>(),
                       [](double v) { return static_cast<T>(v); });
      }
  });
  return grads;
}

}  // namespace ag
