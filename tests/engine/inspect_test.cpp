// Scopes, graph export, backward trace and anomaly mode on small hand-built graphs whose
// structure and gradients are known without the engine.
#include "engine/inspect.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

#include "engine/graph.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/mask.h"
#include "engine/ops/matmul.h"
#include "engine/ops/pointwise.h"
#include "engine/ops/reduce.h"
#include "engine/ops/softmax.h"

namespace ag {
namespace {

// loss = sum(exp(x @ w) * scale), built inside the scopes "block" and "block.head".
struct TinyGraph {
  Tensor x = tensor({0.1, -0.2, 0.3, 0.4, 0.5, -0.6}, {2, 3}).requires_grad_();
  Tensor w = tensor({0.2, -0.1, 0.05, 0.3, -0.4, 0.1}, {3, 2}).requires_grad_();
  Tensor scale = tensor({1.5, -0.5}, {2});  // needs no gradient: a constant input
  Tensor loss;
  TinyGraph() {
    const ScopeGuard block("block");
    Tensor y = matmul(x, w);  // (2, 2)
    Tensor e;
    {
      const ScopeGuard head("head");
      e = exp(y);
    }
    loss = sum(mul(e, scale));
  }
};

TEST(Scope, NodesRecordTheDottedPathOfTheGuardsAround) {
  Tensor x = ones({2}).requires_grad_();
  Tensor outside = exp(x);
  Tensor inside, nested;
  {
    const ScopeGuard a("encoder");
    inside = exp(x);
    {
      const ScopeGuard b("ffn");
      const ScopeGuard unnamed("");  // pushes nothing (a root module)
      nested = exp(x);
    }
  }
  EXPECT_EQ(outside.grad_fn()->scope, nullptr);
  EXPECT_EQ(scope_of(*outside.grad_fn()), "(root)");
  EXPECT_EQ(*inside.grad_fn()->scope, "encoder");
  EXPECT_EQ(*nested.grad_fn()->scope, "encoder.ffn");
  EXPECT_EQ(current_scope(), nullptr);  // every guard popped
}

TEST(Scope, NodesRecordShapeDtypeSavedBytesAndCreationOrder) {
  Tensor x = ones({2, 3}, DType::f64).requires_grad_();
  Tensor y = exp(x);                     // saves its output: 6 f64 = 48 bytes
  Tensor z = sum(y);                     // saves nothing
  Tensor m = matmul(x, x, false, true);  // saves both inputs: 2 × 48
  EXPECT_EQ(y.grad_fn()->shape, (Shape{2, 3}));
  EXPECT_EQ(y.grad_fn()->dtype, DType::f64);
  EXPECT_EQ(y.grad_fn()->saved_bytes, 48);
  EXPECT_EQ(z.grad_fn()->saved_bytes, 0);
  EXPECT_EQ(z.grad_fn()->shape, Shape{});
  EXPECT_EQ(m.grad_fn()->saved_bytes, 96);
  EXPECT_LT(y.grad_fn()->sequence, z.grad_fn()->sequence);
  EXPECT_LT(z.grad_fn()->sequence, m.grad_fn()->sequence);
}

TEST(OpName, SnakeCaseOfTheNodeNameWithoutBackward) {
  Node node;
  node.backward = [](const BackwardContext&) { return std::vector<Tensor>{}; };
  for (auto [name, op] : std::vector<std::pair<std::string_view, std::string>>{
           {"SoftmaxBackward", "softmax"},
           {"MulScalarBackward", "mul_scalar"},
           {"ScaledDotProductAttentionBackward", "scaled_dot_product_attention"},
           {"AccumulateGrad", "accumulate_grad"}}) {  // a custom Function may take any name
    node.name = name;
    EXPECT_EQ(op_of(node), op);
  }
}

// A leaf's AccumulateGrad node is told by having no backward function, not by its name.
TEST(OpName, TheNodeOfALeafIsALeaf) {
  const Tensor x = tensor({1.0}, {1}).requires_grad_();
  EXPECT_EQ(op_of(*gradient_edge(x)), "leaf");
}

TEST(Graph, HasOneNodePerOpAndLeafWithTheRightEdges) {
  TinyGraph g;
  const ParameterNames names = parameter_names({{"layer.weight", g.w}});
  const Graph graph = capture_graph(g.loss, names);
  // 4 ops (matmul, exp, mul, sum) and 2 leaves (x, w); the constant `scale` is no node.
  ASSERT_EQ(graph.nodes.size(), 6u);
  std::map<std::string, int> id;
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    id[graph.nodes[i].op == "leaf" ? (graph.nodes[i].name.empty() ? "x" : "w") : graph.nodes[i].op] = int(i);
  ASSERT_EQ(id.size(), 6u) << "each op once, two leaves";
  auto inputs_of = [&](const std::string& op) {
    std::vector<int> ids;
    for (const GraphInput& input : graph.nodes[id.at(op)].inputs) ids.push_back(input.id);
    return ids;
  };
  EXPECT_EQ(inputs_of("matmul"), (std::vector<int>{id["x"], id["w"]}));
  EXPECT_EQ(inputs_of("exp"), (std::vector<int>{id["matmul"]}));
  EXPECT_EQ(inputs_of("mul"), (std::vector<int>{id["exp"], -1}));
  EXPECT_EQ(inputs_of("sum"), (std::vector<int>{id["mul"]}));
  // Creation order: every input comes before its user.
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    for (const GraphInput& input : graph.nodes[i].inputs) EXPECT_LT(input.id, int(i));
  EXPECT_EQ(graph.nodes[id["exp"]].scope, "block.head");
  EXPECT_EQ(graph.nodes[id["matmul"]].scope, "block");
  EXPECT_EQ(graph.nodes[id["w"]].name, "layer.weight");
  EXPECT_EQ(graph.nodes[id["mul"]].shape, (Shape{2, 2}));
}

TEST(Graph, TextListsEveryNodeWithItsInputsShapeAndScope) {
  TinyGraph g;
  const Graph graph = capture_graph(g.loss, parameter_names({{"layer.weight", g.w}}));
  // Saved bytes: matmul keeps x and w (6 + 6 floats), exp its output (4 floats), mul both of its
  // inputs (4 + 2 floats); the leaves take their scope from the first op that used them.
  EXPECT_EQ(graph_text(graph),
            "%0 = leaf  (2,3) f32  block\n"
            "%1 = parameter layer.weight  (3,2) f32\n"
            "%2 = matmul(%0, %1)  (2,2) f32  saved 48 B  block\n"
            "%3 = exp(%2)  (2,2) f32  saved 16 B  block.head\n"
            "%4 = mul(%3, const(2))  (2,2) f32  saved 24 B  block\n"
            "%5 = sum(%4)  () f32  block\n");
}

TEST(Graph, DotHasEveryNodeEveryGradientEdgeAndNestedClusters) {
  TinyGraph g;
  const Graph graph = capture_graph(g.loss);
  const std::string dot = graph_dot(graph);
  int edges = 0;
  for (const GraphNode& node : graph.nodes)
    for (const GraphInput& input : node.inputs) edges += input.id >= 0;
  EXPECT_EQ(edges, 5);  // x→matmul, w→matmul, matmul→exp, exp→mul, mul→sum
  std::set<std::pair<int, int>> drawn;
  std::istringstream lines(dot);
  for (std::string line; std::getline(lines, line);) {
    int from = 0, to = 0;
    if (std::sscanf(line.c_str(), " n%d -> n%d;", &from, &to) == 2) drawn.emplace(from, to);
  }
  std::set<std::pair<int, int>> expected;
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    for (const GraphInput& input : graph.nodes[i].inputs)
      if (input.id >= 0) expected.emplace(input.id, int(i));
  EXPECT_EQ(drawn, expected);
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    EXPECT_NE(dot.find(fmt::format("n{} [label=\"%{} {}", i, i, graph.nodes[i].op)), std::string::npos) << dot;
  const size_t outer = dot.find("subgraph \"cluster_block\"");
  const size_t inner = dot.find("subgraph \"cluster_block.head\"");
  ASSERT_NE(outer, std::string::npos) << dot;
  ASSERT_NE(inner, std::string::npos) << dot;
  EXPECT_LT(outer, inner);  // nested: the head's cluster is written inside the block's
}

TEST(Graph, OfATensorWithoutGraphIsAnError) { EXPECT_THROW(capture_graph(ones({2})), Error); }

// loss = sum(exp(2x)): the gradient norms along the chain, computed here by hand.
TEST(BackwardTrace, VisitsNodesInOrderWithTheGradientNormsOfTheChainRule) {
  const std::vector<double> values = {0.1, -0.3, 0.7};
  Tensor x = tensor(values, {3}, DType::f64).requires_grad_();
  Tensor loss = sum(exp(mul(x, 2.0)));
  double exp_norm = 0;  // |exp(2x)|
  for (double v : values) exp_norm += std::exp(2 * v) * std::exp(2 * v);
  exp_norm = std::sqrt(exp_norm);

  std::ostringstream printed;
  BackwardTrace trace(&printed, 1, parameter_names({{"x", x}}));
  loss.backward();
  const auto& entries = trace.entries();
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_EQ(entries[0].op, "sum");
  EXPECT_NEAR(entries[0].grad_norm, 1.0, 1e-12);
  EXPECT_NEAR(entries[0].sent_norms.at(0), std::sqrt(3.0), 1e-12);  // ones(3)
  EXPECT_EQ(entries[1].op, "exp");
  EXPECT_NEAR(entries[1].grad_norm, std::sqrt(3.0), 1e-12);
  EXPECT_NEAR(entries[1].sent_norms.at(0), exp_norm, 1e-12);  // 1 · exp(2x)
  EXPECT_EQ(entries[2].op, "mul_scalar");
  EXPECT_NEAR(entries[2].sent_norms.at(0), 2 * exp_norm, 1e-12);  // · 2
  EXPECT_EQ(entries[3].op, "leaf");
  EXPECT_EQ(entries[3].scope, "x");
  EXPECT_NEAR(entries[3].grad_norm, 2 * exp_norm, 1e-12);
  for (const auto& entry : entries) EXPECT_GE(entry.seconds, 0);
  EXPECT_NE(printed.str().find("backward summary: 4 nodes"), std::string::npos) << printed.str();
  // One walk was asked for: the trace is off for the next one.
  EXPECT_EQ(backward_observer(), nullptr);
}

TEST(BackwardTrace, ReportsWherePathsMeet) {
  Tensor x = tensor({0.5, 1.5}, {2}).requires_grad_();
  Tensor loss = sum(add(exp(x), x));  // x reaches add twice: directly and through exp
  std::ostringstream printed;
  const BackwardTrace trace(&printed);
  loss.backward();
  EXPECT_NE(printed.str().find("paths meet"), std::string::npos) << printed.str();
  // The summary counts each op once per run: sum, add, exp, leaf.
  EXPECT_NE(trace.summary().find("backward summary: 4 nodes"), std::string::npos) << trace.summary();
}

TEST(BackwardTrace, OffCostsNothingAndRestoresThePreviousObserver) {
  EXPECT_EQ(backward_observer(), nullptr);
  {
    const BackwardTrace outer(nullptr);
    {
      const BackwardTrace inner(nullptr);
      EXPECT_EQ(backward_observer(), &inner);
    }
    EXPECT_EQ(backward_observer(), &outer);
  }
  EXPECT_EQ(backward_observer(), nullptr);
}

std::string error_of(const std::function<void()>& run) {
  try {
    run();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Anomaly, ForwardNaNNamesTheOpItsScopeAndItsInputs) {
  Tensor x = tensor({1.0, 2.0, 3.0}, {3}).requires_grad_();
  const DetectAnomalyGuard anomaly;
  const std::string message = error_of([&] {
    const ScopeGuard scope("encoder");
    const ScopeGuard inner("block");
    Tensor shifted = add(x, -2.5);  // (-1.5, -0.5, 0.5)
    Tensor bad = log(shifted);      // NaN at elements 0 and 1
  });
  EXPECT_NE(message.find("in forward: log in module scope encoder.block produced NaN at element 0"), std::string::npos)
      << message;
  EXPECT_NE(message.find("inputs: (3) finite"), std::string::npos) << message;
}

TEST(Anomaly, BackwardInfNamesTheForwardOpAndSaysBackward) {
  Tensor x = tensor({0.0, 4.0}, {2}).requires_grad_();
  const DetectAnomalyGuard anomaly;
  Tensor y;
  {
    const ScopeGuard scope("norm");
    y = sqrt(x);  // forward is finite: (0, 2)
  }
  const std::string message = error_of([&] { sum(y).backward(); });  // d sqrt(x) = 1 / (2 sqrt(x)): inf at 0
  EXPECT_NE(message.find("in backward: the backward of sqrt (created in forward in module scope norm"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("returned Inf at element 0 of the gradient for input 0"), std::string::npos) << message;
}

TEST(Anomaly, AnInfTheOpCreatedIsOneButMaskingWithMinusInfIsNot) {
  Tensor scores = tensor({0.5, 1.0, -0.5, 2.0}, {2, 2}).requires_grad_();
  const DetectAnomalyGuard anomaly;
  // Causal masking writes -inf on purpose; the ops after it pass it on; softmax makes it 0.
  Tensor masked = masked_fill(scores, causal_mask(2), -INFINITY);
  Tensor weights = softmax(mul(masked, 0.5), -1);
  EXPECT_NO_THROW(sum(weights).backward());
  EXPECT_EQ(weights.at({0, 1}), 0.0);
  // exp overflowing float makes an Inf of finite inputs.
  const std::string message = error_of([&] { exp(mul(scores, 100.0)); });
  EXPECT_NE(message.find("in forward: exp in module scope (root) produced Inf at element 1"), std::string::npos)
      << message;
}

// The exemption is the op's property writes_inf, not its name: the same Inf-writing op passes with
// it and is reported without it, whatever it is called.
TEST(Anomaly, AnOpThatWritesInfOnPurposeSaysSoInItsProperties) {
  const Tensor x = tensor({1.0, 2.0}, {2}).requires_grad_();
  const DetectAnomalyGuard anomaly;
  const auto fill_inf = [&](OpKind kind) {
    Tensor out = tensor({-INFINITY, 2.0}, {2});
    record(out, kind, {x}, {}, [](const BackwardContext& c) { return std::vector<Tensor>{c.grad}; });
  };
  EXPECT_NO_THROW(fill_inf({"FillInfBackward", {.writes_inf = true}}));
  const std::string message = error_of([&] { fill_inf("MaskedFillBackward"); });
  EXPECT_NE(message.find("in forward: masked_fill in module scope (root) produced Inf at element 0"), std::string::npos)
      << message;
}

TEST(Anomaly, OffLetsNonFiniteValuesThrough) {
  Tensor x = tensor({-1.0}, {1}).requires_grad_();
  Tensor y = log(x);
  EXPECT_TRUE(std::isnan(y.item()));
  EXPECT_FALSE(anomaly_detection_enabled());
}

}  // namespace
}  // namespace ag
