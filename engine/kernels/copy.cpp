// The strided copy under the copying shape ops (permute, cat, stack, slice and its backward).
#include "engine/kernels/copy.h"

#include <algorithm>
#include <type_traits>

#include "engine/kernels/parallel.h"

namespace ag {

namespace {

// The one copy kernel of the copying shape ops: the `shape`-sized window `from` of src goes to
// the window `to` of dst (same dtype, any dtype). Parallel over ranges of the rows of the last
// dim; within a range the row's multi-index advances like an odometer (no division per row).
template <size_t Bytes>
void copy_window_bytes(const Tensor& src, const Window& from, const Tensor& dst, const Window& to, const Shape& shape) {
  using Element = std::conditional_t<Bytes == 1, uint8_t, std::conditional_t<Bytes == 4, uint32_t, uint64_t>>;
  const int64_t ndim = static_cast<int64_t>(shape.size());
  const int64_t total = numel(shape);
  if (total == 0) return;
  const int64_t inner = ndim == 0 ? 1 : shape.back();
  const int64_t src_step = ndim == 0 ? 1 : from.strides.back();
  const int64_t dst_step = ndim == 0 ? 1 : to.strides.back();
  const auto* ps = static_cast<const Element*>(src.raw_data());
  auto* pd = static_cast<Element*>(dst.raw_data());
  parallel_for_ranges(total / inner, inner, [&](int64_t begin, int64_t end) {
    Shape index(std::max<int64_t>(ndim - 1, 0));  // the row's index over the outer dims
    int64_t s = from.offset, d = to.offset;
    for (int64_t k = ndim - 2, rest = begin; k >= 0; --k) {
      index[k] = rest % shape[k];
      rest /= shape[k];
      s += index[k] * from.strides[k];
      d += index[k] * to.strides[k];
    }
    for (int64_t row = begin; row < end; ++row) {
      for (int64_t j = 0; j < inner; ++j) pd[d + j * dst_step] = ps[s + j * src_step];
      for (int64_t k = ndim - 2; k >= 0; --k) {  // next row: carry through the outer dims
        s += from.strides[k];
        d += to.strides[k];
        if (++index[k] < shape[k]) break;
        s -= shape[k] * from.strides[k];
        d -= shape[k] * to.strides[k];
        index[k] = 0;
      }
    }
  });
}

}  // namespace

Window whole(const Tensor& t) { return {0, contiguous_strides(t.shape())}; }

void copy_window(const Tensor& src, const Window& from, const Tensor& dst, const Window& to, const Shape& shape) {
  switch (dtype_size(src.dtype())) {
    case 1:
      return copy_window_bytes<1>(src, from, dst, to, shape);
    case 4:
      return copy_window_bytes<4>(src, from, dst, to, shape);
    case 8:
      return copy_window_bytes<8>(src, from, dst, to, shape);
    default:
      fail("copy: unsupported element size {}", dtype_size(src.dtype()));
  }
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
