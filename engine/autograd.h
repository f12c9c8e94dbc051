// Define-by-run reverse mode: ops attach a Node to their output; backward() walks the nodes
// in topological order with an explicit stack.
#pragma once

#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "engine/tensor.h"

namespace ag {

// Grad mode: ops record nodes only while it is on (thread-local, on by default).
bool grad_enabled();

class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled);
  ~GradModeGuard();
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool previous_;
};

class NoGradGuard : public GradModeGuard {
 public:
  NoGradGuard() : GradModeGuard(false) {}
};

// What a backward function receives.
struct BackwardContext {
  const Tensor& grad;                   // dLoss/dOutput, the output's shape
  const std::vector<Tensor>& saved;     // as the forward saved them (version-checked)
  const std::vector<bool>& needs_grad;  // per input: is its gradient wanted?
};
// Returns one gradient per input (an undefined Tensor where none is needed), each of its
// input's shape.
using BackwardFn = std::function<std::vector<Tensor>(const BackwardContext&)>;

struct InputMeta {
  Shape shape;
  DType dtype;
};

// A tensor saved for backward. The node's own output is kept as a detached alias plus a weak
// link to the node (never a strong one: no reference cycle); inputs are kept as they are.
struct SavedTensor {
  Tensor data;
  std::weak_ptr<Node> output_of;
  uint64_t version = 0;
};

struct Node {
  Node() = default;
  ~Node();  // frees long chains iteratively: a 100,000-node graph must not overflow the stack
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  std::string_view name;                    // "SoftmaxBackward" (static storage)
  std::vector<std::shared_ptr<Node>> next;  // per input; null when the input needs no grad
  std::vector<InputMeta> inputs;
  std::vector<SavedTensor> saved;
  BackwardFn backward;                // empty for AccumulateGrad
  std::vector<TensorHook> pre_hooks;  // hooks of the output tensor
  std::weak_ptr<TensorImpl> leaf;     // AccumulateGrad: the leaf it accumulates into
  Shape out_shape;
  DType out_dtype = DType::f32;
  bool released = false;  // saved tensors freed by a backward without retain_graph
};

// True if grad mode is on and any defined input requires grad: then the op must record.
bool needs_recording(std::initializer_list<const Tensor*> inputs);
bool needs_recording(std::span<const Tensor> inputs);

// Attaches a node named `name` to `out`, computed from `inputs`, if needs_recording(inputs).
// `saved` may hold inputs and `out` itself. Ops call it right after computing the forward.
void record(Tensor& out, std::string_view name, std::vector<Tensor> inputs, std::vector<Tensor> saved,
            BackwardFn backward);

// The node a gradient for `tensor` flows into: its grad_fn, or for a leaf that requires grad,
// its AccumulateGrad node; null if neither.
std::shared_ptr<Node> gradient_edge(const Tensor& tensor);

void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph, bool create_graph);

}  // namespace ag
