// layer_norm's kernels: the reference loops (in double), the oneDNN forward and backward, and the
// affine gradients summed in double.
#include "engine/kernels/layer_norm.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <utility>

#include "engine/kernels/dnnl_compat.h"
#include "engine/kernels/onednn.h"
#include "engine/kernels/parallel.h"
#include "engine/kernels/reduce.h"

namespace ag {

namespace {

// 1 / sqrt(var + eps) from a stored variance, in T: every kernel below computes it this one way.
template <typename T>
T rstd_of(T variance, double eps) {
  return std::pow(variance + static_cast<T>(eps), static_cast<T>(-0.5));
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

// The reference backward's dx per row of (rows, cols), in double:
// dx = rstd (h − mean(h) − xhat mean(h xhat)), h = w g.
void layer_norm_backward_reference(const NormProblem& p, const Tensor& g, const Tensor& x, const Tensor& weight,
                                   const Tensor& mean, const Tensor& variance, Tensor& dx) {
  dispatch_floating(x.dtype(), "layer_norm_backward", [&]<typename T>() {
    const T *px = x.data<T>(), *pg = g.data<T>(), *pm = mean.data<T>(), *pv = variance.data<T>();
    const T* pw = weight.defined() ? weight.data<T>() : nullptr;
    T* pd = dx.data<T>();
    const int64_t cols = p.cols;
    parallel_for(p.rows, 6 * cols, [&](int64_t r) {
      const T *xr = px + r * cols, *gr = pg + r * cols;
      const double m = pm[r], s = rstd_of(pv[r], p.eps);
      const auto h = [&](int64_t j) { return pw ? double(gr[j]) * pw[j] : double(gr[j]); };
      double sum_h = 0, sum_hx = 0;
      for (int64_t j = 0; j < cols; ++j) sum_h += h(j), sum_hx += h(j) * (xr[j] - m) * s;
      const double mean_h = sum_h / static_cast<double>(cols), mean_hx = sum_hx / static_cast<double>(cols);
      for (int64_t j = 0; j < cols; ++j)
        pd[r * cols + j] = static_cast<T>(s * (h(j) - mean_h - (xr[j] - m) * s * mean_hx));
    });
  });
}

// One row's share of affine_grads: sum_w += g ⊙ (x - mean) · rstd and sum_b += g over n columns
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

// dw = Σ_rows g ⊙ xhat and db = Σ_rows g, (cols) each, for x and g of (rows, cols), summed in double
// in row blocks (Note [column sums in row blocks]: deterministic, the rows split between threads).
// oneDNN 2.6 sums them in f32, up to 6× behind PyTorch's accuracy (tests/engine/parity_test.cpp).
std::pair<Tensor, Tensor> affine_grads(const NormProblem& p, const Tensor& x, const Tensor& g, const Tensor& mean,
                                       const Tensor& variance) {
  const int64_t rows = p.rows, cols = p.cols;
  Tensor dw = empty({cols}, x.dtype()), db = empty({cols}, x.dtype());
  dispatch_floating(x.dtype(), "layer_norm_backward", [&]<typename T>() {
    const T *px = x.data<T>(), *pg = g.data<T>(), *pm = mean.data<T>(), *pv = variance.data<T>();
    const std::vector<double> sums = column_sums_in_row_blocks(
        1, rows, cols, 2, 3 * cols, [&](int64_t, int64_t first, int64_t last, int64_t begin, int64_t end, double* s) {
          for (int64_t r = first; r < last; ++r)
            add_affine_row(pg + r * cols + begin, px + r * cols + begin, pm[r], rstd_of(pv[r], p.eps), s + begin,
                           s + cols + begin, end - begin);
        });
    std::transform(sums.begin(), sums.begin() + cols, dw.data<T>(), [](double v) { return static_cast<T>(v); });
    std::transform(sums.begin() + cols, sums.end(), db.data<T>(), [](double v) { return static_cast<T>(v); });
  });
  return {dw, db};
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

// dx on oneDNN; false if oneDNN does not take it. (Its dw and db, summed in f32, are dropped: affine_grads.)
bool layer_norm_backward_onednn(const NormProblem& p, const Tensor& x, const Tensor& w, const Tensor& mean,
                                const Tensor& variance, const Tensor& g, Tensor& dx) {
  onednn::Primitive* primitive = onednn::cached(norm_key(p, onednn::Op::layer_norm_backward), p.rows * p.cols, [&] {
    return onednn::make_layer_norm_backward(onednn::f32_desc({p.rows, p.cols}), static_cast<float>(p.eps), p.scale,
                                            p.shift);
  });
  if (primitive == nullptr) return false;
  const Tensor dw = p.scale ? empty({p.cols}) : Tensor(), db = p.shift ? empty({p.cols}) : Tensor();
  onednn::execute(*primitive, {{DNNL_ARG_SRC, x.data<float>()},
                               {DNNL_ARG_DIFF_DST, g.data<float>()},
                               {DNNL_ARG_MEAN, mean.data<float>()},
                               {DNNL_ARG_VARIANCE, variance.data<float>()},
                               {DNNL_ARG_DIFF_SRC, dx.data<float>()},
                               {DNNL_ARG_SCALE, p.scale ? w.data<float>() : nullptr},
                               {DNNL_ARG_DIFF_SCALE, p.scale ? dw.data<float>() : nullptr},
                               {DNNL_ARG_SHIFT, p.shift ? db.data<float>() : nullptr},  // unread
                               {DNNL_ARG_DIFF_SHIFT, p.shift ? db.data<float>() : nullptr}});
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

std::array<Tensor, 3> layer_norm_backward_data(const NormProblem& p, const Tensor& g, const Tensor& x,
                                               const Tensor& weight, const Tensor& mean, const Tensor& variance,
                                               std::array<bool, 3> wanted) {
  std::array<Tensor, 3> grads;
  if (wanted[0]) {
    grads[0] = empty(x.shape(), x.dtype());
    if (!(onednn_takes(p, x) && layer_norm_backward_onednn(p, x, weight, mean, variance, g, grads[0])))
      layer_norm_backward_reference(p, g, x, weight, mean, variance, grads[0]);
  }
  if (wanted[1] || wanted[2]) {
    auto [dw, db] = affine_grads(p, x, g, mean, variance);
    if (wanted[1]) grads[1] = dw;
    if (wanted[2]) grads[2] = db;
  }
  return grads;
}

}  // namespace ag
