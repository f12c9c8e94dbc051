// layer_norm without recording: the forward over (rows, cols) and the fast first-order backward.
// f32 rows up to a measured length run on oneDNN; the rest on reference loops.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/tensor.h"

namespace ag {

// The (rows, cols) problem, its affine parts and eps: everything a layer_norm primitive depends on.
struct NormProblem {
  int64_t rows, cols;
  bool scale, shift;
  double eps;
};

struct LayerNormForward {
  Tensor out;              // x's shape
  Tensor mean, rstd;       // stat_shape (x's with the normalised dims 1)
  Tensor onednn_variance;  // stat_shape when oneDNN ran (its backward needs it); undefined otherwise
};
LayerNormForward layer_norm_forward(const NormProblem& p, const Tensor& x, const Tensor& weight, const Tensor& bias,
                                    const Shape& stat_shape);

// {dx (when needs_dx; undefined otherwise), dw (cols), db (cols)} when the forward ran on oneDNN;
// nullopt otherwise (the caller then writes the backward in engine ops).
std::optional<std::vector<Tensor>> layer_norm_backward_fast(const NormProblem& p, const Tensor& x, const Tensor& w,
                                                            const Tensor& mean, const Tensor& rstd,
                                                            const Tensor& onednn_variance, const Tensor& g,
                                                            bool needs_dx);

}  // namespace ag
