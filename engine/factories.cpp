// The factories: empty, zeros, full, arange, tensor from values, rand, randn, randint.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/element.h"
#include "engine/tensor.h"

namespace ag {

namespace {

std::string gib(size_t bytes) { return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1 << 30)); }

}  // namespace

Tensor empty(Shape shape, DType dtype) {
  for (int64_t size : shape) AG_CHECK(size >= 0, "empty: negative size in shape {}", shape_str(shape));
  const auto elements = static_cast<uint64_t>(numel(shape));
  AG_CHECK(elements <= physical_memory_bytes() / dtype_size(dtype),
           "a tensor of shape {} {} needs more memory than this machine has ({} elements; {} installed)",
           shape_str(shape), dtype_name(dtype), elements, gib(physical_memory_bytes()));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(elements * dtype_size(dtype));
  impl->shape = std::move(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor full(const Shape& shape, double value, DType dtype) {
  Tensor t = empty(shape, dtype);
  if (value == 0 && !std::signbit(value)) {  // all bits zero for every dtype: libc's memset, the fastest fill
    std::memset(t.raw_data(), 0, static_cast<size_t>(t.numel()) * dtype_size(dtype));
    return t;
  }
  dispatch_any(dtype, [&]<typename T>() { std::fill_n(t.data<T>(), t.numel(), static_cast<T>(value)); });
  return t;
}

Tensor zeros(const Shape& shape, DType dtype) { return full(shape, 0, dtype); }
Tensor ones(const Shape& shape, DType dtype) { return full(shape, 1, dtype); }
Tensor zeros_like(const Tensor& like) { return zeros(like.shape(), like.dtype()); }
Tensor ones_like(const Tensor& like) { return ones(like.shape(), like.dtype()); }
Tensor scalar(double value, DType dtype) { return full({}, value, dtype); }

Tensor arange(double start, double end, double step, DType dtype) {
  AG_CHECK(step != 0 && std::isfinite(start) && std::isfinite(end) && std::isfinite(step),
           "arange: expected finite start, end and a non-zero step, got {}, {}, {}", start, end, step);
  const int64_t count = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((end - start) / step)));
  Tensor t = empty({count}, dtype);
  for (int64_t i = 0; i < count; ++i) write_element(t, i, start + static_cast<double>(i) * step);
  return t;
}

Tensor tensor(std::span<const double> values, const Shape& shape, DType dtype) {
  AG_CHECK(static_cast<int64_t>(values.size()) == numel(shape), "tensor: {} values do not fill shape {} ({} elements)",
           values.size(), shape_str(shape), numel(shape));
  Tensor t = empty(shape, dtype);
  for (size_t i = 0; i < values.size(); ++i) write_element(t, static_cast<int64_t>(i), values[i]);
  return t;
}

Tensor tensor(std::initializer_list<double> values, const Shape& shape, DType dtype) {
  return tensor(std::span<const double>(values.begin(), values.size()), shape, dtype);
}

Tensor rand(const Shape& shape, DType dtype, Generator& gen) {
  Tensor t = empty(shape, dtype);
  dispatch_floating(dtype, "rand", [&]<typename T>() {
    T* out = t.data<T>();
    if (TorchGenerator* torch = gen.torch()) return torch->fill_uniform(out, t.numel(), T{0}, T{1});
    for (int64_t i = 0; i < t.numel(); ++i) out[i] = static_cast<T>(gen.uniform());
  });
  return t;
}

Tensor randn(const Shape& shape, DType dtype, Generator& gen) {
  Tensor t = empty(shape, dtype);
  dispatch_floating(dtype, "randn", [&]<typename T>() {
    T* out = t.data<T>();
    if (TorchGenerator* torch = gen.torch()) return torch->fill_normal(out, t.numel(), T{0}, T{1});
    for (int64_t i = 0; i < t.numel(); ++i) out[i] = static_cast<T>(gen.normal());
  });
  return t;
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, Generator& gen) {
  AG_CHECK(low < high, "randint: expected low < high, got low={} high={}", low, high);
  Tensor t = empty(shape, DType::i64);
  int64_t* out = t.data<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i) out[i] = gen.randint(low, high);
  return t;
}

}  // namespace ag
