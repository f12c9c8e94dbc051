// Where a step's time goes, by op kind, as torch.profiler's key_averages() table shows it. While a
// Profiler lives on a thread it observes every node recorded in the forward and every node run in
// the backward (engine/inspect.h's observers, one pointer check per node when none is on):
//   forward   an op's time is the time since the previous node was recorded (its kernel and its
//             bookkeeping, as the step page counts it); work between ops that records nothing (an
//             optimizer step) goes to the row `section` names, or else to the next op;
//   backward  a node's time is its backward function's; the time between nodes (summing gradients
//             where paths meet, scheduling) is a row of its own.
// Products count their multiply-adds (2 FLOPs each, the backward twice the forward), every row the
// bytes of the outputs it wrote and of the tensors allocated during it.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "engine/inspect.h"

namespace ag {

class Profiler : public ForwardObserver, public BackwardObserver {
 public:
  struct Row {
    std::string op;  // "linear", or "LinearBackward" for its backward
    int64_t calls = 0;
    double seconds = 0;
    double flops = 0;      // of the matrix products (0 for other ops)
    double bytes_out = 0;  // the outputs (or gradients) written
    double bytes_allocated = 0;
  };

  Profiler();
  ~Profiler() override;
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Times `work` (code that records no node, such as an optimizer step) as a row of its own.
  template <typename Work>
  void section(const std::string& name, Work&& work) {
    settle();
    work();
    charge(name, 0, 0);
  }

  // The rows, most time first.
  std::vector<Row> rows() const;
  // The table over `steps` steps: per row its share of the profiled time, calls and time per step,
  // GFLOP/s, GB/s and MB allocated per step; then the total, the page faults per step and the oneDNN
  // primitives built per step (each new shape builds, and JIT-compiles, its own: fresh code pages).
  std::string table(int64_t steps) const;

  void node_recorded(const Node& node, const Tensor& output, std::span<const Tensor> inputs) override;
  void walk_started(const Node& root) override;
  void node_ran(const Node& node, const Tensor& grad, std::span<const Tensor> grads, double seconds) override;
  void gradients_met(const Node&, const Node&) override {}
  void walk_finished() override;

 private:
  void settle();  // starts the clock and the allocation count afresh
  Row& charge(const std::string& op, double flops, double bytes_out);

  std::map<std::string, Row> rows_;
  std::chrono::steady_clock::time_point last_;
  int64_t allocated_at_last_ = 0;
  long page_faults_at_start_ = 0;
  int64_t primitives_at_start_ = 0;
  ForwardObserver* previous_forward_;
  BackwardObserver* previous_backward_;
};

}  // namespace ag
