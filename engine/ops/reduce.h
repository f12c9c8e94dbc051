// Reductions (reduce.cpp) and the broadcast pair broadcast_to / sum_to.
#pragma once

#include <vector>

#include "engine/tensor.h"

namespace ag {

Tensor sum(const Tensor& x);  // all elements, 0-d result
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor max(const Tensor& x);                                     // gradient split evenly among tied maxima (as PyTorch)
Tensor max(const Tensor& x, int64_t dim, bool keepdim = false);  // gradient to the first arg-max
Tensor min(const Tensor& x);
Tensor min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);  // i64, not differentiable
Tensor broadcast_to(const Tensor& x, const Shape& shape);           // materialises; backward sum_to
Tensor sum_to(const Tensor& x, const Shape& shape);                 // sums broadcast dims away

}  // namespace ag
