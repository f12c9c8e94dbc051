#include "engine/graph.h"

#include <algorithm>

#include "engine/inspect.h"

namespace ag {

ParameterNames parameter_names(const NamedTensors& named_parameters) {
  ParameterNames names;
  for (const auto& [name, tensor] : named_parameters) names.emplace(tensor.impl(), name);
  return names;
}

namespace {

// Every node reachable from root, in creation order.
std::vector<const Node*> reachable_in_creation_order(const Node& root) {
  std::vector<const Node*> nodes{&root};
  std::map<const Node*, bool> seen{{&root, true}};
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const auto& next : nodes[i]->next)
      if (next && seen.emplace(next.get(), true).second) nodes.push_back(next.get());
  std::stable_sort(nodes.begin(), nodes.end(), [](const Node* a, const Node* b) { return a->sequence < b->sequence; });
  return nodes;
}

std::string leaf_name(const Node& node, const ParameterNames& names) {
  std::shared_ptr<TensorImpl> leaf = node.leaf.lock();
  if (!leaf) return "";
  auto it = names.find(leaf.get());
  return it == names.end() ? "" : it->second;
}

}  // namespace

Graph capture_graph(const Node& root, const ParameterNames& names) {
  Graph graph;
  const std::vector<const Node*> nodes = reachable_in_creation_order(root);
  for (size_t i = 0; i < nodes.size(); ++i) graph.ids.emplace(nodes[i], static_cast<int>(i));
  for (const Node* node : nodes) {
    GraphNode entry{node,        op_of(*node), scope_of(*node),   leaf_name(*node, names),
                    node->shape, node->dtype,  node->saved_bytes, {}};
    for (size_t i = 0; i < node->next.size(); ++i)
      entry.inputs.push_back({node->next[i] ? graph.ids.at(node->next[i].get()) : -1, node->inputs[i].shape});
    graph.nodes.push_back(std::move(entry));
  }
  return graph;
}

Graph capture_graph(const Tensor& output, const ParameterNames& names) {
  std::shared_ptr<Node> root = gradient_edge(output);
  AG_CHECK(root != nullptr,
           "capture_graph: the tensor (shape {}) has no grad_fn and does not require grad: there is no graph. Did "
           "you compute it under NoGradGuard?",
           output.defined() ? shape_str(output.shape()) : "undefined");
  return capture_graph(*root, names);
}

namespace {

std::string input_str(const GraphInput& input) {
  return input.id >= 0 ? fmt::format("%{}", input.id) : "const" + shape_str(input.shape);
}

std::string bytes_str(int64_t bytes) {
  if (bytes < 10 * 1024) return fmt::format("{} B", bytes);
  return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / 1024);
}

// What a node is, in a word or two: its op, or a leaf's parameter name.
std::string head_of(const GraphNode& n) {
  if (!n.is_leaf()) return n.op;
  return n.name.empty() ? "leaf" : "parameter " + n.name;
}

}  // namespace

std::string graph_text(const Graph& graph) {
  std::string text;
  for (size_t id = 0; id < graph.nodes.size(); ++id) {
    const GraphNode& n = graph.nodes[id];
    std::string inputs;
    for (const GraphInput& input : n.inputs) inputs += (inputs.empty() ? "" : ", ") + input_str(input);
    const std::string call = n.is_leaf() ? head_of(n) : fmt::format("{}({})", n.op, inputs);
    const std::string saved = n.saved_bytes > 0 ? "  saved " + bytes_str(n.saved_bytes) : "";
    const std::string scope = n.name.empty() ? "  " + n.scope : "";  // a parameter's name holds its path
    text += fmt::format("%{} = {}  {} {}{}{}\n", id, call, shape_str(n.shape), dtype_name(n.dtype), saved, scope);
  }
  return text;
}

namespace {

// Module scopes as a tree: each holds its nodes and its child scopes, by path.
struct Cluster {
  std::vector<int> nodes;
  std::map<std::string, Cluster> children;  // by the next path component
};

// The scope a node is drawn in: a parameter in the module that owns it, everything else where
// it was created.
std::string cluster_path(const GraphNode& n) {
  if (n.is_leaf() && !n.name.empty()) {
    const size_t dot = n.name.rfind('.');
    return dot == std::string::npos ? "" : n.name.substr(0, dot);
  }
  return n.scope == "(root)" ? "" : n.scope;
}

Cluster& cluster_at(Cluster& top, const std::string& path) {
  Cluster* cluster = &top;
  size_t start = 0;
  while (start < path.size()) {
    size_t dot = path.find('.', start);
    if (dot == std::string::npos) dot = path.size();
    cluster = &cluster->children[path.substr(start, dot - start)];
    start = dot + 1;
  }
  return *cluster;
}

// Escapes text for a double-quoted DOT string.
std::string escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string quoted(const std::string& text) { return fmt::format("\"{}\"", escaped(text)); }

// Label lines: "%id op", "shape dtype", the scope where it was created (a parameter: where it was first
// used), and the bytes saved for backward.
std::string node_line(const GraphNode& n, int id, const std::string& indent) {
  std::vector<std::string> lines = {fmt::format("%{} {}", id, head_of(n)),
                                    fmt::format("{} {}", shape_str(n.shape), dtype_name(n.dtype)), n.scope};
  if (n.saved_bytes > 0) lines.push_back("saved " + bytes_str(n.saved_bytes));
  std::string label;
  for (const std::string& line : lines) label += (label.empty() ? "" : "\\n") + escaped(line);
  const std::string style = n.is_leaf() ? ", shape=box, style=filled, fillcolor=\"#dbe9f6\"" : "";
  return fmt::format("{}n{} [label=\"{}\"{}];\n", indent, id, label, style);
}

void write_cluster(const Graph& graph, const Cluster& cluster, const std::string& path, const std::string& indent,
                   std::string& dot) {
  for (int id : cluster.nodes) dot += node_line(graph.nodes[id], id, indent);
  for (const auto& [name, child] : cluster.children) {
    const std::string child_path = path.empty() ? name : path + "." + name;
    dot += fmt::format("{}subgraph {} {{\n{}  label={};\n", indent, quoted("cluster_" + child_path), indent,
                       quoted(child_path));
    write_cluster(graph, child, child_path, indent + "  ", dot);
    dot += indent + "}\n";
  }
}

}  // namespace

std::string graph_dot(const Graph& graph) {
  Cluster top;
  for (size_t id = 0; id < graph.nodes.size(); ++id)
    cluster_at(top, cluster_path(graph.nodes[id])).nodes.push_back(static_cast<int>(id));
  std::string dot =
      "digraph autograd {\n  rankdir=TB;\n  node [shape=ellipse, fontname=\"Helvetica\", fontsize=10];\n"
      "  graph [fontname=\"Helvetica\", fontsize=11, style=rounded];\n";
  write_cluster(graph, top, "", "  ", dot);
  for (size_t id = 0; id < graph.nodes.size(); ++id)
    for (const GraphInput& input : graph.nodes[id].inputs)
      if (input.id >= 0) dot += fmt::format("  n{} -> n{};\n", input.id, id);
  return dot + "}\n";
}

}  // namespace ag
