// softmax and log_softmax over one dim, numerically stable (the row's max is subtracted first),
// and softmax's backward in one pass: reference loops, the oneDNN path and the AVX clones.
// Like PyTorch: a -inf entry gets exactly 0 weight (log-weight -inf); a row that is all -inf
// gives NaN, since it has no finite entry to normalise by.
#include "engine/kernels/softmax.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/kernels/bf16.h"
#include "engine/kernels/check.h"
#include "engine/kernels/dnnl_compat.h"
#include "engine/kernels/exp.h"
#include "engine/kernels/onednn.h"
#include "engine/kernels/parallel.h"
#include "engine/kernels/rows.h"

namespace ag {

namespace {

// log = false: y = exp(x - max) / Σ;  log = true: y = x - max - log Σ.
Tensor softmax_kernel(std::string_view op, const Tensor& x, const RowView& p, bool log) {
  Tensor out = empty(x.shape(), x.dtype());
  dispatch_floating(x.dtype(), op, [&]<typename T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    const int64_t size = p.size, inner = p.inner;
    parallel_for(p.rows(), 4 * size, [&](int64_t row) {
      const int64_t base = p.offset(row);
      const T* in = px + base;
      T* y = po + base;
      T max = -std::numeric_limits<T>::infinity();
      for (int64_t k = 0; k < size; ++k) max = std::max(max, in[k * inner]);
      // A NaN anywhere makes the row NaN, as in PyTorch (std::max above skips NaN). Σ is summed in
      // double: in f32 its rounding would cost log_softmax ~1e-5 relative where log y is small.
      double total = 0;
      for (int64_t k = 0; k < size; ++k) {
        const T e = std::exp(in[k * inner] - max);  // all -inf row: exp(-inf + inf) = NaN
        if (!log) y[k * inner] = e;
        total += e;
      }
      if (log) {
        // (x - max) first: subtracting max + log Σ in one go would round at max's magnitude.
        const double log_total = std::log(total);
        for (int64_t k = 0; k < size; ++k) y[k * inner] = static_cast<T>((in[k * inner] - max) - log_total);
      } else {
        const T scale = static_cast<T>(1 / total);
        for (int64_t k = 0; k < size; ++k) y[k * inner] *= scale;
      }
    });
  });
  return out;
}

// Below this many elements the loops above beat oneDNN's ~1 µs per call, and two threads
// double a tiny softmax's time (tools/bench: BM_SoftmaxForward; tools/bench/README.md).
constexpr int64_t kOneDnnSoftmaxMin = 256;

// y = softmax(x) on oneDNN; false if oneDNN does not take it (or only as ref:any).
bool softmax_onednn(const Tensor& x, Tensor& y, const RowView& p) {
  const onednn::Dims dims{p.outer, p.size, p.inner};
  onednn::Primitive* primitive =
      onednn::cached({static_cast<int64_t>(onednn::Op::softmax), p.outer, p.size, p.inner}, x.numel(),
                     [&] { return onednn::make_softmax(onednn::f32_desc(dims), 1); });
  if (primitive == nullptr) return false;
  onednn::execute(*primitive, {{DNNL_ARG_SRC, x.data<float>()}, {DNNL_ARG_DST, y.data<float>()}});
  return true;
}

// f32 softmax along contiguous rows of at most this many: the rows the attention heads of the
// seeds' sizes give, where oneDNN spends ~25 ns a row and the loops above call libm's exp per
// element (tools/bench/README.md, "Thresholds").
constexpr int64_t kShortRowMax = 16;

// The largest of a row's n entries, skipping NaN as std::max does (e^(NaN − max) then stays NaN): in
// order on short rows, in 16 lanes on longer ones (no loop of std::max over a row vectorises).
[[gnu::always_inline]] inline float row_max(const float* x, int64_t n) {
  typedef float Lanes __attribute__((vector_size(64), aligned(alignof(float))));
  constexpr int64_t kLanes = 16;
  float max = -std::numeric_limits<float>::infinity();
  int64_t k = 0;
  if (n >= 2 * kLanes) {
    Lanes lanes;
    std::memcpy(&lanes, x, sizeof lanes);
    for (k = kLanes; k + kLanes <= n; k += kLanes) {
      Lanes v;
      std::memcpy(&v, x + k, sizeof v);
      lanes = v > lanes ? v : lanes;
    }
    for (int64_t l = 0; l < kLanes; ++l) max = std::max(max, lanes[l]);
  }
  for (; k < n; ++k) max = std::max(max, x[k]);
  return max;
}

// Σ of a row's n entries in double: in order on rows up to kShortRowMax, vectorised on longer ones.
[[gnu::always_inline]] inline double row_total(const float* x, int64_t n) {
  double total = 0;
  if (n <= kShortRowMax) {
    for (int64_t k = 0; k < n; ++k) total += x[k];
    return total;
  }
#pragma omp simd reduction(+ : total)
  for (int64_t k = 0; k < n; ++k) total += x[k];
  return total;
}

// y = e^(x − max) / Σ along rows [first, last), e^ inlined and exact 0 for -inf (kernels/exp.h,
// about 1 ulp from libm's), Σ in double. Each step runs as one vector loop over a block of rows in
// L1 (short rows give a loop over one row nothing to do). With `operand`, each weight, times keep's
// (if not null), is also rounded to bf16 in the block's last loop. x may be y.
[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void softmax_rows(const float* x, float* y,
                                                                                      int64_t first, int64_t last,
                                                                                      int64_t size,
                                                                                      const float* keep = nullptr,
                                                                                      uint16_t* operand = nullptr) {
  const int64_t rows_per_block = std::max<int64_t>(1, 4096 / std::max<int64_t>(size, 1));
  for (int64_t begin = first; begin < last; begin += rows_per_block) {
    const int64_t end = std::min(last, begin + rows_per_block);
    for (int64_t row = begin; row < end; ++row) {
      const float max = row_max(x + row * size, size);
      const float* in = x + row * size;
      float* out = y + row * size;
#pragma omp simd
      for (int64_t k = 0; k < size; ++k) out[k] = in[k] - max;  // all -inf: -inf + inf = NaN
    }
    float* block = y + begin * size;
    const int64_t count = (end - begin) * size;
#pragma omp simd
    for (int64_t i = 0; i < count; ++i) block[i] = kernels::exp_or_zero(block[i]);
    for (int64_t row = begin; row < end; ++row) {
      float* out = y + row * size;
      const float scale = static_cast<float>(1 / row_total(out, size));
#pragma omp simd
      for (int64_t k = 0; k < size; ++k) out[k] *= scale;
    }
    if (operand == nullptr) continue;
    uint16_t* bits = operand + begin * size;
    if (keep == nullptr) {
#pragma omp simd
      for (int64_t i = 0; i < count; ++i) bits[i] = bf16_bits_from_f32(block[i]);
    } else {
      const float* kept = keep + begin * size;
#pragma omp simd
      for (int64_t i = 0; i < count; ++i) bits[i] = bf16_bits_from_f32(block[i] * kept[i]);
    }
  }
}

// log_softmax never runs on oneDNN: its logsoftmax subtracts max + log Σ in one step, ~800×
// less accurate than PyTorch f32 for the most probable class (tests/engine/parity_test.cpp).
Tensor run_softmax(std::string_view op, const Tensor& x, const RowView& p, bool log) {
  if (!log && x.dtype() == DType::f32 && p.inner == 1 && p.size <= kShortRowMax) {
    Tensor y = empty(x.shape(), x.dtype());
    parallel_for_ranges(p.outer, 8 * p.size, [&](int64_t first, int64_t last) {
      softmax_rows(x.data<float>(), y.data<float>(), first, last, p.size);
    });
    return y;
  }
  if (!log && x.dtype() == DType::f32 && x.numel() >= kOneDnnSoftmaxMin) {
    Tensor y = empty(x.shape(), x.dtype());
    if (softmax_onednn(x, y, p)) return y;
  }
  return softmax_kernel(op, x, p, log);
}

// dx = y ⊙ (g − Σ g ⊙ y) along one contiguous row: two passes the compiler vectorises (AVX2
// and FMA where the CPU has them; oneDNN 2.6 has only ref:any for this on AVX2).
template <typename T>
[[gnu::always_inline]] inline void softmax_backward_row_body(const T* y, const T* g, T* dx, int64_t size) {
  // Σ g·y in double: in f32 its error depends on how the loop is vectorised (an unvectorised
  // sanitizer build came out 5.6x behind PyTorch's f32 on a long row of the parity suite).
  double dot = 0;
#pragma omp simd reduction(+ : dot)
  for (int64_t k = 0; k < size; ++k) dot += static_cast<double>(g[k]) * static_cast<double>(y[k]);
  const T dot_t = static_cast<T>(dot);
#pragma omp simd
  for (int64_t k = 0; k < size; ++k) dx[k] = y[k] * (g[k] - dot_t);
}
[[gnu::target_clones("arch=haswell", "default")]] void softmax_backward_short_row(const float* y, const float* g,
                                                                                  float* dx, int64_t size) {
  softmax_backward_row_body(y, g, dx, size);
}
// Long f32 rows also get an AVX-512 clone: it ties oneDNN's jit:avx512_core on long rows, and its
// longer set-up loses on short ones, hence the threshold (tools/bench/README.md, "Thresholds").
[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void softmax_backward_long_row(const float* y,
                                                                                                   const float* g,
                                                                                                   float* dx,
                                                                                                   int64_t size) {
  softmax_backward_row_body(y, g, dx, size);
}
void softmax_backward_row(const float* y, const float* g, float* dx, int64_t size) {
  constexpr int64_t kLongRowMin = 64;
  if (size >= kLongRowMin) return softmax_backward_long_row(y, g, dx, size);
  softmax_backward_short_row(y, g, dx, size);
}
[[gnu::target_clones("arch=haswell", "default")]] void softmax_backward_row(const double* y, const double* g,
                                                                            double* dx, int64_t size) {
  softmax_backward_row_body(y, g, dx, size);
}

// x viewed around dim, after checking x.
RowView softmax_rows(std::string_view op, const Tensor& x, int64_t dim) {
  check_floating(op, "input", x);
  return row_view(x.shape(), normalize_dim(op, dim, x.dim()));
}

}  // namespace

Tensor softmax_forward(const Tensor& x, int64_t dim, bool log) {
  const std::string_view op = log ? "log_softmax" : "softmax";
  return run_softmax(op, x, softmax_rows(op, x, dim), log);
}

Tensor softmax_backward_data(const Tensor& y, const Tensor& g, int64_t dim) {
  const RowView p = softmax_rows("softmax_backward", y, dim);
  Tensor dx = empty(y.shape(), y.dtype());
  dispatch_floating(y.dtype(), "softmax_backward", [&]<typename T>() {
    const T* py = y.data<T>();
    const T* pg = g.data<T>();
    T* pd = dx.data<T>();
    const int64_t size = p.size, inner = p.inner;
    if (inner == 1) {
      parallel_for(p.outer, 3 * size,
                   [&](int64_t row) { softmax_backward_row(py + row * size, pg + row * size, pd + row * size, size); });
      return;
    }
    parallel_for(p.rows(), 3 * size, [&](int64_t row) {
      const int64_t base = p.offset(row);  // a strided row
      T dot = 0;
      for (int64_t k = 0; k < size; ++k) dot += pg[base + k * inner] * py[base + k * inner];
      for (int64_t k = 0; k < size; ++k) pd[base + k * inner] = py[base + k * inner] * (pg[base + k * inner] - dot);
    });
  });
  return dx;
}

void softmax_rows_in_place_with_bf16(float* x, const float* keep, BFloat16* operand, int64_t count, int64_t size) {
  softmax_rows(x, x, 0, count, size, keep, reinterpret_cast<uint16_t*>(operand));
}

Tensor softmax_backward_to_bf16(const Tensor& y, const Tensor& g, const Tensor& keep) {
  AG_CHECK(y.dtype() == DType::f32 && g.dtype() == DType::f32 && g.shape() == y.shape() &&
               (!keep.defined() || (keep.dtype() == DType::f32 && keep.shape() == y.shape())) && y.dim() > 0,
           "softmax_backward_to_bf16: expected f32 y, g (and keep) of one shape, got y {} {} and g {} {}",
           dtype_name(y.dtype()), shape_str(y.shape()), dtype_name(g.dtype()), shape_str(g.shape()));
  const int64_t size = y.size(-1), rows = size == 0 ? 0 : y.numel() / size;
  Tensor dx = empty(y.shape(), DType::bf16);
  const float* py = y.data<float>();
  const float* pg = g.data<float>();
  const float* pk = keep.defined() ? keep.data<float>() : nullptr;
  BFloat16* pd = dx.data<BFloat16>();
  parallel_for_ranges(rows, 3 * size, [&](int64_t begin, int64_t end) {
    std::vector<float> kept(pk ? size : 0), dx_row(size);
    for (int64_t row = begin; row < end; ++row) {
      const float* g_row = pg + row * size;
      if (pk) {
        for (int64_t k = 0; k < size; ++k) kept[k] = g_row[k] * pk[row * size + k];
        g_row = kept.data();
      }
      softmax_backward_row(py + row * size, g_row, dx_row.data(), size);
      round_to_bf16(dx_row.data(), pd + row * size, size);
    }
  });
  return dx;
}

}  // namespace ag
