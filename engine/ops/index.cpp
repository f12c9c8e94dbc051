// Index ops: index_select gathers slices of x along one dim; embedding gathers rows of a weight
// matrix. Both are one gather/scatter-add pair underneath, each the other's backward, so the
// gradient of a gradient works. Indices are i64 and checked against the indexed size.
#include "engine/ops/index.h"

#include "engine/autograd.h"
#include "engine/kernels/check.h"
#include "engine/kernels/index.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/shape.h"
#include "engine/registry.h"

namespace ag {

namespace {

void check_index_dtype(std::string_view op, const Tensor& index) {
  AG_CHECK(index.defined(), "{}: the indices are undefined", op);
  AG_CHECK(index.dtype() == DType::i64, "{}: expected i64 indices, got {} of shape {}", op, dtype_name(index.dtype()),
           shape_str(index.shape()));
}

// Throws naming the first index outside [0, size), its position in `index` and what it indexes.
void check_index_range(std::string_view op, const Tensor& index, int64_t size, std::string_view what) {
  const int64_t* pi = index.data<int64_t>();
  for (int64_t p = 0; p < index.numel(); ++p) {
    if (pi[p] >= 0 && pi[p] < size) continue;
    Shape position(index.dim());
    for (int64_t d = index.dim() - 1, rest = p; d >= 0; --d) {
      position[d] = rest % index.shape()[d];
      rest /= index.shape()[d];
    }
    fail("{}: index {} at position {} of the indices {} is out of range for {}; expected an index in [0, {})", op,
         pi[p], shape_str(position), shape_str(index.shape()), what, size);
  }
}

Tensor index_add_zeros(const Tensor& g, const Shape& in_shape, int64_t dim, const Tensor& index, int64_t pad);

// index_select's node (and the node of index_add_zeros's backward, the same gather).
const OpKind kIndexSelect{"IndexSelectBackward", {.formula = "out[k] = x[index[k]]  →  dx[index[k]] += g[k]"}};

// The differentiable gather: out = x at index[k] along dim, shaped out_shape. `pad` (if ≥ 0) is a
// row that gets no gradient; with zero_pad it also reads as zeros (then that is its true
// derivative; without, it is embedding's padding_idx rule).
Tensor index_gather(OpKind kind, const Tensor& x, int64_t dim, const Tensor& index, const Shape& out_shape, int64_t pad,
                    bool zero_pad) {
  Tensor out = gather_kernel(x, dim, index, out_shape, zero_pad ? pad : -1);
  record(out, kind, {x}, {index}, [in = x.shape(), dim, pad](const BackwardContext& c) {
    // out[o, k, i] = x[o, index[k], i]  →  dx[o, index[k], i] += g[o, k, i]  (none for index[k] == pad)
    return std::vector<Tensor>{index_add_zeros(c.grad, in, dim, c.saved[0], pad)};
  });
  return out;
}

// The backward of the gather as an op of its own: g scatter-added into zeros of in_shape.
Tensor index_add_zeros(const Tensor& g, const Shape& in_shape, int64_t dim, const Tensor& index, int64_t pad) {
  // Registered as an op of its own (gradcheck's --shapes reach it): g must be what the gather of
  // `index` along `dim` of in_shape gives, the indices within that dim.
  const int64_t d = normalize_dim("index_add_zeros", dim, static_cast<int64_t>(in_shape.size()));
  Shape gathered(in_shape.begin(), in_shape.begin() + d);
  gathered.insert(gathered.end(), index.shape().begin(), index.shape().end());
  gathered.insert(gathered.end(), in_shape.begin() + d + 1, in_shape.end());
  AG_CHECK(g.shape() == gathered,
           "index_add_zeros: the gradient has shape {}, expected {} ({} indices into dim {} of {})",
           shape_str(g.shape()), shape_str(gathered), shape_str(index.shape()), d, shape_str(in_shape));
  check_index_range("index_add_zeros", index, in_shape[d], fmt::format("dim {} of {}", d, shape_str(in_shape)));
  Tensor out = scatter_add_kernel(g, in_shape, d, index, pad);
  record(out, {"IndexAddBackward", {.formula = "out[index[k]] += g[k]  →  dg[k] = grad[index[k]]"}}, {g}, {index},
         [g_shape = g.shape(), dim, pad](const BackwardContext& c) {
           // out[o, index[k], i] += g[o, k, i]  (skipping index[k] == pad)  →  dg[o, k, i] = grad[o, index[k], i], 0 at
           // pad
           return std::vector<Tensor>{index_gather(kIndexSelect, c.grad, dim, c.saved[0], g_shape, pad, true)};
         });
  return out;
}

}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  check_defined("index_select", "input", x);
  AG_CHECK(x.dim() > 0, "index_select: cannot index a 0-d tensor");
  const int64_t d = normalize_dim("index_select", dim, x.dim());
  check_index_dtype("index_select", index);
  AG_CHECK(index.dim() == 1, "index_select: expected a 1-D index, got shape {} (input {})", shape_str(index.shape()),
           shape_str(x.shape()));
  check_index_range("index_select", index, x.shape()[d],
                    fmt::format("dim {} of size {} of the input {}", d, x.shape()[d], shape_str(x.shape())));
  Shape shape = x.shape();
  shape[d] = index.numel();
  return index_gather(kIndexSelect, x, d, index, shape, -1, false);
}

Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx) {
  check_floating("embedding", "weight", weight);
  AG_CHECK(weight.dim() == 2, "embedding: expected a 2-D weight (num_embeddings, embedding_dim), got shape {}",
           shape_str(weight.shape()));
  check_index_dtype("embedding", indices);
  const int64_t rows = weight.shape()[0];
  const int64_t pad = padding_index("embedding", padding_idx, rows);
  check_index_range("embedding", indices, rows, fmt::format("a weight of shape {}", shape_str(weight.shape())));
  Shape shape = indices.shape();  // indices.shape + (D)
  shape.push_back(weight.shape()[1]);
  // As in PyTorch, the padding row is read as it is (nn::Embedding keeps it at zero); only its
  // gradient is withheld.
  return index_gather(
      {"EmbeddingBackward", {.formula = "out[k] = W[index[k]]  →  dW[index[k]] += g[k] (none at padding_idx)"}}, weight,
      0, indices, shape, pad, false);
}

int64_t padding_index(std::string_view op, std::optional<int64_t> padding_idx, int64_t rows) {
  if (!padding_idx) return -1;
  AG_CHECK(*padding_idx >= -rows && *padding_idx < rows,
           "{}: padding_idx {} is out of range for {} rows; expected one in [-{}, {}) (negative counts from the end)",
           op, *padding_idx, rows, rows, rows);
  return *padding_idx < 0 ? *padding_idx + rows : *padding_idx;
}

void register_index_ops(Registry& registry) {
  // Random indices into dim `dim` of the first input, the last one repeating the first, so the
  // scatter-add must accumulate.
  auto with_index = [](int64_t dim) {
    return [dim](const std::vector<Shape>& shapes, Generator& gen, DType dtype) {
      const int64_t d = normalize_dim("with_index", dim, static_cast<int64_t>(shapes[0].size()));
      Tensor indices = randint(0, shapes[0][d], shapes[1], gen);
      int64_t* pi = indices.data<int64_t>();
      if (indices.numel() >= 2) pi[indices.numel() - 1] = pi[0];
      return std::vector<Tensor>{draw(shapes[0], {}, gen, dtype).requires_grad_(), indices};
    };
  };
  registry.add({"index_select",
                [](const auto& in) { return index_select(in[0], 0, in[1]); },
                with_index(0),
                {{{4, 3}, {6}}, {{5}, {3}}, {{1, 2}, {3}}, {{3, 2, 2}, {4}}}});
  registry.add({"index_select_dim1",
                [](const auto& in) { return index_select(in[0], 1, in[1]); },
                with_index(1),
                {{{2, 5, 3}, {7}}, {{3, 4}, {2}}, {{2, 1, 3}, {2}}}});
  registry.add({"index_select_last",
                [](const auto& in) { return index_select(in[0], -1, in[1]); },
                with_index(-1),
                {{{3, 4}, {5}}, {{2, 2, 3}, {3}}}});
  registry.add({"embedding",
                [](const auto& in) { return embedding(in[0], in[1]); },
                with_index(0),
                {{{5, 3}, {7}}, {{4, 2}, {2, 3}}, {{1, 4}, {2}}, {{6, 3}, {}}}});
  // With a padding row: that row is zeroed in the weight first (as nn::Embedding keeps it), so its
  // withheld gradient is also the true one and finite differences agree. Indices always contain
  // the padding index 1 and repeats.
  registry.add({"embedding_padding",
                [](const auto& in) {
                  Tensor keep = ones({in[0].size(0), 1}, in[0].dtype());
                  keep.set({1, 0}, 0.0);
                  return embedding(mul(in[0], keep), in[1], 1);
                },
                [](const std::vector<Shape>& shapes, Generator& gen, DType dtype) {
                  Tensor indices = randint(0, shapes[0][0], shapes[1], gen);
                  int64_t* pi = indices.data<int64_t>();
                  if (indices.numel() > 0) pi[0] = 1;      // the padding index
                  if (indices.numel() > 2) pi[2] = pi[1];  // a repeat
                  return std::vector<Tensor>{draw(shapes[0], {}, gen, dtype).requires_grad_(), indices};
                },
                {{{5, 3}, {8}}, {{4, 2}, {2, 3}}, {{3, 5}, {3}}}});
  // The backward of the gather is an op too: its gradient is the double backward of
  // index_select / embedding (with a padding row, whose entries read as zero).
  registry.add(
      {"index_select_backward",
       [](const auto& in) {
         return index_add_zeros(in[0], {in[0].size(0), 4, 2}, 1, in[1], -1);
       },
       [](const std::vector<Shape>& shapes, Generator& gen, DType dtype) {
         return std::vector<Tensor>{draw(shapes[0], {}, gen, dtype).requires_grad_(), randint(0, 4, shapes[1], gen)};
       },
       {{{2, 6, 2}, {6}}, {{1, 3, 2}, {3}}}});
  registry.add({"embedding_backward",
                [](const auto& in) {
                  return index_add_zeros(in[0], {4, 3}, 0, in[1], 2);
                },
                [](const std::vector<Shape>& shapes, Generator& gen, DType dtype) {
                  Tensor indices = tensor({2, 0, 3, 2, 0, 1, 3}, {7}, DType::i64);
                  return std::vector<Tensor>{draw(shapes[0], {}, gen, dtype).requires_grad_(), indices};
                },
                {{{7, 3}, {7}}}});
}

}  // namespace ag
