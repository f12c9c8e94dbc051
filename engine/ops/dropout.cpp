// Dropout: in training, zeroes each element with probability p and scales the survivors by
// 1/(1-p), so the expected output is x; in eval (or with p = 0), the identity.
#include "engine/ops/dropout.h"

#include "engine/autograd.h"
#include "engine/kernels/check.h"
#include "engine/kernels/dropout.h"
#include "engine/ops/arithmetic.h"
#include "engine/registry.h"

namespace ag {

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  check_floating("dropout", "input", x);
  AG_CHECK(p >= 0 && p <= 1, "dropout: expected a probability p in [0, 1], got {}", p);
  if (!training || p == 0) return x;  // no draw from gen, no node
  const Tensor mask = dropout_mask(x.shape(), x.dtype(), p, gen);
  Tensor out = mul(x.detach(), mask);
  record(out, {"DropoutBackward", {.formula = "out = x ⊙ mask (mask: 0 or 1/(1 − p))  →  dx = g ⊙ mask"}}, {x}, {mask},
         [](const BackwardContext& c) {
           // out = x * mask  →  dx = g * mask
           return std::vector<Tensor>{mul(c.grad, c.saved[0])};
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
  registry.add({"dropout_p1",
                [](const auto& in) {
                  Generator gen(5);
                  return dropout(in[0], 1.0, true, gen);
                },
                real_inputs(),
                {{{3, 4}}}});
}

}  // namespace ag
