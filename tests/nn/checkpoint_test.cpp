// Checkpoints (model + optimizer state + metadata), the optimizers' state and argument checks,
// and the loss modules.
#include "nn/checkpoint.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "engine/autograd.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/loss.h"
#include "engine/ops/reduce.h"
#include "engine/safetensors.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/optim.h"
#include "tests/test_util.h"

namespace ag::nn {
namespace {

namespace fs = std::filesystem;

std::shared_ptr<Sequential> small_model(uint64_t seed, int64_t hidden = 8) {
  Generator gen(seed);
  return std::make_shared<Sequential>(std::vector<std::shared_ptr<UnaryModule>>{
      std::make_shared<Linear>(4, hidden, true, gen), std::make_shared<ReLU>(),
      std::make_shared<Linear>(hidden, 1, true, gen)});
}

void train_steps(Module& model, Optimizer& optimizer, int steps) {
  Generator gen(7);
  const Tensor x = randn({16, 4}, DType::f32, gen), y = randn({16, 1}, DType::f32, gen);
  for (int i = 0; i < steps; ++i) {
    optimizer.zero_grad();
    mse_loss(dynamic_cast<UnaryModule&>(model)(x), y).backward();
    optimizer.step();
  }
}

std::vector<double> all_values(const Module& model) {
  std::vector<double> out;
  for (const Tensor& p : model.parameters())
    for (double v : p.to_vector()) out.push_back(v);
  return out;
}

std::vector<std::string> names_of(const NamedTensors& tensors) {
  std::vector<std::string> names;
  for (const auto& [name, _] : tensors) names.push_back(name);
  return names;
}

const char* kConfig = R"({"model": "mlp", "in": 4, "hidden": 8, "out": 1})";

TEST(Checkpoint, ResumingFromACheckpointContinuesBitForBit) {
  const TempDir dir;
  const fs::path path = dir / "model.safetensors";
  auto model = small_model(1);
  Adam adam(model->parameters(), {.lr = 1e-2});
  train_steps(*model, adam, 3);
  save(path, *model, kConfig, &adam, {{"epoch", "3"}});
  train_steps(*model, adam, 4);

  auto resumed = small_model(99);
  Adam resumed_adam(resumed->parameters());
  const Checkpoint checkpoint = load(path, *resumed, &resumed_adam);
  EXPECT_EQ(checkpoint.config(), kConfig);
  EXPECT_EQ(checkpoint.metadata.at("epoch"), "3");
  EXPECT_EQ(resumed_adam.lr(), 1e-2);
  train_steps(*resumed, resumed_adam, 4);
  EXPECT_EQ(all_values(*resumed), all_values(*model));
}

TEST(Checkpoint, ModelTensorsKeepTheirStateDictNamesAndOptimizerTensorsArePrefixed) {
  const TempDir dir;
  const fs::path path = dir / "model.safetensors";
  auto model = small_model(1);
  SGD sgd(model->parameters(), 0.1, {.momentum = 0.9});
  train_steps(*model, sgd, 1);
  save(path, *model, kConfig, &sgd);
  const SafetensorsFile file = load_safetensors(path);
  EXPECT_EQ(names_of(file.tensors),
            (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias", "optimizer.lr",
                                      "optimizer.state.0.step", "optimizer.state.0.momentum_buffer",
                                      "optimizer.state.1.step", "optimizer.state.1.momentum_buffer",
                                      "optimizer.state.2.step", "optimizer.state.2.momentum_buffer",
                                      "optimizer.state.3.step", "optimizer.state.3.momentum_buffer"}));
  EXPECT_EQ(
      file.metadata,
      (std::map<std::string, std::string>{
          {"format", "attograd-checkpoint"}, {"format_version", "1"}, {"config", kConfig}, {"optimizer", "SGD"}}));
}

TEST(Checkpoint, AModelOnlyLoadIgnoresTheOptimizerState) {
  const TempDir dir;
  const fs::path path = dir / "model.safetensors";
  auto model = small_model(1);
  Adam adam(model->parameters());
  train_steps(*model, adam, 2);
  save(path, *model, kConfig, &adam);
  auto loaded = small_model(2);
  load(path, *loaded);
  EXPECT_EQ(all_values(*loaded), all_values(*model));
}

TEST(Checkpoint, LoadingIsStrictAndNamesWhatIsWrong) {
  const TempDir dir;
  const std::string path = dir / "model.safetensors";
  auto model = small_model(1);
  Adam adam(model->parameters());
  save(path, *model, kConfig, &adam);

  auto wider = small_model(1, 9);
  expect_error([&] { load(path, *wider); }, {path, "'0.weight' has shape (8,4)", "expects (9,4)"});
  Sequential fewer({std::make_shared<Linear>(4, 8)});
  expect_error([&] { load(path, fewer); }, {"unexpected '2.weight'", "unexpected '2.bias'"});
  Sequential more({std::make_shared<Linear>(4, 8), std::make_shared<ReLU>(), std::make_shared<Linear>(8, 1),
                   std::make_shared<Linear>(1, 1)});
  expect_error([&] { load(path, more); }, {"missing '3.weight'", "missing '3.bias'"});
  SGD sgd(model->parameters(), 0.1);
  expect_error([&] { load(path, *model, &sgd); }, {path, "holds Adam state, expected SGD state"});

  const std::string plain = dir / "plain.safetensors";
  save(plain, *model, kConfig);
  expect_error([&] { load(plain, *model, &adam); }, {"holds no optimizer state"});
}

// Weights that are not numbers are refused by name, with or without the optimizer.
TEST(Checkpoint, ANaNOrInfiniteTensorIsRefusedByName) {
  const TempDir dir;
  const std::string path = dir / "model.safetensors";
  auto model = small_model(1);
  Adam adam(model->parameters());
  train_steps(*model, adam, 1);
  for (double bad : {NAN, INFINITY, -INFINITY}) {
    auto damaged = small_model(1);
    {
      NoGradGuard no_grad;
      damaged->parameters()[2].fill_(bad);
    }
    // Never written by attograd: a checkpoint that could not be loaded.
    expect_error([&] { save(path, *damaged, kConfig, &adam); }, {"tensor '2.weight' holds", "none is written"});
    EXPECT_FALSE(std::filesystem::exists(path));
    // Another writer's such file (the checksum made right) is refused when read.
    const std::string damaged_path = dir / "damaged.safetensors";
    save(damaged_path, *model, kConfig, &adam);
    SafetensorsFile file = load_safetensors(damaged_path);
    for (auto& [name, tensor] : file.tensors)
      if (name == "2.weight") tensor = full(tensor.shape(), bad);
    save_safetensors(damaged_path, file.tensors, file.metadata);
    auto fresh = small_model(2);
    expect_error([&] { load(damaged_path, *fresh); },
                 {damaged_path, "tensor '2.weight' holds", "element 0 of shape (1,8)"});
  }
  save(path, *model, kConfig, &adam);
  auto fresh = small_model(2);
  Adam other(fresh->parameters());
  load(path, *fresh, &other);  // finite: loads
  EXPECT_EQ(all_values(*fresh), all_values(*model));
}

// A config asking for more than the file's tensors fails while the model is built, naming the
// file, instead of allocating what it asks.
TEST(Checkpoint, AModelFromAConfigIsBuiltWithinTheFilesTensors) {
  const TempDir dir;
  const std::string path = dir / "model.safetensors";
  save(path, *small_model(1), kConfig);
  const Checkpoint checkpoint = read_checkpoint(path);
  auto built = build_from_config(checkpoint, path, [] { return small_model(2); });
  load(path, *built);
  expect_error([&] { build_from_config(checkpoint, path, [] { return small_model(2, 1 << 20); }); },
               {path, "the config describes a larger model than the tensors the file holds"});
  expect_error([&] { build_from_config(checkpoint, path, [] { return small_model(2, -3); }); },
               {path, "does not describe the model it holds"});
}

TEST(Checkpoint, RejectsFilesOfAnotherFormatOrVersion) {
  const TempDir dir;
  auto model = small_model(1);
  const NamedTensors state = model->state_dict();
  auto write = [&](const std::map<std::string, std::string>& metadata) {
    const std::string path = dir / "other.safetensors";
    save_safetensors(path, state, metadata);
    return path;
  };
  expect_error([&] { read_checkpoint(write({})); }, {"not an attograd checkpoint", "'(none)'"});
  expect_error(
      [&] {
        read_checkpoint(write({{"format", "pt"}}));
      },
      {"format is 'pt'", "expected 'attograd-checkpoint'"});
  expect_error(
      [&] {
        read_checkpoint(write({{"format", "attograd-checkpoint"}, {"format_version", "2"}}));
      },
      {"format_version '2' is not supported", "reads version 1"});
  expect_error(
      [&] {
        read_checkpoint(write({{"format", "attograd-checkpoint"}, {"format_version", "1"}, {"config", "{oops"}}));
      },
      {"the checkpoint's config: not valid JSON"});
  expect_error(
      [&] {
        read_checkpoint(write({{"format", "attograd-checkpoint"}, {"format_version", "1"}}));
      },
      {"config is missing"});
}

// Every single flipped bit of a checkpoint (in the length, the header, the padding or the data)
// is refused, whatever it hits, including the checksum's own key.
TEST(Checkpoint, EveryFlippedBitIsRefused) {
  const TempDir dir;
  const fs::path path = dir / "model.safetensors";
  save(path, *small_model(1, 2), kConfig);
  std::ifstream in(path, std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const fs::path damaged_path = dir / "damaged.safetensors";
  for (size_t at = 0; at < bytes.size(); ++at) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string damaged = bytes;
      damaged[at] = static_cast<char>(damaged[at] ^ (1 << bit));
      std::ofstream(damaged_path, std::ios::binary) << damaged;
      ASSERT_NE(error_of([&] { read_checkpoint(damaged_path); }), "") << "byte " << at << " bit " << bit;
    }
  }
}

TEST(Checkpoint, SaveChecksItsArguments) {
  const TempDir dir;
  const fs::path path = dir / "model.safetensors";
  auto model = small_model(1);
  expect_error([&] { save(path, *model, "{not json"); }, {"config is not valid JSON"});
  expect_error([&] { save(path, *model, kConfig, nullptr, {{"format", "mine"}}); }, {"'format' is reserved"});
  EXPECT_FALSE(fs::exists(path));
}

// ---- model files (attograd export)

// A checkpoint as the Trainer writes it: the optimizer's state, the resume entries, a task's own.
std::string trained_checkpoint(const TempDir& dir, Sequential& model) {
  Adam adam(model.parameters());
  train_steps(model, adam, 2);
  const std::string path = dir / "best.safetensors";
  save(path, model, kConfig, &adam,
       {{"epoch", "2"}, {"history", "[]"}, {"shuffle_rng", "s"}, {"default_rng", "d"}, {"vocabulary", "abc"}});
  return path;
}

std::string export_to(const TempDir& dir, const std::string& checkpoint, DType dtype) {
  const std::string path = dir / fmt::format("model-{}.safetensors", dtype_name(dtype));
  write_bytes(path, model_file_bytes(read_checkpoint(checkpoint), dtype));
  return path;
}

// f32 to the nearest bf16, ties to even, on the bits (finite values): not the engine's conversion.
float nearest_bf16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  return std::bit_cast<float>((bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u);
}

TEST(ModelFile, KeepsTheModelBitForBitAndDropsTheTrainingState) {
  const TempDir dir;
  auto model = small_model(1);
  const std::string checkpoint = trained_checkpoint(dir, *model);
  const std::string path = export_to(dir, checkpoint, DType::f32);
  const SafetensorsFile file = load_safetensors(path);
  EXPECT_EQ(names_of(file.tensors), (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(file.metadata,
            (std::map<std::string, std::string>{
                {"format", "attograd-checkpoint"},
                {"format_version", "1"},
                {"config", kConfig},
                {"vocabulary", "abc"},
                {"model_file", fmt::format(R"({{"dtype":"f32","epoch":"2","from":"{}"}})", checkpoint)}}));
  const NamedTensors original = model->state_dict();
  for (size_t i = 0; i < original.size(); ++i) {
    ASSERT_EQ(file.tensors[i].second.dtype(), DType::f32);
    EXPECT_EQ(std::memcmp(file.tensors[i].second.data<float>(), original[i].second.data<float>(),
                          sizeof(float) * static_cast<size_t>(original[i].second.numel())),
              0)
        << original[i].first;
  }
  auto loaded = small_model(2);
  const Checkpoint read = load(path, *loaded);
  EXPECT_TRUE(read.is_model_file());
  EXPECT_EQ(all_values(*loaded), all_values(*model));
  // Nothing to train on from: refused, saying why.
  Adam adam(loaded->parameters());
  expect_error([&] { load(path, *loaded, &adam); }, {path, "is a model file", "no optimizer state"});
  expect_error([&] { model_file_bytes(read, DType::f32); }, {path, "is a model file already"});
}

TEST(ModelFile, Bf16HoldsTheNearestBf16OfEachWeightAndLoadsAsF32) {
  const TempDir dir;
  auto model = small_model(1);
  const std::string path = export_to(dir, trained_checkpoint(dir, *model), DType::bf16);
  EXPECT_LT(fs::file_size(path), fs::file_size(export_to(dir, dir / "best.safetensors", DType::f32)));
  for (const auto& [name, tensor] : load_safetensors(path).tensors) EXPECT_EQ(tensor.dtype(), DType::bf16) << name;
  auto loaded = small_model(2);
  load(path, *loaded);
  const std::vector<double> original = all_values(*model), rounded = all_values(*loaded);
  ASSERT_EQ(rounded.size(), original.size());
  int changed = 0;
  for (size_t i = 0; i < original.size(); ++i) {
    EXPECT_EQ(rounded[i], nearest_bf16(static_cast<float>(original[i]))) << i;
    changed += rounded[i] != original[i];
  }
  EXPECT_GT(changed, 0);  // the rounding did something
  for (const Tensor& p : loaded->parameters()) EXPECT_EQ(p.dtype(), DType::f32);
  // The memory budget counts a bf16 tensor at the f32 size it loads into.
  const Checkpoint read = read_checkpoint(path);
  build_from_config(read, path, [] { return small_model(2); });
  expect_error([&] { build_from_config(read, path, [] { return small_model(2, 1 << 20); }); },
               {path, "the config describes a larger model"});
}

// A model file is checked as a checkpoint is: a NaN among its bf16 weights, a shape the model does not
// have, a dtype other than its own; and export refuses what it cannot write.
TEST(ModelFile, IsRefusedLikeACheckpointNamingTheFileAndTensor) {
  const TempDir dir;
  auto model = small_model(1);
  const std::string checkpoint = trained_checkpoint(dir, *model);
  const std::string path = export_to(dir, checkpoint, DType::bf16);
  SafetensorsFile file = load_safetensors(path);
  for (auto& [name, tensor] : file.tensors)
    if (name == "2.weight") tensor = to(full(tensor.shape(), NAN), DType::bf16);
  const std::string damaged = dir / "nan.safetensors";
  save_safetensors(damaged, file.tensors, file.metadata);
  expect_error([&] { load(damaged, *small_model(2)); }, {damaged, "tensor '2.weight' holds", "nan"});
  expect_error([&] { load(path, *small_model(2, 9)); }, {path, "'0.weight' has shape (8,4) bf16", "expects (9,4)"});
  file = load_safetensors(path);
  for (auto& [name, tensor] : file.tensors) tensor = to(tensor, DType::f64);
  const std::string wide = dir / "f64.safetensors";
  save_safetensors(wide, file.tensors, file.metadata);
  expect_error([&] { load(wide, *small_model(2)); }, {wide, "'0.weight' has shape (8,4) f64", "expects (8,4) f32"});

  expect_error([&] { model_file_bytes(read_checkpoint(checkpoint), DType::f64); }, {"dtype f64: expected f32 or bf16"});
  {
    NoGradGuard no_grad;
    model->parameters()[0].fill_(3.4e38);  // finite in f32, beyond bf16's largest (3.39e38)
  }
  save(checkpoint, *model, kConfig);
  expect_error([&] { model_file_bytes(read_checkpoint(checkpoint), DType::bf16); },
               {checkpoint, "tensor '0.weight' holds inf", "once rounded to bf16"});
}

// ---- optimizers

TEST(Optimizer, StateDictRoundTripsAndLoadIsStrict) {
  auto model = small_model(1);
  Adam adam(model->parameters());
  EXPECT_EQ(names_of(adam.state_dict()), std::vector<std::string>{"lr"}) << "no state before the first step";
  train_steps(*model, adam, 2);
  NamedTensors state = adam.state_dict();
  EXPECT_EQ(state.size(), 1u + 4 * 3);
  EXPECT_EQ(state[1].first, "state.0.step");
  EXPECT_EQ(state[1].second.item(), 2);

  Adam other(model->parameters());
  other.load_state_dict(state);
  EXPECT_EQ(other.state_dict()[2].second.to_vector(), state[2].second.to_vector());

  auto without = [&](const std::string& name) {
    NamedTensors out;
    for (const auto& entry : state)
      if (entry.first != name) out.push_back(entry);
    return out;
  };
  expect_error([&] { other.load_state_dict(without("state.1.exp_avg_sq")); }, {"Adam", "missing 'state.1.exp_avg_sq'"});
  expect_error([&] { other.load_state_dict(without("lr")); }, {"missing 'lr'"});
  NamedTensors extra = state;
  extra.emplace_back("state.4.exp_avg", zeros({1}));
  expect_error([&] { other.load_state_dict(extra); }, {"unexpected 'state.4.exp_avg'"});
  NamedTensors misshapen = without("state.0.exp_avg");
  misshapen.emplace_back("state.0.exp_avg", zeros({4, 8}));
  expect_error([&] { other.load_state_dict(misshapen); }, {"'state.0.exp_avg' is (4,8) f32", "parameter is (8,4) f32"});
  NamedTensors bad_step = without("state.2.step");
  bad_step.emplace_back("state.2.step", scalar(1.5));
  expect_error([&] { other.load_state_dict(bad_step); }, {"'state.2.step'", "positive 0-d i64"});
}

TEST(Optimizer, SkipsParametersWithoutAGradient) {
  Tensor a = ones({2}).requires_grad_(), b = ones({2}).requires_grad_();
  SGD sgd({a, b}, 0.5);
  sum(a).backward();
  sgd.step();
  EXPECT_EQ(a.to_vector(), (std::vector<double>{0.5, 0.5}));
  EXPECT_EQ(b.to_vector(), (std::vector<double>{1, 1}));
  EXPECT_EQ(names_of(sgd.state_dict()), (std::vector<std::string>{"lr", "state.0.step"}));
  sgd.zero_grad();
  EXPECT_FALSE(a.grad().defined());
}

TEST(Optimizer, AStepBumpsTheParameterVersion) {
  Tensor w = ones({3}).requires_grad_();
  Adam adam({w});
  Tensor y = mul(w, w);  // saves w for backward
  sum(y).backward({}, true);
  adam.step();
  expect_error([&] { sum(y).backward(); }, {"modified"});
}

TEST(Optimizer, RejectsBadArguments) {
  Tensor w = ones({2}).requires_grad_();
  expect_error([] { SGD({}, 0.1); }, {"SGD", "empty parameter list"});
  expect_error([&] { SGD({w}, -1); }, {"SGD", "invalid lr: -1"});
  expect_error([&] { SGD({w}, 0.1, {.nesterov = true}); }, {"nesterov", "momentum > 0"});
  expect_error([&] { SGD({mul(w, 2.0)}, 0.1); }, {"parameter 0", "leaf"});
  expect_error([&] { SGD({ones({2})}, 0.1); }, {"parameter 0", "requires grad"});
  expect_error([&] { Adam({w}, {.beta1 = 1}); }, {"Adam", "invalid beta1: 1"});
  expect_error([&] { AdamW({w}, {.eps = -1}); }, {"AdamW", "invalid eps"});
  Adam adam({w});
  expect_error([&] { adam.set_lr(-0.5); }, {"Adam", "invalid lr"});
  expect_error([&] { clip_grad_norm({w}, 1, 0.5); }, {"clip_grad_norm", "norm_type"});
  expect_error([&] { StepLR(adam, 0); }, {"StepLR", "step_size"});
  expect_error([&] { WarmupCosineLR(adam, 5, 5); }, {"WarmupCosineLR", "warmup_steps 5", "total_steps 5"});
}

TEST(Optimizer, AdamWDefaultsAreTorchs) {
  Tensor w = ones({2}).requires_grad_();
  AdamW adamw({w});
  EXPECT_EQ(adamw.lr(), 1e-3);
  EXPECT_EQ(adamw.options.weight_decay, 1e-2);
  EXPECT_EQ(adamw.options.beta2, 0.999);
  EXPECT_EQ(adamw.type_name(), "AdamW");
}

// ---- losses

TEST(Loss, ModulesCallTheOpsWithTheirReductionAndPrintLikePyTorch) {
  const Tensor a = tensor({1, 2, 3}, {3}), b = tensor({0, 2, 5}, {3});
  EXPECT_NEAR(MSELoss()(a, b).item(), 5.0 / 3, 1e-6);
  EXPECT_DOUBLE_EQ(MSELoss(Reduction::sum)(a, b).item(), 5.0);
  EXPECT_EQ(MSELoss(Reduction::none)(a, b).to_vector(), (std::vector<double>{1, 0, 4}));
  EXPECT_NEAR(BCEWithLogitsLoss()(tensor({0}, {1}), tensor({1}, {1})).item(), std::log(2.0), 1e-6);
  const Tensor logits = tensor({2, 0, 0, 0, 2, 0}, {2, 3});
  const Tensor target = tensor({0, 1}, {2}, DType::i64), ignored = tensor({0, 7}, {2}, DType::i64);
  EXPECT_NEAR(CrossEntropyLoss()(logits, target).item(), cross_entropy(logits, target).item(), 1e-7);
  EXPECT_NEAR(CrossEntropyLoss(7)(logits, ignored).item(), std::log(1 + 2 * std::exp(-2.0)), 1e-6);
  EXPECT_EQ(MSELoss().str(), "MSELoss()");
  EXPECT_EQ(CrossEntropyLoss().str(), "CrossEntropyLoss()");
  EXPECT_EQ(BCEWithLogitsLoss().num_parameters(), 0);
}

}  // namespace
}  // namespace ag::nn
