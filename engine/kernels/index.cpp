// The gather and scatter-add kernels under index_select and embedding.
#include "engine/kernels/index.h"

#include <algorithm>
#include <cstring>

#include "engine/kernels/parallel.h"
#include "engine/kernels/rows.h"

namespace ag {

// out (outer, n, inner) = x (outer, size, inner) at rows index[k] of the middle dim; a row whose
// index equals zero_row (if ≥ 0) reads as zeros. Any dtype; index already range-checked.
Tensor gather_kernel(const Tensor& x, int64_t dim, const Tensor& index, const Shape& out_shape, int64_t zero_row) {
  const RowView a = row_view(x.shape(), dim);
  const int64_t n = index.numel();
  Tensor out = empty(out_shape, x.dtype());
  const size_t row_bytes = static_cast<size_t>(a.inner) * dtype_size(x.dtype());
  const auto* px = static_cast<const unsigned char*>(x.raw_data());
  auto* po = static_cast<unsigned char*>(out.raw_data());
  const int64_t* pi = index.data<int64_t>();
  parallel_for(a.outer * n, a.inner, [&](int64_t r) {  // r = o·n + k
    const int64_t o = r / n;
    const int64_t k = r % n;
    unsigned char* dst = po + static_cast<size_t>(r) * row_bytes;
    if (pi[k] == zero_row) {
      std::memset(dst, 0, row_bytes);
    } else {
      std::memcpy(dst, px + static_cast<size_t>(o * a.size + pi[k]) * row_bytes, row_bytes);
    }
  });
  return out;
}

// out (outer, size, inner) = 0, then out[o, index[k], :] += g[o, k, :] for every k whose index is
// not skip_row. Parallel over (o, block of columns): no two threads write one element, and each
// element sums its contributions in the order of k (deterministic).
Tensor scatter_add_kernel(const Tensor& g, const Shape& in_shape, int64_t dim, const Tensor& index, int64_t skip_row) {
  const RowView a = row_view(in_shape, dim);
  const int64_t n = index.numel();
  Tensor out = zeros(in_shape, g.dtype());
  constexpr int64_t kBlock = 256;
  const int64_t blocks = (a.inner + kBlock - 1) / kBlock;
  dispatch_floating(g.dtype(), "index_add", [&]<typename T>() {
    const T* pg = g.data<T>();
    T* po = out.data<T>();
    const int64_t* pi = index.data<int64_t>();
    parallel_for(a.outer * blocks, n * kBlock, [&](int64_t item) {
      const int64_t o = item / blocks;
      const int64_t j0 = (item % blocks) * kBlock;
      const int64_t j1 = std::min(a.inner, j0 + kBlock);
      for (int64_t k = 0; k < n; ++k) {
        if (pi[k] == skip_row) continue;
        const T* src = pg + (o * n + k) * a.inner;
        T* dst = po + (o * a.size + pi[k]) * a.inner;
        for (int64_t j = j0; j < j1; ++j) dst[j] += src[j];
      }
    });
  });
  return out;
}

}  // namespace ag
