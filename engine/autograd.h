// Define-by-run reverse mode: ops attach a Node to their output; backward() walks the nodes
// in topological order with an explicit stack.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/forward_ad.h"
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

struct InputMeta {
  Shape shape;
  DType dtype;
};

// Per input of a node: is its gradient wanted? (A view of the node's edges: no allocation.)
class NeedsGrad {
 public:
  explicit NeedsGrad(const std::vector<std::shared_ptr<Node>>& next) : next_(next) {}
  bool operator[](size_t i) const { return next_[i] != nullptr; }
  size_t size() const { return next_.size(); }

 private:
  const std::vector<std::shared_ptr<Node>>& next_;
};

// What a backward function receives.
struct BackwardContext {
  const Tensor& grad;                    // dLoss/dOutput, the output's shape
  const std::vector<Tensor>& saved;      // as the forward saved them (version-checked)
  NeedsGrad needs_grad;                  // per input: is its gradient wanted?
  const std::vector<InputMeta>& inputs;  // per input: its shape and dtype at the forward
};
// Returns one gradient per input (an undefined Tensor where none is needed), each of its
// input's shape.
using BackwardFn = std::function<std::vector<Tensor>(const BackwardContext&)>;

// A tensor saved for backward. The node's own output is kept as a detached alias plus a weak
// link to the node (never a strong one: no reference cycle); inputs are kept as they are.
struct SavedTensor {
  Tensor data;
  std::weak_ptr<Node> output_of;
  uint64_t version = 0;
};

// What tools need to know of an op beyond its name, so that none of them matches on names.
struct OpProperties {
  // Its forward writes ±Inf on purpose (masked_fill's -inf hides attention keys): anomaly mode does
  // not report an Inf in its output.
  bool writes_inf = false;
  // Its products took bf16 operands with f32 results (AutocastGuard, engine/autocast.h): graph
  // export and backward traces show the op as `matmul[bf16]`.
  bool bf16 = false;
  // Its derivative as a table would print it, "out = eˣ  →  dx = g · out" (static storage; g is the
  // gradient arriving at the output): shown by the step page (attograd graph --format html).
  std::string_view formula = {};
};

// An op as record() names it: its node's name (static storage) and its properties. Converts from
// the name alone, so record(out, "ExpBackward", …) reads as the name;
// record(out, {"MaskedFillBackward", {.writes_inf = true}}, …) gives properties too.
struct OpKind {
  OpKind(const char* name) : name(name) {}
  OpKind(std::string_view name, OpProperties properties = {}) : name(name), properties(properties) {}
  std::string_view name;
  OpProperties properties;
};

struct Node {
  Node() = default;
  ~Node();  // frees long chains iteratively: a 100,000-node graph must not overflow the stack
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  std::string_view name;                    // "SoftmaxBackward" (static storage)
  OpProperties properties;                  // what tools read instead of matching the name
  std::vector<std::shared_ptr<Node>> next;  // per input; null when the input needs no grad
  std::vector<InputMeta> inputs;
  std::vector<SavedTensor> saved;
  BackwardFn backward;                // empty for AccumulateGrad
  std::vector<TensorHook> pre_hooks;  // hooks of the output tensor
  std::weak_ptr<TensorImpl> leaf;     // AccumulateGrad: the leaf it accumulates into
  bool released = false;              // saved tensors freed by a backward without retain_graph

  // What the node was, for graph export, backward traces and anomaly messages (engine/inspect.h).
  std::shared_ptr<const std::string> scope;  // module path at creation ("decoder.ffn"); null at the top
  uint64_t sequence = 0;                     // creation order on this thread
  Shape shape;                               // the output's (a leaf's own for AccumulateGrad)
  DType dtype = DType::f32;
  int64_t saved_bytes = 0;  // what `saved` held at the forward

  // Scratch of the backward walk that is running through this node (reset when it ends).
  int pending = 0;  // edges from nodes that have not run yet
  bool reached = false;
  Tensor buffer;  // the gradient summed so far
};

// True if grad mode is on and any defined input requires grad (the op must record a node), or if a
// forward-AD level is active and an input carries a tangent (the op must give its output one).
bool needs_recording(std::initializer_list<const Tensor*> inputs);
bool needs_recording(std::span<const Tensor> inputs);

// Attaches the node to `out` where the tape needs one, and gives `out` its tangent where an input
// carries one (by `jvp`, or if it is empty from `backward`: engine/forward_ad.h); record() below
// calls it when the op must record.
void attach_node(Tensor& out, OpKind kind, std::span<const Tensor> inputs, std::span<const Tensor> saved,
                 BackwardFn backward, const fw::JvpFn& jvp = {});

// Attaches a node of `kind` (its name, and properties if any) to `out`, computed from `inputs`, if
// needs_recording(inputs). `saved` may hold inputs and `out` itself. Ops call it right after
// computing the forward. If `out` is one of the inputs, a leaf, or already has a node, it is first
// replaced by a new alias of its memory (the input stays a leaf; the earlier node stays with the
// earlier tensor).
// Nothing is allocated when the op need not record (the backward becomes a BackwardFn only then).
// An op may state its JVP as a last argument (a callable taking an fw::JvpContext); without one,
// forward mode derives it from the backward (Note [the JVP from the VJP] in forward_ad.cpp).
template <typename F>
void record(Tensor& out, OpKind kind, std::initializer_list<Tensor> inputs, std::initializer_list<Tensor> saved,
            F&& backward) {
  if (needs_recording(std::span<const Tensor>(inputs.begin(), inputs.size())))
    attach_node(out, kind, std::span<const Tensor>(inputs.begin(), inputs.size()),
                std::span<const Tensor>(saved.begin(), saved.size()), BackwardFn(std::forward<F>(backward)));
}
template <typename F>
void record(Tensor& out, OpKind kind, std::span<const Tensor> inputs, std::initializer_list<Tensor> saved,
            F&& backward) {
  if (needs_recording(inputs))
    attach_node(out, kind, inputs, std::span<const Tensor>(saved.begin(), saved.size()),
                BackwardFn(std::forward<F>(backward)));
}
template <typename F, typename J>
void record(Tensor& out, OpKind kind, std::initializer_list<Tensor> inputs, std::initializer_list<Tensor> saved,
            F&& backward, J&& jvp) {
  if (needs_recording(std::span<const Tensor>(inputs.begin(), inputs.size())))
    attach_node(out, kind, std::span<const Tensor>(inputs.begin(), inputs.size()),
                std::span<const Tensor>(saved.begin(), saved.size()), BackwardFn(std::forward<F>(backward)),
                fw::JvpFn(std::forward<J>(jvp)));
}

// The node a gradient for `tensor` flows into: its grad_fn, or for a leaf that requires grad,
// its AccumulateGrad node (in a part of a step split by thread, the part's copy's); null if neither.
std::shared_ptr<Node> gradient_edge(const Tensor& tensor);

// One part of a step split by thread (engine/parts.h): the leaves its ops used, each with the
// part's own copy (sharing the leaf's memory) whose AccumulateGrad node takes the part's gradient,
// so no node is shared between parts. While set on a thread (set_part_leaves), gradient_edge hands
// out the copies' nodes, and refuses a tensor whose graph was recorded before the part began.
struct PartLeaves {
  uint64_t first_sequence = 0;                    // the part's nodes are numbered from here
  std::vector<std::pair<Tensor, Tensor>> leaves;  // (leaf, the part's copy), in order of first use
  std::unordered_map<const TensorImpl*, size_t> index;
};
PartLeaves* set_part_leaves(PartLeaves* leaves);  // returns the previous
// Accumulates `grad` into leaf's grad as a backward would (the leaf's hooks, then its
// post-accumulate hooks): how a step split by thread hands over the parts' summed gradients.
void accumulate_gradient(const Tensor& leaf, Tensor grad);

void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph, bool create_graph);

// The gradients of `outputs` w.r.t. `inputs` (torch.autograd.grad): Σ_i grad_outputs[i] · ∂outputs[i]/∂input,
// one per input, without touching any .grad(). grad_outputs may be empty (or hold undefined
// tensors) for one-element outputs: ones. With create_graph the gradients carry a graph of
// their own (differentiate them again for higher orders) and the graph of `outputs` is kept;
// otherwise it is freed. An input the outputs do not depend on is an error, unless
// allow_unused: then its gradient is undefined. Only the nodes leading to an input run, and
// hooks on the inputs themselves do not.
// With retain_graph the graph of `outputs` is kept without building one of the gradients (a
// Jacobian row by row: ag::jacrev).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool create_graph = false,
                         bool allow_unused = false, bool retain_graph = false);

}  // namespace ag
