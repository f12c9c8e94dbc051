// Normalisation: layer_norm over the trailing dims, as torch.nn.functional.layer_norm, and its
// backward as an op of its own; their kernels are in engine/kernels/layer_norm.cpp.
#include "engine/ops/norm.h"

#include "engine/autograd.h"
#include "engine/kernels/check.h"
#include "engine/kernels/layer_norm.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/pointwise.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "engine/registry.h"

namespace ag {

namespace {

// x as (rows, cols) around normalized_shape, its trailing dims.
struct NormLayout {
  int64_t rows, cols;
  Shape stat_shape;           // x's with the normalised dims 1
  std::vector<int64_t> dims;  // the normalised dims
};

NormLayout norm_layout(std::string_view op, const Tensor& x, const Shape& normalized_shape, double eps) {
  check_floating(op, "input", x);
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  AG_CHECK(k >= 1, "{}: normalized_shape must have at least one dim, got {} (input shape {})", op,
           shape_str(normalized_shape), shape_str(x.shape()));
  AG_CHECK(k <= x.dim() && Shape(x.shape().end() - k, x.shape().end()) == normalized_shape,
           "{}: normalized_shape {} does not match the trailing dims of the input shape {}", op,
           shape_str(normalized_shape), shape_str(x.shape()));
  AG_CHECK(eps >= 0, "{}: expected eps >= 0, got {}", op, eps);
  const int64_t cols = numel(normalized_shape);  // elements normalised together
  NormLayout layout{cols == 0 ? 0 : x.numel() / cols, cols, x.shape(), {}};
  for (int64_t d = x.dim() - k; d < x.dim(); ++d) {
    layout.stat_shape[d] = 1;
    layout.dims.push_back(d);
  }
  return layout;
}

// A tensor beside x (a weight, a bias, a statistic): absent if `optional`, else x's dtype and `shape`.
void check_beside(std::string_view op, std::string_view what, const Tensor& t, const Tensor& x, const Shape& shape,
                  bool optional) {
  if (optional && !t.defined()) return;
  check_defined(op, what, t);
  AG_CHECK(t.dtype() == x.dtype(), "{}: {} has dtype {}, but the input has dtype {} (convert one with ag::to)", op,
           what, dtype_name(t.dtype()), dtype_name(x.dtype()));
  AG_CHECK(t.shape() == shape, "{}: {} has shape {}, expected {}", op, what, shape_str(t.shape()), shape_str(shape));
}

// x's mean and biased variance over dims (keepdim), in engine ops.
LayerNormStatistics statistics(const Tensor& x, const std::vector<int64_t>& dims) {
  const Tensor m = mean(x, dims, true);
  const Tensor centered = x - m;
  return {m, mean(centered * centered, dims, true)};
}

// xhat = (x − mean) · rstd, rstd = 1/√(var + eps), from x in engine ops: recorded when the backward is
// (create_graph), so that their derivatives w.r.t. x, through the statistics too, are exact.
struct Normalized {
  LayerNormStatistics statistics;
  Tensor rstd, xhat;
};

Normalized normalized(const Tensor& x, const std::vector<int64_t>& dims, double eps) {
  const LayerNormStatistics s = statistics(x, dims);
  const Tensor rstd = pow(add(s.variance, eps), -0.5);
  return {s, rstd, (x - s.mean) * rstd};
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  const NormLayout l = norm_layout("layer_norm", x, normalized_shape, eps);
  check_beside("layer_norm", "weight", weight, x, normalized_shape, true);
  check_beside("layer_norm", "bias", bias, x, normalized_shape, true);
  LayerNormForward f =
      layer_norm_forward({l.rows, l.cols, weight.defined(), bias.defined(), eps}, x, weight, bias, l.stat_shape);
  record(f.out,
         {"LayerNormBackward",
          {.formula =
               "out = x̂ w + b, x̂ = (x − μ)/σ  →  db = Σ g, dw = Σ g x̂, dx = (w g − mean(w g) − x̂ mean(w g x̂)) / σ"}},
         {x, weight, bias}, {x, weight, f.mean, f.variance}, [normalized_shape, eps](const BackwardContext& c) {
           // out = xhat * w + b,  xhat = (x - mean) / sqrt(var + eps)
           const LayerNormGradients d =
               layer_norm_backward(c.grad, c.saved[0], {c.saved[2], c.saved[3]}, c.saved[1], normalized_shape, eps,
                                   {c.needs_grad[0], c.needs_grad[1], c.needs_grad[2]});
           return std::vector<Tensor>{d.input, d.weight, d.bias};
         });
  return f.out;
}

namespace {

// Where and how layer_norm_backward normalised: what its nodes' backwards need beside the tensors.
struct NormAxes {
  std::vector<int64_t> dims;  // the normalised dims
  Shape normalized_shape;
  double eps;
};

// l(u) = rstd * (u - mean(u) - xhat * mean(u * xhat)): layer_norm_backward's dx without weight.
Tensor unweighted_input_gradient(const Tensor& u, const Tensor& x, const Normalized& n, const NormAxes& a) {
  return layer_norm_backward(u, x, n.statistics, {}, a.normalized_shape, a.eps, {true, false, false}).input;
}

void record_input_gradient(Tensor& dx, const Tensor& grad, const Tensor& x, const Tensor& weight, const NormAxes& a) {
  record(dx,
         {"LayerNormBackwardBackward",
          {.formula = "dx = (h − mean h − x̂ mean(h x̂))/σ, h = w g  →  dg = w ℓ(u), dw = Σ g ℓ(u), dx = −(x̂ mean(u "
                      "dx) + mean(u x̂) dx + mean(h x̂) ℓ(u))/σ, ℓ = this backward without w"}},
         {grad, x, weight}, {grad, x, weight, dx}, [a](const BackwardContext& c) {
           // dx = rstd * (h - mean(h) - xhat * mean(h * xhat)),  h = w * g,  u the gradient arriving at dx
           //   →  dg = w * l(u),  dw = Σ_rows g * l(u),
           //      dx' = -rstd * (xhat * mean(u * dx) + mean(u * xhat) * dx + mean(h * xhat) * l(u))
           const Tensor &g = c.saved[0], &x = c.saved[1], &w = c.saved[2], &dx = c.saved[3], &u = c.grad;
           const Normalized n = normalized(x, a.dims, a.eps);
           const Tensor lu = unweighted_input_gradient(u, x, n, a);
           std::vector<Tensor> grads(3);
           if (c.needs_grad[0]) grads[0] = w.defined() ? lu * w : lu;
           if (c.needs_grad[1]) {
             const Tensor h = w.defined() ? g * w : g;
             const Tensor terms = n.xhat * mean(u * dx, a.dims, true) + mean(u * n.xhat, a.dims, true) * dx +
                                  mean(h * n.xhat, a.dims, true) * lu;
             grads[1] = neg(n.rstd * terms);
           }
           if (c.needs_grad[2]) grads[2] = sum_to(g * lu, a.normalized_shape);
           return grads;
         });
}

void record_weight_gradient(Tensor& dw, const Tensor& grad, const Tensor& x, const NormAxes& a) {
  record(dw, {"LayerNormBackwardBackward", {.formula = "dw = Σ g x̂  →  dg = v x̂, dx = ℓ(g v)"}}, {grad, x}, {grad, x},
         [a](const BackwardContext& c) {
           // dw = Σ_rows g * xhat,  v the gradient arriving at dw  →  dg = v * xhat,  dx = l(g * v)
           const Tensor &g = c.saved[0], &x = c.saved[1], &v = c.grad;
           const Normalized n = normalized(x, a.dims, a.eps);
           std::vector<Tensor> grads(2);
           if (c.needs_grad[0]) grads[0] = n.xhat * v;
           if (c.needs_grad[1]) grads[1] = unweighted_input_gradient(g * v, x, n, a);
           return grads;
         });
}

void record_bias_gradient(Tensor& db, const Tensor& grad) {
  record(db, {"LayerNormBackwardBackward", {.formula = "db = Σ g  →  dg = v"}}, {grad}, {},
         [](const BackwardContext& c) {
           // db = Σ_rows g  →  dg = v broadcast over the rows
           return std::vector<Tensor>{broadcast_to(c.grad, c.inputs[0].shape)};
         });
}

}  // namespace

// Note [layer_norm's backward is an op]
// layer_norm's derivative is one formula, computed by one fused kernel (layer_norm_backward_data:
// oneDNN's backward primitive or our loops for dx, dw and db summed in double), and recorded as nodes
// of its own, one per gradient, so that the second order differentiates the same formula: PyTorch's
// native_layer_norm_backward does the same. The statistics are data, not inputs: the nodes
// differentiate through them by recomputing them from x in engine ops, so any order is exact.
LayerNormGradients layer_norm_backward(const Tensor& grad, const Tensor& x, const LayerNormStatistics& statistics,
                                       const Tensor& weight, const Shape& normalized_shape, double eps,
                                       std::array<bool, 3> wanted) {
  const char* op = "layer_norm_backward";
  const NormLayout l = norm_layout(op, x, normalized_shape, eps);
  check_beside(op, "grad", grad, x, x.shape(), false);
  check_beside(op, "weight", weight, x, normalized_shape, true);
  check_beside(op, "mean", statistics.mean, x, l.stat_shape, false);
  check_beside(op, "variance", statistics.variance, x, l.stat_shape, false);
  const std::array<Tensor, 3> d = layer_norm_backward_data({l.rows, l.cols, weight.defined(), wanted[2], eps}, grad, x,
                                                           weight, statistics.mean, statistics.variance, wanted);
  LayerNormGradients out{d[0], d[1].defined() ? reshape(d[1], normalized_shape) : Tensor(),
                         d[2].defined() ? reshape(d[2], normalized_shape) : Tensor()};
  const NormAxes axes{l.dims, normalized_shape, eps};
  if (out.input.defined()) record_input_gradient(out.input, grad, x, weight, axes);
  if (out.weight.defined()) record_weight_gradient(out.weight, grad, x, axes);
  if (out.bias.defined()) record_bias_gradient(out.bias, grad);
  return out;
}

namespace {

// layer_norm_backward as a registry function of (grad, x, weight): dx, dw and db in one tensor, with
// x's statistics.
Tensor layer_norm_gradients(const Tensor& grad, const Tensor& x, const Tensor& weight, const Shape& normalized_shape) {
  const std::vector<int64_t> dims = norm_layout("layer_norm_backward", x, normalized_shape, 0).dims;
  const LayerNormGradients d = layer_norm_backward(grad, x, statistics(x, dims), weight, normalized_shape);
  if (!weight.defined()) return d.input;
  return cat({flatten(d.input), flatten(d.weight), flatten(d.bias)}, 0);
}

}  // namespace

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
  // layer_norm's backward as an op of (grad, x, weight), weight's shape normalised: dx, dw, db flattened
  // and joined; without weight, dx over the last dim.
  registry.add({"layer_norm_backward",
                [](const auto& in) { return layer_norm_gradients(in[0], in[1], in[2], in[2].shape()); },
                real_inputs(),
                {{{3, 4}, {3, 4}, {4}}, {{2, 3, 5}, {2, 3, 5}, {3, 5}}, {{5, 3}, {5, 3}, {3}}}});
  registry.add({"layer_norm_backward_no_affine",
                [](const auto& in) { return layer_norm_gradients(in[0], in[1], {}, {in[1].size(-1)}); },
                real_inputs(),
                {{{3, 4}, {3, 4}}, {{2, 3, 5}, {2, 3, 5}}, {{1, 5}, {1, 5}}}});
}

}  // namespace ag
