// Modules push their scope as they run: every node of a model's graph names the module that
// created it by its dotted path (as named_parameters() names parameters), forward hooks see each
// module's output, and anomaly mode names the module where a NaN appeared.
#include <gtest/gtest.h>

#include <set>

#include "engine/graph.h"
#include "engine/inspect.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/pointwise.h"
#include "engine/ops/reduce.h"
#include "nn/gpt.h"
#include "nn/layers.h"
#include "nn/transformer.h"
#include "seeds/seed004.h"

namespace ag::nn {
namespace {

namespace seed004 = seeds::seed004;

// log(proj(x)): a NaN appears here when proj's output is negative.
class LogBlock : public UnaryModule {
 public:
  LogBlock() { proj = register_module("proj", std::make_shared<Linear>(3, 3)); }
  Tensor forward(const Tensor& x) override { return log((*proj)(x)); }
  std::string type_name() const override { return "LogBlock"; }
  std::shared_ptr<Linear> proj;
};

class TwoLevels : public UnaryModule {
 public:
  TwoLevels() {
    block = register_module("block", std::make_shared<LogBlock>());
    head = register_module("head", std::make_shared<Linear>(3, 1));
  }
  Tensor forward(const Tensor& x) override { return sum((*head)((*block)(x))); }
  std::string type_name() const override { return "TwoLevels"; }
  std::shared_ptr<LogBlock> block;
  std::shared_ptr<Linear> head;
};

// The scopes of the nodes in `loss`'s graph with op `op`.
std::multiset<std::string> scopes_of(const Tensor& loss, const std::string& op) {
  std::multiset<std::string> scopes;
  for (const GraphNode& node : capture_graph(loss).nodes)
    if (node.op == op) scopes.insert(node.scope);
  return scopes;
}

// Each parameter is used by the module that owns it: the nodes that take a parameter as input
// were created in the scope its name gives ("decoder.ffn.0.weight" → "decoder.ffn.0"), and every
// parameter is reached.
void expect_parameters_used_in_their_modules(const Module& model, const Tensor& loss) {
  const Graph graph = capture_graph(loss, parameter_names(model.named_parameters()));
  std::set<std::string> reached;
  for (const GraphNode& node : graph.nodes) {
    for (const GraphInput& input : node.inputs) {
      if (input.id < 0 || graph.nodes[input.id].name.empty()) continue;
      const std::string& parameter = graph.nodes[input.id].name;
      reached.insert(parameter);
      EXPECT_EQ(node.scope, parameter.substr(0, parameter.rfind('.'))) << node.op << " uses " << parameter;
    }
  }
  for (const auto& [name, _] : model.named_parameters()) EXPECT_TRUE(reached.count(name)) << name << " unused";
}

// Where dropout is inactive (p = 0, or eval), a residual add runs in the epilogue of the projection
// that feeds it (linear_add, recorded in that projection's scope) and no add is left; with dropout
// active in training the add is dropout's own (add_dropout) or a plain add after it.
TEST(ModuleScope, ResidualAddsRunInTheirProjectionsWhereDropoutIsInactive) {
  manual_seed(0);
  const Tensor idx = zeros({2, 8}, DType::i64);
  for (const double p : {0.0, 0.1}) {
    GPT gpt({.vocab_size = 11, .block_size = 8, .n_layer = 1, .n_head = 2, .n_embd = 16, .dropout = p});
    const Tensor loss = sum(gpt.forward(idx));
    const std::multiset<std::string> fused = scopes_of(loss, "linear_add");
    if (p == 0) {
      EXPECT_EQ(fused, (std::multiset<std::string>{"transformer.h.0.attn.c_proj", "transformer.h.0.mlp.c_proj"}));
      for (const std::string& scope : scopes_of(loss, "add"))  // the embeddings' sum alone
        EXPECT_FALSE(scope.starts_with("transformer.h.")) << scope;
    } else {
      EXPECT_TRUE(fused.empty());
    }
  }
  TransformerEncoderLayer layer({.d_model = 8, .nhead = 2, .dim_feedforward = 16, .dropout = 0.1});
  layer.eval();
  const Tensor out = sum(layer(ones({2, 3, 8}).requires_grad_()));
  EXPECT_EQ(scopes_of(out, "linear_add"), (std::multiset<std::string>{"self_attn.out_proj", "linear2"}));
  EXPECT_TRUE(scopes_of(out, "add").empty());
}

TEST(ModuleScope, NestedModulesGiveDottedPathsAndTheRootNone) {
  manual_seed(0);
  TwoLevels model;
  const Tensor loss = model(ones({2, 3}));
  EXPECT_EQ(scopes_of(loss, "linear"), (std::multiset<std::string>{"block.proj", "head"}));
  EXPECT_EQ(scopes_of(loss, "log"), (std::multiset<std::string>{"block"}));
  EXPECT_EQ(scopes_of(loss, "sum"), (std::multiset<std::string>{"(root)"}));
  expect_parameters_used_in_their_modules(model, loss);
}

TEST(ModuleScope, Seed004EncoderDecoderNamesEveryHeadAsItsStateDictDoes) {
  manual_seed(0);
  auto encoder = std::make_shared<seed004::EncoderSelfAttn>(3, 2, 10, 2);
  auto decoder = std::make_shared<seed004::DecoderSelfAttn>(3, 2, 10, 2);
  seed004::EncoderDecoderSelfAttn model(encoder, decoder, 2, 2);
  const Tensor loss = sum(model(randn({4, 4, 2})));
  // The seed's module tree, typed in: three heads in each attention block.
  std::multiset<std::string> heads;
  for (const char* block : {"encoder.self_attn_heads", "decoder.self_attn_heads", "decoder.cross_attn_heads"})
    for (int h = 0; h < 3; ++h) heads.insert(fmt::format("{}.attn_heads.{}", block, h));
  EXPECT_EQ(scopes_of(loss, "scaled_dot_product_attention"), heads);
  EXPECT_EQ(scopes_of(loss, "relu"), (std::multiset<std::string>{"encoder.ffn.1", "decoder.ffn.1"}));
  // init_keys runs the key projections outside forward: they still carry their full path.
  EXPECT_EQ(scopes_of(loss, "linear").count("decoder.cross_attn_heads.attn_heads.1.linear_key"), 1u);
  expect_parameters_used_in_their_modules(model, loss);
}

TEST(ModuleScope, TransformerLayersInAModuleListCarryTheListName) {
  manual_seed(0);
  Transformer model(
      {.d_model = 4, .nhead = 2, .num_encoder_layers = 2, .num_decoder_layers = 1, .dim_feedforward = 8, .dropout = 0});
  const Tensor loss = sum(model(randn({3, 2, 4}), randn({3, 2, 4})));
  // The feed-forward's ReLU runs as linear1's epilogue (Linear::forward_activated), in linear1's scope.
  std::multiset<std::string> first_linears;
  for (const std::string& scope : scopes_of(loss, "linear"))
    if (scope.ends_with(".linear1")) first_linears.insert(scope);
  EXPECT_EQ(first_linears, (std::multiset<std::string>{"encoder.layers.0.linear1", "encoder.layers.1.linear1",
                                                       "decoder.layers.0.linear1"}));
  expect_parameters_used_in_their_modules(model, loss);
}

// A ModuleList filled before it is registered (TransformerEncoder registers first, then fills).
class ListFilledFirst : public UnaryModule {
 public:
  ListFilledFirst() {
    auto list = std::make_shared<ModuleList<Linear>>();
    list->push_back(std::make_shared<Linear>(2, 2));
    list->push_back(std::make_shared<Linear>(2, 2));
    layers = register_module("layers", list);
  }
  Tensor forward(const Tensor& x) override {
    Tensor y = x;
    for (auto& layer : *layers) y = (*layer)(y);
    return y;
  }
  std::string type_name() const override { return "ListFilledFirst"; }
  std::shared_ptr<ModuleList<Linear>> layers;
};

TEST(ModuleScope, AModuleListNamesItsElementsWhicheverIsNamedFirst) {
  manual_seed(0);
  std::shared_ptr<Linear> survivor;
  {
    ListFilledFirst model;
    const Tensor loss = sum(model(ones({1, 2})));
    EXPECT_EQ(scopes_of(loss, "linear"), (std::multiset<std::string>{"layers.0", "layers.1"}));
    expect_parameters_used_in_their_modules(model, loss);
    survivor = *model.layers->begin();
  }
  // The module outlives its parent and still runs under its own name (no link back to the parent).
  EXPECT_EQ(scopes_of(sum((*survivor)(ones({1, 2}))), "linear"), (std::multiset<std::string>{"layers.0"}));
}

TEST(ForwardHook, FiresOncePerCallWithTheModuleAndItsOutputUntilRemoved) {
  manual_seed(0);
  TwoLevels model;
  const Tensor x = randn({2, 3});
  int calls = 0;
  Module* seen = nullptr;
  Tensor captured;
  HookHandle handle = model.block->register_forward_hook([&](Module& module, const Tensor& output) {
    ++calls;
    seen = &module;
    captured = output;
  });
  model(x);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, model.block.get());
  // What the block computes, without the model around it: log(x Wᵀ + b), element by element.
  const std::vector<double> in = x.to_vector(), w = model.block->proj->weight.to_vector(),
                            b = model.block->proj->bias.to_vector(), got = captured.to_vector();
  ASSERT_EQ(got.size(), 6u);
  for (int r = 0; r < 2; ++r) {
    for (int o = 0; o < 3; ++o) {
      double z = b[o];
      for (int i = 0; i < 3; ++i) z += in[r * 3 + i] * w[o * 3 + i];
      if (std::isnan(std::log(z))) {
        EXPECT_TRUE(std::isnan(got[r * 3 + o]));
      } else {
        EXPECT_NEAR(got[r * 3 + o], std::log(z), 1e-5);
      }
    }
  }
  model(x);
  EXPECT_EQ(calls, 2);
  handle.remove();
  model(x);
  EXPECT_EQ(calls, 2);
  handle.remove();  // twice: nothing happens
}

TEST(ForwardHook, SeveralHooksRunInOrderAndOneCanRemoveItself) {
  manual_seed(0);
  Linear layer(2, 2);
  std::vector<int> order;
  HookHandle first;
  first = layer.register_forward_hook([&](Module&, const Tensor&) {
    order.push_back(1);
    first.remove();
  });
  layer.register_forward_hook([&](Module&, const Tensor&) { order.push_back(2); });
  layer(ones({1, 2}));
  layer(ones({1, 2}));
  EXPECT_EQ(order, (std::vector<int>{1, 2, 2}));
}

// A module of several arguments (Callable's operator()), called with all of them and with forward's
// defaults: its hook fires each time, with what forward returns, and its nodes carry its scope.
TEST(ForwardHook, FiresForAModuleOfSeveralArgumentsCalledWithForwardsDefaults) {
  manual_seed(0);
  Transformer model(
      {.d_model = 4, .nhead = 2, .num_encoder_layers = 1, .num_decoder_layers = 1, .dim_feedforward = 8, .dropout = 0});
  int calls = 0;
  Tensor captured;
  model.encoder->register_forward_hook([&](Module& module, const Tensor& output) {
    ++calls;
    EXPECT_EQ(&module, model.encoder.get());
    captured = output;
  });
  const Tensor src = randn({3, 2, 4});
  model(src, randn({3, 2, 4}));  // the encoder with every mask argument (undefined)
  EXPECT_EQ(calls, 1);
  const Tensor memory = (*model.encoder)(src);  // mask and src_key_padding_mask from forward's defaults
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(captured.to_vector(), model.encoder->forward(src).to_vector());
  EXPECT_EQ(scopes_of(sum(memory), "layer_norm"),
            (std::multiset<std::string>{"encoder.layers.0.norm1", "encoder.layers.0.norm2", "encoder.norm"}));
}

TEST(Anomaly, NaNInsideASubmoduleNamesTheOpAndTheModulePath) {
  manual_seed(0);
  TwoLevels model;
  {
    NoGradGuard no_grad;  // proj(x) = -x: log of a negative number inside "block"
    model.block->proj->weight.copy_(tensor({-1, 0, 0, 0, -1, 0, 0, 0, -1}, {3, 3}));
    model.block->proj->bias.zero_();
  }
  const DetectAnomalyGuard anomaly;
  try {
    model(ones({2, 3}));
    FAIL() << "expected an anomaly error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("anomaly detected in forward: log in module scope block produced NaN"), std::string::npos)
        << message;
    EXPECT_NE(message.find("inputs: (2,3) finite"), std::string::npos) << message;
    std::cout << "the message: " << message << "\n";
  }
}

}  // namespace
}  // namespace ag::nn
