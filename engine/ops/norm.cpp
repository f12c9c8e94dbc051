// Normalisation: layer_norm over the trailing dims, as torch.nn.functional.layer_norm.
#include <algorithm>
#include <bit>
#include <cmath>
#include <utility>

#include "engine/autograd.h"
#include "engine/kernels/dnnl_compat.h"
#include "engine/kernels/onednn.h"
#include "engine/kernels/parallel.h"
#include "engine/ops.h"
#include "engine/registry.h"

namespace ag {

namespace {

// A weight or bias: absent, or a floating tensor of x's dtype and exactly normalized_shape.
void check_affine(std::string_view what, const Tensor& t, const Tensor& x, const Shape& normalized_shape) {
  if (!t.defined()) return;
  AG_CHECK(t.dtype() == x.dtype(), "layer_norm: {} has dtype {}, but the input has dtype {} (convert one with ag::to)",
           what, dtype_name(t.dtype()), dtype_name(x.dtype()));
  AG_CHECK(t.shape() == normalized_shape, "layer_norm: {} has shape {}, expected normalized_shape {}", what,
           shape_str(t.shape()), shape_str(normalized_shape));
}

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

// The (rows, cols) problem, its affine parts and eps: everything a layer_norm primitive depends on.
struct NormProblem {
  int64_t rows, cols;
  bool scale, shift;
  float eps;
  onednn::Key key(onednn::Op op) const {
    return {static_cast<int64_t>(op), rows, cols, scale, shift, std::bit_cast<int32_t>(eps)};
  }
};

// out, mean and variance (rows) on oneDNN; false if oneDNN does not take it.
bool layer_norm_forward_onednn(const NormProblem& p, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& out,
                               Tensor& mean, Tensor& var) {
  onednn::Primitive* primitive = onednn::cached(p.key(onednn::Op::layer_norm_forward), p.rows * p.cols, [&] {
    return onednn::make_layer_norm_forward(onednn::f32_desc({p.rows, p.cols}), p.eps, p.scale, p.shift);
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
  onednn::Primitive* primitive = onednn::cached(p.key(onednn::Op::layer_norm_backward), p.rows * p.cols, [&] {
    return onednn::make_layer_norm_backward(onednn::f32_desc({p.rows, p.cols}), p.eps, p.scale, p.shift);
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

// Note [layer_norm backward and its statistics]
// The forward saves mean and rstd (keepdim shape, e.g. (B, T, 1)) so that the first-order
// backward does not recompute them. They are constants, though: a backward built on them is
// exact, but its own derivative w.r.t. x would miss the paths through mean and rstd. So when
// the backward itself is being recorded (create_graph, and x requires grad) it recomputes
// mean and rstd from x with engine ops, and double backward is exact.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  AG_CHECK(x.defined(), "layer_norm: the input is undefined");
  AG_CHECK(is_floating(x.dtype()), "layer_norm: expected a floating input (f32 or f64), got {} of shape {}",
           dtype_name(x.dtype()), shape_str(x.shape()));
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  AG_CHECK(k >= 1, "layer_norm: normalized_shape must have at least one dim, got {} (input shape {})",
           shape_str(normalized_shape), shape_str(x.shape()));
  AG_CHECK(k <= x.dim() && Shape(x.shape().end() - k, x.shape().end()) == normalized_shape,
           "layer_norm: normalized_shape {} does not match the trailing dims of the input shape {}",
           shape_str(normalized_shape), shape_str(x.shape()));
  AG_CHECK(eps >= 0, "layer_norm: expected eps >= 0, got {}", eps);
  check_affine("weight", weight, x, normalized_shape);
  check_affine("bias", bias, x, normalized_shape);

  const int64_t cols = numel(normalized_shape);  // elements normalised together
  const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  Shape stat_shape = x.shape();  // keepdim: (leading..., 1, ..., 1)
  std::vector<int64_t> dims;     // the normalised dims
  for (int64_t d = x.dim() - k; d < x.dim(); ++d) {
    stat_shape[d] = 1;
    dims.push_back(d);
  }
  Tensor out = empty(x.shape(), x.dtype());
  Tensor mean_t = empty(stat_shape, x.dtype());
  Tensor rstd_t = empty(stat_shape, x.dtype());
  Tensor var_t;  // oneDNN's variance, kept for its backward
  const NormProblem problem{rows, cols, weight.defined(), bias.defined(), static_cast<float>(eps)};
  if (x.dtype() == DType::f32 && x.numel() >= kOneDnnLayerNormMin && cols <= kOneDnnLayerNormMaxCols) {
    var_t = empty(stat_shape);
    if (layer_norm_forward_onednn(problem, x, weight, bias, out, mean_t, var_t)) {
      rstd_t = pow(add(var_t, eps), -0.5);  // rstd = 1 / sqrt(var + eps), (rows) elements
    } else {
      var_t = Tensor();
    }
  }
  if (!var_t.defined()) layer_norm_reference(x, weight, bias, eps, rows, cols, out, mean_t, rstd_t);
  record(out, "LayerNormBackward", {x, weight, bias}, {x, weight, mean_t, rstd_t, var_t},
         [dims, eps, normalized_shape, problem](const BackwardContext& c) {
           // out = xhat * w + b,  xhat = (x - mean) * rstd,  rstd = 1 / sqrt(var + eps)
           const Tensor& g = c.grad;
           const Tensor& x = c.saved[0];
           const Tensor& w = c.saved[1];
           Tensor mean_x = c.saved[2];
           Tensor rstd = c.saved[3];
           // When the forward ran on oneDNN: its dx in one pass, and dw, db from affine_grads.
           std::vector<Tensor> fast;
           if (!grad_enabled() && c.saved[4].defined() &&
               (!c.needs_grad[0] || layer_norm_backward_onednn(problem, x, w, mean_x, c.saved[4], g, fast))) {
             const auto [dw, db] = affine_grads(x, g, mean_x, rstd, problem.rows, problem.cols);
             return std::vector<Tensor>{c.needs_grad[0] ? fast[0] : Tensor(),
                                        c.needs_grad[1] ? reshape(dw, normalized_shape) : Tensor(),
                                        c.needs_grad[2] ? reshape(db, normalized_shape) : Tensor()};
           }
           if (grad_enabled() && x.requires_grad()) {  // see Note [layer_norm backward and its statistics]
             mean_x = mean(x, dims, true);
             const Tensor centered = x - mean_x;
             rstd = pow(add(mean(centered * centered, dims, true), eps), -0.5);
           }
           std::vector<Tensor> grads(3);
           if (!c.needs_grad[0] && !c.needs_grad[1] && !c.needs_grad[2]) return grads;
           const Tensor xhat = (x - mean_x) * rstd;
           if (c.needs_grad[0]) {
             // dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) over the normalised dims
             const Tensor dxhat = w.defined() ? g * w : g;
             grads[0] = rstd * (dxhat - mean(dxhat, dims, true) - xhat * mean(dxhat * xhat, dims, true));
           }
           if (c.needs_grad[1]) grads[1] = sum_to(g * xhat, normalized_shape);  // out = xhat * w + b
           if (c.needs_grad[2]) grads[2] = sum_to(g, normalized_shape);
           return grads;
         });
  return out;
}

void register_norm_ops(Registry& registry) {
  // Normalised sizes ≥ 3: over 1 element xhat is 0, over 2 it is ±1 whatever x is (a gradient
  // near 0 that finite differences resolve poorly).
  // With weight and bias: normalized_shape is the weight's shape.
  registry.add({"layer_norm",
                [](const auto& in) { return layer_norm(in[0], in[1].shape(), in[1], in[2]); },
                real_inputs(),
                {{{3, 4}, {4}, {4}}, {{2, 3, 5}, {3, 5}, {3, 5}}, {{5, 3}, {3}, {3}}, {{7}, {7}, {7}}}});
  registry.add({"layer_norm_weight_only",
                [](const auto& in) { return layer_norm(in[0], in[1].shape(), in[1]); },
                real_inputs(),
                {{{3, 4}, {4}}, {{2, 3, 5}, {3, 5}}}});
  registry.add({"layer_norm_no_affine",
                [](const auto& in) { return layer_norm(in[0], {in[0].size(-1)}); },
                real_inputs(),
                {{{3, 4}}, {{2, 3, 5}}, {{1, 5}}}});
  registry.add({"layer_norm_no_affine_last2",
                [](const auto& in) {
                  return layer_norm(in[0], {in[0].size(-2), in[0].size(-1)}, {}, {}, 1e-3);
                },
                real_inputs(),
                {{{2, 3, 5}}, {{3, 3}}}});
}

}  // namespace ag
