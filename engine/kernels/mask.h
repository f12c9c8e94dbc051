// The masking ops' kernels, without recording; inputs already checked.
#pragma once

#include <cstdint>

#include "engine/tensor.h"

namespace ag {

// out = mask ? value : x, the b8 mask broadcast to x's shape.
Tensor masked_fill_kernel(const Tensor& x, const Tensor& mask, double value);

// out = condition ? a : b over `shape`, the broadcast of the three.
Tensor where_kernel(const Tensor& condition, const Tensor& a, const Tensor& b, const Shape& shape);

// x[..., i, j] where j - i >= diagonal (upper) or j - i <= diagonal (lower), zero elsewhere; any dtype.
Tensor triangle_kernel(const Tensor& x, int64_t diagonal, bool upper);

}  // namespace ag
