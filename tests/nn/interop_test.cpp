// Checkpoints between attograd and PyTorch, both ways (tools/golden/interop.sh runs the round
// trip). Writes attograd_<model>.safetensors (checkpoint) and attograd_<model>_io.safetensors
// (inputs, outputs) for tools/golden/interop.py to load into the PyTorch classes; reads the
// pytorch_<model> files that script writes and reproduces their outputs. The files live in
// $ATTOGRAD_INTEROP_DIR (or interop/ beside the test binary); without that variable, a missing
// PyTorch file skips the test.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "engine/ops/arithmetic.h"
#include "engine/ops/pointwise.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "engine/safetensors.h"
#include "nn/checkpoint.h"
#include "nn/gpt.h"
#include "nn/layers.h"
#include "nn/optim.h"
#include "seeds/seed004.h"
#include "tests/golden_util.h"

namespace ag::nn {
namespace {

namespace seed004 = seeds::seed004;

namespace fs = std::filesystem;
using Tensors = std::map<std::string, Tensor>;

fs::path interop_directory() {
  const char* dir = std::getenv("ATTOGRAD_INTEROP_DIR");
  const fs::path path = dir ? fs::path(dir) : fs::read_symlink("/proc/self/exe").parent_path() / "interop";
  fs::create_directories(path);
  return path;
}

// A model built from its configuration, and how to run it: inputs by name → outputs by name.
struct InteropModel {
  std::shared_ptr<Module> module;
  std::function<Tensors(const Tensors&)> run;
};

InteropModel build_model(const std::string& config_text, Generator& gen) {
  const nlohmann::json config = nlohmann::json::parse(config_text);
  const std::string kind = config.at("model");
  if (kind == "mlp") {  // Linear → ReLU → LayerNorm → Linear → GELU
    const int64_t in = config.at("in"), hidden = config.at("hidden"), out = config.at("out");
    auto seq = std::make_shared<Sequential>(std::vector<std::shared_ptr<UnaryModule>>{
        std::make_shared<Linear>(in, hidden, true, gen), std::make_shared<ReLU>(),
        std::make_shared<LayerNorm>(Shape{hidden}), std::make_shared<Linear>(hidden, out, true, gen),
        std::make_shared<GELU>()});
    return {seq, [seq](const Tensors& in) { return Tensors{{"out", (*seq)(in.at("x"))}}; }};
  }
  if (kind == "embedding") {  // Embedding(padding_idx 0) → Linear → GELU(tanh) → LayerNorm
    const int64_t vocab = config.at("vocab"), dim = config.at("dim");
    auto seq = std::make_shared<Sequential>(std::vector<std::shared_ptr<UnaryModule>>{
        std::make_shared<Embedding>(vocab, dim, 0, gen), std::make_shared<Linear>(dim, dim, true, gen),
        std::make_shared<GELU>(GeluApproximation::tanh), std::make_shared<LayerNorm>(Shape{dim})});
    return {seq, [seq](const Tensors& in) { return Tensors{{"out", (*seq)(in.at("tokens"))}}; }};
  }
  if (kind == "gpt") {  // nanoGPT's model; PyTorch side: the peer's CharGPT, names with "transformer."
    auto gpt = std::make_shared<GPT>(GPTConfig{.vocab_size = config.at("vocab_size"),
                                               .block_size = config.at("block_size"),
                                               .n_layer = config.at("n_layer"),
                                               .n_head = config.at("n_head"),
                                               .n_embd = config.at("n_embd")},
                                     gen);
    return {gpt, [gpt](const Tensors& in) {
              gpt->eval();
              return Tensors{{"logits", gpt->forward(in.at("idx"))}};
            }};
  }
  AG_CHECK(kind == "seed004_encdec", "interop: unknown model '{}'", kind);
  const int64_t heads = config.at("n_heads"), d_model = config.at("d_model"), ff = config.at("ff_units"),
                features = config.at("n_features");
  auto model = std::make_shared<seed004::EncoderDecoderSelfAttn>(
      std::make_shared<seed004::EncoderSelfAttn>(heads, d_model, ff, features, gen),
      std::make_shared<seed004::DecoderSelfAttn>(heads, d_model, ff, features, gen), config.at("input_len"),
      config.at("target_len"));
  return {model, [model](const Tensors& in) {
            model->train();
            Tensor teacher_forced = (*model)(in.at("X"));
            model->eval();
            Tensor predicted = (*model)(slice(in.at("X"), 1, 0, model->input_len));
            return Tensors{{"out_train", teacher_forced}, {"out_eval", predicted}};
          }};
}

const std::vector<std::pair<std::string, std::string>>& interop_configs() {
  static const std::vector<std::pair<std::string, std::string>> configs{
      {"mlp", R"({"model": "mlp", "in": 4, "hidden": 8, "out": 3})"},
      {"embedding", R"({"model": "embedding", "vocab": 10, "dim": 6})"},
      {"seed004", R"({"model": "seed004_encdec", "n_heads": 3, "d_model": 2, "ff_units": 10, "n_features": 2, )"
                  R"("input_len": 2, "target_len": 2})"},
      {"gpt", R"({"model": "gpt", "vocab_size": 13, "block_size": 8, "n_layer": 2, "n_head": 2, "n_embd": 16})"},
  };
  return configs;
}

Tensors make_inputs(const std::string& name, Generator& gen) {
  if (name == "mlp") return {{"x", randn({5, 4}, DType::f32, gen)}};
  if (name == "embedding") return {{"tokens", tensor({1, 0, 3, 9, 9, 2, 0, 5}, {2, 4}, DType::i64)}};
  if (name == "gpt") return {{"idx", randint(0, 13, {3, 8}, gen)}};
  return {{"X", randn({3, 4, 2}, DType::f32, gen)}};
}

NamedTensors named(const Tensors& tensors) { return {tensors.begin(), tensors.end()}; }

// A few steps of minimising Σ out², so the mlp's file holds optimizer state too.
void train_briefly(InteropModel& model, Optimizer& optimizer, const Tensors& inputs) {
  for (int i = 0; i < 3; ++i) {
    optimizer.zero_grad();
    const Tensor out = model.run(inputs).at("out");
    sum(mul(out, out)).backward();
    optimizer.step();
  }
}

TEST(Interop, WritesCheckpointsForPyTorch) {
  const fs::path dir = interop_directory();
  for (const auto& [name, config] : interop_configs()) {
    Generator gen(4);
    InteropModel model = build_model(config, gen);
    const Tensors inputs = make_inputs(name, gen);
    const std::string path = dir / ("attograd_" + name + ".safetensors");
    if (name == "mlp") {
      Adam adam(model.module->parameters(), {.lr = 1e-2});
      train_briefly(model, adam, inputs);
      save(path, *model.module, config, &adam, {{"writer", "tests/nn/interop_test.cpp"}});
    } else {
      save(path, *model.module, config, nullptr, {{"writer", "tests/nn/interop_test.cpp"}});
    }
    Tensors io = inputs;
    for (const auto& [key, out] : model.run(inputs)) io["output." + key] = out.detach();
    save_safetensors(dir / ("attograd_" + name + "_io.safetensors"), named(io));

    Generator other(5);
    InteropModel reloaded = build_model(read_checkpoint(path).config(), other);
    load(path, *reloaded.module);
    for (const auto& [key, out] : reloaded.run(inputs)) expect_close(out, io.at("output." + key), name + " reloaded");
  }
}

TEST(Interop, ReproducesPyTorchCheckpoints) {
  const fs::path dir = interop_directory();
  for (const auto& [name, _] : interop_configs()) {
    const fs::path path = dir / ("pytorch_" + name + ".safetensors");
    if (!fs::exists(path) && !std::getenv("ATTOGRAD_INTEROP_DIR"))
      GTEST_SKIP() << path << " is absent: run tools/golden/interop.sh";
    const Checkpoint checkpoint = read_checkpoint(path);
    Generator gen(6);
    InteropModel model = build_model(checkpoint.config(), gen);
    load(path, *model.module);
    Tensors inputs, expected;
    for (const auto& [key, t] : load_safetensors(dir / ("pytorch_" + name + "_io.safetensors")).tensors)
      (key.rfind("output.", 0) == 0 ? expected[key.substr(7)] : inputs[key]) = t;
    ASSERT_FALSE(expected.empty()) << name;
    const Tensors outputs = model.run(inputs);
    for (const auto& [key, out] : expected)
      expect_close(outputs.at(key), out, "PyTorch → attograd " + name + " " + key);
  }
}

}  // namespace
}  // namespace ag::nn
