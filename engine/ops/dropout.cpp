// Dropout: in training, zeroes each element with probability p and scales the survivors by
// 1/(1-p), so the expected output is x; in eval (or with p = 0), the identity.
#include "engine/ops/dropout.h"

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

// out = x ⊙ mask, or residual + x ⊙ mask: one pass, or mul (and add) where the generator is
// PyTorch's, whose draws cannot be split between threads.
AppliedDropout draw_and_apply(const Tensor& x, const Tensor& residual, double p, Generator& gen) {
  if (gen.torch() == nullptr) return apply_dropout(x, residual, p, gen);
  AppliedDropout dropped;
  dropped.mask = dropout_mask(x.shape(), x.dtype(), p, gen);
  dropped.out = mul(x, dropped.mask);
  if (residual.defined()) dropped.out = add(residual, dropped.out);
  return dropped;
}

}  // namespace

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  check_dropout_arguments(x, p);
  if (!training || p == 0) return x;  // no draw from gen, no node
  auto [out, mask] = draw_and_apply(x.detach(), Tensor(), p, gen);
  record(out, {"DropoutBackward", {.formula = "out = x ⊙ mask (mask: 0 or 1/(1 − p))  →  dx = g ⊙ mask"}}, {x}, {mask},
         [](const BackwardContext& c) {
           // out = x * mask  →  dx = g * mask
           return std::vector<Tensor>{mul(c.grad, c.saved[0])};
         });
  return out;
}

Tensor add_dropout(const Tensor& residual, const Tensor& x, double p, bool training, Generator& gen) {
  check_dropout_arguments(x, p);
  if (!training || p == 0 || residual.shape() != x.shape() || residual.dtype() != x.dtype())
    return add(residual, dropout(x, p, training, gen));
  auto [out, mask] = draw_and_apply(x.detach(), residual.detach(), p, gen);
  record(out,
         {"AddDropoutBackward", {.formula = "out = r + x ⊙ mask (mask: 0 or 1/(1 − p))  →  dr = g, dx = g ⊙ mask"}},
         {residual, x}, {mask}, [](const BackwardContext& c) {
           // out = residual + x * mask  →  dresidual = g, dx = g * mask
           return std::vector<Tensor>{c.grad, c.needs_grad[1] ? mul(c.grad, c.saved[0]) : Tensor()};
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
  registry.add({"dropout_p1",
                [](const auto& in) {
                  Generator gen(5);
                  return dropout(in[0], 1.0, true, gen);
                },
                real_inputs(),
                {{{3, 4}}}});
}

}  // namespace ag
