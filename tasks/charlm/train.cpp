// `train charlm`: the text, the GPT training starts from, the TrainTask (random windows, nanoGPT's
// recipe), and what the end of a run prints and writes; `first_step_loss` (`attograd graph charlm`).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "engine/autograd.h"
#include "engine/ops/attention.h"
#include "engine/ops/loss.h"
#include "engine/ops/shape.h"
#include "nn/optim.h"
#include "tasks/charlm/model.h"
#include "tasks/charlm/task.h"
#include "tasks/common/memory.h"
#include "tasks/common/run_dir.h"
#include "tasks/common/svg.h"
#include "tasks/common/text.h"

namespace ag::charlm {

namespace {

class CharLMTask : public nn::TrainTask {
 public:
  CharLMTask(nn::GPT& model, Split split) : model_(model), split_(std::move(split)) {}

  // Every start of a whole window (inputs and targets) in the training split.
  int64_t train_size() const override { return static_cast<int64_t>(split_.train.size()) - model_.config.block_size; }

  Tensor loss(const std::vector<int64_t>& starts) override {
    const int64_t T = model_.config.block_size;
    const Tensor logits = model_.forward(windows(split_.train, starts, T, 0));  // (B, T, V)
    return cross_entropy(reshape(logits, {-1, model_.config.vocab_size}),
                         reshape(windows(split_.train, starts, T, 1), {-1}));
  }

  nn::MetricSums evaluate(const nn::dist::Shard& shard) override {
    const WindowLoss val = window_loss(model_, split_.val, shard);
    const auto targets = static_cast<double>(val.targets);
    return {{"val_loss", {val.nats_sum, targets}}, {"val_bpc", {bits(val.nats_sum), targets}}};
  }

 private:
  nn::GPT& model_;
  Split split_;
};

// Note [memory estimate] for the GPT, in f32 values: a training step's peak is what the forward
// leaves for the backward (the backward frees saved tensors about as fast as it makes gradients),
// per layer 18·B·T·C (the layer norms' outputs, q, k, v, the attention's output and its copy, the
// residual sums, the MLP's 4C input and GELU's 4C output: counted with a live-bytes tally of the
// engine's allocations) and B·H·T² (the attention weights the materialising kernel keeps; the
// streaming one, which attention_streams says runs at 128 × 128 scores and more without dropout,
// keeps only a logsumexp per query; under autocast smaller heads stream too, so a bf16 run's
// estimate counts weights it does not keep), then
// 3·B·T·V for the logits, their softmax and gradient and 4·B·T·C for the embeddings and the final
// norm; an evaluation chunk (eval_windows_per_chunk windows, or the validation text's fewer)
// holds one layer's work at a time and its logits.
tasks::MemoryEstimate memory_estimate(const nn::GPTConfig& c, const tasks::TrainingOptions& training,
                                      int64_t parameters, int64_t eval_windows) {
  const auto B = static_cast<double>(training.batch_size) / static_cast<double>(training.micro_batches);
  const auto T = static_cast<double>(c.block_size), C = static_cast<double>(c.n_embd),
             H = static_cast<double>(c.n_head), V = static_cast<double>(c.vocab_size),
             L = static_cast<double>(c.n_layer);
  const int64_t W = std::min(eval_windows_per_chunk(c), eval_windows);
  const bool streams = attention_streams(c.block_size, c.block_size, {.is_causal = true, .dropout_p = c.dropout});
  const double weights = streams ? 0 : B * H * T * T;
  return {.task = "charlm",
          .parameters = parameters,
          .step_bytes = 4 * (L * (18 * B * T * C + weights) + 3 * B * T * V + 4 * B * T * C),
          .step_settings = fmt::format("--batch-size {} x --block-size {} (with --width {}, --layers {}, --heads {} "
                                       "and the text's {} distinct characters)",
                                       training.batch_size, c.block_size, c.n_embd, c.n_layer, c.n_head, c.vocab_size),
          .eval_bytes = static_cast<double>(W) * eval_bytes_per_window(c),
          .eval_settings = fmt::format("{} windows of --block-size {} (the text's {} distinct characters)", W,
                                       c.block_size, c.vocab_size)};
}

// The run's config: the table's settings of `options` as trained (`model` with the text's vocabulary,
// `epochs` the evaluations), the text it read, and what it derives from it.
nlohmann::json run_settings(CharLMOptions options, const nn::GPTConfig& model, const Text& text, int64_t epochs) {
  options.model = model;
  options.data = tasks::recorded_data_path(text.path);
  options.training.epochs = epochs;
  nlohmann::json config = tasks::to_json(settings(), options);
  config.update({{"task", "charlm"},
                 {"model", "gpt"},
                 {"optimizer", "AdamW"},
                 {"data_chars", text.chars.size()},
                 {"data_sha256", text.sha256}});
  return config;
}

void write_plot(tasks::RunDir& folder, const std::vector<nn::EpochRecord>& history, int64_t interval) {
  folder.write("losses.svg", plot::line_chart("charlm: cross-entropy (nats per character)", "iteration", "loss",
                                              tasks::loss_curves(history, "train (mean of the interval's batches)",
                                                                 "validation (every window)"),
                                              static_cast<double>(interval)));
}

double median_tokens_per_second(std::vector<double> seconds, int64_t tokens_per_step) {
  const size_t warm_up = seconds.size() > 50 ? 50 : 0;  // as the peer: after 50 iterations
  seconds.erase(seconds.begin(), seconds.begin() + static_cast<std::ptrdiff_t>(warm_up));
  if (seconds.empty()) return 0;
  std::nth_element(seconds.begin(), seconds.begin() + static_cast<std::ptrdiff_t>(seconds.size() / 2), seconds.end());
  return static_cast<double>(tokens_per_step) / seconds[seconds.size() / 2];
}

// What a run trains on and the model's sizes: the text, its vocabulary, the 90/10 split, and
// options.model with the vocabulary's size (checked; `command` names the caller in errors).
struct Corpus {
  Text text;
  Vocabulary vocabulary;
  Split split;
  nn::GPTConfig config;
};

Corpus load_corpus(const CharLMOptions& options, const std::string& command) {
  Text text = load_text(options.data);
  Vocabulary vocabulary = Vocabulary::of_text(text.chars, text.path);
  Split split = split_90_10(vocabulary.encode(text.chars, text.path));
  nn::GPTConfig config = options.model;
  config.vocab_size = vocabulary.size();
  check_model_config(config, command);
  return {std::move(text), std::move(vocabulary), std::move(split), config};
}

// The GPT training starts from (build_model), within the memory bound (tasks::build_within_memory).
std::unique_ptr<nn::GPT> build_to_train(const CharLMOptions& options, const nn::GPTConfig& config) {
  return tasks::build_within_memory("charlm",
                                    fmt::format("--width {}, --layers {}, the text's {} distinct characters",
                                                config.n_embd, config.n_layer, config.vocab_size),
                                    options.training.max_memory_mb,
                                    [&] { return build_model(options, config.vocab_size); });
}

}  // namespace

std::unique_ptr<nn::GPT> build_model(const CharLMOptions& options, int64_t vocab_size) {
  nn::GPTConfig config = options.model;
  config.vocab_size = vocab_size;
  manual_seed(options.training.seed);
  return std::make_unique<nn::GPT>(config);
}

double learning_rate(int64_t iter, const CharLMOptions& o) {
  const double lr = o.training.lr;
  if (iter < o.warmup_iters) return lr * static_cast<double>(iter + 1) / static_cast<double>(o.warmup_iters + 1);
  if (iter > o.iters) return o.min_lr;
  const double ratio = static_cast<double>(iter - o.warmup_iters) / static_cast<double>(o.iters - o.warmup_iters);
  return o.min_lr + 0.5 * (1.0 + std::cos(std::numbers::pi * ratio)) * (lr - o.min_lr);
}

StepLoss first_step_loss(const CharLMOptions& options, const tasks::BeforeForward& before_forward) {
  const auto [text, vocabulary, split, config] = load_corpus(options, "graph charlm");
  const int64_t T = config.block_size, batch = options.training.batch_size;
  AG_CHECK(static_cast<int64_t>(split.train.size()) > batch * T,
           "{}: too short for {} windows of {}: its training split has {} characters", text.path, batch, T,
           split.train.size());
  StepLoss step{build_to_train(options, config), {}};
  std::vector<int64_t> starts;
  for (int64_t k = 0; k < batch; ++k) starts.push_back(k * T);
  if (before_forward) before_forward(step.model->named_parameters());
  step.loss = CharLMTask(*step.model, split).loss(starts);
  return step;
}

int train(const CharLMOptions& options) {
  const auto [text, vocabulary, split, config] = load_corpus(options, "train charlm");
  const int64_t T = config.block_size;
  AG_CHECK(static_cast<int64_t>(split.train.size()) > T && static_cast<int64_t>(split.val.size()) > T,
           "{}: too short for --block-size {}: its 90% training split has {} characters and its validation split {}; "
           "each needs more than {}",
           text.path, T, split.train.size(), split.val.size(), T);
  const int64_t train_windows = static_cast<int64_t>(split.train.size()) - T;  // CharLMTask::train_size
  AG_CHECK(options.training.batch_size <= train_windows,
           "{}: --batch-size {} is more windows than the training split holds ({} windows of --block-size {} in its "
           "{} characters); lower --batch-size or give a longer text",
           text.path, options.training.batch_size, train_windows, T, split.train.size());
  AG_CHECK(options.iters >= 1 && options.eval_interval >= 1 && options.warmup_iters >= 0,
           "train charlm: expected iters ≥ 1, eval-interval ≥ 1 and warmup-iters ≥ 0, got {}, {}, {}", options.iters,
           options.eval_interval, options.warmup_iters);
  fmt::print("{}: {} characters, vocabulary {}; train {}, validation {} ({} windows of {})\n", text.path,
             text.chars.size(), vocabulary.size(), split.train.size(), split.val.size(),
             (static_cast<int64_t>(split.val.size()) - 1) / T, T);

  const std::unique_ptr<nn::GPT> built = build_to_train(options, config);
  nn::GPT& model = *built;
  std::vector<Tensor> no_decay;  // nanoGPT: decay the matrices, not the LayerNorm weights and biases
  for (const Tensor& p : model.parameters())
    if (p.dim() < 2) no_decay.push_back(p);
  nn::AdamW optimizer(
      model.parameters(),
      {.lr = options.training.lr, .beta1 = 0.9, .beta2 = options.beta2, .weight_decay = options.weight_decay},
      no_decay);
  fmt::print("GPT: {} parameters ({} layers, {} heads, width {}, block {})\n", model.num_parameters(), config.n_layer,
             config.n_head, config.n_embd, T);

  tasks::check_memory(memory_estimate(config, options.training, model.num_parameters(),
                                      (static_cast<int64_t>(split.val.size()) - 1) / T),
                      options.training.max_memory_mb);
  CharLMTask task(model, split);
  tasks::TrainingOptions training = options.training;
  training.epochs = (options.iters + options.eval_interval - 1) / options.eval_interval;  // evaluations
  const int64_t tokens_per_step = training.batch_size * T;
  const std::optional<tasks::TrainedRun> trained =
      tasks::run_training(model, optimizer, task, training,
                          tasks::run_config(run_settings(options, config, text, training.epochs), settings()),
                          {{"vocabulary", vocabulary.to_utf8()}}, [&](nn::TrainerOptions& t) {
                            t.steps_per_epoch = options.eval_interval;
                            t.max_steps = options.iters;
                            t.lr_schedule = [options](int64_t iter) { return learning_rate(iter, options); };
                            t.clip_grad_norm = options.grad_clip;
                            t.tokens_per_step = tokens_per_step;
                          });
  if (!trained) return 0;  // another rank of a data-parallel job: rank 0 reports
  const std::vector<nn::EpochRecord>& history = trained->history;
  const std::vector<double>& step_seconds = trained->step_seconds;

  write_plot(*trained->folder, history, options.eval_interval);
  double best = INFINITY;
  for (const nn::EpochRecord& r : history) {
    fmt::print("iter {:>6.0f}: train loss {:.4f}, val loss {:.4f} ({:.4f} bits/char), lr {:.2e}\n",
               r.metrics.at("iter"), r.train_loss, r.metrics.at("val_loss"), r.metrics.at("val_bpc"),
               r.metrics.at("lr"));
    best = std::min(best, r.metrics.at("val_loss"));
  }
  fmt::print("final validation loss {:.4f} nats/char ({:.4f} bits/char), best {:.4f}\n",
             history.back().metrics.at("val_loss"), history.back().metrics.at("val_bpc"), best);
  if (!step_seconds.empty())
    fmt::print("training: {:.0f} tokens/s (median step after 50 warm-up iterations, {} steps in this process)\n",
               median_tokens_per_second(step_seconds, tokens_per_step), step_seconds.size());
  tasks::print_files_written(training.out, {"losses.svg"});
  return 0;
}

}  // namespace ag::charlm
