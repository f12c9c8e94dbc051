// The Adam/AdamW update of one parameter over contiguous arrays, in one pass, in loops the
// compiler vectorises (AVX-512, AVX2 clones). The embeddings of a real vocabulary make this the
// biggest cost of a small model's step.
#pragma once

#include <cstdint>
#include <vector>

namespace ag::kernels {

// One step's constants (nn/optim.cpp computes them from the options and the step count).
struct AdamStep {
  double beta1, beta2, eps;
  double l2;           // Adam's weight decay, added to the gradient (0 for AdamW)
  double kept;         // AdamW's decoupled decay: the parameter is first scaled by this (1 for Adam)
  double correction2;  // √(1 − β₂ᵗ)
  double step_size;    // −lr / (1 − β₁ᵗ)
};

// For each i: d = g + l2·p; m = β₁m + (1−β₁)d; v = β₂v + (1−β₂)d²;
// p = kept·p + step_size · m / (√v / correction2 + eps). Each element on its own: the same bits
// for any thread count.
void adam_step(const AdamStep& step, float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n);
void adam_step(const AdamStep& step, double* param, const double* grad, double* exp_avg, double* exp_avg_sq, int64_t n);

// One f32 parameter's update, for adam_steps.
struct AdamTensor {
  AdamStep step;
  float* param;
  const float* grad;
  float* exp_avg;
  float* exp_avg_sq;
  int64_t n;
  uint16_t* param_bf16 = nullptr;  // when set: the updated param rounded to bf16 (bf16_bits_from_f32) here too
};
// Every tensor's adam_step in one parallel region, their elements shared evenly between the threads
// as if they were one array: a model's many small parameters (biases, layer norms) then take one
// fork and join, not one each, and keep both threads busy. The same bits as adam_step on each; a
// param_bf16 gets the bits to(param, DType::bf16) would give, written in the same pass (autocast's
// copy of a weight, so the next forward converts nothing: engine/autocast.h).
void adam_steps(const std::vector<AdamTensor>& tensors);

}  // namespace ag::kernels
