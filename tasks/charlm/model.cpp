#include "tasks/charlm/model.h"

#include <fmt/format.h>

#include <algorithm>
#include <numbers>

#include "engine/autograd.h"
#include "engine/ops/loss.h"
#include "engine/ops/shape.h"
#include "tasks/common/memory.h"

namespace ag::charlm {

namespace {

constexpr int64_t kEvalWindowsPerBatch = 128;  // as the peer, where they fit (eval_windows_per_chunk)

}  // namespace

void check_model_config(const nn::GPTConfig& c, const std::string& source) {
  AG_CHECK(c.vocab_size >= 1 && c.vocab_size <= (1 << 21) && c.block_size >= 1 && c.block_size <= 65536 &&
               c.n_layer >= 1 && c.n_layer <= 1024 && c.n_head >= 1 && c.n_embd >= 1 && c.n_embd <= 65536 &&
               c.n_embd % c.n_head == 0 && c.dropout >= 0 && c.dropout < 1,
           "{}: model sizes out of range (vocab_size {}, block_size {}, n_layer {}, n_head {}, n_embd {}, dropout {}); "
           "expected positive sizes with n_embd a multiple of n_head",
           source, c.vocab_size, c.block_size, c.n_layer, c.n_head, c.n_embd, c.dropout);
}

Tensor windows(const std::vector<int64_t>& ids, const std::vector<int64_t>& starts, int64_t T, int64_t shift) {
  Tensor out = empty({static_cast<int64_t>(starts.size()), T}, DType::i64);
  int64_t* row = out.data<int64_t>();
  for (const int64_t start : starts) row = std::copy_n(ids.begin() + start + shift, T, row);
  return out;
}

double eval_bytes_per_window(const nn::GPTConfig& c) {
  const auto T = static_cast<double>(c.block_size);
  return 4 * T *
         (8 * static_cast<double>(c.n_embd) + 2 * static_cast<double>(c.n_head) * T +
          2 * static_cast<double>(c.vocab_size));
}

int64_t eval_windows_per_chunk(const nn::GPTConfig& c) {
  return tasks::rows_per_chunk(eval_bytes_per_window(c), kEvalWindowsPerBatch);
}

WindowLoss window_loss(nn::GPT& model, const std::vector<int64_t>& ids, const nn::dist::Shard& shard) {
  NoGradGuard no_grad;
  const int64_t T = model.config.block_size, count = (static_cast<int64_t>(ids.size()) - 1) / T;
  const int64_t end = shard.end(count), chunk = eval_windows_per_chunk(model.config);
  double total = 0;
  for (int64_t first = shard.begin(count); first < end; first += chunk) {
    std::vector<int64_t> starts;
    for (int64_t k = first; k < std::min(end, first + chunk); ++k) starts.push_back(k * T);
    const Tensor logits = model.forward(windows(ids, starts, T, 0));  // (B, T, V)
    const Tensor targets = windows(ids, starts, T, 1);                // (B, T)
    total += cross_entropy(reshape(logits, {-1, model.config.vocab_size}), reshape(targets, {-1}), -100, Reduction::sum)
                 .item();
  }
  return {total, (end - shard.begin(count)) * T};
}

double bits(double nats) { return nats / std::numbers::ln2; }

}  // namespace ag::charlm
