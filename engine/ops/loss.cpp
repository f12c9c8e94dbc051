// Losses: mse_loss, binary_cross_entropy_with_logits, cross_entropy. Each is one fused forward
// kernel (accumulating in double) with its own node; the backwards are engine ops, so they are
// differentiable again.
#include "engine/ops/loss.h"

#include <algorithm>
#include <cmath>

#include "engine/autograd.h"
#include "engine/kernels/check.h"
#include "engine/kernels/loss.h"
#include "engine/kernels/parallel.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/index.h"
#include "engine/ops/pointwise.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "engine/ops/softmax.h"
#include "engine/registry.h"

namespace ag {

namespace {

std::string_view reduction_name(Reduction reduction) {
  switch (reduction) {
    case Reduction::none:
      return "none";
    case Reduction::mean:
      return "mean";
    case Reduction::sum:
      return "sum";
  }
  return "?";
}

// An elementwise loss of two same-shape floating tensors.
void check_pair(std::string_view op, std::string_view first, const Tensor& a, std::string_view second,
                const Tensor& b) {
  check_floating(op, first, a);
  check_floating(op, second, b);
  check_same_dtype(op, a, b);
  AG_CHECK(a.shape() == b.shape(), "{}: {} shape {} and {} shape {} differ; expected the same shape (no broadcasting)",
           op, first, shape_str(a.shape()), second, shape_str(b.shape()));
}

// The incoming gradient of an elementwise loss, ready to multiply an input-shaped tensor:
// g itself for none and sum (g is 0-d then, and broadcasts), g / count for mean. A mean over no
// elements (NaN, 0/0) has an empty gradient whatever g is scaled by; scaling by 1/0 would make the
// gradient's own derivative with respect to g 0 · ∞ = NaN, where Σ over no elements is 0 (as in
// PyTorch), so g is left as it is there.
Tensor loss_grad_scale(const Tensor& g, Reduction reduction, int64_t count) {
  return reduction == Reduction::mean && count > 0 ? mul(g, 1.0 / static_cast<double>(count)) : g;
}

}  // namespace

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  check_pair("mse_loss", "input", input, "target", target);
  Tensor out = elementwise_loss_kernel("mse_loss", input, target, reduction,
                                       [](double x, double y) { return (x - y) * (x - y); });
  record(out, {"MseLossBackward", {.formula = "out = reduce((x − t)²)  →  dx = 2 (x − t) g (÷ n for mean), dt = −dx"}},
         {input, target}, {input, target}, [reduction, n = input.numel()](const BackwardContext& c) {
           // out = reduce((input - target)²)  →  dinput = 2 (input - target) g = -dtarget
           const Tensor dinput = (c.saved[0] - c.saved[1]) * mul(loss_grad_scale(c.grad, reduction, n), 2.0);
           return std::vector<Tensor>{c.needs_grad[0] ? dinput : Tensor(), c.needs_grad[1] ? neg(dinput) : Tensor()};
         });
  return out;
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target, Reduction reduction) {
  check_pair("binary_cross_entropy_with_logits", "logits", logits, "target", target);
  Tensor out =
      elementwise_loss_kernel("binary_cross_entropy_with_logits", logits, target, reduction, [](double x, double y) {
        // = -(y log σ(x) + (1-y) log(1-σ(x))), with no exp of a positive number: finite for any x
        return std::max(x, 0.0) - x * y + std::log1p(std::exp(-std::abs(x)));
      });
  record(
      out,
      {"BinaryCrossEntropyWithLogitsBackward",
       {.formula = "out = reduce(max(x, 0) − x y + log(1 + e^−|x|))  →  dx = (σ(x) − y) g, dy = −x g (÷ n for mean)"}},
      {logits, target}, {logits, target}, [reduction, n = logits.numel()](const BackwardContext& c) {
        // out = reduce(max(x,0) - x·y + log1p(exp(-|x|)))  →  dx = (σ(x) - y) g,  dy = -x g
        const Tensor& x = c.saved[0];
        const Tensor& y = c.saved[1];
        const Tensor g = loss_grad_scale(c.grad, reduction, n);
        return std::vector<Tensor>{c.needs_grad[0] ? (sigmoid(x) - y) * g : Tensor(),
                                   c.needs_grad[1] ? neg(x) * g : Tensor()};
      });
  return out;
}

// Note [cross_entropy and ignore_index]
// Rows whose target equals ignore_index contribute 0 (also in Reduction::none) and get a zero
// gradient; the mean divides by the number of other rows. If every row is ignored, the mean is
// 0/0 = NaN, as in PyTorch, and the gradient is zero, as in PyTorch.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index, Reduction reduction,
                     double label_smoothing) {
  check_floating("cross_entropy", "logits", logits);
  AG_CHECK(label_smoothing >= 0 && label_smoothing <= 1, "cross_entropy: label_smoothing must be in [0, 1], got {}",
           label_smoothing);
  check_defined("cross_entropy", "target", target);
  AG_CHECK(target.dtype() == DType::i64, "cross_entropy: expected i64 class-index targets, got {} of shape {}",
           dtype_name(target.dtype()), shape_str(target.shape()));
  AG_CHECK(logits.dim() == 2 && target.dim() == 1 && target.size(0) == logits.size(0),
           "cross_entropy: expected logits (N, C) and target (N), got logits {} and target {}",
           shape_str(logits.shape()), shape_str(target.shape()));
  const int64_t rows = logits.size(0);
  const int64_t classes = logits.size(1);
  const int64_t* pt = target.data<int64_t>();
  int64_t count = 0;  // rows not ignored
  for (int64_t r = 0; r < rows; ++r) {
    if (pt[r] == ignore_index) continue;
    AG_CHECK(pt[r] >= 0 && pt[r] < classes,
             "cross_entropy: target {} at row {} is out of range [0, {}) for logits {} (ignore_index is {})", pt[r], r,
             classes, shape_str(logits.shape()), ignore_index);
    ++count;
  }

  Tensor out = cross_entropy_kernel(logits, target, ignore_index, reduction, count, label_smoothing);
  if (!needs_recording({&logits})) return out;
  const auto [row_weight, distribution] =
      cross_entropy_targets(logits, target, ignore_index, reduction, count, label_smoothing);
  record(out,
         {"CrossEntropyBackward",
          {.formula = "out = reduce(logsumexp(x) − Σ q x), q = onehot(t) smoothed  →  dx = (softmax(x) − q) g "
                      "(÷ n for mean)"}},
         {logits}, {logits, distribution, row_weight}, [reduction, rows](const BackwardContext& c) {
           // out[n] = logsumexp(x[n]) - Σ_c q[n, c] x[n, c]  →  dx[n] = (softmax(x[n]) - q[n]) · g[n]
           const Tensor& g = c.grad;  // (N) for none, else 0-d
           const Tensor coef = c.saved[2] * (reduction == Reduction::none ? reshape(g, {rows, 1}) : g);  // (N, 1)
           return std::vector<Tensor>{(softmax(c.saved[0], 1) - c.saved[1]) * coef};
         });
  return out;
}

void register_loss_ops(Registry& registry) {
  const std::vector<std::vector<Shape>> pair_shapes = {{{3, 4}, {3, 4}}, {{2, 3, 5}, {2, 3, 5}}, {{1}, {1}}, {{}, {}}};
  // Logits in [-4, 4], targets in [0, 1] (probabilities), both differentiable.
  const InputMaker logits_and_probabilities = [](const std::vector<Shape>& shapes, Generator& gen, DType dtype) {
    return std::vector<Tensor>{draw(shapes[0], {.low = -4, .high = 4}, gen, dtype).requires_grad_(),
                               draw(shapes[1], {.low = 0, .high = 1}, gen, dtype).requires_grad_()};
  };
  // Logits (N, C) and i64 targets (N) in [0, C), with every third row (1, 4, ...) set to -100.
  const InputMaker logits_and_classes = [](const std::vector<Shape>& shapes, Generator& gen, DType dtype) {
    Tensor target = randint(0, shapes[0][1], shapes[1], gen);
    for (int64_t r = 1; r < shapes[1][0]; r += 3) target.set({r}, -100);
    return std::vector<Tensor>{draw(shapes[0], {.low = -3, .high = 3}, gen, dtype).requires_grad_(), target};
  };
  const std::vector<std::vector<Shape>> class_shapes = {{{4, 5}, {4}}, {{7, 3}, {7}}, {{1, 2}, {1}}};
  for (Reduction reduction : {Reduction::mean, Reduction::sum, Reduction::none}) {
    const std::string suffix =
        reduction == Reduction::mean ? std::string() : fmt::format("_{}", reduction_name(reduction));
    registry.add({"mse_loss" + suffix, [reduction](const auto& in) { return mse_loss(in[0], in[1], reduction); },
                  real_inputs(), pair_shapes});
    registry.add({"binary_cross_entropy_with_logits" + suffix,
                  [reduction](const auto& in) { return binary_cross_entropy_with_logits(in[0], in[1], reduction); },
                  logits_and_probabilities, pair_shapes});
    registry.add({"cross_entropy" + suffix,
                  [reduction](const auto& in) { return cross_entropy(in[0], in[1], -100, reduction); },
                  logits_and_classes, class_shapes});
  }
  // ignore_index inside [0, C): the rows whose target is class 0 are ignored.
  registry.add(
      {"cross_entropy_ignore_class0",
       [](const auto& in) { return cross_entropy(in[0], in[1], 0); },
       [](const std::vector<Shape>& shapes, Generator& gen, DType dtype) {
         Tensor target = randint(0, shapes[0][1], shapes[1], gen);
         target.set({0}, 0);
         target.set({1}, 1);
         return std::vector<Tensor>{draw(shapes[0], {.low = -3, .high = 3}, gen, dtype).requires_grad_(), target};
       },
       {{{5, 3}, {5}}, {{6, 4}, {6}}}});
  // PyTorch's label smoothing, with ignored rows (-100) among the others.
  for (Reduction reduction : {Reduction::mean, Reduction::sum, Reduction::none}) {
    const std::string suffix =
        reduction == Reduction::mean ? std::string() : fmt::format("_{}", reduction_name(reduction));
    registry.add({"cross_entropy_label_smoothing" + suffix,
                  [reduction](const auto& in) { return cross_entropy(in[0], in[1], -100, reduction, 0.1); },
                  logits_and_classes, class_shapes});
  }
}

}  // namespace ag
