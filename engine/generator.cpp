#include "engine/generator.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "engine/error.h"

namespace ag {

void Generator::manual_seed(uint64_t seed, RngStyle style) {
  state_ = seed;
  has_spare_normal_ = false;
  if (style == RngStyle::attograd) return torch_.reset();
  if (!torch_) torch_ = std::make_unique<TorchGenerator>();
  torch_->manual_seed(seed);
}

Generator::State Generator::state() const {
  if (torch_) return {0, false, 0.0, std::make_shared<const TorchGenerator>(*torch_)};
  return {state_, has_spare_normal_, spare_normal_, nullptr};
}

void Generator::set_state(const State& s) {
  torch_ = s.torch ? std::make_unique<TorchGenerator>(*s.torch) : nullptr;
  state_ = s.counter;
  has_spare_normal_ = s.has_spare_normal;
  spare_normal_ = s.spare_normal;
}

void Generator::skip(uint64_t draws) {
  AG_CHECK(!torch_,
           "generator: PyTorch's generator (--rng torch) cannot skip ahead: per-row dropout streams "
           "(data parallelism) need attograd's");
  state_ += draws * kIncrement;
}

uint64_t Generator::next_u64() {
  if (torch_) return torch_->random64();
  return mix(state_ += kIncrement);
}

double Generator::uniform() {
  double u = 0;
  if (torch_) torch_->fill_uniform(&u, 1, 0.0, 1.0);
  return torch_ ? u : static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
}

double Generator::normal() {
  if (torch_) return torch_->normal();
  if (has_spare_normal_) {
    has_spare_normal_ = false;
    return spare_normal_;
  }
  const double u1 = 1.0 - uniform();  // (0, 1]: log stays finite
  const double u2 = uniform();
  const double radius = std::sqrt(-2.0 * std::log(u1));
  const double angle = 2.0 * std::numbers::pi * u2;
  spare_normal_ = radius * std::sin(angle);
  has_spare_normal_ = true;
  return radius * std::cos(angle);
}

int64_t Generator::randint(int64_t low, int64_t high) {
  if (torch_) {
    int64_t value = 0;
    torch_->fill_randint(&value, 1, low, high);
    return value;
  }
  AG_CHECK(low < high, "randint: expected low < high, got low={} high={}", low, high);
  const uint64_t range = static_cast<uint64_t>(high - low);
  const uint64_t limit = UINT64_MAX - UINT64_MAX % range;  // reject the biased tail
  uint64_t bits = next_u64();
  while (bits >= limit) bits = next_u64();
  return low + static_cast<int64_t>(bits % range);
}

namespace {
BatchShardGuard* active_shard = nullptr;
}

BatchShardGuard::BatchShardGuard(int64_t global_rows) : previous_(active_shard), shard_{.global_rows = global_rows} {
  AG_CHECK(global_rows >= 0, "BatchShardGuard: a global batch of {} rows", global_rows);
  active_shard = this;
}
BatchShardGuard::~BatchShardGuard() { active_shard = previous_; }

void BatchShardGuard::select(int64_t first, int64_t rows) {
  AG_CHECK(first >= 0 && rows >= 0 && first + rows <= shard_.global_rows,
           "BatchShardGuard: rows [{}, {}) do not fit a global batch of {}", first, first + rows, shard_.global_rows);
  shard_.first = first;
  shard_.rows = rows;
  for (const auto& [gen, before] : drawn_) gen->set_state(before);
}

void BatchShardGuard::will_draw(Generator& gen) {
  const auto drew = [&](const auto& entry) { return entry.first == &gen; };
  if (std::none_of(drawn_.begin(), drawn_.end(), drew)) drawn_.emplace_back(&gen, gen.state());
}

BatchShardGuard* current_batch_shard() { return active_shard; }

Generator& default_generator() {
  static Generator generator(0);
  return generator;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }
void manual_seed(uint64_t seed, RngStyle style) { default_generator().manual_seed(seed, style); }

}  // namespace ag
