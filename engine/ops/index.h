// Index ops (index.cpp): index_select and embedding, each other's gather / scatter-add.
#pragma once

#include <optional>
#include <string_view>

#include "engine/tensor.h"

namespace ag {

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);  // index: 1-D i64
// Rows of weight (V, D) gathered by i64 indices of any shape → indices.shape + (D).
// Backward scatter-adds; rows at padding_idx get no gradient. As in PyTorch a negative padding_idx
// counts from the end (-1 is the last row) and one outside [-V, V) is an error; none: no padding.
Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx = std::nullopt);
// padding_idx resolved to a row in [0, rows), or -1 for none; throws (naming op) when out of range.
int64_t padding_index(std::string_view op, std::optional<int64_t> padding_idx, int64_t rows);

}  // namespace ag
