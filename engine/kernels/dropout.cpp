#include "engine/kernels/dropout.h"

#include <cmath>
#include <memory>

#include "engine/generator.h"
#include "engine/torch_generator.h"

namespace ag::kernels {

namespace {

uint64_t first_kept(double p) { return static_cast<uint64_t>(std::ceil(std::ldexp(p, 53))); }  // ⌈p·2⁵³⌉

template <typename T>
[[gnu::always_inline]] inline void mask_range(uint64_t counter, uint64_t kept_from, T scale, T* __restrict out,
                                              int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t bits = Generator::mix(counter + static_cast<uint64_t>(i + 1) * Generator::kIncrement);
    out[i] = (bits >> 11) >= kept_from ? scale : T(0);
  }
}

[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void mask_range_f32(uint64_t counter,
                                                                                        uint64_t kept_from, float scale,
                                                                                        float* out, int64_t n) {
  mask_range(counter, kept_from, scale, out, n);
}

[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void mask_range_f64(uint64_t counter,
                                                                                        uint64_t kept_from,
                                                                                        double scale, double* out,
                                                                                        int64_t n) {
  mask_range(counter, kept_from, scale, out, n);
}

}  // namespace

void dropout_mask_row(uint64_t counter, double p, float scale, float* out, int64_t n) {
  mask_range_f32(counter, first_kept(p), scale, out, n);
}

void dropout_mask_row(uint64_t counter, double p, double scale, double* out, int64_t n) {
  mask_range_f64(counter, first_kept(p), scale, out, n);
}

}  // namespace ag::kernels

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
  BatchShardGuard* batch = current_batch_shard();
  if (batch) batch->will_draw(gen);
  const BatchShard* shard = batch ? &batch->shard() : nullptr;
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

}  // namespace ag
