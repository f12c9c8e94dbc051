// layer_norm's kernels: the reference loops (statistics in double), the oneDNN forward and
// backward, and the affine gradients summed in double.
#include "engine/kernels/layer_norm.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <utility>

#include "engine/kernels/dnnl_compat.h"
#include "engine/kernels/onednn.h"
#include "engine/kernels/parallel.h"

namespace ag {

namespace {

// The reference kernel: out, mean and rstd per row of (rows, cols), statistics in double.
void layer_norm_reference(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, int64_t rows,
                          int64_t cols, Tensor& out, Tensor& mean_t, Tensor& rstd_t) {
  dispatch_floating(x.dtype(), "layer_norm", [&]<typename T>() {
    const T* px = x.data<T>();
    const T* pw = weight.defined() ? weight.data<T>() : nullptr;
    const T* pb = bias.defined() ? bias.data<T>() : nullptr;
    T* po = out.data<T>();
    T* pm = mean_t.data<T>();
    T* pr = rstd_t.data<T>();
    parallel_for(rows, 4 * cols, [&](int64_t r) {
      const T* row = px + r * cols;
      double mean = 0;
      for (int64_t j = 0; j < cols; ++j) mean += row[j];
      mean /= static_cast<double>(cols);
      double var = 0;  // biased, two passes: no cancellation for large means
      for (int64_t j = 0; j < cols; ++j) var += (row[j] - mean) * (row[j] - mean);
      var /= static_cast<double>(cols);
      const double rstd = 1.0 / std::sqrt(var + eps);
      pm[r] = static_cast<T>(mean);
      pr[r] = static_cast<T>(rstd);
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

// dw = Σ_rows g ⊙ xhat and db = Σ_rows g, (cols) each, for f32 x and g of (rows, cols), summed in
// double in row order (deterministic). oneDNN 2.6 sums them in f32, up to 6× behind PyTorch's
// accuracy (tests/engine/parity_test.cpp). Parallel over blocks of columns.
std::pair<Tensor, Tensor> affine_grads(const Tensor& x, const Tensor& g, const Tensor& mean, const Tensor& rstd,
                                       int64_t rows, int64_t cols) {
  Tensor dw = empty({cols}), db = empty({cols});
  const float *px = x.data<float>(), *pg = g.data<float>(), *pm = mean.data<float>(), *pr = rstd.data<float>();
  float *pw = dw.data<float>(), *pb = db.data<float>();
  constexpr int64_t kBlock = 64;
  parallel_for((cols + kBlock - 1) / kBlock, 3 * rows * kBlock, [&](int64_t block) {
    const int64_t j0 = block * kBlock, j1 = std::min(cols, j0 + kBlock);
    double sum_w[kBlock] = {}, sum_b[kBlock] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const double m = pm[r], s = pr[r];
      for (int64_t j = j0; j < j1; ++j) {
        const double gv = pg[r * cols + j];
        sum_w[j - j0] += gv * (px[r * cols + j] - m) * s;
        sum_b[j - j0] += gv;
      }
    }
    for (int64_t j = j0; j < j1; ++j)
      pw[j] = static_cast<float>(sum_w[j - j0]), pb[j] = static_cast<float>(sum_b[j - j0]);
  });
  return {dw, db};
}

// Below this many elements the loops beat oneDNN's ~1 µs per call (tools/bench: BM_LayerNorm).
constexpr int64_t kOneDnnLayerNormMin = 1;
// oneDNN 2.6 sums a row's statistics in f32: past this many normalised elements it falls behind
// PyTorch's f32 accuracy (7× at 1,240: tests/engine/parity_test.cpp), so longer rows take the
// reference kernel, whose statistics are in double.
constexpr int64_t kOneDnnLayerNormMaxCols = 512;

// Everything a layer_norm primitive depends on, as the primitive cache's key.
onednn::Key norm_key(const NormProblem& p, onednn::Op op) {
  return {
      static_cast<int64_t>(op), p.rows, p.cols, p.scale, p.shift, std::bit_cast<int32_t>(static_cast<float>(p.eps))};
}

// out, mean and variance (rows) on oneDNN; false if oneDNN does not take it.
bool layer_norm_forward_onednn(const NormProblem& p, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& out,
                               Tensor& mean, Tensor& var) {
  onednn::Primitive* primitive = onednn::cached(norm_key(p, onednn::Op::layer_norm_forward), p.rows * p.cols, [&] {
    return onednn::make_layer_norm_forward(onednn::f32_desc({p.rows, p.cols}), static_cast<float>(p.eps), p.scale,
                                           p.shift);
  });
  if (primitive == nullptr) return false;
  onednn::execute(*primitive, {{DNNL_ARG_SRC, x.data<float>()},
                               {DNNL_ARG_DST, out.data<float>()},
                               {DNNL_ARG_MEAN, mean.data<float>()},
                               {DNNL_ARG_VARIANCE, var.data<float>()},
                               {DNNL_ARG_SCALE, p.scale ? w.data<float>() : nullptr},
                               {DNNL_ARG_SHIFT, p.shift ? b.data<float>() : nullptr}});
  return true;
}

// dx, dw, db on oneDNN (dw, db only with weight / bias); false if oneDNN does not take it.
bool layer_norm_backward_onednn(const NormProblem& p, const Tensor& x, const Tensor& w, const Tensor& mean,
                                const Tensor& var, const Tensor& g, std::vector<Tensor>& grads) {
  onednn::Primitive* primitive = onednn::cached(norm_key(p, onednn::Op::layer_norm_backward), p.rows * p.cols, [&] {
    return onednn::make_layer_norm_backward(onednn::f32_desc({p.rows, p.cols}), static_cast<float>(p.eps), p.scale,
                                            p.shift);
  });
  if (primitive == nullptr) return false;
  const Shape affine_shape{p.cols};
  grads = {empty(x.shape()), p.scale ? empty(affine_shape) : Tensor(), p.shift ? empty(affine_shape) : Tensor()};
  onednn::execute(*primitive, {{DNNL_ARG_SRC, x.data<float>()},
                               {DNNL_ARG_DIFF_DST, g.data<float>()},
                               {DNNL_ARG_MEAN, mean.data<float>()},
                               {DNNL_ARG_VARIANCE, var.data<float>()},
                               {DNNL_ARG_DIFF_SRC, grads[0].data<float>()},
                               {DNNL_ARG_SCALE, p.scale ? w.data<float>() : nullptr},
                               {DNNL_ARG_DIFF_SCALE, p.scale ? grads[1].data<float>() : nullptr},
                               {DNNL_ARG_SHIFT, p.shift ? grads[2].data<float>() : nullptr},  // unread
                               {DNNL_ARG_DIFF_SHIFT, p.shift ? grads[2].data<float>() : nullptr}});
  return true;
}

}  // namespace

LayerNormForward layer_norm_forward(const NormProblem& p, const Tensor& x, const Tensor& weight, const Tensor& bias,
                                    const Shape& stat_shape) {
  LayerNormForward f{empty(x.shape(), x.dtype()), empty(stat_shape, x.dtype()), empty(stat_shape, x.dtype()), {}};
  if (x.dtype() == DType::f32 && x.numel() >= kOneDnnLayerNormMin && p.cols <= kOneDnnLayerNormMaxCols) {
    Tensor var = empty(stat_shape);
    if (layer_norm_forward_onednn(p, x, weight, bias, f.out, f.mean, var)) {
      dispatch_floating(x.dtype(), "layer_norm", [&]<typename T>() {  // rstd = (var + eps)^-0.5
        const T* pv = var.data<T>();
        T* pr = f.rstd.data<T>();
        for (int64_t r = 0; r < p.rows; ++r) pr[r] = std::pow(pv[r] + static_cast<T>(p.eps), static_cast<T>(-0.5));
      });
      f.onednn_variance = var;
      return f;
    }
  }
  layer_norm_reference(x, weight, bias, p.eps, p.rows, p.cols, f.out, f.mean, f.rstd);
  return f;
}

std::optional<std::vector<Tensor>> layer_norm_backward_fast(const NormProblem& p, const Tensor& x, const Tensor& w,
                                                            const Tensor& mean, const Tensor& rstd,
                                                            const Tensor& onednn_variance, const Tensor& g,
                                                            bool needs_dx) {
  if (!onednn_variance.defined()) return std::nullopt;
  std::vector<Tensor> grads(3);
  if (needs_dx && !layer_norm_backward_onednn(p, x, w, mean, onednn_variance, g, grads)) return std::nullopt;
  std::tie(grads[1], grads[2]) = affine_grads(x, g, mean, rstd, p.rows, p.cols);
  return grads;
}

}  // namespace ag
