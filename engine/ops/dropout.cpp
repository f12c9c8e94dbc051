// Dropout: in training, zeroes each element with probability p and scales the survivors by
// 1/(1-p), so the expected output is x; in eval (or with p = 0), the identity.
#include "engine/ops/dropout.h"

#include "engine/autocast.h"
#include "engine/autograd.h"
#include "engine/kernels/check.h"
#include "engine/kernels/dropout.h"
#include "engine/ops/arithmetic.h"
#include "engine/registry.h"

namespace ag {

namespace {

void check_dropout_arguments(const Tensor& x, double p) {
  check_floating("dropout", "input", x);
  AG_CHECK(p >= 0 && p <= 1, "dropout: expected a probability p in [0, 1], got {}", p);
}

// out = x ⊙ mask, or residual + x ⊙ mask, and keep = mask ≠ 0: one pass, or mul (and add) where
// the generator is PyTorch's, whose draws cannot be split between threads. Under autocast, an f32
// dropout's output also gets its bf16 copy in the same pass (attach_bf16_copy): the operand of the
// product that reads it next (a Transformer's second feed-forward Linear, or its first layer's).
AppliedDropout draw_and_apply(const Tensor& x, const Tensor& residual, double p, Generator& gen) {
  if (gen.torch() == nullptr) {
    const bool bf16_copy = autocast_enabled() && x.dtype() == DType::f32 && !residual.defined();
    AppliedDropout dropped = apply_dropout(x, residual, p, gen, bf16_copy);
    if (bf16_copy) attach_bf16_copy(dropped.out, dropped.out_bf16);
    return dropped;
  }
  AppliedDropout dropped;
  const Tensor mask = dropout_mask(x.shape(), x.dtype(), p, gen);
  dropped.out = mul(x, mask);
  if (residual.defined()) dropped.out = add(residual, dropped.out);
  dropped.keep = gt(mask, 0.0);
  return dropped;
}

}  // namespace

Tensor dropout_backward(const Tensor& grad, const Tensor& keep, double scale) {
  check_floating("dropout_backward", "grad", grad);
  Tensor dx = dropout_backward_data(grad, keep, scale);
  record(dx, {"DropoutBackwardBackward", {.formula = "dx = g ⊙ keep · scale  →  dg = u ⊙ keep · scale"}}, {grad},
         {keep}, [scale](const BackwardContext& c) {
           // dx = grad * keep * scale  →  dgrad = u * keep * scale
           return std::vector<Tensor>{dropout_backward(c.grad, c.saved[0], scale)};
         });
  return dx;
}

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  check_dropout_arguments(x, p);
  if (!training || p == 0) return x;  // no draw from gen, no node
  const double scale = dropout_scale(x.dtype(), p, gen.style());
  AppliedDropout dropped = draw_and_apply(x.detach(), Tensor(), p, gen);  // out's bf16 copy attached
  Tensor& out = dropped.out;
  record(out, {"DropoutBackward", {.formula = "out = x ⊙ keep · scale (scale = 1/(1 − p))  →  dx = g ⊙ keep · scale"}},
         {x}, {dropped.keep}, [scale](const BackwardContext& c) {
           // out = x * keep * scale  →  dx = g * keep * scale
           return std::vector<Tensor>{dropout_backward(c.grad, c.saved[0], scale)};
         });
  return out;
}

Tensor add_dropout(const Tensor& residual, const Tensor& x, double p, bool training, Generator& gen) {
  check_dropout_arguments(x, p);
  if (!training || p == 0 || residual.shape() != x.shape() || residual.dtype() != x.dtype())
    return add(residual, dropout(x, p, training, gen));
  const double scale = dropout_scale(x.dtype(), p, gen.style());
  AppliedDropout dropped = draw_and_apply(x.detach(), residual.detach(), p, gen);
  Tensor& out = dropped.out;
  record(out,
         {"AddDropoutBackward",
          {.formula = "out = r + x ⊙ keep · scale (scale = 1/(1 − p))  →  dr = g, dx = g ⊙ keep · scale"}},
         {residual, x}, {dropped.keep}, [scale](const BackwardContext& c) {
           // out = residual + x * keep * scale  →  dresidual = g, dx = g * keep * scale
           return std::vector<Tensor>{c.grad, c.needs_grad[1] ? dropout_backward(c.grad, c.saved[0], scale) : Tensor()};
         });
  return out;
}

void register_dropout_ops(Registry& registry) {
  // A generator seeded inside the function: every call (each finite-difference probe) draws the
  // same mask.
  registry.add({.name = "dropout",
                .fn =
                    [](const auto& in) {
                      Generator gen(5);
                      return dropout(in[0], 0.3, true, gen);
                    },
                .make_inputs = real_inputs(),
                .shape_sets = {{{3, 4}}, {{2, 3, 5}}, {{1}}, {{}}},
                .differs_from_pytorch = "its masks come from attograd's Generator, not PyTorch's RNG: the parity "
                                        "suite checks p = 0, p = 1 and eval only"});
  registry.add({.name = "add_dropout",
                .fn =
                    [](const auto& in) {
                      Generator gen(5);
                      return add_dropout(in[0], in[1], 0.3, true, gen);
                    },
                .make_inputs = real_inputs(),
                .shape_sets = {{{3, 4}, {3, 4}}, {{2, 3, 5}, {2, 3, 5}}, {{}, {}}, {{3, 4}, {4}}},
                .differs_from_pytorch = "no PyTorch op: residual + dropout(x), whose masks come from attograd's "
                                        "Generator"});
  registry.add({.name = "dropout_backward",
                .fn =
                    [](const auto& in) {
                      Generator gen(5);
                      const Tensor keep = gt(dropout_mask(in[0].shape(), in[0].dtype(), 0.3, gen), 0.0);
                      return dropout_backward(in[0], keep, 1 / 0.7);
                    },
                .make_inputs = real_inputs(),
                .shape_sets = {{{3, 4}}, {{2, 3, 5}}, {{1}}, {{}}},
                .differs_from_pytorch = "native_dropout_backward(grad, mask, scale), here with attograd's masks"});
  registry.add({"dropout_p1",
                [](const auto& in) {
                  Generator gen(5);
                  return dropout(in[0], 1.0, true, gen);
                },
                real_inputs(),
                {{{3, 4}}}});
}

}  // namespace ag
