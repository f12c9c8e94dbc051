// Normalisation: layer_norm over the trailing dims, as torch.nn.functional.layer_norm; its
// kernels are in engine/kernels/layer_norm.cpp.
#include "engine/ops/norm.h"

#include "engine/autograd.h"
#include "engine/kernels/check.h"
#include "engine/kernels/layer_norm.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
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

}  // namespace

// Note [layer_norm backward and its statistics]
// The forward saves mean and rstd (keepdim shape, e.g. (B, T, 1)) so that the first-order
// backward does not recompute them. They are constants, though: a backward built on them is
// exact, but its own derivative w.r.t. x would miss the paths through mean and rstd. So when
// the backward itself is being recorded (create_graph, and x requires grad) it recomputes
// mean and rstd from x with engine ops, and double backward is exact.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  check_floating("layer_norm", "input", x);
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
  const NormProblem problem{rows, cols, weight.defined(), bias.defined(), eps};
  LayerNormForward f = layer_norm_forward(problem, x, weight, bias, stat_shape);
  record(f.out,
         {"LayerNormBackward",
          {.formula =
               "out = x̂ w + b, x̂ = (x − μ)/σ  →  db = Σ g, dw = Σ g x̂, dx = (w g − mean(w g) − x̂ mean(w g x̂)) / σ"}},
         {x, weight, bias}, {x, weight, f.mean, f.rstd, f.onednn_variance},
         [dims, eps, normalized_shape, problem](const BackwardContext& c) {
           // out = xhat * w + b,  xhat = (x - mean) * rstd,  rstd = 1 / sqrt(var + eps)
           const Tensor& g = c.grad;
           const Tensor& x = c.saved[0];
           const Tensor& w = c.saved[1];
           Tensor mean_x = c.saved[2];
           Tensor rstd = c.saved[3];
           // When the forward ran on oneDNN: its dx in one pass, and dw, db summed in double.
           if (!grad_enabled())
             if (auto fast = layer_norm_backward_fast(problem, x, w, mean_x, rstd, c.saved[4], g, c.needs_grad[0]))
               return std::vector<Tensor>{(*fast)[0],
                                          c.needs_grad[1] ? reshape((*fast)[1], normalized_shape) : Tensor(),
                                          c.needs_grad[2] ? reshape((*fast)[2], normalized_shape) : Tensor()};
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
  return f.out;
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
