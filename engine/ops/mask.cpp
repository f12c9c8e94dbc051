// Masking ops: masked_fill and where select elementwise under a b8 mask (numpy broadcasting);
// triu/tril keep one triangle of the last two dims; causal_mask builds attention's (T, T) mask.
#include "engine/ops/mask.h"

#include <cmath>

#include "engine/autograd.h"
#include "engine/kernels/broadcast.h"
#include "engine/kernels/check.h"
#include "engine/kernels/mask.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/reduce.h"
#include "engine/registry.h"

namespace ag {

namespace {

void check_mask(std::string_view op, std::string_view what, const Tensor& mask) {
  check_defined(op, what, mask);
  AG_CHECK(mask.dtype() == DType::b8, "{}: expected a b8 (bool) {}, got {} of shape {} (build one with gt/lt)", op,
           what, dtype_name(mask.dtype()), shape_str(mask.shape()));
}

// x must be a matrix or a batch of them.
void check_matrices(std::string_view op, const Tensor& x) {
  check_defined(op, "input", x);
  AG_CHECK(x.dim() >= 2, "{}: expected a tensor with at least 2 dims (a matrix or a batch of them), got shape {}", op,
           shape_str(x.shape()));
}

}  // namespace

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  check_floating("masked_fill", "input", x);
  check_mask("masked_fill", "mask", mask);
  AG_CHECK(broadcasts_to(mask.shape(), x.shape()),
           "masked_fill: the mask of shape {} does not broadcast to the input's shape {}", shape_str(mask.shape()),
           shape_str(x.shape()));
  Tensor out = masked_fill_kernel(x, mask, value);
  record(out,
         {"MaskedFillBackward",
          {.writes_inf = true,
           .formula = "out = mask ? value : x  →  dx = g where the mask is false, 0 where it is true"}},
         {x}, {mask}, [](const BackwardContext& c) {
           // out = mask ? value : x  →  dx = g where the mask is false, 0 where it is true
           return std::vector<Tensor>{masked_fill(c.grad, c.saved[0], 0.0)};
         });
  return out;
}

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  check_mask("where", "condition", condition);
  check_floating("where", "first operand", a);
  check_floating("where", "second operand", b);
  check_same_dtype("where", a, b);
  const Shape shape = broadcast_shapes("where", condition.shape(), broadcast_shapes("where", a.shape(), b.shape()));
  Tensor out = where_kernel(condition, a, b, shape);
  record(out, {"WhereBackward", {.formula = "out = c ? a : b  →  da = g where c, db = g elsewhere"}}, {a, b},
         {condition}, [sa = a.shape(), sb = b.shape()](const BackwardContext& c) {
           // out = condition ? a : b  →  da = g where condition (summed to a's shape), db = g elsewhere
           const Tensor& condition = c.saved[0];
           const Tensor zero = zeros({}, c.grad.dtype());
           return std::vector<Tensor>{c.needs_grad[0] ? sum_to(where(condition, c.grad, zero), sa) : Tensor(),
                                      c.needs_grad[1] ? sum_to(where(condition, zero, c.grad), sb) : Tensor()};
         });
  return out;
}

Tensor triu(const Tensor& x, int64_t diagonal) {
  check_matrices("triu", x);
  Tensor out = triangle_kernel(x, diagonal, /*upper=*/true);
  record(out, {"TriuBackward", {.formula = "out = triu(x)  →  dx = triu(g)"}}, {x}, {},
         [diagonal](const BackwardContext& c) {
           // out = x on and above the diagonal-th diagonal, 0 below
           return std::vector<Tensor>{triu(c.grad, diagonal)};
         });
  return out;
}

Tensor tril(const Tensor& x, int64_t diagonal) {
  check_matrices("tril", x);
  Tensor out = triangle_kernel(x, diagonal, /*upper=*/false);
  record(out, {"TrilBackward", {.formula = "out = tril(x)  →  dx = tril(g)"}}, {x}, {},
         [diagonal](const BackwardContext& c) {
           // out = x on and below the diagonal-th diagonal, 0 above
           return std::vector<Tensor>{tril(c.grad, diagonal)};
         });
  return out;
}

Tensor causal_mask(int64_t size) {
  AG_CHECK(size >= 0, "causal_mask: expected a non-negative sequence length, got {}", size);
  Tensor out = empty({size, size}, DType::b8);
  bool* po = out.data<bool>();
  for (int64_t i = 0; i < size; ++i)
    for (int64_t j = 0; j < size; ++j) po[i * size + j] = j > i;  // j is in i's future
  return out;
}

Tensor logical_not(const Tensor& mask) {
  check_mask("logical_not", "input", mask);
  Tensor out = empty(mask.shape(), DType::b8);
  const bool* pm = mask.data<bool>();
  bool* po = out.data<bool>();
  for (int64_t i = 0; i < mask.numel(); ++i) po[i] = !pm[i];
  return out;
}

void register_mask_ops(Registry& registry) {
  // A random b8 tensor, about half true.
  auto random_mask = [](const Shape& shape, Generator& gen) { return gt(rand(shape, DType::f64, gen), 0.5); };

  // masked_fill: x real, mask broadcast to x. The fill value is finite: a -inf in the output
  // would make the checked sum Σ v ⊙ out infinite.
  registry.add({"masked_fill",
                [](const auto& in) { return masked_fill(in[0], in[1], -0.75); },
                [random_mask](const std::vector<Shape>& shapes, Generator& gen, DType dtype) {
                  Tensor x = draw(shapes[0], {}, gen, dtype).requires_grad_();
                  return std::vector<Tensor>{x, random_mask(shapes[1], gen)};
                },
                {{{2, 3, 4}, {3, 4}}, {{2, 3, 4}, {2, 1, 4}}, {{3, 4}, {3, 4}}, {{5}, {}}, {{1}, {1}}}});

  // where: condition b8, then two real operands; all three broadcast together.
  registry.add({"where",
                [](const auto& in) { return where(in[0], in[1], in[2]); },
                [random_mask](const std::vector<Shape>& shapes, Generator& gen, DType dtype) {
                  return std::vector<Tensor>{random_mask(shapes[0], gen),
                                             draw(shapes[1], {}, gen, dtype).requires_grad_(),
                                             draw(shapes[2], {}, gen, dtype).requires_grad_()};
                },
                {{{3, 4}, {3, 4}, {3, 4}},
                 {{2, 3, 4}, {3, 1}, {4}},
                 {{3, 1}, {1, 4}, {2, 1, 1}},
                 {{4}, {2, 1}, {}},
                 {{}, {5}, {}}}});

  const std::vector<std::vector<Shape>> matrices = {{{4, 4}}, {{3, 5}}, {{5, 3}}, {{2, 4, 3}}, {{1, 1}}};
  registry.add({"triu", [](const auto& in) { return triu(in[0]); }, real_inputs(), matrices});
  registry.add({"triu_diagonal_1", [](const auto& in) { return triu(in[0], 1); }, real_inputs(), matrices});
  registry.add({"triu_diagonal_m1", [](const auto& in) { return triu(in[0], -1); }, real_inputs(), matrices});
  registry.add({"tril", [](const auto& in) { return tril(in[0]); }, real_inputs(), matrices});
  registry.add({"tril_diagonal_1", [](const auto& in) { return tril(in[0], 1); }, real_inputs(), matrices});
  registry.add({"tril_diagonal_m1", [](const auto& in) { return tril(in[0], -1); }, real_inputs(), matrices});
}

}  // namespace ag
