// The strided copy under the copying shape ops (permute, cat, stack, slice and its backward).
#include "engine/kernels/copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "engine/kernels/bf16.h"
#include "engine/kernels/parallel.h"

namespace ag {

namespace {

// The walk under every copy of a window: calls copy_rows(s, d, count, s_step, d_step) for each run
// of `count` rows (along the last dim) of the `shape`-sized window `from` that lie along the dim
// before the last: the first row's storage offsets in `from` and in its place in `to`, and how far
// apart the rows are on each side. Parallel over ranges of rows; within a range the multi-index
// advances like an odometer (no division per row).
template <typename CopyRows>
void for_each_row(const Window& from, const Window& to, const Shape& shape, CopyRows copy_rows) {
  const int64_t ndim = static_cast<int64_t>(shape.size());
  const int64_t total = numel(shape);
  if (total == 0) return;
  const int64_t inner = ndim == 0 ? 1 : shape.back();
  parallel_for_ranges(total / inner, inner, [&](int64_t begin, int64_t end) {
    Shape index(std::max<int64_t>(ndim - 1, 0));  // the row's index over the outer dims
    int64_t s = from.offset, d = to.offset;
    for (int64_t k = ndim - 2, rest = begin; k >= 0; --k) {
      index[k] = rest % shape[k];
      rest /= shape[k];
      s += index[k] * from.strides[k];
      d += index[k] * to.strides[k];
    }
    for (int64_t row = begin; row < end;) {
      if (ndim >= 2) {  // the rest of this run along dim ndim-2 without the odometer
        const int64_t k = ndim - 2, run = std::min(shape[k] - index[k], end - row);
        copy_rows(s, d, run, from.strides[k], to.strides[k]);
        row += run;
        s += run * from.strides[k];
        d += run * to.strides[k];
        index[k] += run;
      } else {
        copy_rows(s, d, 1, 0, 0);
        ++row;
      }
      for (int64_t k = ndim - 2; k >= 0; --k) {  // carry through the outer dims
        if (index[k] < shape[k]) break;
        s -= shape[k] * from.strides[k];
        d -= shape[k] * to.strides[k];
        index[k] = 0;
        if (k == 0) break;
        s += from.strides[k - 1];
        d += to.strides[k - 1];
        ++index[k - 1];
      }
    }
  });
}

// The one copy kernel of the copying shape ops: the window `from` of src goes to the window `to` of
// dst (same dtype, any dtype). A row of 64 bytes or more contiguous on both sides (a head split, a
// cat) is one memcpy.
template <size_t Bytes>
void copy_window_bytes(const void* src, const Window& from, void* dst, const Window& to, const Shape& shape) {
  using Element =
      std::conditional_t<Bytes == 1, uint8_t,
                         std::conditional_t<Bytes == 2, uint16_t, std::conditional_t<Bytes == 4, uint32_t, uint64_t>>>;
  const int64_t inner = shape.empty() ? 1 : shape.back();
  const int64_t src_step = shape.empty() ? 1 : from.strides.back();
  const int64_t dst_step = shape.empty() ? 1 : to.strides.back();
  const bool contiguous_rows = src_step == 1 && dst_step == 1 && inner * Bytes >= 64;  // else a call costs more
  const auto* ps = static_cast<const Element*>(src);
  auto* pd = static_cast<Element*>(dst);
  for_each_row(from, to, shape, [&](int64_t s, int64_t d, int64_t count, int64_t s_step, int64_t d_step) {
    for (int64_t r = 0; r < count; ++r, s += s_step, d += d_step) {
      if (contiguous_rows) {
        std::memcpy(pd + d, ps + s, inner * Bytes);
      } else {
        for (int64_t j = 0; j < inner; ++j) pd[d + j * dst_step] = ps[s + j * src_step];
      }
    }
  });
}

// A last dim of at most 8 bytes, contiguous and aligned on both sides, copies as one wide
// element: a head split's rows of 2 floats then move as single 8-byte words, and the odometer
// turns per row of the dim before (`attograd bench attention --shape 16,4,6,3`: 44 → 40 µs).
bool widen_last_dim(const void* src, Window& from, const void* dst, Window& to, Shape& shape, size_t& bytes) {
  if (shape.size() < 2 || shape.back() < 2 || from.strides.back() != 1 || to.strides.back() != 1) return false;
  const int64_t width = shape.back();
  const size_t wide = bytes * width;
  if (wide > 8 || (wide & (wide - 1)) != 0) return false;  // 2, 4 or 8 bytes
  auto divisible = [&](const Window& w, const void* data) {
    return w.offset % width == 0 && reinterpret_cast<uintptr_t>(data) % wide == 0 &&
           std::all_of(w.strides.begin(), w.strides.end() - 1, [&](int64_t s) { return s % width == 0; });
  };
  if (!divisible(from, src) || !divisible(to, dst)) return false;
  for (Window* w : {&from, &to}) {
    w->offset /= width;
    w->strides.pop_back();
    for (int64_t& s : w->strides) s /= width;
  }
  shape.pop_back();
  bytes = wide;
  return true;
}

}  // namespace

Window whole(const Tensor& t) { return {0, contiguous_strides(t.shape())}; }

void copy_window(const Tensor& src, const Window& from, const Tensor& dst, const Window& to, const Shape& shape) {
  const void* ps = src.raw_data();
  void* pd = dst.raw_data();
  size_t bytes = dtype_size(src.dtype());
  Window wide_from = from, wide_to = to;
  Shape wide_shape = shape;
  const bool widened = widen_last_dim(ps, wide_from, pd, wide_to, wide_shape, bytes);
  const Window& f = widened ? wide_from : from;
  const Window& t = widened ? wide_to : to;
  const Shape& s = widened ? wide_shape : shape;
  switch (bytes) {
    case 1:
      return copy_window_bytes<1>(ps, f, pd, t, s);
    case 2:
      return copy_window_bytes<2>(ps, f, pd, t, s);
    case 4:
      return copy_window_bytes<4>(ps, f, pd, t, s);
    case 8:
      return copy_window_bytes<8>(ps, f, pd, t, s);
    default:
      fail("copy: unsupported element size {}", bytes);
  }
}

void copy_window_to_bf16(const Tensor& src, const Window& from, const Tensor& dst, const Window& to,
                         const Shape& shape) {
  AG_CHECK(src.dtype() == DType::f32 && dst.dtype() == DType::bf16 && !shape.empty() && from.strides.back() == 1 &&
               to.strides.back() == 1,
           "copy_window_to_bf16: expected f32 rows into bf16 rows, both contiguous along the last dim");
  const float* ps = src.data<float>();
  BFloat16* pd = dst.data<BFloat16>();
  for_each_row(from, to, shape, [&](int64_t s, int64_t d, int64_t count, int64_t s_step, int64_t d_step) {
    round_rows_to_bf16(ps + s, s_step, pd + d, d_step, count, shape.back());  // one call a run: a head's rows
  });
}

// x with its dims reordered (out dim i is x's dim perm[i]), as a new contiguous tensor.
Tensor permute_kernel(const Tensor& x, const std::vector<int64_t>& perm) {
  Shape shape(perm.size());
  Window from{0, Shape(perm.size())};
  const Shape in_strides = contiguous_strides(x.shape());
  for (size_t i = 0; i < perm.size(); ++i) {
    shape[i] = x.shape()[perm[i]];
    from.strides[i] = in_strides[perm[i]];
  }
  Tensor out = empty(shape, x.dtype());
  copy_window(x, from, out, whole(out), shape);
  return out;
}

}  // namespace ag
