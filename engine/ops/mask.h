// Masking ops (mask.cpp): masks are b8 tensors, broadcast against x; true means "fill" / "take a".
#pragma once

#include "engine/tensor.h"

namespace ag {

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
Tensor triu(const Tensor& x, int64_t diagonal = 0);  // over the last two dims
Tensor tril(const Tensor& x, int64_t diagonal = 0);
// (T, T) b8, true above the diagonal: the future positions a causal attention must not see.
Tensor causal_mask(int64_t size);
Tensor logical_not(const Tensor& mask);  // b8 → b8: flips a mask between the two conventions

}  // namespace ag
