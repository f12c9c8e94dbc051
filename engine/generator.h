// A seeded random source whose sequence is the same on every platform: splitmix64 bits,
// uniform floats from the top mantissa bits, normals by Box-Muller. (std::*_distribution
// output differs between standard libraries, so none is used.)
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "engine/torch_generator.h"

namespace ag {

// Whose numbers a Generator draws: attograd's own (splitmix64, below) or PyTorch's CPU generator,
// so that a seeded program draws what the same PyTorch script draws: the factories (rand, randn,
// randint), dropout's masks and the layers' initialisation (in PyTorch's order and formulas) all
// follow the style.
enum class RngStyle { attograd, torch };

class Generator {
 public:
  explicit Generator(uint64_t seed = 0, RngStyle style = RngStyle::attograd) { manual_seed(seed, style); }

  void manual_seed(uint64_t seed) { manual_seed(seed, style()); }  // keeps the style
  void manual_seed(uint64_t seed, RngStyle style);
  RngStyle style() const { return torch_ ? RngStyle::torch : RngStyle::attograd; }
  TorchGenerator* torch() { return torch_ ? torch_.get() : nullptr; }  // PyTorch's stream, in torch style

  uint64_t next_u64();
  void skip(uint64_t draws);                   // as if next_u64 ran `draws` times (attograd style only)
  double uniform();                            // [0, 1), 53 random bits
  double normal();                             // mean 0, std 1
  int64_t randint(int64_t low, int64_t high);  // [low, high), unbiased (torch style: PyTorch's modulo)

  // The whole state, for checkpoints; set_state(state()) resumes the same sequence.
  struct State {
    uint64_t counter;
    bool has_spare_normal;
    double spare_normal;
    std::shared_ptr<const TorchGenerator> torch;  // set in torch style (then the rest is unused)
  };
  State state() const;
  void set_state(const State& s);

  // splitmix64 is counter-based: draw k (from 1) after counter c is mix(c + k·kIncrement), so a
  // kernel can make many draws at once, in any order (engine/kernels/dropout.h).
  static constexpr uint64_t kIncrement = 0x9E3779B97F4A7C15ULL;  // the counter's step
  static constexpr uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

 private:
  uint64_t state_ = 0;
  bool has_spare_normal_ = false;
  double spare_normal_ = 0.0;
  std::unique_ptr<TorchGenerator> torch_;
};

// Data parallelism splits a global batch into parts: a shard per process, each perhaps in
// micro-batches. While a BatchShardGuard lives, a draw per element of a batch-major tensor (a
// dropout mask) gives each row of the global batch a stream of its own: row r draws from the
// generator's position + r·kDrawsPerRow, and the generator then moves past all the global batch's
// rows. Each part starts every generator where the batch began (select), so a part's k-th mask is
// the rows of the whole batch's k-th mask, and after the last part the generators stand where the
// whole batch leaves them. An example's mask thus depends neither on how the batch was split nor
// on the other rows (their padding, say).
inline constexpr uint64_t kDrawsPerRow = uint64_t{1} << 32;
struct BatchShard {
  int64_t first = 0;        // this part's first row in the global batch
  int64_t rows = 0;         // its rows
  int64_t global_rows = 0;  // the global batch's
};
class BatchShardGuard {
 public:
  explicit BatchShardGuard(int64_t global_rows);  // the step's batch; select a part before drawing
  ~BatchShardGuard();
  BatchShardGuard(const BatchShardGuard&) = delete;
  BatchShardGuard& operator=(const BatchShardGuard&) = delete;

  // Draws from here on are those of rows [first, first + rows) of the global batch; every generator
  // that drew for an earlier part goes back to where it stood before the batch's first draw (the
  // parts draw the same masks in the same order: one model's forward each).
  void select(int64_t first, int64_t rows);
  const BatchShard& shard() const { return shard_; }
  // Called before drawing a mask from `gen`: notes where gen stood, the first time it draws here.
  void will_draw(Generator& gen);

 private:
  BatchShardGuard* previous_;
  BatchShard shard_;
  std::vector<std::pair<Generator*, Generator::State>> drawn_;  // each generator, before its first draw
};
BatchShardGuard* current_batch_shard();  // null outside a guard

// Puts `items` in a uniformly random order (Fisher-Yates, drawing randint from the last item down).
template <class T>
void shuffle(std::vector<T>& items, Generator& gen) {
  for (auto i = static_cast<int64_t>(items.size()) - 1; i > 0; --i) std::swap(items[i], items[gen.randint(0, i + 1)]);
}

// The process-wide generator used when a factory is not given one.
Generator& default_generator();
void manual_seed(uint64_t seed);                  // keeps the default generator's style
void manual_seed(uint64_t seed, RngStyle style);  // torch: as torch.manual_seed(seed)

}  // namespace ag
