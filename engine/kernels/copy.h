// The strided copy under the copying shape ops: a window of one tensor into a window of another.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/tensor.h"

namespace ag {

// A strided window on a contiguous tensor: the element at multi-index (i0, i1, ...) of the
// window sits at offset + Σ i_d · strides[d] of the storage (in elements, not bytes).
struct Window {
  int64_t offset = 0;
  Shape strides;
};

// The whole of t as a window.
Window whole(const Tensor& t);

// The `shape`-sized window `from` of src goes to the window `to` of dst (same dtype, any dtype).
// Parallel over ranges of the rows of the last dim.
void copy_window(const Tensor& src, const Window& from, const Tensor& dst, const Window& to, const Shape& shape);

// The same from f32 rows to bf16 rows (both contiguous along the last dim), rounded as
// to(x, DType::bf16): a head split that writes a product's bf16 operand in the one pass.
void copy_window_to_bf16(const Tensor& src, const Window& from, const Tensor& dst, const Window& to,
                         const Shape& shape);

// x with its dims reordered (out dim i is x's dim perm[i]), as a new contiguous tensor.
Tensor permute_kernel(const Tensor& x, const std::vector<int64_t>& perm);

}  // namespace ag
