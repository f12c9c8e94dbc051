#include "engine/tensor.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ostream>

#include "engine/autograd.h"
#include "engine/kernels/bf16.h"
#include "engine/ops/arithmetic.h"

namespace ag {

namespace {

// Small buffers are recycled through a per-thread cache: a training step frees and allocates
// the same small sizes every step, and aligned_alloc costs more than a tiny op's arithmetic.
// Sizes round up to a power of two from 64 bytes to 64 KiB; each size keeps at most 64 buffers
// (none under AddressSanitizer, which must see every free to catch a use after it).
class SmallBufferCache {
 public:
#ifdef __SANITIZE_ADDRESS__
  static constexpr size_t kPerSize = 0;
#else
  static constexpr size_t kPerSize = 64;
#endif
  static constexpr size_t kMinBytes = 64, kMaxBytes = size_t{1} << 16;

  // The size a buffer of `bytes` is allocated with: a cached size class, or 64-byte multiples.
  static size_t allocation_size(size_t bytes) {
    if (bytes > kMaxBytes) return (bytes + 63) / 64 * 64;
    return std::max(kMinBytes, std::bit_ceil(bytes));
  }
  void* take(size_t size) {
    if (size > kMaxBytes || free_[bucket(size)].empty()) return nullptr;
    void* data = free_[bucket(size)].back();
    free_[bucket(size)].pop_back();
    return data;
  }
  bool give(void* data, size_t size) {
    if (size > kMaxBytes || free_[bucket(size)].size() >= kPerSize) return false;
    free_[bucket(size)].push_back(data);
    return true;
  }
  ~SmallBufferCache() {
    for (auto& buffers : free_)
      for (void* data : buffers) std::free(data);
    destroyed = true;
  }
  // Set once the thread's cache is gone: static tensors freed after it bypass it.
  static thread_local inline bool destroyed = false;

 private:
  static size_t bucket(size_t size) { return static_cast<size_t>(std::countr_zero(size / kMinBytes)); }
  std::array<std::vector<void*>, 11> free_;  // 64 B … 64 KiB
};

thread_local SmallBufferCache small_buffers;

thread_local AllocationBudget* allocation_budget = nullptr;

std::string gib(size_t bytes) { return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1 << 30)); }

}  // namespace

AllocationBudget::AllocationBudget(size_t bytes, std::string what)
    : left_(bytes), limit_(bytes), what_(std::move(what)), outer_(allocation_budget) {
  allocation_budget = this;
}

AllocationBudget::~AllocationBudget() { allocation_budget = outer_; }

void AllocationBudget::charge(size_t bytes) {
  AG_CHECK(bytes <= left_, "{} (its tensors would take more than {} bytes)", what_, limit_);
  left_ -= bytes;
}

void AllocationBudget::refund(size_t bytes) { left_ = std::min(limit_, left_ + bytes); }

size_t physical_memory_bytes() {
  static const size_t bytes =
      static_cast<size_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(::sysconf(_SC_PAGE_SIZE));
  return bytes;
}

Storage::Storage(size_t bytes) : bytes(bytes) {
  const size_t size = SmallBufferCache::allocation_size(bytes);
  if (allocation_budget) {
    allocation_budget->charge(size);
    charged_to = allocation_budget;
  }
  data = SmallBufferCache::destroyed ? nullptr : small_buffers.take(size);
  if (data == nullptr) data = std::aligned_alloc(64, size);
  if (data == nullptr) fail("out of memory allocating {} bytes", bytes);
}

Storage::~Storage() {
  if (charged_to != nullptr && charged_to == allocation_budget)
    allocation_budget->refund(SmallBufferCache::allocation_size(bytes));
  if (SmallBufferCache::destroyed || !small_buffers.give(data, SmallBufferCache::allocation_size(bytes)))
    std::free(data);
}

const Shape& Tensor::shape() const { return impl_->shape; }
int64_t Tensor::dim() const { return static_cast<int64_t>(impl_->shape.size()); }
int64_t Tensor::size(int64_t d) const { return impl_->shape[normalize_dim("size", d, dim())]; }
int64_t Tensor::numel() const { return ag::numel(impl_->shape); }
DType Tensor::dtype() const { return impl_->dtype; }
void* Tensor::raw_data() const { return impl_->storage->data; }

void Tensor::check_dtype(DType expected) const {
  AG_CHECK(defined(), "data: the tensor is undefined");
  AG_CHECK(impl_->dtype == expected, "data: tensor has dtype {}, asked for {}", dtype_name(impl_->dtype),
           dtype_name(expected));
}

namespace {

double read_element(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::f32:
      return t.data<float>()[i];
    case DType::f64:
      return t.data<double>()[i];
    case DType::i64:
      return static_cast<double>(t.data<int64_t>()[i]);
    case DType::b8:
      return t.data<bool>()[i] ? 1.0 : 0.0;
    case DType::bf16:
      return static_cast<double>(t.data<BFloat16>()[i]);
  }
  return 0;
}

void write_element(const Tensor& t, int64_t i, double value) {
  switch (t.dtype()) {
    case DType::f32:
      t.data<float>()[i] = static_cast<float>(value);
      break;
    case DType::f64:
      t.data<double>()[i] = value;
      break;
    case DType::i64:
      t.data<int64_t>()[i] = static_cast<int64_t>(value);
      break;
    case DType::b8:
      t.data<bool>()[i] = value != 0;
      break;
    case DType::bf16:
      t.data<BFloat16>()[i] = BFloat16(value);
      break;
  }
}

int64_t flat_index(const Tensor& t, std::initializer_list<int64_t> index, std::string_view op) {
  AG_CHECK(static_cast<int64_t>(index.size()) == t.dim(), "{}: got {} indices for a tensor of shape {}", op,
           index.size(), shape_str(t.shape()));
  int64_t flat = 0;
  int64_t d = 0;
  for (int64_t i : index) {
    const int64_t size = t.shape()[d];
    AG_CHECK(i >= -size && i < size, "{}: index {} is out of range for dim {} of size {}", op, i, d, size);
    flat = flat * size + (i < 0 ? i + size : i);
    ++d;
  }
  return flat;
}

}  // namespace

double Tensor::item() const {
  AG_CHECK(defined(), "item: the tensor is undefined");
  AG_CHECK(numel() == 1, "item: expected a tensor with one element, got shape {}", shape_str(shape()));
  return read_element(*this, 0);
}

double Tensor::at(std::initializer_list<int64_t> index) const {
  return read_element(*this, flat_index(*this, index, "at"));
}

void Tensor::set(std::initializer_list<int64_t> index, double value) {
  check_writable("set");
  write_element(*this, flat_index(*this, index, "set"), value);
  ++impl_->storage->version;
}

std::vector<double> Tensor::to_vector() const {
  std::vector<double> values(numel());
  for (int64_t i = 0; i < numel(); ++i) values[i] = read_element(*this, i);
  return values;
}

bool Tensor::requires_grad() const { return impl_->requires_grad || impl_->grad_fn != nullptr; }

Tensor& Tensor::requires_grad_(bool requires_grad) {
  AG_CHECK(is_leaf(),
           "requires_grad_: can only change requires_grad of a leaf tensor (this one has grad_fn={}); "
           "use detach() to get a leaf",
           impl_->grad_fn->name);
  AG_CHECK(!requires_grad || is_floating(dtype()), "requires_grad_: only floating tensors can require grad, got {}",
           dtype_name(dtype()));
  impl_->requires_grad = requires_grad;
  return *this;
}

bool Tensor::is_leaf() const { return impl_->grad_fn == nullptr; }
const Tensor& Tensor::grad() const { return impl_->grad; }

void Tensor::set_grad(const Tensor& grad) const {
  AG_CHECK(!grad.defined() || grad.shape() == shape(), "set_grad: gradient of shape {} for a tensor of shape {}",
           grad.defined() ? shape_str(grad.shape()) : "", shape_str(shape()));
  impl_->grad = grad;
}

const std::shared_ptr<Node>& Tensor::grad_fn() const { return impl_->grad_fn; }

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph) const {
  run_backward(*this, gradient, retain_graph, create_graph);
}

Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = impl_->storage;
  impl->shape = impl_->shape;
  impl->dtype = impl_->dtype;
  return Tensor(std::move(impl));
}

void Tensor::retain_grad() const {
  AG_CHECK(requires_grad(), "retain_grad: the tensor does not require grad");
  if (is_leaf()) return;  // leaves keep their grad anyway
  std::weak_ptr<TensorImpl> weak = impl_;
  impl_->grad_fn->pre_hooks.push_back([weak](const Tensor& grad) {
    if (auto impl = weak.lock()) impl->grad = impl->grad.defined() ? add(impl->grad, grad) : grad.detach();
    return Tensor();
  });
}

void Tensor::register_hook(TensorHook hook) const {
  AG_CHECK(requires_grad(), "register_hook: the tensor does not require grad, so no gradient will reach the hook");
  if (is_leaf()) {
    impl_->hooks.push_back(std::move(hook));
  } else {
    impl_->grad_fn->pre_hooks.push_back(std::move(hook));
  }
}

void Tensor::register_post_accumulate_grad_hook(std::function<void(const Tensor& leaf)> hook) const {
  AG_CHECK(is_leaf() && requires_grad(),
           "register_post_accumulate_grad_hook: expected a leaf that requires grad (only leaves accumulate a grad)");
  impl_->post_accumulate_hooks.push_back(std::move(hook));
}

uint64_t Tensor::version() const { return impl_->storage->version; }

void Tensor::check_writable(std::string_view op) const {
  AG_CHECK(defined(), "{}: the tensor is undefined", op);
  AG_CHECK(!(grad_enabled() && requires_grad()),
           "{}: in-place writes to a tensor that requires grad are not recorded; use an out-of-place op, or write "
           "under NoGradGuard (as optimizers do){}",
           op, is_leaf() ? "" : " to a detached copy");
}

Tensor& Tensor::zero_() { return fill_(0); }

Tensor& Tensor::fill_(double value) {
  check_writable("fill_");
  dispatch_any(dtype(), [&]<typename T>() { std::fill_n(data<T>(), numel(), static_cast<T>(value)); });
  ++impl_->storage->version;
  return *this;
}

Tensor& Tensor::copy_(const Tensor& source) {
  check_writable("copy_");
  AG_CHECK(source.defined() && source.shape() == shape(), "copy_: source of shape {} into a tensor of shape {}",
           source.defined() ? shape_str(source.shape()) : "undefined", shape_str(shape()));
  if (source.dtype() == dtype()) {
    std::memmove(raw_data(), source.raw_data(), numel() * dtype_size(dtype()));
  } else if (source.dtype() == DType::f32 && dtype() == DType::bf16) {
    convert_f32_to_bf16(source.data<float>(), data<BFloat16>(), numel());
  } else if (source.dtype() == DType::bf16 && dtype() == DType::f32) {
    convert_bf16_to_f32(source.data<BFloat16>(), data<float>(), numel());
  } else {
    dispatch_any(dtype(), [&]<typename To>() {
      dispatch_any(source.dtype(), [&]<typename From>() {
        To* out = data<To>();
        const From* in = source.data<From>();
        const int64_t n = numel();
        for (int64_t i = 0; i < n; ++i) out[i] = static_cast<To>(in[i]);  // to b8: v != 0
      });
    });
  }
  ++impl_->storage->version;
  return *this;
}

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  check_writable("add_");
  AG_CHECK(other.defined() && other.shape() == shape() && other.dtype() == dtype(),
           "add_: expected a tensor of shape {} and dtype {}, got {} {}", shape_str(shape()), dtype_name(dtype()),
           other.defined() ? shape_str(other.shape()) : "undefined", other.defined() ? dtype_name(other.dtype()) : "");
  dispatch_floating(dtype(), "add_", [&]<typename T>() {
    T* out = data<T>();
    const T* in = other.data<T>();
    const T a = static_cast<T>(alpha);
    for (int64_t i = 0, n = numel(); i < n; ++i) out[i] += a * in[i];
  });
  ++impl_->storage->version;
  return *this;
}

Tensor& Tensor::mul_(double factor) {
  check_writable("mul_");
  dispatch_floating(dtype(), "mul_", [&]<typename T>() {
    T* out = data<T>();
    for (int64_t i = 0, n = numel(); i < n; ++i) out[i] *= static_cast<T>(factor);
  });
  ++impl_->storage->version;
  return *this;
}

// ---- printing, in PyTorch's style

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

// ---- factories

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
