// TorchGenerator against PyTorch 1.13's own draws (tools/golden/torch_generator.py): every value
// bit for bit, for each seed, distribution and size, and along one stream of mixed calls.
#include "engine/torch_generator.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "engine/generator.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/dropout.h"
#include "engine/safetensors.h"

namespace ag {
namespace {

using Draw = std::function<std::vector<double>(TorchGenerator&, int64_t)>;

template <class T>
std::vector<double> as_doubles(const std::vector<T>& values) {
  return {values.begin(), values.end()};
}

// A draw of n values of type T made by fill(gen, out, n).
template <class T, class Fill>
Draw filled(Fill fill) {
  return [=](TorchGenerator& gen, int64_t n) {
    std::vector<T> out(n);
    fill(gen, out.data(), n);
    return as_doubles(out);
  };
}

Draw uniform_f32(float from, float to) {
  return filled<float>([=](TorchGenerator& g, float* out, int64_t n) { g.fill_uniform(out, n, from, to); });
}
const Draw uniform_f64 =
    filled<double>([](TorchGenerator& g, double* out, int64_t n) { g.fill_uniform(out, n, 0.0, 1.0); });
Draw normal_f32(float mean, float std) {
  return filled<float>([=](TorchGenerator& g, float* out, int64_t n) { g.fill_normal(out, n, mean, std); });
}
const Draw normal_f64 =
    filled<double>([](TorchGenerator& g, double* out, int64_t n) { g.fill_normal(out, n, 0.0, 1.0); });
Draw randint(int64_t low, int64_t high) {
  return filled<int64_t>([=](TorchGenerator& g, int64_t* out, int64_t n) { g.fill_randint(out, n, low, high); });
}

// F.dropout(torch.ones(n), p): kept elements hold 1 / (1 - p) in f32.
Draw dropout_of_ones(double p) {
  return [=](TorchGenerator& gen, int64_t n) {
    std::unique_ptr<bool[]> keep(new bool[n]);
    gen.fill_bernoulli(keep.get(), n, 1 - p);
    const float scale = 1.0f / static_cast<float>(1 - p);
    std::vector<double> out(n);
    for (int64_t i = 0; i < n; ++i) out[i] = keep[i] ? scale : 0.0f;
    return out;
  };
}

std::vector<double> randperm(TorchGenerator& gen, int64_t n) { return as_doubles(gen.randperm(n)); }

const std::map<std::string, Draw>& draws() {
  static const std::map<std::string, Draw> table = {
      {"rand_f32", uniform_f32(0, 1)},
      {"rand_f64", uniform_f64},
      {"uniform_f32", uniform_f32(-0.4082f, 0.7f)},
      {"randn_f32", normal_f32(0, 1)},
      {"randn_f64", normal_f64},
      {"normal_f32", normal_f32(1.5f, 0.25f)},
      {"randint", randint(-3, 7)},
      {"randint_wide", randint(0, int64_t{1} << 40)},
      {"dropout_p0.5", dropout_of_ones(0.5)},
      {"dropout_p0.1", dropout_of_ones(0.1)},
      {"randperm", randperm},
  };
  return table;
}

// The first element that differs, or -1.
int64_t first_difference(const std::vector<double>& ours, const Tensor& torch) {
  const std::vector<double> expected = torch.to_vector();
  if (ours.size() != expected.size()) return 0;
  for (size_t i = 0; i < ours.size(); ++i)
    if (ours[i] != expected[i]) return static_cast<int64_t>(i);
  return -1;
}

const SafetensorsFile& golden() {
  static const SafetensorsFile file =
      load_safetensors(std::string(ATTOGRAD_SOURCE_DIR) + "/tests/golden/torch_generator.safetensors");
  return file;
}

// "seed123.dropout_p0.5.17" → {123, "dropout_p0.5", 17}
struct Case {
  uint64_t seed;
  std::string draw;
  int64_t size;
};
Case parse_case(const std::string& key) {
  const size_t first = key.find('.'), last = key.rfind('.');
  return {std::stoull(key.substr(4, first - 4)), key.substr(first + 1, last - first - 1),
          std::stoll(key.substr(last + 1))};
}

TEST(TorchGenerator, MatchesPyTorchPerSeedDistributionAndSize) {
  std::map<std::string, int> passed, cases;  // by "draw size"
  for (const auto& [key, expected] : golden().tensors) {
    if (key.rfind("seed", 0) != 0) continue;
    const Case c = parse_case(key);
    ASSERT_TRUE(draws().count(c.draw)) << key;
    TorchGenerator gen(c.seed);
    const int64_t at = first_difference(draws().at(c.draw)(gen, c.size), expected);
    EXPECT_EQ(at, -1) << key << ": first difference at element " << at;
    const std::string label = c.draw + " n=" + std::to_string(c.size);
    ++cases[label];
    passed[label] += at == -1;
  }
  EXPECT_EQ(cases.size(), draws().size() * 5);
  for (const auto& [label, count] : cases)
    std::printf("%-24s %d/%d seeds bit-exact\n", label.c_str(), passed[label], count);
}

TEST(TorchGenerator, MatchesPyTorchAlongOneStreamOfMixedCalls) {
  const std::vector<std::pair<std::string, std::function<std::vector<double>(TorchGenerator&)>>> calls = {
      {"randn_f32_3", [](TorchGenerator& g) { return normal_f32(0, 1)(g, 3); }},
      {"randn_f32_1", [](TorchGenerator& g) { return normal_f32(0, 1)(g, 1); }},
      {"rand_f32_5", [](TorchGenerator& g) { return uniform_f32(0, 1)(g, 5); }},
      {"randn_f64_5", [](TorchGenerator& g) { return normal_f64(g, 5); }},
      {"randn_f32_20", [](TorchGenerator& g) { return normal_f32(0, 1)(g, 20); }},
      {"randn_f32_2", [](TorchGenerator& g) { return normal_f32(0, 1)(g, 2); }},
      {"randperm_9", [](TorchGenerator& g) { return randperm(g, 9); }},
      {"dropout_p0.2_7", [](TorchGenerator& g) { return dropout_of_ones(0.2)(g, 7); }},
      {"randn_f32_4", [](TorchGenerator& g) { return normal_f32(0, 1)(g, 4); }},
  };
  std::map<std::string, Tensor> expected(golden().tensors.begin(), golden().tensors.end());
  TorchGenerator gen(5);
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string key = "stream." + std::to_string(i) + "." + calls[i].first;
    ASSERT_TRUE(expected.count(key)) << key;
    EXPECT_EQ(first_difference(calls[i].second(gen), expected[key]), -1) << key;
  }
}

// The engine's dropout op and factories on a Generator in torch style draw what PyTorch draws.
TEST(TorchGenerator, DrivesDropoutAndTheFactoriesInTorchStyle) {
  const std::map<std::string, Tensor> expected(golden().tensors.begin(), golden().tensors.end());
  for (const char* n : {"1", "17", "1000"}) {
    const int64_t size = std::stoll(n);
    Generator gen(7, RngStyle::torch);
    EXPECT_EQ(dropout(ones({size}), 0.1, true, gen).to_vector(),
              expected.at(std::string("seed7.dropout_p0.1.") + n).to_vector());
    gen.manual_seed(7);
    EXPECT_EQ(randn({size}, DType::f32, gen).to_vector(), expected.at(std::string("seed7.randn_f32.") + n).to_vector());
    gen.manual_seed(7);
    EXPECT_EQ(rand({size}, DType::f64, gen).to_vector(), expected.at(std::string("seed7.rand_f64.") + n).to_vector());
    gen.manual_seed(7);
    EXPECT_EQ(randint(-3, 7, {size}, gen).to_vector(), expected.at(std::string("seed7.randint.") + n).to_vector());
  }
}

TEST(TorchGenerator, ShufflesAsDataLoaderDoesEpochAfterEpoch) {
  const std::map<std::string, Tensor> expected(golden().tensors.begin(), golden().tensors.end());
  for (const int64_t n : {1, 10, 128}) {
    TorchGenerator gen(42);
    for (int epoch = 0; epoch < 3; ++epoch)
      EXPECT_EQ(as_doubles(gen.data_loader_epoch(n)),
                expected.at(fmt::format("dataloader.{}.{}", n, epoch)).to_vector())
          << "n " << n << " epoch " << epoch;
  }
}

TEST(TorchGenerator, RejectsBadArguments) {
  TorchGenerator gen;
  int64_t out = 0;
  bool keep = false;
  EXPECT_THROW(gen.fill_randint(&out, 1, 3, 3), Error);
  EXPECT_THROW(gen.fill_bernoulli(&keep, 1, 1.5), Error);
  EXPECT_THROW(gen.randperm(-1), Error);
}

}  // namespace
}  // namespace ag
