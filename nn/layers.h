// The basic layers, with PyTorch's names, defaults and parameter names.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "engine/options.h"
#include "nn/module.h"

namespace ag::nn {

// U(-bound, bound) as a new f32 tensor drawn in row-major order (in torch style, tensor.uniform_'s
// draws and rounding).
Tensor init_uniform(const Shape& shape, double bound, Generator& gen);

class Dropout;

// y = x Wᵀ + b, W (out, in). PyTorch's default init: W and b ~ U(-1/√in, 1/√in); in torch style
// exactly its draws: kaiming_uniform_(W, a=√5), then b.
class Linear : public UnaryModule {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, Generator& gen = default_generator());
  Tensor forward(const Tensor& x) override;
  // activation(this(x)) as one op (linear in engine/ops/matmul.h: a ReLU in the product's epilogue,
  // a GELU in one pass after it and one backward pass for both), in this module's scope; its forward
  // hooks see the activated output.
  Tensor forward_activated(const Tensor& x, Activation activation);
  // dropout(relu(this(x))) as one op (linear_relu_dropout in engine/ops/matmul.h: the mask applied in
  // place, no mask kept), with `dropout`'s p, mode and generator, in this module's scope; its forward
  // hooks see the dropped output (the Dropout module's are not run, as add_dropout's callers skip them).
  Tensor forward_relu_dropout(const Tensor& x, const Dropout& dropout);
  // residual + this(x) as one op (linear_add in engine/ops/matmul.h: the add in the product's
  // epilogue), in this module's scope; its forward hooks see the sum.
  Tensor forward_add(const Tensor& x, const Tensor& residual);
  std::string type_name() const override { return "Linear"; }
  std::string extra_repr() const override;

  Tensor weight;
  Tensor bias;  // undefined without bias
};

// Rows of weight (num, dim) ~ N(0, 1); the padding row (if any) starts at zero and gets no gradient.
class Embedding : public UnaryModule {
 public:
  // padding_idx as in PyTorch: negative counts from the end; std::nullopt for none.
  Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx = std::nullopt,
            Generator& gen = default_generator());
  Tensor forward(const Tensor& indices) override;
  std::string type_name() const override { return "Embedding"; }
  std::string extra_repr() const override;

  Tensor weight;
  std::optional<int64_t> padding_idx;  // in [0, num_embeddings), or none
};

// Uses `gen` (the default generator unless given) for its masks; identity in eval mode.
class Dropout : public UnaryModule {
 public:
  explicit Dropout(double p = 0.5, Generator& gen = default_generator());
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Dropout"; }
  std::string extra_repr() const override;

  double p;
  Generator& generator() const { return *gen_; }  // where the masks are drawn from

 private:
  Generator* gen_;
};

class LayerNorm : public UnaryModule {
 public:
  // bias = false: a weight and no bias (PyTorch 2.1's LayerNorm(bias=False); nanoGPT's LN).
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "LayerNorm"; }
  std::string extra_repr() const override;

  Shape normalized_shape;
  double eps;
  Tensor weight;  // ones
  Tensor bias;    // zeros; undefined without bias
};

class ReLU : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ReLU"; }
};

class GELU : public UnaryModule {
 public:
  explicit GELU(GeluApproximation approximation = GeluApproximation::none) : approximation(approximation) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GELU"; }
  std::string extra_repr() const override;

  GeluApproximation approximation;
};

// Children named "0", "1", …; forward chains them.
class Sequential : public UnaryModule {
 public:
  Sequential() = default;
  explicit Sequential(const std::vector<std::shared_ptr<UnaryModule>>& modules);
  void push_back(std::shared_ptr<UnaryModule> module);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Sequential"; }
  size_t size() const { return modules_.size(); }

 private:
  std::vector<std::shared_ptr<UnaryModule>> modules_;
};

// A list of modules named "0", "1", … (for N identical layers); no forward of its own.
template <typename M>
class ModuleList : public Module {
 public:
  void push_back(std::shared_ptr<M> module) {
    modules_.push_back(register_module(std::to_string(modules_.size()), std::move(module)));
  }
  M& operator[](size_t i) { return *modules_.at(i); }
  size_t size() const { return modules_.size(); }
  auto begin() { return modules_.begin(); }
  auto end() { return modules_.end(); }
  std::string type_name() const override { return "ModuleList"; }
  bool is_container() const override { return true; }

 private:
  std::vector<std::shared_ptr<M>> modules_;
};

}  // namespace ag::nn
