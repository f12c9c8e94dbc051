// Losses as modules, with PyTorch's names and defaults: loss(input, target) calls the engine's
// loss op (engine/ops/loss.h) with the module's reduction.
#pragma once

#include <string>

#include "engine/ops/loss.h"
#include "nn/module.h"

namespace ag::nn {

// A module with no parameters computing loss(input, target). Prints as PyTorch does: "MSELoss()".
class Loss : public Callable<Loss> {
 public:
  explicit Loss(Reduction reduction) : reduction(reduction) {}
  virtual Tensor forward(const Tensor& input, const Tensor& target) = 0;

  Reduction reduction;
};

class MSELoss : public Loss {
 public:
  explicit MSELoss(Reduction reduction = Reduction::mean) : Loss(reduction) {}
  Tensor forward(const Tensor& input, const Tensor& target) override { return mse_loss(input, target, reduction); }
  std::string type_name() const override { return "MSELoss"; }
};

// Sigmoid and binary cross-entropy in one numerically stable op; targets are probabilities.
class BCEWithLogitsLoss : public Loss {
 public:
  explicit BCEWithLogitsLoss(Reduction reduction = Reduction::mean) : Loss(reduction) {}
  Tensor forward(const Tensor& logits, const Tensor& target) override {
    return binary_cross_entropy_with_logits(logits, target, reduction);
  }
  std::string type_name() const override { return "BCEWithLogitsLoss"; }
};

// logits (N, C), i64 class targets (N); targets equal to ignore_index add nothing and the mean
// is over the others.
class CrossEntropyLoss : public Loss {
 public:
  explicit CrossEntropyLoss(int64_t ignore_index = -100, Reduction reduction = Reduction::mean)
      : Loss(reduction), ignore_index(ignore_index) {}
  Tensor forward(const Tensor& logits, const Tensor& target) override {
    return cross_entropy(logits, target, ignore_index, reduction);
  }
  std::string type_name() const override { return "CrossEntropyLoss"; }

  int64_t ignore_index;
};

}  // namespace ag::nn
