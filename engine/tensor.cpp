// Tensor, the handle: its shape and dtype, element access, and its autograd fields (grad, grad_fn,
// hooks, backward, detach).
#include "engine/tensor.h"

#include <vector>

#include "engine/autograd.h"
#include "engine/element.h"
#include "engine/ops/arithmetic.h"

namespace ag {

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

}  // namespace ag
