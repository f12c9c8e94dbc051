// The autograd graph behind a tensor, as data (Graph) and as text: a numbered Wengert list in
// creation order, or Graphviz DOT with one cluster per module scope.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/autograd.h"

namespace ag {

// Leaf names: a parameter's TensorImpl → its dotted name ("encoder.linear.weight").
using ParameterNames = std::map<const TensorImpl*, std::string>;
ParameterNames parameter_names(const NamedTensors& named_parameters);

struct GraphInput {
  int id;       // the input's node, or -1: a tensor that needs no gradient (data, a mask)
  Shape shape;  // as the forward saw it
};

struct GraphNode {
  const Node* node;
  std::string op;     // "softmax"; "leaf" for a tensor that requires grad (a parameter)
  std::string scope;  // "decoder.ffn.0", "(root)" outside every module
  std::string name;   // leaves: the parameter's name if known
  Shape shape;
  DType dtype;
  int64_t saved_bytes;
  std::vector<GraphInput> inputs;
  // A leaf's AccumulateGrad node, told by its missing backward (not by `op`: a user's
  // ag::Function named "LeafBackward" also reads "leaf").
  bool is_leaf() const { return !node->backward; }
};

// Nodes in creation order, so inputs come before the nodes that use them; a node's id is its
// position.
struct Graph {
  std::vector<GraphNode> nodes;
  std::map<const Node*, int> ids;
};

// Every node reachable from `root` (the nodes a backward from it would run).
Graph capture_graph(const Node& root, const ParameterNames& names = {});
// The graph of `output`; throws if it has no grad_fn and does not require grad.
Graph capture_graph(const Tensor& output, const ParameterNames& names = {});

// "%17 = softmax(%16)  (16,1,2) f32  saved 128 B  decoder.self_attn_heads.attn_heads.0", one line
// per node (a parameter: "%3 = parameter decoder.ffn.0.weight  (10,2) f32"); an input that needs no
// gradient prints as its shape ("const(16,2,2)").
std::string graph_text(const Graph& graph);
// Graphviz DOT: nodes labelled op, scope, shape and saved bytes; edges follow the data (input →
// op); `subgraph cluster_…` per module scope, nested by path; parameters sit in their module.
std::string graph_dot(const Graph& graph);

}  // namespace ag
