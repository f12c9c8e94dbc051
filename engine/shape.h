// Shapes: sizes of a row-major contiguous tensor, and the helpers ops use to check them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ag {

using Shape = std::vector<int64_t>;

// "(2,3)"; a scalar prints as "()".
std::string shape_str(const Shape& shape);
// The element count; throws on a negative size or a product past int64 (every count of elements
// is formed here, so a size read from a file or a flag cannot wrap it).
// "(4,5) (5)": one shape per input.
std::string shapes_str(const std::vector<Shape>& shapes);
int64_t numel(const Shape& shape);
Shape contiguous_strides(const Shape& shape);

// Wraps a negative dim (-1 is the last) and throws if it is out of range for ndim dims.
int64_t normalize_dim(std::string_view op, int64_t dim, int64_t ndim);

// numpy broadcasting of two shapes; throws naming op and both shapes if they do not broadcast.
Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b);

// Parses "4x5" into {4,5}; "" or "scalar" is the scalar shape. Throws on anything else.
Shape parse_shape(std::string_view text);

}  // namespace ag
