// Shape ops (shape.cpp): reshape, flatten, unsqueeze and squeeze share storage; the rest copy.
#pragma once

#include <vector>

#include "engine/tensor.h"

namespace ag {

Tensor reshape(const Tensor& x, const Shape& shape);  // one size may be -1
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor squeeze(const Tensor& x, int64_t dim);  // a no-op if that dim is not 1
Tensor squeeze(const Tensor& x);               // every size-1 dim
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim);  // last piece may be smaller
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim);
// Elements start, start+step, ... < end along dim; negative start/end count from the end.
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);

}  // namespace ag
