// Shape ops. reshape, flatten, unsqueeze and squeeze are views: they share storage (and so the
// version counter) with their input. transpose, permute, cat, stack, split, chunk, slice and
// narrow copy.
#include "engine/ops/shape.h"

#include <algorithm>
#include <type_traits>

#include "engine/autograd.h"
#include "engine/kernels/check.h"
#include "engine/kernels/copy.h"
#include "engine/kernels/parallel.h"
#include "engine/ops/arithmetic.h"
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

// Python's slice arithmetic on one dim: negative start/end count from the end, both are
// clamped to [0, size], and an empty range has no elements.
struct SliceRange {
  int64_t start = 0;
  int64_t step = 1;
  int64_t count = 0;
};

SliceRange resolve_slice(int64_t size, int64_t start, int64_t end, int64_t step) {
  auto clamp_index = [size](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size); };
  const int64_t lo = clamp_index(start);
  const int64_t hi = clamp_index(end);
  return {lo, step, hi > lo ? (hi - lo - 1) / step + 1 : 0};  // no overflow for a huge step
}

// The window of a tensor of `shape` that slice(dim, range) reads.
Window slice_window(const Shape& shape, int64_t dim, const SliceRange& range) {
  Window w = {0, contiguous_strides(shape)};
  w.offset = range.start * w.strides[dim];
  w.strides[dim] *= range.step;
  return w;
}

Shape sliced_shape(Shape shape, int64_t dim, const SliceRange& range) {
  shape[dim] = range.count;
  return shape;
}

Tensor slice_range(const Tensor& x, int64_t dim, const SliceRange& range);

// The backward of slice as an op of its own: grad (the slice's shape) written into zeros of the
// input's shape at the sliced positions. Its own backward slices again, so double backward works.
Tensor slice_backward(const Tensor& grad, const Shape& in_shape, int64_t dim, const SliceRange& range) {
  AG_CHECK(grad.shape() == sliced_shape(in_shape, dim, range), "slice_backward: gradient of shape {}, expected {}",
           shape_str(grad.shape()), shape_str(sliced_shape(in_shape, dim, range)));
  Tensor out = zeros(in_shape, grad.dtype());
  copy_window(grad, whole(grad), out, slice_window(in_shape, dim, range), grad.shape());
  record(out, {"SliceBackwardBackward", {.formula = "out = g placed into zeros  →  dg = the slice of grad"}}, {grad},
         {}, [dim, range](const BackwardContext& c) {
           // out[..., start + i·step, ...] = grad[..., i, ...], zero elsewhere
           return std::vector<Tensor>{slice_range(c.grad, dim, range)};
         });
  return out;
}

Tensor slice_range(const Tensor& x, int64_t dim, const SliceRange& range) {
  const Shape shape = sliced_shape(x.shape(), dim, range);
  Tensor out = empty(shape, x.dtype());
  copy_window(x, slice_window(x.shape(), dim, range), out, whole(out), shape);
  record(out, {"SliceBackward", {.formula = "out = x[start:stop:step]  →  dx = g placed into zeros at the slice"}}, {x},
         {}, [in = x.shape(), dim, range](const BackwardContext& c) {
           // out[..., i, ...] = x[..., start + i·step, ...]
           return std::vector<Tensor>{slice_backward(c.grad, in, dim, range)};
         });
  return out;
}

// Checks the tensors of cat/stack: at least one, all defined, one dtype.
void check_tensor_list(std::string_view op, const std::vector<Tensor>& tensors) {
  AG_CHECK(!tensors.empty(), "{}: expected a non-empty list of tensors", op);
  for (size_t i = 0; i < tensors.size(); ++i) {
    AG_CHECK(tensors[i].defined(), "{}: tensor {} is undefined", op, i);
    AG_CHECK(tensors[i].dtype() == tensors[0].dtype(),
             "{}: tensor {} is {} {}, but tensor 0 is {} {}: dtypes must match", op, i, dtype_name(tensors[i].dtype()),
             shape_str(tensors[i].shape()), dtype_name(tensors[0].dtype()), shape_str(tensors[0].shape()));
  }
}

}  // namespace

Tensor reshape(const Tensor& x, const Shape& shape) {
  check_defined("reshape", "input", x);
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
  AG_CHECK(numel(resolved) == x.numel(), "reshape: shape {} has {} elements, but the input {} has {}", shape_str(shape),
           numel(resolved), shape_str(x.shape()), x.numel());
  if (resolved == x.shape()) return x;
  Tensor out = view_as_shape(x, resolved);
  record(out, {"ReshapeBackward", {.formula = "out = x reshaped  →  dx = g reshaped back"}}, {x}, {},
         [in = x.shape()](const BackwardContext& c) {
           // out = x viewed with another shape
           return std::vector<Tensor>{reshape(c.grad, in)};
         });
  return out;
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  check_defined("flatten", "input", x);
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
  check_defined("unsqueeze", "input", x);
  const int64_t d = normalize_dim("unsqueeze", dim, x.dim() + 1);
  Shape shape = x.shape();
  shape.insert(shape.begin() + d, 1);
  return reshape(x, shape);
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  check_defined("squeeze", "input", x);
  if (x.dim() == 0) return x;
  const int64_t d = normalize_dim("squeeze", dim, x.dim());
  if (x.shape()[d] != 1) return x;
  Shape shape = x.shape();
  shape.erase(shape.begin() + d);
  return reshape(x, shape);
}

Tensor squeeze(const Tensor& x) {
  check_defined("squeeze", "input", x);
  Shape shape;
  for (int64_t size : x.shape())
    if (size != 1) shape.push_back(size);
  return reshape(x, shape);
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  check_defined("transpose", "input", x);
  const int64_t d0 = normalize_dim("transpose", dim0, x.dim());
  const int64_t d1 = normalize_dim("transpose", dim1, x.dim());
  if (d0 == d1) return x;
  std::vector<int64_t> perm(x.dim());
  for (int64_t d = 0; d < x.dim(); ++d) perm[d] = d;
  std::swap(perm[d0], perm[d1]);
  Tensor out = permute_kernel(x, perm);
  record(out, {"TransposeBackward", {.formula = "out = x with two dims swapped  →  dx = g swapped back"}}, {x}, {},
         [d0, d1](const BackwardContext& c) {
           // out = x with dims d0 and d1 swapped
           return std::vector<Tensor>{transpose(c.grad, d0, d1)};
         });
  return out;
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  check_defined("permute", "input", x);
  AG_CHECK(static_cast<int64_t>(dims.size()) == x.dim(), "permute: got {} dims for a tensor of shape {} ({} dims)",
           dims.size(), shape_str(x.shape()), x.dim());
  std::vector<int64_t> perm(dims.size());
  std::vector<int64_t> inverse(dims.size(), -1);
  bool identity = true;
  for (size_t i = 0; i < dims.size(); ++i) {
    perm[i] = normalize_dim("permute", dims[i], x.dim());
    AG_CHECK(inverse[perm[i]] < 0, "permute: dim {} appears twice in {} (input {})", perm[i], shape_str(dims),
             shape_str(x.shape()));
    inverse[perm[i]] = static_cast<int64_t>(i);
    identity = identity && perm[i] == static_cast<int64_t>(i);
  }
  if (identity) return x;
  Tensor out = permute_kernel(x, perm);
  record(out, {"PermuteBackward", {.formula = "out = x permuted  →  dx = g permuted back"}}, {x}, {},
         [inverse](const BackwardContext& c) {
           // out = x with out dim i taken from x's dim perm[i]  →  dx = g permuted back
           return std::vector<Tensor>{permute(c.grad, inverse)};
         });
  return out;
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  check_tensor_list("cat", tensors);
  const Tensor& first = tensors[0];
  AG_CHECK(first.dim() > 0, "cat: cannot concatenate 0-d tensors (tensor 0 has shape ()); use stack");
  const int64_t d = normalize_dim("cat", dim, first.dim());
  Shape shape = first.shape();
  shape[d] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Shape& s = tensors[i].shape();
    bool match = s.size() == first.shape().size();
    for (size_t k = 0; match && k < s.size(); ++k) match = static_cast<int64_t>(k) == d || s[k] == first.shape()[k];
    AG_CHECK(match, "cat: tensor {} has shape {}, but tensor 0 has shape {}: sizes must match except in dim {}", i,
             shape_str(s), shape_str(first.shape()), d);
    shape[d] += s[d];
  }
  Tensor out = empty(shape, first.dtype());
  Window to = whole(out);
  std::vector<int64_t> sizes;
  for (const Tensor& t : tensors) {
    copy_window(t, whole(t), out, to, t.shape());
    to.offset += t.shape()[d] * to.strides[d];
    sizes.push_back(t.shape()[d]);
  }
  record(out, {"CatBackward", {.formula = "out = cat(t₀, t₁, …)  →  dtᵢ = the slice of g where tᵢ landed"}}, tensors,
         {}, [d, sizes](const BackwardContext& c) {
           // out = [t0, t1, ...] along dim d  →  dt_i = the slice of g where t_i landed
           std::vector<Tensor> grads(sizes.size());
           int64_t start = 0;
           for (size_t i = 0; i < sizes.size(); ++i) {
             if (c.needs_grad[i]) grads[i] = narrow(c.grad, d, start, sizes[i]);
             start += sizes[i];
           }
           return grads;
         });
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  check_tensor_list("stack", tensors);
  const Shape& in = tensors[0].shape();
  for (size_t i = 0; i < tensors.size(); ++i) {
    AG_CHECK(tensors[i].shape() == in, "stack: tensor {} has shape {}, but tensor 0 has shape {}: all must match", i,
             shape_str(tensors[i].shape()), shape_str(in));
  }
  const int64_t d = normalize_dim("stack", dim, static_cast<int64_t>(in.size()) + 1);
  Shape shape = in;
  shape.insert(shape.begin() + d, static_cast<int64_t>(tensors.size()));
  Shape piece = in;  // each tensor as a size-1 slab of the output
  piece.insert(piece.begin() + d, 1);
  Tensor out = empty(shape, tensors[0].dtype());
  Window to = whole(out);
  for (const Tensor& t : tensors) {
    copy_window(t, {0, contiguous_strides(piece)}, out, to, piece);
    to.offset += to.strides[d];
  }
  record(out, {"StackBackward", {.formula = "out = stack(t₀, t₁, …)  →  dtᵢ = g[…, i, …]"}}, tensors, {},
         [d, in](const BackwardContext& c) {
           // out[..., i, ...] = t_i  →  dt_i = g[..., i, ...]
           std::vector<Tensor> grads(c.needs_grad.size());
           for (size_t i = 0; i < grads.size(); ++i)
             if (c.needs_grad[i]) grads[i] = reshape(narrow(c.grad, d, static_cast<int64_t>(i), 1), in);
           return grads;
         });
  return out;
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  check_defined("split", "input", x);
  AG_CHECK(x.dim() > 0, "split: cannot split a 0-d tensor");
  const int64_t d = normalize_dim("split", dim, x.dim());
  AG_CHECK(split_size >= 1, "split: expected split_size >= 1, got {} (input {})", split_size, shape_str(x.shape()));
  const int64_t size = x.shape()[d];
  std::vector<Tensor> pieces;
  for (int64_t start = 0; start < size; start += split_size) {
    pieces.push_back(narrow(x, d, start, std::min(split_size, size - start)));  // each piece is its own op
  }
  if (pieces.empty()) pieces.push_back(narrow(x, d, 0, 0));  // an empty dim splits into one empty piece
  return pieces;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  check_defined("chunk", "input", x);
  AG_CHECK(x.dim() > 0, "chunk: cannot chunk a 0-d tensor");
  AG_CHECK(chunks >= 1, "chunk: expected chunks >= 1, got {} (input {})", chunks, shape_str(x.shape()));
  const int64_t size = x.shape()[normalize_dim("chunk", dim, x.dim())];
  // As in PyTorch: pieces of ceil(size / chunks), so there may be fewer than `chunks`; an empty
  // dim gives `chunks` empty pieces.
  if (size == 0) {
    std::vector<Tensor> pieces;
    for (int64_t k = 0; k < chunks; ++k) pieces.push_back(narrow(x, dim, 0, 0));
    return pieces;
  }
  return split(x, (size + chunks - 1) / chunks, dim);
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  check_defined("slice", "input", x);
  AG_CHECK(x.dim() > 0, "slice: cannot slice a 0-d tensor");
  const int64_t d = normalize_dim("slice", dim, x.dim());
  AG_CHECK(step >= 1, "slice: expected step >= 1, got {} (input {}, dim {})", step, shape_str(x.shape()), d);
  return slice_range(x, d, resolve_slice(x.shape()[d], start, end, step));
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  check_defined("narrow", "input", x);
  AG_CHECK(x.dim() > 0, "narrow: cannot narrow a 0-d tensor");
  const int64_t d = normalize_dim("narrow", dim, x.dim());
  const int64_t size = x.shape()[d];
  AG_CHECK(start >= -size && start <= size, "narrow: start {} is out of range for dim {} of size {} (input {})", start,
           d, size, shape_str(x.shape()));
  const int64_t begin = start < 0 ? start + size : start;
  AG_CHECK(length >= 0 && length <= size - begin,
           "narrow: start {} + length {} exceeds dim {} of size {} (input {}); expected 0 <= length <= {}", begin,
           length, d, size, shape_str(x.shape()), size - begin);
  return slice_range(x, d, {begin, 1, length});
}

void register_shape_ops(Registry& registry) {
  registry.add({"reshape",
                [](const auto& in) {
                  return reshape(in[0], {-1, 2});
                },
                real_inputs(),
                {{{3, 4}}, {{2, 3, 2}}, {{2}}}});
  registry.add({"flatten",
                [](const auto& in) { return flatten(in[0], 1); },
                real_inputs(),
                {{{3, 4}}, {{2, 3, 5}}, {{2, 1, 1, 3}}}});
  registry.add(
      {"unsqueeze", [](const auto& in) { return unsqueeze(in[0], -1); }, real_inputs(), {{{3, 4}}, {{5}}, {{}}}});
  registry.add(
      {"squeeze", [](const auto& in) { return squeeze(in[0]); }, real_inputs(), {{{3, 1, 4}}, {{1}}, {{1, 5, 1}}}});

  registry.add({"transpose",
                [](const auto& in) { return transpose(in[0], 0, -1); },
                real_inputs(),
                {{{3, 4}}, {{2, 3, 5}}, {{1, 5}}, {{3, 1}}}});
  registry.add({"transpose_inner",
                [](const auto& in) { return transpose(in[0], -2, -1); },
                real_inputs(),
                {{{2, 3, 5}}, {{3, 1, 4}}, {{2, 2, 3, 1}}}});
  registry.add({"permute",
                [](const auto& in) {
                  return permute(in[0], {2, 0, 1});
                },
                real_inputs(),
                {{{2, 3, 5}}, {{1, 4, 3}}, {{3, 1, 1}}}});
  registry.add({"permute_4d",
                [](const auto& in) {
                  return permute(in[0], {0, 2, 1, 3});
                },
                real_inputs(),
                {{{2, 3, 1, 5}}, {{1, 2, 3, 2}}}});
  // cat takes any number of inputs: one tensor per shape in the set.
  registry.add({"cat",
                [](const auto& in) { return cat(in, 0); },
                real_inputs(),
                {{{2, 3}, {5, 3}}, {{1, 5}, {3, 5}, {2, 5}}, {{1, 2, 3}, {2, 2, 3}}, {{3}, {1}}}});
  registry.add({"cat_dim1",
                [](const auto& in) { return cat(in, 1); },
                real_inputs(),
                {{{2, 3, 2}, {2, 1, 2}, {2, 4, 2}}, {{3, 1}, {3, 2}}}});
  registry.add({"cat_last",
                [](const auto& in) { return cat(in, -1); },
                real_inputs(),
                {{{2, 3}, {2, 5}}, {{2, 2, 1}, {2, 2, 3}, {2, 2, 2}}}});
  registry.add({"stack",
                [](const auto& in) { return stack(in, 0); },
                real_inputs(),
                {{{3}, {3}}, {{2, 3}, {2, 3}, {2, 3}}, {{1, 3, 2}, {1, 3, 2}}, {{}, {}}}});
  registry.add({"stack_last",
                [](const auto& in) { return stack(in, -1); },
                real_inputs(),
                {{{3}, {3}, {3}}, {{2, 3}, {2, 3}}, {{1, 3, 2}, {1, 3, 2}}}});
  // split/chunk: each piece scaled by its position (so a piece's gradient landing in the wrong
  // place shows), then put back together.
  auto scaled_cat = [](std::vector<Tensor> pieces, int64_t dim) {
    for (size_t k = 0; k < pieces.size(); ++k) pieces[k] = mul(pieces[k], static_cast<double>(k + 1));
    return cat(pieces, dim);
  };
  registry.add({"split",
                [scaled_cat](const auto& in) { return scaled_cat(split(in[0], 2, 1), 1); },
                real_inputs(),
                {{{3, 5}}, {{2, 7, 3}}, {{4, 1}}, {{2, 4, 2}}}});
  registry.add({"chunk",
                [scaled_cat](const auto& in) { return scaled_cat(chunk(in[0], 3, 0), 0); },
                real_inputs(),
                {{{7, 2}}, {{6}}, {{2, 3, 4}}, {{1, 3}}, {{5, 1, 3}}}});
  registry.add({"slice",
                [](const auto& in) { return slice(in[0], 1, -4, 100, 2); },
                real_inputs(),
                {{{3, 5}}, {{2, 7, 3}}, {{2, 3}}, {{1, 4, 1}}}});
  registry.add({"slice_negative_end",
                [](const auto& in) { return slice(in[0], -1, 1, -1); },
                real_inputs(),
                {{{3, 5}}, {{2, 3, 4}}, {{4, 3}}}});
  registry.add(
      {"narrow", [](const auto& in) { return narrow(in[0], 0, 1, 2); }, real_inputs(), {{{3, 4}}, {{4, 2, 3}}, {{3}}}});
  // slice's backward is an op too (its gradient is the double backward of slice).
  registry.add({"slice_backward",
                [](const auto& in) {
                  const Shape shape = {in[0].size(0), 7, 2};
                  return slice_backward(in[0], shape, 1, resolve_slice(7, -5, 7, 2));
                },
                real_inputs(),
                {{{2, 3, 2}}, {{1, 3, 2}}}});
}

}  // namespace ag
