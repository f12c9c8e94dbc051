// NumpyRandomState against numpy's legacy RandomState (tools/golden/numpy_random.py), bit for bit.
#include "engine/numpy_random.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "engine/safetensors.h"

namespace ag {
namespace {

const std::map<std::string, Tensor>& golden() {
  static const std::map<std::string, Tensor> tensors = [] {
    const SafetensorsFile file =
        load_safetensors(std::string(ATTOGRAD_SOURCE_DIR) + "/tests/golden/numpy_random.safetensors");
    return std::map<std::string, Tensor>(file.tensors.begin(), file.tensors.end());
  }();
  return tensors;
}

// n values of draw(state), as numpy's size=n.
std::vector<double> draws(NumpyRandomState& state, int64_t n, const std::function<double(NumpyRandomState&)>& draw) {
  std::vector<double> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(draw(state));
  return out;
}

TEST(NumpyRandomState, MatchesNumpyPerSeedAndDraw) {
  const std::map<std::string, std::function<double(NumpyRandomState&)>> table = {
      {"random_sample", [](NumpyRandomState& s) { return s.random_sample(); }},
      {"randint_4", [](NumpyRandomState& s) { return static_cast<double>(s.randint(0, 4)); }},
      {"randint_2", [](NumpyRandomState& s) { return static_cast<double>(s.randint(0, 2)); }},
      {"randint_1", [](NumpyRandomState& s) { return static_cast<double>(s.randint(0, 1)); }},
      {"randint_-3_1000", [](NumpyRandomState& s) { return static_cast<double>(s.randint(-3, 1000)); }},
      {"randn", [](NumpyRandomState& s) { return s.randn(); }},
  };
  int cases = 0;
  for (const uint32_t seed : {0u, 13u, 19u, 4294967295u})
    for (const auto& [name, draw] : table) {
      const std::vector<double> expected = golden().at(fmt::format("seed{}.{}", seed, name)).to_vector();
      NumpyRandomState state(seed);
      EXPECT_EQ(draws(state, static_cast<int64_t>(expected.size()), draw), expected) << "seed " << seed << " " << name;
      ++cases;
    }
  std::printf("%d numpy cases (4 seeds x %zu draws) compared bit for bit\n", cases, table.size());
}

TEST(NumpyRandomState, RejectsBadRanges) {
  NumpyRandomState state(0);
  EXPECT_THROW(state.randint(2, 2), Error);
  EXPECT_THROW(state.randint(0, int64_t{1} << 33), Error);
}

}  // namespace
}  // namespace ag
