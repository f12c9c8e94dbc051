#include "nn/layers.h"

#include <cmath>

#include "engine/autograd.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/dropout.h"
#include "engine/ops/index.h"
#include "engine/ops/matmul.h"
#include "engine/ops/norm.h"
#include "engine/ops/pointwise.h"

namespace ag::nn {

Tensor init_uniform(const Shape& shape, double bound, Generator& gen) {
  NoGradGuard no_grad;
  if (TorchGenerator* torch = gen.torch()) {  // tensor.uniform_(-bound, bound)
    Tensor t = empty(shape, DType::f32);
    torch->fill_uniform(t.data<float>(), t.numel(), static_cast<float>(-bound), static_cast<float>(bound));
    return t;
  }
  return sub(mul(rand(shape, DType::f32, gen), 2 * bound), scalar(bound));
}

namespace {

// kaiming_uniform_(w, a=√5)'s bound as PyTorch computes it: gain √(2 / (1 + a²)), std gain / √fan_in,
// bound √3 · std (1/√fan_in in exact arithmetic, not always in double).
double kaiming_uniform_bound(int64_t fan_in) {
  const double a = std::sqrt(5.0);
  const double gain = std::sqrt(2.0 / (1 + a * a));
  return std::sqrt(3.0) * (gain / std::sqrt(static_cast<double>(fan_in)));
}

void check_linear_input(const Tensor& x, const Tensor& weight) {
  AG_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == weight.size(1),
           "Linear: expected input with last dim {} (in_features), got shape {}", weight.size(1),
           x.defined() ? shape_str(x.shape()) : "undefined");
}

}  // namespace

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias, Generator& gen) {
  AG_CHECK(in_features > 0 && out_features > 0, "Linear: expected positive sizes, got in={} out={}", in_features,
           out_features);
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  const double weight_bound = gen.torch() ? kaiming_uniform_bound(in_features) : bound;
  weight = register_parameter("weight", init_uniform({out_features, in_features}, weight_bound, gen));
  if (with_bias) bias = register_parameter("bias", init_uniform({out_features}, bound, gen));
}

Tensor Linear::forward(const Tensor& x) {
  check_linear_input(x, weight);
  return linear(x, weight, bias);  // (..., in) @ (out, in)ᵀ + (out) → (..., out)
}

Tensor Linear::forward_activated(const Tensor& x, Activation activation) {
  return call([&] {
    check_linear_input(x, weight);
    return linear(x, weight, bias, activation);
  });
}

Tensor Linear::forward_relu_dropout(const Tensor& x, const Dropout& dropout) {
  return call([&] {
    check_linear_input(x, weight);
    return linear_relu_dropout(x, weight, bias, dropout.p, dropout.is_training(), dropout.generator());
  });
}

Tensor Linear::forward_add(const Tensor& x, const Tensor& residual) {
  return call([&] {
    check_linear_input(x, weight);
    return linear_add(x, weight, bias, residual);
  });
}

std::string Linear::extra_repr() const {
  return fmt::format("in_features={}, out_features={}, bias={}", weight.size(1), weight.size(0),
                     bias.defined() ? "True" : "False");
}

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding, Generator& gen) {
  AG_CHECK(num_embeddings > 0 && embedding_dim > 0, "Embedding: expected positive sizes, got {} x {}", num_embeddings,
           embedding_dim);
  if (padding) padding_idx = padding_index("Embedding", padding, num_embeddings);
  Tensor initial = randn({num_embeddings, embedding_dim}, DType::f32, gen);
  if (padding_idx)
    for (int64_t j = 0; j < embedding_dim; ++j) initial.set({*padding_idx, j}, 0.0);
  weight = register_parameter("weight", initial);
}

Tensor Embedding::forward(const Tensor& indices) { return embedding(weight, indices, padding_idx); }

std::string Embedding::extra_repr() const {
  std::string out = fmt::format("{}, {}", weight.size(0), weight.size(1));
  return padding_idx ? out + fmt::format(", padding_idx={}", *padding_idx) : out;
}

Dropout::Dropout(double p, Generator& gen) : p(p), gen_(&gen) {
  AG_CHECK(p >= 0 && p <= 1, "Dropout: p must be in [0, 1], got {}", p);
}

Tensor Dropout::forward(const Tensor& x) { return dropout(x, p, is_training(), *gen_); }

std::string Dropout::extra_repr() const {
  // Python prints a float with at least one decimal: p=0.0, p=0.1.
  return p == std::floor(p) ? fmt::format("p={:.1f}, inplace=False", p) : fmt::format("p={}, inplace=False", p);
}

LayerNorm::LayerNorm(Shape normalized_shape, double eps, bool elementwise_affine, bool bias)
    : normalized_shape(std::move(normalized_shape)), eps(eps) {
  if (!elementwise_affine) return;
  weight = register_parameter("weight", ones(this->normalized_shape));
  if (bias) this->bias = register_parameter("bias", zeros(this->normalized_shape));
}

Tensor LayerNorm::forward(const Tensor& x) { return layer_norm(x, normalized_shape, weight, bias, eps); }

std::string LayerNorm::extra_repr() const {
  std::string sizes;
  for (int64_t s : normalized_shape) sizes += std::to_string(s) + ",";
  return fmt::format("({}), eps={}, elementwise_affine={}", sizes, eps, weight.defined() ? "True" : "False");
}

Tensor ReLU::forward(const Tensor& x) { return relu(x); }

Tensor GELU::forward(const Tensor& x) { return gelu(x, approximation); }

std::string GELU::extra_repr() const {
  return approximation == GeluApproximation::tanh ? "approximate='tanh'" : "approximate='none'";
}

Sequential::Sequential(const std::vector<std::shared_ptr<UnaryModule>>& modules) {
  for (const auto& m : modules) push_back(m);
}

void Sequential::push_back(std::shared_ptr<UnaryModule> module) {
  AG_CHECK(module != nullptr, "Sequential: cannot add a null module");
  modules_.push_back(register_module(std::to_string(modules_.size()), std::move(module)));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (auto& m : modules_) y = (*m)(y);
  return y;
}

}  // namespace ag::nn
