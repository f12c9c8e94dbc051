// Shape ops. reshape, flatten, unsqueeze and squeeze are views: they share storage (and so the
// version counter) with their input. transpose, permute, cat, stack, split, chunk, slice and
// narrow copy.
#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/registry.h"

namespace ag {

namespace {

// A tensor sharing x's storage with another shape of the same element count.
Tensor view_as_shape(const Tensor& x, const Shape& shape) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = x.impl()->storage;
  impl->shape = shape;
  impl->dtype = x.dtype();
  return Tensor(std::move(impl));
}

}  // namespace

Tensor reshape(const Tensor& x, const Shape& shape) {
  AG_CHECK(x.defined(), "reshape: the input is undefined");
  Shape resolved = shape;
  int64_t known = 1;
  int64_t infer_at = -1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1) {
      AG_CHECK(infer_at < 0, "reshape: only one size may be -1, got {}", shape_str(shape));
      infer_at = static_cast<int64_t>(d);
    } else {
      AG_CHECK(shape[d] >= 0, "reshape: invalid size {} in {}", shape[d], shape_str(shape));
      known *= shape[d];
    }
  }
  if (infer_at >= 0) {
    AG_CHECK(known != 0 && x.numel() % known == 0, "reshape: cannot infer the -1 in {} for {} elements (input {})",
             shape_str(shape), x.numel(), shape_str(x.shape()));
    resolved[infer_at] = x.numel() / known;
  }
  AG_CHECK(numel(resolved) == x.numel(), "reshape: shape {} has {} elements, but the input {} has {}",
           shape_str(shape), numel(resolved), shape_str(x.shape()), x.numel());
  if (resolved == x.shape()) return x;
  Tensor out = view_as_shape(x, resolved);
  record(out, "ReshapeBackward", {x}, {}, [in = x.shape()](const BackwardContext& c) {
    // out = x viewed with another shape
    return std::vector<Tensor>{reshape(c.grad, in)};
  });
  return out;
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  AG_CHECK(x.defined(), "flatten: the input is undefined");
  if (x.dim() == 0) return reshape(x, {1});
  const int64_t start = normalize_dim("flatten", start_dim, x.dim());
  const int64_t end = normalize_dim("flatten", end_dim, x.dim());
  AG_CHECK(start <= end, "flatten: start_dim {} comes after end_dim {}", start_dim, end_dim);
  Shape shape(x.shape().begin(), x.shape().begin() + start);
  shape.push_back(numel(Shape(x.shape().begin() + start, x.shape().begin() + end + 1)));
  shape.insert(shape.end(), x.shape().begin() + end + 1, x.shape().end());
  return reshape(x, shape);
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  AG_CHECK(x.defined(), "unsqueeze: the input is undefined");
  const int64_t d = normalize_dim("unsqueeze", dim, x.dim() + 1);
  Shape shape = x.shape();
  shape.insert(shape.begin() + d, 1);
  return reshape(x, shape);
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  AG_CHECK(x.defined(), "squeeze: the input is undefined");
  if (x.dim() == 0) return x;
  const int64_t d = normalize_dim("squeeze", dim, x.dim());
  if (x.shape()[d] != 1) return x;
  Shape shape = x.shape();
  shape.erase(shape.begin() + d);
  return reshape(x, shape);
}

Tensor squeeze(const Tensor& x) {
  AG_CHECK(x.defined(), "squeeze: the input is undefined");
  Shape shape;
  for (int64_t size : x.shape())
    if (size != 1) shape.push_back(size);
  return reshape(x, shape);
}

void register_shape_ops(Registry& registry) {
  registry.add({"reshape", [](const auto& in) { return reshape(in[0], {-1, 2}); }, real_inputs(),
                {{{3, 4}}, {{2, 3, 2}}, {{2}}}});
  registry.add({"flatten", [](const auto& in) { return flatten(in[0], 1); }, real_inputs(),
                {{{3, 4}}, {{2, 3, 5}}, {{2, 1, 1, 3}}}});
  registry.add({"unsqueeze", [](const auto& in) { return unsqueeze(in[0], -1); }, real_inputs(),
                {{{3, 4}}, {{5}}, {{}}}});
  registry.add({"squeeze", [](const auto& in) { return squeeze(in[0]); }, real_inputs(),
                {{{3, 1, 4}}, {{1}}, {{1, 5, 1}}}});
}

}  // namespace ag
