// Matrix products like torch.matmul: 1-D operands are promoted to matrices (a vector on the left
// becomes a (1, K) row, on the right a (K, 1) column, and the added dim is removed from the result);
// N-D operands are stacks of matrices whose batch dims broadcast. transpose_a / transpose_b read an
// operand's last two dims swapped, without a copy: Q·Kᵀ is matmul(q, k, false, true).
#include "engine/ops/matmul.h"

#include "engine/autocast.h"
#include "engine/autograd.h"
#include "engine/kernels/dropout.h"
#include "engine/kernels/linear.h"
#include "engine/kernels/matmul.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/dropout.h"
#include "engine/ops/pointwise.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "engine/registry.h"

namespace ag {

namespace {

// out = A @ B, with A = a or aᵀ (ta) and B = b or bᵀ (tb), 1-D operands promoted
//   →  dA = G @ Bᵀ and dB = Aᵀ @ G, summed over the batch dims an operand was broadcast along.
// `product(x, y, tx, ty)` computes each x @ y (flags as matmul's): the recorded op, or bf16's.
template <typename Product>
std::vector<Tensor> matmul_backward(const MatmulPlan& plan, const Tensor& a, const Tensor& b, const Tensor& grad,
                                    NeedsGrad needs, Product product) {
  const Tensor a_p = reshape(a, plan.a_shape);  // (..., M, K) or (..., K, M)
  const Tensor b_p = reshape(b, plan.b_shape);  // (..., K, N) or (..., N, K)
  Shape g_shape = plan.batch;
  g_shape.push_back(plan.m);
  g_shape.push_back(plan.n);
  const Tensor g = reshape(grad, g_shape);  // (batch, M, N)
  Tensor da, db;
  if (needs[0]) {
    // dA = G @ Bᵀ; when a is stored transposed, da = dAᵀ = B @ Gᵀ.
    da = plan.ta ? product(b_p, g, plan.tb, true) : product(g, b_p, false, !plan.tb);
    da = reshape(sum_to(da, plan.a_shape), a.shape());
  }
  if (needs[1]) {
    const bool b_unbatched = numel(Shape(plan.b_shape.begin(), plan.b_shape.end() - 2)) == 1;
    if (b_unbatched && !plan.batch.empty() && !plan.ta) {
      // One matrix b under a batch of a (a Linear layer): fold the batch into the rows,
      // dB = A_flatᵀ @ G_flat, one product instead of a batch of them summed.
      const int64_t rows = numel(plan.batch) * plan.m;
      const Tensor a_flat = reshape(a_p, {rows, plan.k});  // (rows, K)
      const Tensor g_flat = reshape(g, {rows, plan.n});    // (rows, N)
      db = plan.tb ? product(g_flat, a_flat, true, false) : product(a_flat, g_flat, true, false);
    } else {
      // dB = Aᵀ @ G; when b is stored transposed, db = dBᵀ = Gᵀ @ A.
      db = plan.tb ? product(g, a_p, true, plan.ta) : product(a_p, g, !plan.ta, false);
      db = sum_to(db, plan.b_shape);
    }
    db = reshape(db, b.shape());
  }
  return {da, db};
}

// Under AutocastGuard: the product of a's and b's bf16 copies, f32 out; the node saves the copies
// and its backward's two products take bf16 operands too (the gradient rounded once).
Tensor matmul_bf16(const Tensor& a, const Tensor& b, const MatmulPlan& plan) {
  const Tensor a16 = autocast_operand(a), b16 = autocast_operand(b);
  Tensor out = run_matmul(a16, b16, plan, 1.0);
  record(out,
         {"MatmulBackward",
          {.bf16 = true, .formula = "out = bf16(A) bf16(B)  →  dA = bf16(g) bf16(B)ᵀ, dB = bf16(A)ᵀ bf16(g)"}},
         {a, b}, {a16, b16}, [plan](const BackwardContext& c) {
           // out = bf16(A) @ bf16(B)  →  dA = bf16(G) @ bf16(B)ᵀ, dB = bf16(A)ᵀ @ bf16(G)
           AG_CHECK(!grad_enabled(),
                    "matmul ran in bf16 (under AutocastGuard): its backward cannot be differentiated again "
                    "(create_graph); compute higher-order gradients in f32");
           return matmul_backward(
               plan, c.saved[0], c.saved[1], to(c.grad, DType::bf16), c.needs_grad,
               [](const Tensor& x, const Tensor& y, bool tx, bool ty) { return matmul_forward(x, y, tx, ty, 1.0); });
         });
  return out;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  const MatmulPlan plan = plan_matmul(a, b, transpose_a, transpose_b);
  if (autocast_products(a, b)) return matmul_bf16(a, b, plan);
  Tensor out = run_matmul(a, b, plan, 1.0);
  record(out, {"MatmulBackward", {.formula = "out = A B  →  dA = g Bᵀ, dB = Aᵀ g (summed over broadcast batch dims)"}},
         {a, b}, {a, b}, [plan](const BackwardContext& c) {
           // out = A @ B (matmul_backward above); the products recorded under create_graph, and in f32
           // even where a backward runs under AutocastGuard
           return matmul_backward(plan, c.saved[0], c.saved[1], c.grad, c.needs_grad,
                                  [](const Tensor& x, const Tensor& y, bool tx, bool ty) {
                                    return grad_enabled() ? matmul(x, y, tx, ty) : matmul_forward(x, y, tx, ty, 1.0);
                                  });
         });
  return out;
}

namespace {

void check_linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  AG_CHECK(x.defined() && weight.defined() && weight.dim() == 2 && x.dim() >= 1 && x.size(-1) == weight.size(1),
           "linear: expected x (..., in) and weight (out, in) with the same in, got x {} and weight {}",
           x.defined() ? shape_str(x.shape()) : "undefined",
           weight.defined() ? shape_str(weight.shape()) : "undefined");
  AG_CHECK(!bias.defined() || bias.shape() == Shape{weight.size(0)},
           "linear: expected bias of shape ({}) for weight {}, got {}", weight.size(0), shape_str(weight.shape()),
           shape_str(bias.shape()));
  AG_CHECK(x.dtype() == weight.dtype() && (!bias.defined() || bias.dtype() == x.dtype()),
           "linear: dtypes differ: x {}, weight {}, bias {}", dtype_name(x.dtype()), dtype_name(weight.dtype()),
           bias.defined() ? dtype_name(bias.dtype()) : "none");
}

// A linear's backward, from the output gradient: gz = g where out > 0 (after a ReLU; g · relu_scale
// after a ReLU and dropout), g · gelu′(z) (after a GELU) or g, (rows, out), as the products' operand
// (bf16 under autocast), and db = Σ_rows gz if the bias wants it. One pass of the kernel
// (linear_output_gradient) when nothing records; recorded ops otherwise.
LinearOutputGradient output_gradient(const BackwardContext& c, const Shape& rows_shape, Activation activation,
                                     bool bf16, double relu_scale) {
  const bool needs_bias = c.needs_grad.size() > 2 && c.needs_grad[2];
  const Tensor g = reshape(c.grad, rows_shape);  // (rows, out)
  const bool activated = activation != Activation::none;
  if (!grad_enabled() && g.dtype() == DType::f32 && (activated || bf16))
    return linear_output_gradient(g, activated ? reshape(c.saved[2], rows_shape) : Tensor(), activation, bf16,
                                  needs_bias, relu_scale);
  Tensor gz = g;  // (rows, out)
  if (activation == Activation::relu) gz = threshold_backward(g, reshape(c.saved[2], rows_shape));
  if (relu_scale != 1) gz = mul(gz, relu_scale);
  // after a GELU: the saved gelu′(z), or, when the backward is recorded (create_graph), z = x Wᵀ + b
  // recomputed with recorded ops, since the second order needs how z depends on x, W and b
  if (activation == Activation::gelu)
    gz = grad_enabled() ? gelu_erf_backward(g, linear(c.saved[0], c.saved[1], c.saved[3]))
                        : mul(g, reshape(c.saved[2], rows_shape));
  return {bf16 ? to(gz, DType::bf16) : gz, needs_bias ? sum(gz, {0}) : Tensor()};
}

// The ReLU's output after dropout (linear_relu_dropout): dropout's p and generator.
struct AfterDropout {
  double p;
  Generator* gen;
};

std::string_view linear_formula(Activation activation, const AfterDropout* dropout, bool residual) {
  if (residual) return "out = x Wᵀ + b + r  →  dx = g W, dW = gᵀ x, db = Σ g (over the rows), dr = g";
  if (dropout)
    return "out = relu(x Wᵀ + b) ⊙ keep · scale  →  gz = g · scale where out > 0, dx = gz W, dW = gzᵀ x, db = Σ gz";
  switch (activation) {
    case Activation::relu:
      return "out = relu(x Wᵀ + b)  →  gz = g where out > 0, dx = gz W, dW = gzᵀ x, db = Σ gz";
    case Activation::gelu:
      return "out = gelu(z), z = x Wᵀ + b  →  gz = g · gelu′(z), dx = gz W, dW = gzᵀ x, db = Σ gz";
    case Activation::none:
      break;
  }
  return "out = x Wᵀ + b  →  dx = g W, dW = gᵀ x, db = Σ g (over the rows)";
}

// linear, or with `dropout` linear_relu_dropout: the ReLU's output dropped in place, its backward
// reading that output alone; or with `residual` (no activation) linear_add, the residual added in the
// product's epilogue.
Tensor linear_node(const Tensor& x, const Tensor& weight, const Tensor& bias, Activation activation,
                   const AfterDropout* dropout, const Tensor& residual = {}) {
  check_linear(x, weight, bias);
  const int64_t in = weight.size(1), out_features = weight.size(0);
  Shape out_shape = x.shape();
  out_shape.back() = out_features;
  const DType out_dtype = x.dtype() == DType::bf16 ? DType::f32 : x.dtype();  // bf16 operands give f32
  AG_CHECK(!residual.defined() || (residual.shape() == out_shape && residual.dtype() == out_dtype),
           "linear_add: expected a residual of the output's shape {} and dtype {}, got {} {}", shape_str(out_shape),
           dtype_name(out_dtype), shape_str(residual.shape()), dtype_name(residual.dtype()));
  const bool bf16 = autocast_products(x, weight);
  const int64_t rows = numel(Shape(x.shape().begin(), x.shape().end() - 1));  // 1 for a 1-D x
  const Tensor x_rows = reshape(bf16 ? autocast_operand(x) : x, {rows, in});  // (rows, in)
  const Tensor w = bf16 ? autocast_operand(weight) : weight;                  // (out, in)
  // A GELU runs in its own pass after the product (z = x Wᵀ + b), writing gelu′(z) for the backward.
  const Activation epilogue = activation == Activation::gelu ? Activation::none : activation;
  // the residual as the kernel reads it, (rows, out): a view the node does not record (it records residual)
  const Tensor residual_rows = residual.defined() ? reshape(residual.detach(), {rows, out_features}) : Tensor();
  Tensor product = reshape(linear_forward(x_rows, w, bias, epilogue, residual_rows), out_shape);  // (..., out)
  Tensor out = product;
  Tensor activation_saved;  // what the activation's backward reads: a ReLU's output, a GELU's gelu′(z)
  if (activation == Activation::gelu && needs_recording({&x, &weight, &bias})) {
    out = gelu_erf_keeping_derivative(product);  // (..., out), with its bf16 copy under autocast
    activation_saved = product;                  // gelu′(z) now, in z's memory
  } else if (activation == Activation::gelu) {   // no backward to come: the GELU alone
    NoGradGuard no_grad;
    out = gelu(product);  // (..., out), with its bf16 copy under autocast
  }
  if (dropout) {  // one pass over the ReLU's output, writing its bf16 copy under autocast
    const bool bf16_copy = autocast_enabled() && out.dtype() == DType::f32;
    const Tensor copy = apply_dropout_in_place(out, dropout->p, *dropout->gen, bf16_copy);
    if (bf16_copy) attach_bf16_copy(out, copy);
  }
  if (activation == Activation::relu) activation_saved = out;
  // what dropout scales a kept element of the output by, 1/(1 − p) in out's dtype
  const double relu_scale = dropout ? dropout_scale(out.dtype(), dropout->p, dropout->gen->style()) : 1.0;
  const char* name = dropout              ? "LinearReluDropoutBackward"
                     : residual.defined() ? "LinearAddBackward"
                                          : "LinearBackward";
  record(out, {name, {.bf16 = bf16, .formula = linear_formula(activation, dropout, residual.defined())}},
         {x, weight, bias, residual}, {x_rows, w, activation_saved, activation == Activation::gelu ? bias : Tensor()},
         [bf16, activation, relu_scale, in, out_features](const BackwardContext& c) {
           // out = act(x @ Wᵀ + b) (⊙ keep · scale after a ReLU and dropout)  →  gz = g · act′ (· scale where
           // out > 0), dx = gz @ W, dW = gzᵀ @ x, db = Σ_rows gz
           AG_CHECK(!(bf16 && grad_enabled()),
                    "linear ran in bf16 (under AutocastGuard): its backward cannot be differentiated again "
                    "(create_graph); compute higher-order gradients in f32");
           const Tensor& x_rows = c.saved[0];  // (rows, in), bf16 under autocast
           const Tensor& w = c.saved[1];       // (out, in)
           const auto [g_operand, bias_grad] =
               output_gradient(c, {x_rows.size(0), out_features}, activation, bf16, relu_scale);
           const auto product = [](const Tensor& a, const Tensor& b, bool ta) {
             return grad_enabled() ? matmul(a, b, ta, false) : matmul_forward(a, b, ta, false, 1.0);
           };
           std::vector<Tensor> grads(4);
           if (c.needs_grad[0]) grads[0] = reshape(product(g_operand, w, false), c.inputs[0].shape);  // (..., in)
           if (c.needs_grad[1]) grads[1] = product(g_operand, x_rows, true);                          // (out, in)
           grads[2] = bias_grad;                                                                      // (out)
           if (c.needs_grad[3]) grads[3] = c.grad;                                                    // (..., out)
           return grads;
         });
  return out;
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Activation activation) {
  return linear_node(x, weight, bias, activation, nullptr);
}

Tensor linear_add(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& residual) {
  AG_CHECK(residual.defined(), "linear_add: expected a residual of the output's shape, got an undefined tensor");
  return linear_node(x, weight, bias, Activation::none, nullptr, residual);
}

Tensor linear_relu_dropout(const Tensor& x, const Tensor& weight, const Tensor& bias, double p, bool training,
                           Generator& gen) {
  AG_CHECK(p >= 0 && p <= 1, "linear_relu_dropout: expected a probability p in [0, 1], got {}", p);
  if (!training || p == 0 || gen.torch() != nullptr)  // PyTorch's generator draws the mask alone
    return dropout(linear(x, weight, bias, Activation::relu), p, training, gen);
  const AfterDropout after{p, &gen};
  return linear_node(x, weight, bias, Activation::relu, &after);
}

void register_matmul_ops(Registry& registry) {
  auto product = [](bool ta, bool tb) {
    return [ta, tb](const std::vector<Tensor>& in) { return matmul(in[0], in[1], ta, tb); };
  };
  // Shapes are the operands' stored shapes: for matmul_ta, a is (K, M).
  registry.add(
      {"matmul",
       product(false, false),
       real_inputs(),
       {{{3, 4}, {4, 5}}, {{5, 7}, {7, 3}}, {{1, 1}, {1, 1}}, {{1, 4}, {4, 1}}, {{4, 1}, {1, 3}}, {{3, 1}, {1, 1}}}});
  registry.add({"matmul_vector",
                product(false, false),
                real_inputs(),
                {{{4}, {4, 3}}, {{3, 4}, {4}}, {{5}, {5}}, {{1}, {1}}, {{3}, {2, 3, 2}}, {{2, 3, 4}, {4}}}});
  registry.add({"matmul_batched",
                product(false, false),
                real_inputs(),
                {{{2, 3, 4}, {2, 4, 5}},
                 {{2, 1, 3, 4}, {5, 4, 6}},
                 {{2, 3, 4}, {4, 5}},
                 {{3, 4}, {2, 4, 5}},
                 {{1, 3, 2}, {3, 2, 2}},
                 {{3, 1, 2, 3}, {1, 2, 3, 2}}}});
  const std::vector<std::vector<Shape>> ta_shapes = {
      {{4, 3}, {4, 5}}, {{1, 1}, {1, 2}}, {{4}, {4, 3}}, {{2, 4, 3}, {4, 5}}, {{2, 1, 4, 3}, {3, 4, 2}}};
  const std::vector<std::vector<Shape>> tb_shapes = {
      {{3, 4}, {5, 4}}, {{2, 1}, {1, 1}}, {{3, 4}, {4}}, {{2, 3, 4}, {5, 4}}, {{2, 1, 3, 4}, {3, 2, 4}}};
  const std::vector<std::vector<Shape>> tatb_shapes = {
      {{4, 3}, {5, 4}}, {{1, 2}, {3, 1}}, {{2, 4, 3}, {5, 4}}, {{4, 3}, {2, 5, 4}}, {{2, 1, 4, 3}, {3, 2, 4}}};
  registry.add({"matmul_ta", product(true, false), real_inputs(), ta_shapes});
  // x (..., in), weight (out, in), bias (out); the last set takes oneDNN's path in f32 (≥ 8192 multiply-adds).
  const std::vector<std::vector<Shape>> linear_shapes = {{{3, 4}, {5, 4}, {5}},
                                                         {{2, 3, 4}, {2, 4}, {2}},
                                                         {{4}, {3, 4}, {3}},
                                                         {{1, 1}, {1, 1}, {1}},
                                                         {{40, 16}, {24, 16}, {24}}};
  auto linear_of = [](Activation activation) {
    return [activation](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2], activation); };
  };
  registry.add({"linear", linear_of(Activation::none), real_inputs(), linear_shapes});
  registry.add({"linear_relu", linear_of(Activation::relu), real_inputs(), linear_shapes});
  registry.add({"linear_gelu", linear_of(Activation::gelu), real_inputs(), linear_shapes});
  std::vector<std::vector<Shape>> no_bias_shapes;
  for (const auto& set : linear_shapes) no_bias_shapes.push_back({set[0], set[1]});
  registry.add({"linear_no_bias", [](const std::vector<Tensor>& in) { return linear(in[0], in[1]); }, real_inputs(),
                no_bias_shapes});
  std::vector<std::vector<Shape>> residual_shapes;  // x, weight, bias and the residual, the output's shape
  for (const auto& set : linear_shapes) {
    Shape out = set[0];
    out.back() = set[1][0];
    residual_shapes.push_back({set[0], set[1], set[2], out});
  }
  registry.add({"linear_add", [](const std::vector<Tensor>& in) { return linear_add(in[0], in[1], in[2], in[3]); },
                real_inputs(), residual_shapes});
  registry.add({.name = "linear_relu_dropout",
                .fn =
                    [](const std::vector<Tensor>& in) {
                      Generator gen(5);  // the same mask on every call (every finite-difference probe)
                      return linear_relu_dropout(in[0], in[1], in[2], 0.3, true, gen);
                    },
                .make_inputs = real_inputs(),
                .shape_sets = linear_shapes,
                .differs_from_pytorch =
                    "dropout(relu(linear(x))) with attograd's Generator, which PyTorch's RNG cannot "
                    "replay: the parity suite checks it against its composition"});
  registry.add({"matmul_tb", product(false, true), real_inputs(), tb_shapes});
  registry.add({"matmul_tatb", product(true, true), real_inputs(), tatb_shapes});
}

}  // namespace ag
