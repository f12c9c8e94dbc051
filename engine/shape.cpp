#include "engine/shape.h"

#include <algorithm>
#include <charconv>

#include "engine/error.h"

namespace ag {

std::string shape_str(const Shape& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ",";
    out += std::to_string(shape[i]);
  }
  return out + ")";
}

std::string shapes_str(const std::vector<Shape>& shapes) {
  std::string text;
  for (const Shape& s : shapes) {
    if (!text.empty()) text += ' ';
    text += shape_str(s);
  }
  return text;
}

int64_t numel(const Shape& shape) {
  for (int64_t size : shape) AG_CHECK(size >= 0, "shape {}: negative size {}", shape_str(shape), size);
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  int64_t n = 1;
  for (int64_t size : shape)
    AG_CHECK(!__builtin_mul_overflow(n, size, &n), "shape {}: more elements than a tensor can hold (2^63 - 1)",
             shape_str(shape));
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  return strides;
}

int64_t normalize_dim(std::string_view op, int64_t dim, int64_t ndim) {
  const int64_t lo = ndim == 0 ? -1 : -ndim;
  const int64_t hi = ndim == 0 ? 0 : ndim - 1;
  AG_CHECK(dim >= lo && dim <= hi, "{}: dim {} is out of range for a tensor with {} dims (expected {} to {})", op, dim,
           ndim, lo, hi);
  return dim < 0 ? dim + (ndim == 0 ? 1 : ndim) : dim;
}

Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b) {
  if (a == b) return a;
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    AG_CHECK(da == db || da == 1 || db == 1, "{}: shapes {} and {} cannot be broadcast (dim {}: {} vs {})", op,
             shape_str(a), shape_str(b), i, da, db);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape parse_shape(std::string_view text) {
  Shape shape;
  if (text.empty() || text == "scalar") return shape;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t end = std::min(text.find('x', pos), text.size());
    int64_t size = -1;
    const auto [ptr, ec] = std::from_chars(text.data() + pos, text.data() + end, size);
    AG_CHECK(ec == std::errc() && ptr == text.data() + end && size >= 0,
             "shape '{}': expected sizes separated by 'x', like 4x5", text);
    shape.push_back(size);
    pos = end + 1;
  }
  return shape;
}

}  // namespace ag
