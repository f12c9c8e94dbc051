// Looking inside the tape while it is built and walked: scopes (which module created a node),
// anomaly mode (the first NaN/Inf, forward or backward, named by op and scope) and backward
// observers (BackwardTrace prints the walk node by node). All of it is thread-local, like grad
// mode, and costs one pointer or flag check per node when off.
#pragma once

#include <chrono>
#include <iosfwd>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/autograd.h"
#include "engine/graph.h"

namespace ag {

// --- Scopes ---------------------------------------------------------------------------------

// Pushes `name` onto this thread's scope path for its lifetime: nodes created meanwhile record
// the path ("decoder.ffn" + "0" → "decoder.ffn.0"). One string per push, shared by pointer by
// every node created under it. An empty name pushes nothing (the root module).
class ScopeGuard {
 public:
  explicit ScopeGuard(std::string_view name);
  ~ScopeGuard();
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;

 private:
  std::shared_ptr<const std::string> previous_;
  bool pushed_ = false;
};

// The path nodes created now record; null at the top.
const std::shared_ptr<const std::string>& current_scope();
// A node's scope for printing: its path, or "(root)" when it was created outside every scope.
std::string scope_of(const Node& node);
// A node's op in snake case: "SoftmaxBackward" → "softmax", "MulScalarBackward" → "mul_scalar";
// AccumulateGrad → "leaf".
std::string op_of(const Node& node);
// Creation order on this thread: the next node's sequence number.
uint64_t next_node_sequence();
// Numbers this thread's next nodes from `first` on, if it is past the current count (a part of a
// step split by thread, engine/parts.h, numbers its nodes after everything its caller recorded).
void continue_node_sequence(uint64_t first);

// --- Anomaly mode ---------------------------------------------------------------------------

// While one is alive, every recorded op's output and every gradient a backward function returns
// is checked for NaN and Inf; the first one throws an ag::Error naming the op, the module scope
// where it was created, its input shapes and whether it happened in forward or backward. In the
// forward, an Inf counts only where the op created it: not passed on from an input, and not
// masked_fill's fill value (-inf hides attention keys on purpose).
class DetectAnomalyGuard {
 public:
  explicit DetectAnomalyGuard(bool enabled = true);
  ~DetectAnomalyGuard();
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool previous_;
};

bool anomaly_detection_enabled();
// Throws if `output` (the output of `node`, just recorded from `inputs`) holds a NaN, or an Inf
// the op created.
void check_forward_anomaly(const Node& node, const Tensor& output, std::span<const Tensor> inputs);
// Throws if a gradient `node`'s backward returned holds a NaN or Inf.
void check_backward_anomaly(const Node& node, std::span<const Tensor> grads);

// --- Forward observers ----------------------------------------------------------------------

// Told about every node recorded on this thread (the step recorder, engine/step_record.h).
class ForwardObserver {
 public:
  virtual ~ForwardObserver() = default;
  // `node` was just attached to `output`, which its op computed from `inputs`.
  virtual void node_recorded(const Node& node, const Tensor& output, std::span<const Tensor> inputs) = 0;
};

// The observer of the nodes recorded on this thread (null: none); returns the previous one.
ForwardObserver* set_forward_observer(ForwardObserver* observer);
ForwardObserver* forward_observer();

// --- Backward observers ---------------------------------------------------------------------

// Told about every step of a backward walk on this thread (see run_backward's loop).
class BackwardObserver {
 public:
  virtual ~BackwardObserver() = default;
  virtual void walk_started(const Node& root) = 0;
  // `node` ran: it received `grad` and sent `grads` (one per input; undefined where none) in
  // `seconds`. AccumulateGrad nodes report no grads.
  virtual void node_ran(const Node& node, const Tensor& grad, std::span<const Tensor> grads, double seconds) = 0;
  // A gradient from `from` was added to one that had already reached `into`: paths meet.
  virtual void gradients_met(const Node& from, const Node& into) = 0;
  virtual void walk_finished() = 0;
};

// The observer of this thread's backward walks (null: none); returns the previous one.
BackwardObserver* set_backward_observer(BackwardObserver* observer);
BackwardObserver* backward_observer();

// While alive, this thread's forward and backward observers see nothing: the engine's own
// computations (a JVP derived from a VJP runs ops and a backward walk) are not the program's.
class ObserversPaused {
 public:
  ObserversPaused() : forward_(set_forward_observer(nullptr)), backward_(set_backward_observer(nullptr)) {}
  ~ObserversPaused() {
    set_forward_observer(forward_);
    set_backward_observer(backward_);
  }
  ObserversPaused(const ObserversPaused&) = delete;
  ObserversPaused& operator=(const ObserversPaused&) = delete;

 private:
  ForwardObserver* forward_;
  BackwardObserver* backward_;
};

// The Euclidean norm of a floating tensor, in double (0 for an undefined one).
double norm_of(const Tensor& t);

// While alive, observes backward walks on this thread and prints each node as it runs: its id
// (%N, the numbering of `attograd graph --format text`), op, scope, the norm of the gradient it
// received, the norms of the gradients it sent, where paths meet, and its time; after each walk
// a summary by op (count, time, share of the nodes' time). `walks` limits how many walks it
// watches (0: all).
class BackwardTrace : public BackwardObserver {
 public:
  struct Entry {
    int id;  // the node's %id in the graph of the walk
    std::string op, scope;
    double grad_norm;
    std::vector<double> sent_norms;  // per input; -1 where no gradient was sent
    double seconds;
  };

  // `names` label leaves (parameter TensorImpl → "encoder.linear.weight"); `out` may be null.
  explicit BackwardTrace(std::ostream* out, int walks = 0, ParameterNames names = {});
  ~BackwardTrace() override;
  BackwardTrace(const BackwardTrace&) = delete;
  BackwardTrace& operator=(const BackwardTrace&) = delete;

  const std::vector<Entry>& entries() const { return entries_; }  // of every walk watched, in order
  std::string summary() const;                                    // by op, of every walk watched

  void walk_started(const Node& root) override;
  void node_ran(const Node& node, const Tensor& grad, std::span<const Tensor> grads, double seconds) override;
  void gradients_met(const Node& from, const Node& into) override;
  void walk_finished() override;

 private:
  int id_of(const Node& node) const;
  std::string summary_of(size_t begin, size_t end, double walk_seconds) const;

  std::ostream* out_;
  int walks_left_;
  ParameterNames names_;
  BackwardObserver* previous_;
  bool installed_ = true;
  std::map<const Node*, int> ids_;  // of the walk running
  std::vector<Entry> entries_;
  size_t walk_first_entry_ = 0;
  std::chrono::steady_clock::time_point walk_start_;
  double walk_seconds_ = 0;
};

}  // namespace ag
