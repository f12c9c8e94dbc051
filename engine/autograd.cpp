#include "engine/autograd.h"

#include <algorithm>
#include <chrono>
#include <unordered_set>
#include <utility>

#include "engine/inspect.h"
#include "engine/ops/arithmetic.h"

namespace ag {

namespace {
thread_local bool grad_mode = true;
}  // namespace

bool grad_enabled() { return grad_mode; }

GradModeGuard::GradModeGuard(bool enabled) : previous_(grad_mode) { grad_mode = enabled; }
GradModeGuard::~GradModeGuard() { grad_mode = previous_; }

namespace {

// True if grad mode is on and any defined input requires grad: the op must record a node.
bool needs_tape(std::span<const Tensor> inputs) {
  if (!grad_mode) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

}  // namespace

bool needs_recording(std::initializer_list<const Tensor*> inputs) {
  if (fw::level_active()) [[unlikely]]
    for (const Tensor* t : inputs)
      if (fw::tangent_of(*t).defined()) return true;
  if (!grad_mode) return false;
  for (const Tensor* t : inputs)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

bool needs_recording(std::span<const Tensor> inputs) {
  if (fw::level_active() && fw::carries_tangent(inputs)) [[unlikely]]
    return true;
  return needs_tape(inputs);
}

namespace {

// Moves out of `node` the nodes it alone keeps alive: its edges, and the grad_fn of saved
// tensors nobody else holds.
void take_owned_children(Node& node, std::vector<std::shared_ptr<Node>>& out) {
  for (auto& next : node.next)
    if (next) out.push_back(std::move(next));
  node.next.clear();
  for (SavedTensor& entry : node.saved) {
    const std::shared_ptr<TensorImpl>& impl = entry.data.impl_ptr();
    if (impl && impl.use_count() == 1 && impl->grad_fn) out.push_back(std::move(impl->grad_fn));
  }
  node.saved.clear();
}

}  // namespace

Node::~Node() {
  std::vector<std::shared_ptr<Node>> pending;
  take_owned_children(*this, pending);
  while (!pending.empty()) {
    std::shared_ptr<Node> node = std::move(pending.back());
    pending.pop_back();
    if (node.use_count() == 1) take_owned_children(*node, pending);
  }  // each node dies here with nothing left to free recursively
}

namespace {

thread_local PartLeaves* part_leaves = nullptr;

std::shared_ptr<Node> accumulator_of(const Tensor& leaf) {
  TensorImpl* impl = leaf.impl();
  std::shared_ptr<Node> accumulator = impl->grad_accumulator.lock();
  if (!accumulator) {
    accumulator = std::make_shared<Node>();
    accumulator->name = "AccumulateGrad";
    accumulator->leaf = leaf.impl_ptr();
    accumulator->scope = current_scope();
    accumulator->sequence = next_node_sequence();
    accumulator->shape = impl->shape;
    accumulator->dtype = impl->dtype;
    impl->grad_accumulator = accumulator;
  }
  return accumulator;
}

const Tensor& part_copy_of(PartLeaves& part, const Tensor& leaf) {
  const auto [found, added] = part.index.try_emplace(leaf.impl(), part.leaves.size());
  if (added) part.leaves.emplace_back(leaf, leaf.detach().requires_grad_());
  return part.leaves[found->second].second;
}

}  // namespace

PartLeaves* set_part_leaves(PartLeaves* leaves) { return std::exchange(part_leaves, leaves); }

std::shared_ptr<Node> gradient_edge(const Tensor& tensor) {
  if (!tensor.defined()) return nullptr;
  TensorImpl* impl = tensor.impl();
  if (impl->grad_fn) {
    AG_CHECK(part_leaves == nullptr || impl->grad_fn->sequence >= part_leaves->first_sequence,
             "a part of a step split by thread used a tensor recorded before the parts began (by {}, shape {}): "
             "the parts would walk its graph at once. Compute it inside each part, or detach() it",
             impl->grad_fn->name, shape_str(impl->shape));
    return impl->grad_fn;
  }
  if (!impl->requires_grad) return nullptr;
  return accumulator_of(part_leaves != nullptr ? part_copy_of(*part_leaves, tensor) : tensor);
}

void attach_node(Tensor& out, OpKind kind, std::span<const Tensor> inputs, std::span<const Tensor> saved,
                 BackwardFn backward, const fw::JvpFn& jvp) {
  // The node goes on a tensor of its own. An output that is an input itself (reshape to the same
  // shape, eval-mode dropout), a leaf, or a tensor that already has a node (a custom function's
  // forward computed with recorded ops) is replaced by a new alias of its memory: the input stays
  // what it was (a leaf stays a leaf) and an earlier node stays with the earlier tensor. So is an
  // output given a tangent, before the node saves it (forward-over-reverse reads saved tangents).
  const bool is_an_input =
      std::any_of(inputs.begin(), inputs.end(), [&](const Tensor& input) { return input.impl() == out.impl(); });
  if (fw::level_active() && fw::carries_tangent(inputs)) [[unlikely]] {
    const Tensor tangent = fw::output_tangent(kind.name, out, inputs, saved, backward, jvp);
    if (is_an_input) out = out.detach();
    fw::set_tangent(out, tangent, kind.name);
    if (!needs_tape(inputs)) return;
  }
  if (is_an_input || out.impl()->grad_fn || out.impl()->requires_grad) out = fw::alias_keeping_tangent(out);
  auto node = std::make_shared<Node>();
  node->name = kind.name;
  node->properties = kind.properties;
  node->scope = current_scope();  // shared by pointer: no allocation
  node->shape = out.shape();
  node->dtype = out.dtype();
  node->next.reserve(inputs.size());
  node->inputs.reserve(inputs.size());
  for (const Tensor& input : inputs) {
    node->next.push_back(gradient_edge(input));
    node->inputs.push_back(input.defined() ? InputMeta{input.shape(), input.dtype()} : InputMeta{});
  }
  node->sequence = next_node_sequence();  // after the leaves' AccumulateGrad nodes its edges created
  node->saved.reserve(saved.size());
  for (const Tensor& tensor : saved) {
    SavedTensor entry;
    if (tensor.defined()) node->saved_bytes += tensor.numel() * static_cast<int64_t>(dtype_size(tensor.dtype()));
    entry.version = tensor.defined() ? tensor.version() : 0;
    if (tensor.defined() && tensor.impl() == out.impl()) {
      entry.data = fw::alias_keeping_tangent(tensor);  // the output: alias without the node, or we would own ourselves
      entry.output_of = node;
    } else {
      entry.data = tensor;
    }
    node->saved.push_back(std::move(entry));
  }
  node->backward = std::move(backward);
  if (anomaly_detection_enabled()) check_forward_anomaly(*node, out, inputs);
  if (ForwardObserver* const recorder = forward_observer()) recorder->node_recorded(*node, out, inputs);
  out.impl()->grad_fn = std::move(node);
}

namespace {

std::vector<Tensor> unpack_saved(const Node& node, bool create_graph) {
  std::vector<Tensor> tensors;
  tensors.reserve(node.saved.size());
  for (size_t i = 0; i < node.saved.size(); ++i) {
    const SavedTensor& entry = node.saved[i];
    if (entry.data.defined()) {
      AG_CHECK(entry.data.version() == entry.version,
               "{}: saved tensor {} (shape {}) was modified by an in-place operation after the forward saved it: it "
               "is at version {}, expected version {}. Hint: clone() the tensor before writing to it in place",
               node.name, i, shape_str(entry.data.shape()), entry.data.version(), entry.version);
    }
    std::shared_ptr<Node> owner = entry.output_of.lock();
    if (create_graph && owner) {
      Tensor output = fw::alias_keeping_tangent(entry.data);  // the output again, now carrying its grad_fn
      output.impl()->grad_fn = std::move(owner);
      tensors.push_back(std::move(output));
    } else {
      tensors.push_back(entry.data);
    }
  }
  return tensors;
}

Tensor apply_hooks(const std::vector<TensorHook>& hooks, Tensor grad, std::string_view where) {
  for (const TensorHook& hook : hooks) {
    Tensor replaced = hook(grad);
    if (!replaced.defined()) continue;
    AG_CHECK(replaced.shape() == grad.shape() && replaced.dtype() == grad.dtype(),
             "hook on {}: returned a gradient of shape {} {}, expected {} {}", where, shape_str(replaced.shape()),
             dtype_name(replaced.dtype()), shape_str(grad.shape()), dtype_name(grad.dtype()));
    grad = std::move(replaced);
  }
  return grad;
}

// observed: the walk's observer holds one more handle to grad, to read it once this returns.
void accumulate_into_leaf(const Node& accumulator, Tensor grad, bool create_graph, bool observed) {
  std::shared_ptr<TensorImpl> leaf = accumulator.leaf.lock();
  if (!leaf) return;  // the leaf is gone; nobody can read its gradient
  grad = apply_hooks(leaf->hooks, std::move(grad), "a leaf tensor");
  // The leaf owns its gradient. Taken as it is when nothing else holds it or its memory (the usual
  // case: an op made it for this leaf alone; PyTorch's AccumulateGrad steals it too), else copied:
  // the same gradient may reach other leaves, or a hook may have kept it. An observer's handle
  // counts as nobody's unless a post-accumulate hook could change the gradient before it reads it.
  const bool observer_only_reads = observed && leaf->post_accumulate_hooks.empty();
  const bool sole_owner =
      grad.impl_ptr().use_count() == (observer_only_reads ? 2 : 1) && grad.impl()->storage.use_count() == 1;
  if (!create_graph) grad = grad.detach();
  if (!leaf->grad.defined()) {
    leaf->grad = create_graph || sole_owner ? grad : clone(grad);
  } else {
    leaf->grad = add(leaf->grad, grad);
  }
  if (leaf->post_accumulate_hooks.empty()) return;
  const Tensor accumulated(leaf);
  for (const auto& hook : leaf->post_accumulate_hooks) hook(accumulated);
}

}  // namespace

void accumulate_gradient(const Tensor& leaf, Tensor grad) {
  accumulate_into_leaf(*accumulator_of(leaf), std::move(grad), false, false);
}

namespace {

// The nodes reachable from root, each with `pending` = how many edges point at it. The scratch
// lives in the nodes (no hash maps: most graphs are small) and is reset when the walk ends, even
// by an exception.
class Walk {
 public:
  explicit Walk(Node* root) : nodes_{root} {
    root->reached = true;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      for (const auto& next : nodes_[i]->next) {
        if (!next) continue;
        ++next->pending;
        if (!next->reached) {
          next->reached = true;
          nodes_.push_back(next.get());
        }
      }
    }
  }
  ~Walk() {
    for (Node* node : nodes_) {
      node->pending = 0;
      node->reached = false;
      node->buffer = Tensor();
    }
  }
  Walk(const Walk&) = delete;
  Walk& operator=(const Walk&) = delete;

 private:
  std::vector<Node*> nodes_;
};

std::vector<Tensor> call_backward(Node& node, const Tensor& grad, bool create_graph) {
  AG_CHECK(!node.released,
           "backward: trying to backward through {} a second time, but its saved tensors were freed by the first "
           "backward. Pass retain_graph=true to the first backward if you need to backward twice",
           node.name);
  std::vector<Tensor> saved = unpack_saved(node, create_graph);
  std::vector<Tensor> grads = node.backward(BackwardContext{grad, saved, NeedsGrad(node.next), node.inputs});
  AG_CHECK(grads.size() == node.next.size(), "{}: returned {} gradients for {} inputs", node.name, grads.size(),
           node.next.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!node.next[i] || !grads[i].defined()) continue;
    const InputMeta& meta = node.inputs[i];
    AG_CHECK(grads[i].shape() == meta.shape && grads[i].dtype() == meta.dtype,
             "{}: gradient for input {} has shape {} {}, but the input has shape {} {}", node.name, i,
             shape_str(grads[i].shape()), dtype_name(grads[i].dtype()), shape_str(meta.shape), dtype_name(meta.dtype));
  }
  if (anomaly_detection_enabled()) check_backward_anomaly(node, grads);
  return grads;
}

// The gradient a walk starts from at `output`: `given`, or ones for a one-element output.
Tensor starting_gradient(const Tensor& output, const Tensor& given, const std::string& what) {
  if (!given.defined()) {
    AG_CHECK(output.numel() == 1,
             "{}: grad can be implicitly created only for a one-element output, but it has shape {}; pass a "
             "gradient of that shape",
             what, shape_str(output.shape()));
    return ones_like(output);
  }
  AG_CHECK(given.shape() == output.shape() && given.dtype() == output.dtype(),
           "{}: the gradient has shape {} {}, but the output has shape {} {}", what, shape_str(given.shape()),
           dtype_name(given.dtype()), shape_str(output.shape()), dtype_name(output.dtype()));
  return given;
}

// What a grad() call asks of the walk: the gradient arriving at each target node (instead of
// accumulating into leaves); nodes that lead to no target are not run.
struct Capture {
  std::vector<std::shared_ptr<Node>> targets;  // per input: its gradient_edge
  std::vector<Tensor> grads;                   // per input, filled by the walk
  std::unordered_set<const Node*> needed;      // the targets and every node with a path to one
};

// The nodes reachable from root that have a path to a target (post-order, explicit stack).
std::unordered_set<const Node*> nodes_leading_to(const Node* root, const std::vector<std::shared_ptr<Node>>& targets) {
  std::unordered_set<const Node*> needed;
  for (const auto& target : targets) needed.insert(target.get());
  std::unordered_set<const Node*> visited{root};
  std::vector<std::pair<const Node*, size_t>> stack{{root, 0}};  // a node and its next edge to visit
  while (!stack.empty()) {
    auto& [node, edge] = stack.back();
    if (edge < node->next.size()) {
      const Node* child = node->next[edge++].get();
      if (child != nullptr && visited.insert(child).second) stack.emplace_back(child, 0);
      continue;
    }
    const Node* done = node;
    stack.pop_back();
    for (const auto& next : done->next)
      if (next && needed.count(next.get())) needed.insert(done);
  }
  return needed;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Whether the gradient g may be added into buffer in place: nothing records (no create_graph, no
// forward-AD level) and nothing but the walk holds the buffer or its memory; add_ then gives add's bits.
bool summable_in_place(const Tensor& buffer, const Tensor& g) {
  return !grad_enabled() && buffer.shape() == g.shape() && buffer.dtype() == g.dtype() &&
         (buffer.dtype() == DType::f32 || buffer.dtype() == DType::f64) && buffer.impl_ptr().use_count() == 1 &&
         buffer.impl()->storage.use_count() == 1;
}

// Runs the nodes reachable from root in topological order, root's gradient being root_grad.
void execute(const std::shared_ptr<Node>& root_node, const Tensor& root_grad, bool retain_graph, bool create_graph,
             Capture* capture) {
  const Walk walk(root_node.get());
  root_node->buffer = root_grad;
  std::vector<std::shared_ptr<Node>> ready{root_node};
  // Under a forward-AD level the backward's ops run as under create_graph, so that every one of them
  // carries tangents (forward-over-reverse): the fast paths taken when nothing records skip them.
  GradModeGuard mode(create_graph || fw::level_active());
  BackwardObserver* const observer = backward_observer();  // null unless a trace is on: one check per node
  if (observer != nullptr) observer->walk_started(*root_node);
  while (!ready.empty()) {
    std::shared_ptr<Node> node = std::move(ready.back());
    ready.pop_back();
    Tensor grad = std::move(node->buffer);

    std::vector<Tensor> grads;
    if (grad.defined() && (capture == nullptr || capture->needed.count(node.get()))) {
      const auto start =
          observer != nullptr ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
      grad = apply_hooks(node->pre_hooks, std::move(grad), node->name);
      if (capture != nullptr) {
        for (size_t i = 0; i < capture->targets.size(); ++i)
          if (capture->targets[i] == node) capture->grads[i] = grad;
      }
      if (!node->backward) {
        // Moved unless the trace still reads it, so the leaf can take the gradient's memory.
        if (capture == nullptr)
          accumulate_into_leaf(*node, observer ? Tensor(grad) : std::move(grad), create_graph, observer != nullptr);
        if (observer != nullptr) observer->node_ran(*node, grad, {}, seconds_since(start));
        continue;
      }
      grads = call_backward(*node, grad, create_graph);
      if (observer != nullptr) observer->node_ran(*node, grad, grads, seconds_since(start));
      // Free what the node saved (a graph of the gradient may still need it under create_graph).
      // A node that saved nothing can run again, as in PyTorch.
      if (!retain_graph && !create_graph && !node->saved.empty()) {
        node->saved.clear();
        node->released = true;
      }
    }
    for (size_t i = 0; i < node->next.size(); ++i) {
      Node* next = node->next[i].get();
      if (next == nullptr) continue;
      if (i < grads.size() && grads[i].defined()) {
        Tensor& slot = next->buffer;
        if (slot.defined() && observer != nullptr) observer->gradients_met(*node, *next);
        if (!slot.defined())
          slot = std::move(grads[i]);
        else if (summable_in_place(slot, grads[i]))
          slot.add_(grads[i]);  // paths meet: sum, into the walk's own buffer
        else
          slot = add(slot, grads[i]);
      }
      if (--next->pending == 0) ready.push_back(node->next[i]);
    }
  }
  if (observer != nullptr) observer->walk_finished();
}

}  // namespace

void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph, bool create_graph) {
  AG_CHECK(root.defined(), "backward: called on an undefined tensor");
  std::shared_ptr<Node> root_node = gradient_edge(root);
  AG_CHECK(root_node != nullptr,
           "backward: tensor of shape {} does not require grad and has no grad_fn. Did you forget to set "
           "requires_grad on an input, or compute it under NoGradGuard?",
           shape_str(root.shape()));
  execute(root_node, starting_gradient(root, gradient, "backward: the output"), retain_graph, create_graph, nullptr);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool create_graph, bool allow_unused,
                         bool retain_graph) {
  AG_CHECK(!outputs.empty(), "grad: expected at least one output");
  AG_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(),
           "grad: got {} grad_outputs for {} outputs; pass one per output (or none for one-element outputs)",
           grad_outputs.size(), outputs.size());
  // A root node whose edges are the outputs' and whose gradients are grad_outputs.
  auto root = std::make_shared<Node>();
  root->name = "GraphRoot";
  std::vector<Tensor> root_grads;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& output = outputs[i];
    AG_CHECK(output.defined(), "grad: output {} is undefined", i);
    std::shared_ptr<Node> edge = gradient_edge(output);
    AG_CHECK(edge != nullptr,
             "grad: output {} (shape {}) does not require grad and has no grad_fn. Did you forget to set "
             "requires_grad on an input, or compute it under NoGradGuard?",
             i, shape_str(output.shape()));
    root->next.push_back(std::move(edge));
    root->inputs.push_back({output.shape(), output.dtype()});
    root_grads.push_back(starting_gradient(output, grad_outputs.empty() ? Tensor() : grad_outputs[i],
                                           fmt::format("grad: output {} (grad_outputs[{}])", i, i)));
  }
  root->backward = [root_grads](const BackwardContext&) { return root_grads; };

  Capture capture;
  for (size_t i = 0; i < inputs.size(); ++i) {
    AG_CHECK(inputs[i].defined() && inputs[i].requires_grad(),
             "grad: input {} does not require grad; only tensors that require grad can be differentiated against", i);
    capture.targets.push_back(gradient_edge(inputs[i]));
  }
  capture.grads.resize(inputs.size());
  capture.needed = nodes_leading_to(root.get(), capture.targets);
  execute(root, root_grads[0], retain_graph || create_graph, create_graph, &capture);
  for (size_t i = 0; i < inputs.size(); ++i) {
    AG_CHECK(allow_unused || capture.grads[i].defined(),
             "grad: input {} (shape {}) was not used to compute the outputs; pass allow_unused=true to get an "
             "undefined gradient for it",
             i, shape_str(inputs[i].shape()));
  }
  return std::move(capture.grads);
}

}  // namespace ag
