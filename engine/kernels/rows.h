// A tensor viewed as (outer, size, inner) around one dim or a block of dims: row r (of outer·inner)
// is the `size` elements at offset(r) + k·inner. Softmax's rows, index_select's slices and a
// reduction's contiguous block are all this view.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/shape.h"

namespace ag {

struct RowView {
  int64_t outer = 1;
  int64_t size = 1;
  int64_t inner = 1;
  int64_t rows() const { return outer * inner; }
  int64_t offset(int64_t row) const { return (row / inner) * size * inner + row % inner; }
};

// Around dim (already normalised); a 0-d shape is one row of one element.
inline RowView row_view(const Shape& shape, int64_t dim) {
  RowView v;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < dim) v.outer *= shape[d];
    if (d == dim) v.size = shape[d];
    if (d > dim) v.inner *= shape[d];
  }
  return v;
}

// Around the dims marked in `in_block`, when they are contiguous in the shape once size-1 dims
// are ignored (a bias gradient's leading dims, a row sum's trailing ones); nullopt otherwise.
inline std::optional<RowView> block_view(const Shape& shape, const std::vector<bool>& in_block) {
  RowView v;
  int part = 0;  // 0: before the block, 1: in it, 2: after
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (in_block[d] && part == 2) return std::nullopt;
    if (in_block[d]) part = 1;
    if (!in_block[d] && part == 1) part = 2;
    (part == 0 ? v.outer : part == 1 ? v.size : v.inner) *= shape[d];
  }
  return v;
}

}  // namespace ag
