// `attograd walkthrough --notebook 000|003|004` against PyTorch running the same cells
// (tools/golden/walkthrough_000.py, _003.py, _004.py): every printed number PyTorch 1.13 reproduces (exactly, or
// within one unit of the last digit) ours reproduces at least as well, and ours stay within f32
// rounding of PyTorch's values.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "engine/safetensors.h"
#include "seeds/printed_values.h"

namespace ag::seeds {
namespace {

void expect_what_pytorch_reproduces(const std::string& notebook, const std::vector<PrintedCheck>& checks) {
  const SafetensorsFile file =
      load_safetensors(std::string(ATTOGRAD_SOURCE_DIR) + "/tests/golden/walkthrough_" + notebook + ".safetensors");
  const std::map<std::string, Tensor> torch(file.tensors.begin(), file.tensors.end());
  std::map<Verdict, int> ours_count, torch_count;
  for (const PrintedCheck& check : checks) {
    const std::vector<std::string> numbers = printed_numbers(check.printed);
    const std::vector<double> ours = check.ours.to_vector(),
                              theirs = torch.at(check.cell + "." + check.what).to_vector();
    ASSERT_EQ(ours.size(), numbers.size()) << check.cell;
    ASSERT_EQ(theirs.size(), numbers.size()) << check.cell;
    for (size_t i = 0; i < numbers.size(); ++i) {
      const Verdict ours_verdict = verdict_of(ours[i], numbers[i]), torch_verdict = verdict_of(theirs[i], numbers[i]);
      EXPECT_LE(static_cast<int>(ours_verdict), static_cast<int>(torch_verdict))
          << check.cell << " " << check.what << "[" << i << "]: printed " << numbers[i] << ", ours " << ours[i]
          << ", PyTorch " << theirs[i];
      if (std::isfinite(theirs[i])) {
        EXPECT_NEAR(ours[i], theirs[i], 1e-5 * std::max(1.0, std::abs(theirs[i]))) << check.cell << " " << check.what;
      }
      ++ours_count[ours_verdict];
      ++torch_count[torch_verdict];
    }
  }
  for (const Verdict v : {Verdict::exact, Verdict::within_one_unit, Verdict::differs})
    std::printf("notebook %s, verdict %d: ours %d, PyTorch 1.13 %d\n", notebook.c_str(), static_cast<int>(v),
                ours_count[v], torch_count[v]);
}

TEST(WalkthroughNotebook, Seed000ReproducesWhatPyTorchReproduces) {
  expect_what_pytorch_reproduces("000", notebook_000());
}
TEST(WalkthroughNotebook, Seed003ReproducesWhatPyTorchReproduces) {
  expect_what_pytorch_reproduces("003", notebook_003());
}
TEST(WalkthroughNotebook, Seed004ReproducesWhatPyTorchReproduces) {
  expect_what_pytorch_reproduces("004", notebook_004());
}

}  // namespace
}  // namespace ag::seeds
