// Recording mode of the tape: everything one training step did, node by node, kept as bounded
// summaries (never whole tensors) for the step page (`attograd graph TASK --format html`). Off
// unless a StepRecorder is alive on this thread; then each recorded op and each backward node
// reports to it through the forward and backward observers of engine/inspect.h, which cost one
// pointer check per node when no recorder is on.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/graph.h"
#include "engine/inspect.h"

namespace ag {

// What a tensor held, in at most kWholeValues + kHistogramBins numbers whatever its size: a
// tensor of up to kWholeValues elements is kept whole; a larger one keeps its first
// kFirstValues elements and a histogram of its finite values in kHistogramBins equal bins
// between min and max.
struct ValueSummary {
  static constexpr int64_t kWholeValues = 64;
  static constexpr int64_t kFirstValues = 8;
  static constexpr int kHistogramBins = 16;

  Shape shape;
  DType dtype = DType::f32;
  int64_t numel = 0;
  double min = 0, mean = 0, max = 0, norm = 0;  // over the finite values (0 if none)
  int64_t nan_count = 0, inf_count = 0;
  std::vector<double> values;      // whole (numel ≤ kWholeValues) or the first kFirstValues, row-major
  std::vector<int64_t> histogram;  // empty when whole; else kHistogramBins counts over [min, max]
  bool whole() const { return static_cast<int64_t>(values.size()) == numel; }
};

// Summarises a floating, integer or boolean tensor (an undefined one: numel 0).
ValueSummary summarize(const Tensor& t);

struct SavedRecord {
  std::string what;  // "output", "input 1", or "other" (a mask, statistics the op computed)
  Shape shape;
  DType dtype;
  int64_t bytes;
};

// A node as its op recorded it in the forward.
struct ForwardRecord {
  ValueSummary output;
  std::optional<ValueSummary> tangent;  // the output's tangent, when it ran under a forward-AD level
  std::vector<SavedRecord> saved;
  // Time since the previous node was recorded on this thread (or since the recorder started):
  // the op's kernel and its bookkeeping, plus any unrecorded work between the two.
  double seconds = 0;
};

// A node as it ran in the backward.
struct BackwardRecord {
  const Node* node;
  ValueSummary grad;                              // the gradient that arrived (summed over every path)
  std::vector<std::optional<ValueSummary>> sent;  // per input; none where no gradient was sent
  double seconds = 0;
};

// While alive, records on this thread the forward of every node and the first backward walk:
// each node's output, saved tensors and forward time; the backward order, each node's gradient
// in and out and its time; the graph (with parameter names) and the leaves' values and .grad
// after the walk. Summaries only: memory stays a few KB per node. A forward run under a forward-AD
// level (engine/forward_ad.h) also records each output's tangent and the tangents of the leaves.
class StepRecorder : public ForwardObserver, public BackwardObserver {
 public:
  StepRecorder();
  ~StepRecorder() override;
  StepRecorder(const StepRecorder&) = delete;
  StepRecorder& operator=(const StepRecorder&) = delete;

  // Names the leaves (parameter TensorImpl → "encoder.linear.weight") in the graph captured when
  // the backward starts.
  void name_parameters(ParameterNames names) { names_ = std::move(names); }
  // The graph of the recorded walk (empty until a backward started).
  const Graph& graph() const { return graph_; }
  const ForwardRecord* forward(const Node& node) const;
  const std::vector<BackwardRecord>& backward() const { return backward_; }
  // A leaf's value before the step's backward and its .grad after it (by the leaf's node).
  const ValueSummary* leaf_value(const Node& node) const;
  const ValueSummary* leaf_grad(const Node& node) const;
  // A leaf's tangent as the forward read it (null: it carried none).
  const ValueSummary* leaf_tangent(const Node& node) const;

  void node_recorded(const Node& node, const Tensor& output, std::span<const Tensor> inputs) override;
  void walk_started(const Node& root) override;
  void node_ran(const Node& node, const Tensor& grad, std::span<const Tensor> grads, double seconds) override;
  void gradients_met(const Node& from, const Node& into) override;
  void walk_finished() override;

 private:
  ParameterNames names_;
  ForwardObserver* previous_forward_;
  BackwardObserver* previous_backward_;
  bool walk_recorded_ = false, walking_ = false;
  std::chrono::steady_clock::time_point last_record_;
  std::map<const Node*, ForwardRecord> forward_;
  Graph graph_;
  std::vector<BackwardRecord> backward_;
  std::map<const Node*, ValueSummary> leaf_values_, leaf_grads_, leaf_tangents_;
  std::map<const TensorImpl*, ValueSummary> tangents_read_;  // leaves' tangents, until the walk names them
};

}  // namespace ag
