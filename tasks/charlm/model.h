// The GPT on a text's windows, what `train charlm` and `eval charlm` share: the sizes a config may
// ask for, (B, T) windows of token ids, and the loss over every non-overlapping window of a text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/distributed.h"
#include "nn/gpt.h"

namespace ag::charlm {

// The sizes a checkpoint may ask for (a config is read before anything is built from it).
void check_model_config(const nn::GPTConfig& c, const std::string& source);

// (B, T) windows of `ids` starting at `starts`, shifted by `shift` (0: inputs, 1: targets).
Tensor windows(const std::vector<int64_t>& ids, const std::vector<int64_t>& starts, int64_t T, int64_t shift);

// The model's cross-entropy summed over the non-overlapping windows of `ids` that are the shard's
// (window k: inputs [kT, kT + T), targets one further), and the number of targets.
struct WindowLoss {
  double nats_sum = 0;
  int64_t targets = 0;
  double nats() const { return nats_sum / static_cast<double>(targets); }  // per character
};

// An evaluation chunk's bytes per window (no graph): one layer's work at a time, 8·C + 2·H·T values
// per position, then the logits and their log-softmax, 2·V (Note [memory estimate]).
double eval_bytes_per_window(const nn::GPTConfig& c);

// The peer's 128 windows per evaluation chunk, fewer where they would not fit tasks::kEvalChunkBytes
// (a wide model, a long block, a large vocabulary): settings alone decide, so results do not depend
// on the machine.
int64_t eval_windows_per_chunk(const nn::GPTConfig& c);

WindowLoss window_loss(nn::GPT& model, const std::vector<int64_t>& ids, const nn::dist::Shard& shard = {});

double bits(double nats);  // nats in bits

}  // namespace ag::charlm
