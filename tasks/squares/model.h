// The two models of `train squares`, behind one interface: seed 004's EncoderDecoderSelfAttn
// ("selfattn") and the full Transformer with positional encoding ("transformer"). Both see the
// first two corners of a square (the source) and produce the last two (the target).
#pragma once

#include <memory>
#include <string>

#include "nn/module.h"

namespace ag::squares {

inline constexpr int64_t kSourceLen = 2;
inline constexpr int64_t kTargetLen = 2;

struct ModelConfig {
  std::string model = "selfattn";  // or "transformer"
  int64_t heads = 3;
  int64_t d_model = 2;
  int64_t ff_units = 10;
  int64_t layers = 1;  // transformer: encoder and decoder layers each
  double dropout = 0;  // transformer
};

class SquaresModel {
 public:
  virtual ~SquaresModel() = default;
  // The module whose state_dict is checkpointed (names as in the PyTorch peer).
  virtual nn::Module& module() = 0;
  // Training: X (N, 4, 2) whole squares → the last two corners (N, 2, 2) by teacher forcing.
  virtual Tensor teacher_forced(const Tensor& X) = 0;
  // Eval: source (N, 2, 2) → the last two corners (N, 2, 2), each decoded from the ones before.
  virtual Tensor predict(const Tensor& source) = 0;
};

// Checks the config (a clear error for an unknown model or sizes that do not fit) and builds it
// from the default generator.
std::unique_ptr<SquaresModel> make_model(const ModelConfig& config);

// Whole squares (N, 4, 2) split into the given corners and the ones to predict.
struct SourceTarget {
  Tensor source;  // (N, 2, 2)
  Tensor target;  // (N, 2, 2)
};
SourceTarget split(const Tensor& points);

// The f32 values a square's forward keeps (Note [memory estimate] in train.cpp): `train`'s estimate,
// and the chunks `eval squares` decodes.
double values_per_square(const ModelConfig& m);

}  // namespace ag::squares
