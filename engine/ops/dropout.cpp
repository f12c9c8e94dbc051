// Dropout: in training, zeroes each element with probability p and scales the survivors by
// 1/(1-p), so the expected output is x; in eval (or with p = 0), the identity.
#include "engine/kernels/dropout.h"

#include <cmath>
#include <memory>

#include "engine/autograd.h"
#include "engine/kernels/fast.h"
#include "engine/ops.h"
#include "engine/registry.h"

namespace ag {

namespace {

// PyTorch's CPU dropout: noise.bernoulli_(1 - p), one 53-bit draw per element (none for p = 1,
// which multiplies by zero), then noise.div_(1 - p) in the tensor's type.
Tensor torch_dropout_mask(const Shape& shape, DType dtype, double p, TorchGenerator& torch) {
  Tensor mask = zeros(shape, dtype);
  if (p == 1) return mask;
  std::unique_ptr<bool[]> keep(new bool[mask.numel()]);
  torch.fill_bernoulli(keep.get(), mask.numel(), 1 - p);
  dispatch_floating(dtype, "dropout", [&]<typename T>() {
    const T scale = T(1) / static_cast<T>(1 - p);
    T* out = mask.data<T>();
    for (int64_t i = 0; i < mask.numel(); ++i) out[i] = keep[i] ? scale : T(0);
  });
  return mask;
}

}  // namespace

Tensor dropout_mask(const Shape& shape, DType dtype, double p, Generator& gen) {
  if (TorchGenerator* torch = gen.torch()) {
    AG_CHECK(current_batch_shard() == nullptr,
             "dropout: PyTorch's generator (--rng torch) has no per-row streams for a data-parallel step");
    return torch_dropout_mask(shape, dtype, p, *torch);
  }
  Tensor mask = empty(shape, dtype);
  const BatchShard* shard = current_batch_shard();
  AG_CHECK(shard == nullptr || (!shape.empty() && shape[0] == shard->rows),
           "dropout in a data-parallel step: expected a batch-major tensor whose first dimension is the shard's {} "
           "rows, got shape {}",
           shard ? shard->rows : 0, shape_str(shape));
  const int64_t rows = shard ? shard->rows : 1, per_row = rows > 0 ? mask.numel() / rows : 0;
  AG_CHECK(static_cast<uint64_t>(per_row) <= kDrawsPerRow,
           "dropout: a row of {} elements is more than a row's {} draws", per_row, kDrawsPerRow);
  const uint64_t start = gen.state().counter;
  dispatch_floating(dtype, "dropout", [&]<typename T>() {
    const T scale = p == 1 ? T(0) : static_cast<T>(1.0 / (1.0 - p));
    // One draw per element in row-major order, so a seed gives the same mask on every machine
    // and thread count. In a shard, each row from its own stream (engine/generator.h).
    for (int64_t row = 0; row < rows; ++row) {
      const uint64_t row_start = shard ? static_cast<uint64_t>(shard->first + row) * kDrawsPerRow : 0;
      kernels::dropout_mask_row(start + row_start * Generator::kIncrement, p, scale, mask.data<T>() + row * per_row,
                                per_row);
    }
  });
  gen.skip(shard ? static_cast<uint64_t>(shard->global_rows) * kDrawsPerRow : static_cast<uint64_t>(mask.numel()));
  return mask;
}

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  AG_CHECK(x.defined(), "dropout: the input is undefined");
  AG_CHECK(p >= 0 && p <= 1, "dropout: expected a probability p in [0, 1], got {}", p);
  AG_CHECK(is_floating(x.dtype()), "dropout: expected a floating input (f32 or f64), got {} of shape {}",
           dtype_name(x.dtype()), shape_str(x.shape()));
  if (!training || p == 0) return x;  // no draw from gen, no node
  const Tensor mask = dropout_mask(x.shape(), x.dtype(), p, gen);
  Tensor out = mul(x.detach(), mask);
  record(out, "DropoutBackward", {x}, {mask}, [](const BackwardContext& c) {
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
