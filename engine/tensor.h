// ag::Tensor: a cheap handle to a shared TensorImpl (storage, shape, dtype, autograd fields).
// Storage is row-major, contiguous and 64-byte aligned; reshape-like ops share it.
#pragma once

#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/dtype.h"
#include "engine/generator.h"
#include "engine/shape.h"
#include "engine/storage.h"

namespace ag {

struct Node;
struct TensorImpl;
class Tensor;

// A gradient hook: gets the gradient, returns a replacement or an undefined Tensor to keep it.
using TensorHook = std::function<Tensor(const Tensor&)>;

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

  const Shape& shape() const;
  int64_t dim() const;
  int64_t size(int64_t dim) const;  // negative dims count from the end
  int64_t numel() const;
  DType dtype() const;

  // Typed pointer to the elements; throws if T does not match the dtype.
  template <typename T>
  T* data() const {
    check_dtype(dtype_of<T>());
    return static_cast<T*>(raw_data());
  }
  void* raw_data() const;

  double item() const;                                           // the value of a one-element tensor
  double at(std::initializer_list<int64_t> index) const;         // one element, by multi-index
  void set(std::initializer_list<int64_t> index, double value);  // in-place write of one element
  std::vector<double> to_vector() const;                         // all elements, row-major

  // Autograd.
  bool requires_grad() const;
  Tensor& requires_grad_(bool requires_grad = true);
  bool is_leaf() const;
  const Tensor& grad() const;  // undefined until a backward reaches this tensor
  void set_grad(const Tensor& grad) const;
  const std::shared_ptr<Node>& grad_fn() const;
  // Back-propagates from this tensor. A non-scalar needs `gradient` of its shape. The graph is
  // freed afterwards unless retain_graph or create_graph (which builds a graph of the gradient).
  void backward(const Tensor& gradient = {}, bool retain_graph = false, bool create_graph = false) const;
  Tensor detach() const;  // shares storage, no grad_fn, requires_grad false
  void retain_grad() const;
  void register_hook(TensorHook hook) const;
  // A leaf's hook that runs after a backward has accumulated this walk's whole gradient into
  // grad() (PyTorch's register_post_accumulate_grad_hook): the gradient is final for the walk.
  void register_post_accumulate_grad_hook(std::function<void(const Tensor& leaf)> hook) const;
  uint64_t version() const;

  // In-place writes. Never recorded: allowed on tensors that need no gradient, and on
  // leaves under NoGradGuard (optimizer steps). Each bumps the version counter.
  Tensor& zero_();
  Tensor& fill_(double value);
  Tensor& copy_(const Tensor& source);                  // same shape; converts dtype
  Tensor& add_(const Tensor& other, double alpha = 1);  // this += alpha * other, same shape
  Tensor& mul_(double factor);

  std::string str() const;  // PyTorch-style: tensor([[0.1500, 0.2264]], grad_fn=<SoftmaxBackward>)

 private:
  void check_dtype(DType expected) const;
  void check_writable(std::string_view op) const;
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& tensor);

// Tensors by name, in order: a module's state_dict, a safetensors file's contents.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  DType dtype = DType::f32;
  bool requires_grad = false;  // meaningful for leaves; a non-leaf requires grad through grad_fn
  Tensor grad;
  std::shared_ptr<Node> grad_fn;
  std::weak_ptr<Node> grad_accumulator;  // leaves: the AccumulateGrad node of the live graphs
  std::vector<TensorHook> hooks;         // leaves' hooks (a non-leaf keeps its hooks on grad_fn)
  std::vector<std::function<void(const Tensor&)>> post_accumulate_hooks;  // leaves only
  // Autocast's bf16 copy of this tensor, and the version it was made from: made without grad mode
  // (decoding, evaluation: a decoder's cached keys convert once), or written by the op that made
  // the tensor (attach_bf16_copy, engine/autocast.h). It lives as long as the tensor.
  std::shared_ptr<TensorImpl> bf16_copy;
  uint64_t bf16_copy_version = 0;
  Tensor tangent;              // forward mode: the tangent at level tangent_level (engine/forward_ad.h)
  uint64_t tangent_level = 0;  // the DualLevel the tangent belongs to; 0: none
};

// Factories. Floating factories default to f32. Every factory throws ag::Error, naming the shape,
// when the tensor would not fit in the machine's memory.
Tensor empty(Shape shape, DType dtype = DType::f32);  // uninitialised
Tensor zeros(const Shape& shape, DType dtype = DType::f32);
Tensor ones(const Shape& shape, DType dtype = DType::f32);
Tensor full(const Shape& shape, double value, DType dtype = DType::f32);
Tensor zeros_like(const Tensor& like);
Tensor ones_like(const Tensor& like);
Tensor arange(double start, double end, double step = 1, DType dtype = DType::f32);
Tensor scalar(double value, DType dtype = DType::f32);
// From row-major values: tensor({1, 2, 3, 4}, {2, 2}). Throws if the counts differ.
Tensor tensor(std::span<const double> values, const Shape& shape, DType dtype = DType::f32);
Tensor tensor(std::initializer_list<double> values, const Shape& shape, DType dtype = DType::f32);
Tensor rand(const Shape& shape, DType dtype = DType::f32, Generator& gen = default_generator());      // U[0,1)
Tensor randn(const Shape& shape, DType dtype = DType::f32, Generator& gen = default_generator());     // N(0,1)
Tensor randint(int64_t low, int64_t high, const Shape& shape, Generator& gen = default_generator());  // i64

}  // namespace ag
