#include "engine/kernels/dropout.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <type_traits>
#include <vector>

#include "engine/generator.h"
#include "engine/kernels/parallel.h"
#include "engine/torch_generator.h"

namespace ag::kernels {

namespace {

uint64_t first_kept(double p) { return static_cast<uint64_t>(std::ceil(std::ldexp(p, 53))); }  // ⌈p·2⁵³⌉

[[gnu::always_inline]] inline bool kept(uint64_t counter, int64_t i, uint64_t kept_from) {
  return (Generator::mix(counter + static_cast<uint64_t>(i + 1) * Generator::kIncrement) >> 11) >= kept_from;
}

// One loop per case, so each vectorises without a branch inside.
template <typename T>
[[gnu::always_inline]] inline void mask_range(uint64_t counter, uint64_t kept_from, T scale, T* __restrict mask,
                                              int64_t n, const DropoutApply<T>* apply) {
  if (apply == nullptr) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) mask[i] = kept(counter, i, kept_from) ? scale : T(0);
    return;
  }
  if (apply->keep == nullptr) {  // no keep mask; out may be x (in place): each element read before it is written
    const T* x = apply->x;
    T* out = apply->out;
    if constexpr (std::is_same_v<T, float>) {
      if (uint16_t* __restrict out_bf16 = apply->out_bf16) {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) {
          out[i] = x[i] * (kept(counter, i, kept_from) ? scale : T(0));
          out_bf16[i] = bf16_bits_from_f32(out[i]);
        }
        return;
      }
    }
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * (kept(counter, i, kept_from) ? scale : T(0));
    return;
  }
  const T* __restrict x = apply->x;
  T* __restrict out = apply->out;
  bool* __restrict keep = apply->keep;
  if (apply->residual == nullptr && apply->out_bf16 != nullptr) {
    if constexpr (std::is_same_v<T, float>) {
      uint16_t* __restrict out_bf16 = apply->out_bf16;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) {
        keep[i] = kept(counter, i, kept_from);
        out[i] = x[i] * (keep[i] ? scale : T(0));
        out_bf16[i] = bf16_bits_from_f32(out[i]);
      }
      return;
    }
  }
  if (apply->residual == nullptr) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      keep[i] = kept(counter, i, kept_from);
      out[i] = x[i] * (keep[i] ? scale : T(0));
    }
    return;
  }
  const T* __restrict residual = apply->residual;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    keep[i] = kept(counter, i, kept_from);
    out[i] = residual[i] + x[i] * (keep[i] ? scale : T(0));
  }
}

[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void mask_range_f32(
    uint64_t counter, uint64_t kept_from, float scale, float* mask, int64_t n, const DropoutApply<float>* apply) {
  mask_range(counter, kept_from, scale, mask, n, apply);
}

[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void mask_range_f64(
    uint64_t counter, uint64_t kept_from, double scale, double* mask, int64_t n, const DropoutApply<double>* apply) {
  mask_range(counter, kept_from, scale, mask, n, apply);
}

template <typename T>
[[gnu::always_inline]] inline void backward_range(const T* __restrict grad, const bool* keep_flags, T scale,
                                                  T* __restrict out, int64_t n) {
  const auto* __restrict keep = reinterpret_cast<const uint8_t*>(keep_flags);  // bytes vectorise, bools do not
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = grad[i] * (static_cast<T>(keep[i]) * scale);
}

[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void backward_range_f32(const float* grad,
                                                                                            const bool* keep,
                                                                                            float scale, float* out,
                                                                                            int64_t n) {
  backward_range(grad, keep, scale, out, n);
}

[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void backward_range_f64(const double* grad,
                                                                                            const bool* keep,
                                                                                            double scale, double* out,
                                                                                            int64_t n) {
  backward_range(grad, keep, scale, out, n);
}

// The attention weights (heads, T·S) of one example: weight (h, e) from the draw at counter +
// offsets[e] + h·kIncrement.
template <typename T>
[[gnu::always_inline]] inline void attention_mask(uint64_t counter, uint64_t kept_from, T scale, T* __restrict out,
                                                  int64_t heads, const uint64_t* __restrict offsets, int64_t weights) {
  for (int64_t h = 0; h < heads; ++h) {
    const uint64_t head_counter = counter + static_cast<uint64_t>(h) * Generator::kIncrement;
    T* __restrict line = out + h * weights;
#pragma omp simd
    for (int64_t e = 0; e < weights; ++e)
      line[e] = (Generator::mix(head_counter + offsets[e]) >> 11) >= kept_from ? scale : T(0);
  }
}

[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void attention_mask_f32(
    uint64_t counter, uint64_t kept_from, float scale, float* out, int64_t heads, const uint64_t* offsets,
    int64_t weights) {
  attention_mask(counter, kept_from, scale, out, heads, offsets, weights);
}

[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void attention_mask_f64(
    uint64_t counter, uint64_t kept_from, double scale, double* out, int64_t heads, const uint64_t* offsets,
    int64_t weights) {
  attention_mask(counter, kept_from, scale, out, heads, offsets, weights);
}

}  // namespace

std::vector<uint64_t> attention_draw_offsets(int64_t heads, int64_t queries, int64_t keys) {
  std::vector<uint64_t> offsets(static_cast<size_t>(queries * keys));
  for (int64_t i = 0; i < queries; ++i)
    for (int64_t j = 0; j < keys; ++j)
      offsets[static_cast<size_t>(i * keys + j)] = (attention_draw(0, i, j, heads) + 1) * Generator::kIncrement;
  return offsets;
}

void attention_dropout_mask_row(uint64_t counter, double p, float scale, float* out, int64_t heads,
                                const uint64_t* offsets, int64_t weights) {
  attention_mask_f32(counter, first_kept(p), scale, out, heads, offsets, weights);
}

void attention_dropout_mask_row(uint64_t counter, double p, double scale, double* out, int64_t heads,
                                const uint64_t* offsets, int64_t weights) {
  attention_mask_f64(counter, first_kept(p), scale, out, heads, offsets, weights);
}

void dropout_backward_row(const float* grad, const bool* keep, float scale, float* out, int64_t n) {
  backward_range_f32(grad, keep, scale, out, n);
}

void dropout_backward_row(const double* grad, const bool* keep, double scale, double* out, int64_t n) {
  backward_range_f64(grad, keep, scale, out, n);
}

void dropout_mask_row(uint64_t counter, double p, float scale, float* mask, int64_t n,
                      const DropoutApply<float>* apply) {
  mask_range_f32(counter, first_kept(p), scale, mask, n, apply);
}

void dropout_mask_row(uint64_t counter, double p, double scale, double* mask, int64_t n,
                      const DropoutApply<double>* apply) {
  mask_range_f64(counter, first_kept(p), scale, mask, n, apply);
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
    const auto scale = static_cast<T>(dropout_scale(dtype, p, RngStyle::torch));
    T* out = mask.data<T>();
    for (int64_t i = 0; i < mask.numel(); ++i) out[i] = keep[i] ? scale : T(0);
  });
  return mask;
}

// How a data-parallel step lays out the draws of one example's part of a mask in its stream.
enum class RowLayout {
  flat,       // row-major: a dimension after the first may not be padded ((B, T, D) activations)
  attention,  // attention weights (B, H, T, S): kernels::attention_draw, any T and S
};

// What draw_mask applies its mask to in the same pass, if anything (apply_dropout), and where it
// puts the results.
struct ApplyTo {
  const Tensor* x = nullptr;
  const Tensor* residual = nullptr;  // may be undefined
  Tensor* out = nullptr;
  Tensor* keep = nullptr;      // null: in place (out is x), no keep mask
  Tensor* out_bf16 = nullptr;  // not null: out's bf16 copy too
};

// Element operations a draw costs, for parallel_for's grain.
constexpr int64_t kDrawCost = 16;

// dropout_mask and attention_dropout_mask: outside a data-parallel step, one draw per element in
// row-major order, so a seed gives the same mask on every machine and thread count; in a step (a
// BatchShardGuard), each row of the global batch from a stream of its own (engine/generator.h).
// Each element's draw depends on its place alone, so the threads may split the work anywhere.
// Returns the mask, or, applying it (apply.x set), nothing: apply's out and keep are set.
Tensor draw_mask(const Shape& shape, DType dtype, double p, Generator& gen, RowLayout layout,
                 const ApplyTo& apply = {}) {
  if (TorchGenerator* torch = gen.torch()) {
    AG_CHECK(current_batch_shard() == nullptr,
             "dropout: PyTorch's generator (--rng torch) has no per-row streams for a data-parallel step");
    AG_CHECK(apply.x == nullptr, "dropout: PyTorch's generator draws the mask alone (apply it with mul)");
    return torch_dropout_mask(shape, dtype, p, *torch);
  }
  const int64_t count = numel(shape);
  Tensor mask = apply.x ? Tensor() : empty(shape, dtype);
  BatchShardGuard* batch = current_batch_shard();
  if (batch) batch->will_draw(gen);
  const BatchShard* shard = batch ? &batch->shard() : nullptr;
  AG_CHECK(shard == nullptr || (!shape.empty() && shape[0] == shard->rows),
           "dropout in a data-parallel step: expected a batch-major tensor whose first dimension is the shard's {} "
           "rows, got shape {}",
           shard ? shard->rows : 0, shape_str(shape));
  const int64_t rows = shard ? shard->rows : 1, per_row = rows > 0 ? count / rows : 0;
  const bool by_place = shard && layout == RowLayout::attention;
  const double draws_per_row = by_place ? static_cast<double>(shape[1]) * std::pow(std::max(shape[2], shape[3]), 2.0)
                                        : static_cast<double>(per_row);
  AG_CHECK(draws_per_row <= static_cast<double>(kDrawsPerRow),
           "dropout: a row needs {} draws (shape {}), more than a row's {}", draws_per_row, shape_str(shape),
           kDrawsPerRow);
  const uint64_t start = gen.state().counter;
  const auto row_counter = [&](int64_t row) {
    const uint64_t row_start = shard ? static_cast<uint64_t>(shard->first + row) * kDrawsPerRow : 0;
    return start + row_start * Generator::kIncrement;
  };
  if (apply.x && !apply.out->defined()) *apply.out = empty(shape, dtype);
  if (apply.x && apply.keep) *apply.keep = empty(shape, DType::b8);
  if (apply.out_bf16) *apply.out_bf16 = empty(shape, DType::bf16);
  dispatch_floating(dtype, "dropout", [&]<typename T>() {
    const auto scale = static_cast<T>(dropout_scale(dtype, p, RngStyle::attograd));
    T* masks = apply.x ? nullptr : mask.data<T>();
    if (by_place) {
      const std::vector<uint64_t> offsets = kernels::attention_draw_offsets(shape[1], shape[2], shape[3]);
      parallel_for(rows, per_row * kDrawCost, [&](int64_t row) {
        kernels::attention_dropout_mask_row(row_counter(row), p, scale, masks + row * per_row, shape[1], offsets.data(),
                                            shape[2] * shape[3]);
      });
      return;
    }
    parallel_for_ranges(count, kDrawCost, [&](int64_t begin, int64_t end) {
      for (int64_t at = begin; at < end;) {  // the range, cut where rows end
        const int64_t row = at / per_row, in_row = at % per_row, n = std::min(end - at, per_row - in_row);
        const uint64_t counter = row_counter(row) + static_cast<uint64_t>(in_row) * Generator::kIncrement;
        if (!apply.x) {
          kernels::dropout_mask_row(counter, p, scale, masks + at, n);
        } else {
          const kernels::DropoutApply<T> to{
              .x = apply.x->data<T>() + at,
              .residual = apply.residual->defined() ? apply.residual->data<T>() + at : nullptr,
              .out = apply.out->data<T>() + at,
              .keep = apply.keep ? apply.keep->data<bool>() + at : nullptr,
              .out_bf16 =
                  apply.out_bf16 ? reinterpret_cast<uint16_t*>(apply.out_bf16->data<BFloat16>()) + at : nullptr};
          kernels::dropout_mask_row(counter, p, scale, nullptr, n, &to);
        }
        at += n;
      }
    });
  });
  gen.skip(shard ? static_cast<uint64_t>(shard->global_rows) * kDrawsPerRow : static_cast<uint64_t>(count));
  return mask;
}

}  // namespace

double dropout_scale(DType dtype, double p, RngStyle style) {
  if (p == 1) return 0;
  double scale = 0;
  dispatch_floating(dtype, "dropout", [&]<typename T>() {
    scale =
        static_cast<double>(style == RngStyle::torch ? T(1) / static_cast<T>(1 - p) : static_cast<T>(1.0 / (1.0 - p)));
  });
  return scale;
}

Tensor dropout_mask(const Shape& shape, DType dtype, double p, Generator& gen) {
  return draw_mask(shape, dtype, p, gen, RowLayout::flat);
}

AppliedDropout apply_dropout(const Tensor& x, const Tensor& residual, double p, Generator& gen, bool bf16_copy) {
  AG_CHECK(!residual.defined() || (residual.shape() == x.shape() && residual.dtype() == x.dtype()),
           "dropout: expected a residual of the input's shape {} and dtype {}, got {} {}", shape_str(x.shape()),
           dtype_name(x.dtype()), shape_str(residual.shape()), dtype_name(residual.dtype()));
  AG_CHECK(!bf16_copy || (x.dtype() == DType::f32 && !residual.defined()),
           "dropout: a bf16 copy of the output needs an f32 input without a residual, got {}", dtype_name(x.dtype()));
  AppliedDropout result;
  draw_mask(x.shape(), x.dtype(), p, gen, RowLayout::flat,
            {.x = &x,
             .residual = &residual,
             .out = &result.out,
             .keep = &result.keep,
             .out_bf16 = bf16_copy ? &result.out_bf16 : nullptr});
  return result;
}

Tensor apply_dropout_in_place(const Tensor& x, double p, Generator& gen, bool bf16_copy) {
  AG_CHECK(!bf16_copy || x.dtype() == DType::f32, "dropout in place: a bf16 copy needs an f32 input, got {}",
           dtype_name(x.dtype()));
  Tensor out = x, none, out_bf16;
  draw_mask(x.shape(), x.dtype(), p, gen, RowLayout::flat,
            {.x = &x, .residual = &none, .out = &out, .keep = nullptr, .out_bf16 = bf16_copy ? &out_bf16 : nullptr});
  return out_bf16;
}

Tensor dropout_backward_data(const Tensor& grad, const Tensor& keep, double scale) {
  AG_CHECK(keep.dtype() == DType::b8 && keep.shape() == grad.shape(),
           "dropout_backward: expected a b8 keep mask of the gradient's shape {}, got {} {}", shape_str(grad.shape()),
           dtype_name(keep.dtype()), shape_str(keep.shape()));
  Tensor out = empty(grad.shape(), grad.dtype());
  dispatch_floating(grad.dtype(), "dropout_backward", [&]<typename T>() {
    const T* g = grad.data<T>();
    const bool* k = keep.data<bool>();
    T* o = out.data<T>();
    parallel_for_ranges(grad.numel(), 2, [&](int64_t begin, int64_t end) {
      kernels::dropout_backward_row(g + begin, k + begin, static_cast<T>(scale), o + begin, end - begin);
    });
  });
  return out;
}

Tensor attention_dropout_mask(const Shape& shape, DType dtype, double p, Generator& gen) {
  AG_CHECK(shape.size() == 4, "attention dropout: expected weights (B, H, T, S), got shape {}", shape_str(shape));
  return draw_mask(shape, dtype, p, gen, RowLayout::attention);
}

}  // namespace ag
