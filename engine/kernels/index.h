// Gather and scatter-add along one dim, without recording (the index ops record them as each
// other's backward). Indices are i64 and already range-checked.
#pragma once

#include <cstdint>

#include "engine/tensor.h"

namespace ag {

// out (outer, n, inner) = x (outer, size, inner) at rows index[k] of dim; a row whose index equals
// zero_row (if ≥ 0) reads as zeros. Any dtype.
Tensor gather_kernel(const Tensor& x, int64_t dim, const Tensor& index, const Shape& out_shape, int64_t zero_row);

// out (in_shape) = 0, then out[o, index[k], :] += g[o, k, :] for every k whose index is not skip_row.
Tensor scatter_add_kernel(const Tensor& g, const Shape& in_shape, int64_t dim, const Tensor& index, int64_t skip_row);

}  // namespace ag
