// The op registry: every differentiable op, with how to build valid random inputs for it,
// the shape sets it is checked on, and its gradient-check tolerances. The test suite and
// `attograd gradcheck --all` iterate it, so a registered op is checked without a new test.
#pragma once

#include <algorithm>
#include <array>
#include <deque>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/generator.h"
#include "engine/tensor.h"

namespace ag {

// The points where a function has a kink, at most four: a literal type, so that a Domain, and the
// op table rows that hold one (UnaryOp), are constants, set before any code runs.
class Kinks {
 public:
  constexpr Kinks() = default;
  constexpr Kinks(std::initializer_list<double> points) {
    if (points.size() > points_.size()) throw Error("Domain: at most 4 kinks");
    std::copy(points.begin(), points.end(), points_.begin());
    count_ = points.size();
  }
  constexpr const double* begin() const { return points_.data(); }
  constexpr const double* end() const { return points_.data() + count_; }

 private:
  std::array<double, 4> points_ = {};
  size_t count_ = 0;
};

// Where random inputs are drawn from. Values closer than kink_margin to a kink are redrawn
// (finite differences are wrong across a kink).
struct Domain {
  double low = -2.0;
  double high = 2.0;
  Kinks kinks = {};
  double kink_margin = 1e-2;
  bool distinct = false;  // no two values within kink_margin of each other (max/min ties)
};

using InputMaker = std::function<std::vector<Tensor>(const std::vector<Shape>& shapes, Generator& gen, DType dtype)>;
using OpFunction = std::function<Tensor(const std::vector<Tensor>& inputs)>;

struct Tolerance {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
};

// An entry's PyTorch counterpart, from which tools/golden/parity.py draws its parity cases (it reads
// them with `attograd gradcheck --list --json`): a Python expression of the entry's inputs
// ("torch.exp", "lambda x: F.gelu(x, approximate='tanh')"; `torch` and `F` are in scope), the
// shapes its inputs are drawn in, and the domain of each (an input past the list: the default).
// So far for the elementwise entries.
struct TorchCounterpart {
  enum class Shapes {
    any,        // inputs of one random shape of rank 0-3, empty ones included
    broadcast,  // two inputs whose random shapes broadcast together
  };
  std::string expression;
  std::vector<Domain> domains = {};
  Shapes shapes = Shapes::any;
};

struct OpEntry {
  std::string name;
  OpFunction fn;
  InputMaker make_inputs;                      // differentiable inputs come back with requires_grad
  std::vector<std::vector<Shape>> shape_sets;  // one Shape per input
  Tolerance tolerance = {};
  std::string no_double_backward = {};  // why gradgradcheck cannot pass for this op; empty: it must pass
  // Where this op has no PyTorch counterpart, or differs from PyTorch on purpose: why. The parity
  // suite (tests/engine/parity_test.cpp) prints these and lets an op with no counterpart go
  // without cases; empty: it matches PyTorch and has parity cases.
  std::string differs_from_pytorch = {};
  TorchCounterpart torch = {};  // empty expression: its parity cases are written in parity.py
};

// One floating tensor per shape, drawn from the domain, each requiring grad.
InputMaker real_inputs(Domain domain = {});
// A floating tensor of `shape` drawn from the domain (requires_grad not set).
Tensor draw(const Shape& shape, const Domain& domain, Generator& gen, DType dtype);

class Registry {
 public:
  static const Registry& global();  // all of attograd's ops, and those register_op added
  void add(OpEntry entry);
  const std::deque<OpEntry>& ops() const { return ops_; }
  const OpEntry& find(const std::string& name) const;  // throws, listing the names, if absent

 private:
  std::deque<OpEntry> ops_;  // a deque: register_op keeps every earlier OpEntry& (find, gradcheck_rows) valid
};

// Registers one-input ops on the shapes every unary op is checked on: (3, 4), (2, 3, 5), (1), ().
class UnaryRegistrar {
 public:
  explicit UnaryRegistrar(Registry& registry) : registry_(registry) {}
  // `torch`: its PyTorch counterpart, drawn from `domain` too.
  void add(std::string name, std::function<Tensor(const Tensor&)> op, Domain domain = {}, std::string torch = {}) const;
  const std::vector<std::vector<Shape>> shapes = {{{3, 4}}, {{2, 3, 5}}, {{1}}, {{}}};

 private:
  Registry& registry_;
};

// Adds a program's own op to Registry::global(), so it is checked as the engine's ops are (its
// name must be new: "registry: op 'x' is registered twice"). Not synchronised with readers: add
// ops before any other thread reads the registry (at the start of main, or of a test).
void register_op(OpEntry entry);

// Each op family registers its ops beside their definitions.
void register_arithmetic_ops(Registry& registry);
void register_pointwise_ops(Registry& registry);
void register_reduce_ops(Registry& registry);
void register_shape_ops(Registry& registry);
void register_index_ops(Registry& registry);
void register_mask_ops(Registry& registry);
void register_matmul_ops(Registry& registry);
void register_softmax_ops(Registry& registry);
void register_dropout_ops(Registry& registry);
void register_norm_ops(Registry& registry);
void register_loss_ops(Registry& registry);
void register_attention_ops(Registry& registry);
void register_packed_attention_ops(Registry& registry);

}  // namespace ag
