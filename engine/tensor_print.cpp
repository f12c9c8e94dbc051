// Tensor::str and operator<<: printing in PyTorch's style.
#include <algorithm>
#include <cmath>
#include <ostream>

#include "engine/autograd.h"
#include "engine/element.h"
#include "engine/tensor.h"

namespace ag {

namespace {

struct NumberFormat {
  bool integral = true;
  bool scientific = false;
};

NumberFormat choose_format(const Tensor& t) {
  NumberFormat format;
  if (!is_floating(t.dtype())) return format;
  double max_abs = 0;
  double min_abs = INFINITY;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = read_element(t, i);
    if (!std::isfinite(v)) continue;
    if (v != std::round(v)) format.integral = false;
    max_abs = std::max(max_abs, std::abs(v));
    if (v != 0) min_abs = std::min(min_abs, std::abs(v));
  }
  format.scientific = max_abs >= 1e8 || (min_abs < 1e-4 && !format.integral) ||
                      (max_abs / min_abs > 1000 && !format.integral && min_abs < 1e-2);
  return format;
}

std::string format_number(double v, DType dtype, const NumberFormat& format) {
  if (dtype == DType::b8) return v != 0 ? "True" : "False";
  if (dtype == DType::i64) return fmt::format("{}", static_cast<int64_t>(v));
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (format.scientific) return fmt::format("{:.4e}", v);
  if (format.integral) return fmt::format("{:.0f}.", v);
  return fmt::format("{:.4f}", v);
}

void format_dims(const Tensor& t, const std::vector<std::string>& cells, size_t width, int64_t dim, int64_t offset,
                 int indent, std::string& out) {
  out += '[';
  const int64_t size = t.shape()[dim];
  const int64_t stride = numel(Shape(t.shape().begin() + dim + 1, t.shape().end()));
  for (int64_t i = 0; i < size; ++i) {
    if (i > 0) {
      out += ',';
      if (dim + 1 == t.dim()) {
        out += ' ';
      } else {
        out += std::string(t.dim() - dim - 1, '\n');
        out += std::string(indent + dim + 1, ' ');
      }
    }
    if (dim + 1 == t.dim()) {
      const std::string& cell = cells[offset + i];
      out += std::string(width - cell.size(), ' ') + cell;
    } else {
      format_dims(t, cells, width, dim + 1, offset + i * stride, indent, out);
    }
  }
  out += ']';
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  const NumberFormat format = choose_format(*this);
  std::vector<std::string> cells(numel());
  size_t width = 0;
  for (int64_t i = 0; i < numel(); ++i) {
    cells[i] = format_number(read_element(*this, i), dtype(), format);
    width = std::max(width, cells[i].size());
  }
  std::string out = "tensor(";
  if (dim() == 0) {
    out += cells[0];
  } else {
    format_dims(*this, cells, width, 0, 0, 7, out);
  }
  if (dtype() != DType::f32) out += fmt::format(", dtype={}", dtype_name(dtype()));
  if (grad_fn()) {
    out += fmt::format(", grad_fn=<{}>", grad_fn()->name);
  } else if (requires_grad()) {
    out += ", requires_grad=True";
  }
  return out + ")";
}

std::ostream& operator<<(std::ostream& os, const Tensor& tensor) { return os << tensor.str(); }

}  // namespace ag
