// `attograd train charlm`, `eval charlm` and `sample`: a character-level GPT (nn/gpt.h) trained
// on real text — Moby-Dick by default — with nanoGPT's recipe: random windows, AdamW with weight
// decay on matrices only, warm-up then cosine decay, gradient clipping, and a deterministic
// validation loss over every non-overlapping window of the validation split.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "nn/gpt.h"
#include "tasks/charlm/data.h"
#include "tasks/common/training.h"

namespace ag::charlm {

struct CharLMOptions {
  tasks::TrainingOptions training{.lr = 1e-3, .batch_size = 12, .seed = 1337, .out = "runs/charlm"};
  std::string data;  // a UTF-8 text file; empty: Moby-Dick from the data cache
  int64_t iters = 2000;
  int64_t eval_interval = 250;
  int64_t warmup_iters = 100;
  double min_lr = 1e-4;  // the cosine ends here at `iters`
  double weight_decay = 0.1;
  double beta2 = 0.99;     // AdamW's (nanoGPT's beta2)
  double grad_clip = 1.0;  // 0: none
  nn::GPTConfig model;     // vocab_size comes from the text
};

// The settings of `train charlm`, one row each (settings.cpp): its flags, config.json, the resume rules.
const std::vector<tasks::Setting<CharLMOptions>>& settings();

// nanoGPT's get_lr: linear warm-up to lr over warmup_iters, then cosine down to min_lr at iters.
double learning_rate(int64_t iter, const CharLMOptions& options);

struct EvalOptions {
  std::string checkpoint;
  std::string data{};         // empty: the text the checkpoint was trained on
  std::string split = "val";  // val (the last 10%), train (the first 90%) or all
  bool drop_unknown = false;
};

struct SampleOptions {
  std::string checkpoint;
  std::string prompt = "\n";
  int64_t tokens = 500;
  double temperature = 1.0;
  int64_t top_k = 0;  // 0: all
  uint64_t seed = 1337;
  bool drop_unknown = false;
};

// The GPT a run trains and its checkpoints hold: options.model's sizes with the text's vocab_size,
// initialised from the run's seed. `train` and `first_step_loss` build it within the memory bound;
// `eval` and `sample` within the file's tensors (nn::build_from_config), then load them.
std::unique_ptr<nn::GPT> build_model(const CharLMOptions& options, int64_t vocab_size);

// Each returns the process exit code; bad input throws ag::Error.
int train(const CharLMOptions& options);
// The loss of `train`'s first step on the first batch_size windows of the training split (starts
// 0, T, 2T, …; `train` draws its windows at random), with the model that made it: what
// `attograd graph charlm` exports.
using StepLoss = tasks::StepLoss<nn::GPT>;
StepLoss first_step_loss(const CharLMOptions& options, const tasks::BeforeForward& before_forward = {});
int eval(const EvalOptions& options);
int sample(const SampleOptions& options);

// Sampling, exposed for tests: `count` tokens after `context`, drawn from gen, each from the
// logits of the current window. The window holds at most block_size tokens; when it is full
// it jumps: the last block_size/2 tokens are re-encoded at positions 0… (one forward), then
// generation goes on. With a KV cache (use_cache) each token costs one position's forward;
// without, the whole window is re-run for each token (the reference the cache must equal).
// on_token (if set) sees each id as it is drawn.
struct Sampling {
  double temperature = 1.0;
  int64_t top_k = 0;
  bool use_cache = true;
};
std::vector<int64_t> generate(nn::GPT& model, std::vector<int64_t> context, int64_t count, const Sampling& sampling,
                              Generator& gen, const std::function<void(int64_t)>& on_token = {});

}  // namespace ag::charlm
