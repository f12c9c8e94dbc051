#include "tasks/charlm/task.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numbers>

#include "engine/autograd.h"
#include "engine/json.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/attention.h"
#include "engine/ops/loss.h"
#include "engine/ops/shape.h"
#include "nn/checkpoint.h"
#include "nn/optim.h"
#include "tasks/common/checkpoint_config.h"
#include "tasks/common/corpus.h"
#include "tasks/common/memory.h"
#include "tasks/common/run_dir.h"
#include "tasks/common/svg.h"
#include "tasks/common/text.h"

namespace ag::charlm {

namespace {

constexpr int64_t kEvalWindowsPerBatch = 128;  // as the peer, where they fit (eval_windows_per_chunk)

// The text a run reads, decoded: --data, else Moby-Dick from the data cache.
struct Text {
  std::string path;
  std::u32string chars;
  std::string sha256;  // of the file's bytes: recorded in config.json, compared by --resume and eval
};

Text load_text(const std::string& data) {
  constexpr const char* kMobyDick = "moby-dick.txt";
  Text text{data.empty() ? tasks::corpus_path(kMobyDick) : data, {}, {}};
  const std::string bytes = data.empty() ? tasks::read_corpus(kMobyDick) : tasks::read_data_file(data);
  text.sha256 = tasks::data_file_sha256(text.path);
  text.chars = tasks::decode_utf8(tasks::as_text(bytes, text.path), text.path);
  AG_CHECK(!text.chars.empty(), "{}: the text is empty, expected UTF-8 text to train on", text.path);
  return text;
}

// The text a checkpoint's run trained on (its config's "data"; "" is Moby-Dick), saying where the
// path came from when it cannot be read.
Text checkpoint_data(const nlohmann::json& config, const std::string& checkpoint) {
  const std::string data = tasks::config_string(config, "data", checkpoint);  // "": Moby-Dick
  try {
    return load_text(data);
  } catch (const Error& e) {
    fail("{} (the data path is the one the checkpoint {} was trained on; --data FILE evaluates on another text)",
         e.what(), checkpoint);
  }
}

// (B, T) windows of `ids` starting at `starts`, shifted by `shift` (0: inputs, 1: targets).
Tensor windows(const std::vector<int64_t>& ids, const std::vector<int64_t>& starts, int64_t T, int64_t shift) {
  Tensor out = empty({static_cast<int64_t>(starts.size()), T}, DType::i64);
  int64_t* row = out.data<int64_t>();
  for (const int64_t start : starts) row = std::copy_n(ids.begin() + start + shift, T, row);
  return out;
}

// The model's cross-entropy summed over the non-overlapping windows of `ids` that are the shard's
// (window k: inputs [kT, kT + T), targets one further), and the number of targets.
struct WindowLoss {
  double nats_sum = 0;
  int64_t targets = 0;
  double nats() const { return nats_sum / static_cast<double>(targets); }  // per character
};

// An evaluation chunk's bytes per window (no graph): one layer's work at a time, 8·C + 2·H·T values
// per position, then the logits and their log-softmax, 2·V (Note [memory estimate]).
double eval_bytes_per_window(const nn::GPTConfig& c) {
  const auto T = static_cast<double>(c.block_size);
  return 4 * T *
         (8 * static_cast<double>(c.n_embd) + 2 * static_cast<double>(c.n_head) * T +
          2 * static_cast<double>(c.vocab_size));
}

// The peer's 128 windows per evaluation chunk, fewer where they would not fit tasks::kEvalChunkBytes
// (a wide model, a long block, a large vocabulary): settings alone decide, so results do not depend
// on the machine.
int64_t eval_windows_per_chunk(const nn::GPTConfig& c) {
  return tasks::rows_per_chunk(eval_bytes_per_window(c), kEvalWindowsPerBatch);
}

WindowLoss window_loss(nn::GPT& model, const std::vector<int64_t>& ids, const nn::dist::Shard& shard = {}) {
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

// The sizes a checkpoint may ask for (a config is read before anything is built from it).
void check_model_config(const nn::GPTConfig& c, const std::string& source) {
  AG_CHECK(c.vocab_size >= 1 && c.vocab_size <= (1 << 21) && c.block_size >= 1 && c.block_size <= 65536 &&
               c.n_layer >= 1 && c.n_layer <= 1024 && c.n_head >= 1 && c.n_embd >= 1 && c.n_embd <= 65536 &&
               c.n_embd % c.n_head == 0 && c.dropout >= 0 && c.dropout < 1,
           "{}: model sizes out of range (vocab_size {}, block_size {}, n_layer {}, n_head {}, n_embd {}, dropout {}); "
           "expected positive sizes with n_embd a multiple of n_head",
           source, c.vocab_size, c.block_size, c.n_layer, c.n_head, c.n_embd, c.dropout);
}

// Note [memory estimate] for the GPT, in f32 values: a training step's peak is what the forward
// leaves for the backward (the backward frees saved tensors about as fast as it makes gradients),
// per layer 18·B·T·C (the layer norms' outputs, q, k, v, the attention's output and its copy, the
// residual sums, the MLP's 4C input and GELU's 4C output: counted with a live-bytes tally of the
// engine's allocations) and B·H·T² (the attention weights the materialising kernel keeps; the
// streaming one, which attention_streams says runs at 128 × 128 scores and more without dropout,
// keeps only a logsumexp per query), then
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

// A trained model and what it needs to read text: the checkpoint's config and vocabulary.
struct Trained {
  std::unique_ptr<nn::GPT> model;
  Vocabulary vocabulary;
  nlohmann::json config;
};

Trained load_trained(const std::string& path) {
  const nn::Checkpoint checkpoint = nn::read_checkpoint(path);
  nlohmann::json config = checkpoint.settings;
  tasks::check_checkpoint_task(config, "charlm", path);
  AG_CHECK(checkpoint.metadata.count("vocabulary"), "{}: the checkpoint has no vocabulary", path);
  Vocabulary vocabulary = Vocabulary::from_utf8(checkpoint.metadata.at("vocabulary"), path);
  const nn::GPTConfig model_config = tasks::from_json(settings(), config, path, CharLMOptions{}).model;
  check_model_config(model_config, path);
  AG_CHECK(model_config.vocab_size == vocabulary.size(), "{}: vocab_size {} but a vocabulary of {} characters", path,
           model_config.vocab_size, vocabulary.size());
  auto model = nn::build_from_config(checkpoint, path, [&] { return std::make_unique<nn::GPT>(model_config); });
  nn::load(path, *model);
  model->eval();
  return {std::move(model), std::move(vocabulary), std::move(config)};
}

// One token id from the last position's logits (V): temperature, top-k, then a draw.
int64_t draw_token(const Tensor& logits, const Sampling& sampling, Generator& gen) {
  const std::vector<double> values = logits.to_vector();
  double kth_largest = -INFINITY;
  if (sampling.top_k > 0 && sampling.top_k < static_cast<int64_t>(values.size())) {
    std::vector<double> sorted = values;
    std::nth_element(sorted.begin(), sorted.begin() + sampling.top_k - 1, sorted.end(), std::greater<>());
    kth_largest = sorted[static_cast<size_t>(sampling.top_k - 1)];
  }
  const double largest = *std::max_element(values.begin(), values.end());
  std::vector<double> weights(values.size());
  double total = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    weights[i] = values[i] < kth_largest ? 0.0 : std::exp((values[i] - largest) / sampling.temperature);
    total += weights[i];
  }
  double u = gen.uniform() * total;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (u < weights[i]) return static_cast<int64_t>(i);
    u -= weights[i];
  }
  return static_cast<int64_t>(std::max_element(weights.begin(), weights.end()) - weights.begin());  // rounding
}

Tensor row_of(const std::vector<int64_t>& ids) {
  Tensor out = empty({1, static_cast<int64_t>(ids.size())}, DType::i64);
  std::copy(ids.begin(), ids.end(), out.data<int64_t>());
  return out;
}

void write_plot(tasks::RunDir& folder, const std::vector<nn::EpochRecord>& history, int64_t interval) {
  std::vector<double> train_losses, val_losses;
  for (const nn::EpochRecord& r : history) {
    train_losses.push_back(r.train_loss);
    val_losses.push_back(r.metrics.at("val_loss"));
  }
  folder.write("losses.svg", plot::line_chart("charlm: cross-entropy (nats per character)", "iteration", "loss",
                                              {{"train (mean of the interval's batches)", train_losses},
                                               {"validation (every window)", val_losses}},
                                              static_cast<double>(interval)));
}

double median_tokens_per_second(std::vector<double> seconds, int64_t tokens_per_step) {
  const size_t warm_up = seconds.size() > 50 ? 50 : 0;  // as the peer: after 50 iterations
  seconds.erase(seconds.begin(), seconds.begin() + static_cast<std::ptrdiff_t>(warm_up));
  if (seconds.empty()) return 0;
  std::nth_element(seconds.begin(), seconds.begin() + static_cast<std::ptrdiff_t>(seconds.size() / 2), seconds.end());
  return static_cast<double>(tokens_per_step) / seconds[seconds.size() / 2];
}

}  // namespace

double learning_rate(int64_t iter, const CharLMOptions& o) {
  const double lr = o.training.lr;
  if (iter < o.warmup_iters) return lr * static_cast<double>(iter + 1) / static_cast<double>(o.warmup_iters + 1);
  if (iter > o.iters) return o.min_lr;
  const double ratio = static_cast<double>(iter - o.warmup_iters) / static_cast<double>(o.iters - o.warmup_iters);
  return o.min_lr + 0.5 * (1.0 + std::cos(std::numbers::pi * ratio)) * (lr - o.min_lr);
}

std::vector<int64_t> generate(nn::GPT& model, std::vector<int64_t> context, int64_t count, const Sampling& sampling,
                              Generator& gen, const std::function<void(int64_t)>& on_token) {
  AG_CHECK(!context.empty(), "sample: the prompt is empty after encoding; expected at least one character");
  AG_CHECK(sampling.temperature > 0 && std::isfinite(sampling.temperature),
           "sample: expected a finite temperature > 0, got {}", sampling.temperature);
  NoGradGuard no_grad;
  const auto block = static_cast<size_t>(model.config.block_size);
  if (context.size() > block) context.erase(context.begin(), context.end() - static_cast<std::ptrdiff_t>(block));
  std::vector<int64_t> window = context, drawn;
  nn::KVCache cache;
  auto window_logits = [&] {  // the logits after the whole window, recomputed
    cache = {};
    const auto n = static_cast<int64_t>(window.size());
    return sampling.use_cache ? model.forward_cached(row_of(window), cache)
                              : squeeze(slice(model.forward(row_of(window)), 1, n - 1, n), 1);  // (1, V)
  };
  Tensor logits = window_logits();  // (1, V)
  for (int64_t i = 0; i < count; ++i) {
    const int64_t token = draw_token(squeeze(logits, 0), sampling, gen);
    drawn.push_back(token);
    if (on_token) on_token(token);
    if (i + 1 == count) break;
    if (window.size() == block) {  // full: jump to the last half, at positions 0…
      window.erase(window.begin(), window.end() - static_cast<std::ptrdiff_t>(std::max<size_t>(1, block / 2)));
      window.push_back(token);
      if (window.size() > block) window.erase(window.begin());
      logits = window_logits();
      continue;
    }
    window.push_back(token);
    logits = sampling.use_cache ? model.forward_cached(row_of({token}), cache) : window_logits();
  }
  return drawn;
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

// The GPT training starts from: `config` (load_corpus's), initialised from the run's seed, built
// within the memory bound (tasks::build_within_memory).
std::unique_ptr<nn::GPT> build_model(const nn::GPTConfig& config, const tasks::TrainingOptions& training) {
  manual_seed(training.seed);
  return tasks::build_within_memory("charlm",
                                    fmt::format("--width {}, --layers {}, the text's {} distinct characters",
                                                config.n_embd, config.n_layer, config.vocab_size),
                                    training.max_memory_mb, [&] { return std::make_unique<nn::GPT>(config); });
}

StepLoss first_step_loss(const CharLMOptions& options, const tasks::BeforeForward& before_forward) {
  const auto [text, vocabulary, split, config] = load_corpus(options, "graph charlm");
  const int64_t T = config.block_size, batch = options.training.batch_size;
  AG_CHECK(static_cast<int64_t>(split.train.size()) > batch * T,
           "{}: too short for {} windows of {}: its training split has {} characters", text.path, batch, T,
           split.train.size());
  StepLoss step{build_model(config, options.training), {}};
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

  const std::unique_ptr<nn::GPT> built = build_model(config, options.training);
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
  fmt::print("wrote {}/config.json, metrics.csv, losses.svg, last.safetensors, best.safetensors\n", training.out);
  return 0;
}

int eval(const EvalOptions& options) {
  Trained trained = load_trained(options.checkpoint);
  AG_CHECK(options.split == "val" || options.split == "train" || options.split == "all",
           "eval charlm: --split must be val, train or all, got '{}'", options.split);
  const Text text =
      options.data.empty() ? checkpoint_data(trained.config, options.checkpoint) : load_text(options.data);
  tasks::note_if_not_the_runs_data(trained.config, options.checkpoint, text.path);
  const std::vector<int64_t> ids = trained.vocabulary.encode(text.chars, text.path, options.drop_unknown);
  const Split split = split_90_10(ids);
  const std::vector<int64_t>& part = options.split == "val" ? split.val : options.split == "train" ? split.train : ids;
  const int64_t T = trained.model->config.block_size;
  AG_CHECK(static_cast<int64_t>(part.size()) > T, "{}: its {} split has {} characters, fewer than a window of {} + 1",
           text.path, options.split, part.size(), T);
  const WindowLoss loss = window_loss(*trained.model, part);
  fmt::print("{} loss {:.6f} nats/char, {:.6f} bits/char over {} characters ({} windows of {}) of {}\n", options.split,
             loss.nats(), bits(loss.nats()), loss.targets, loss.targets / T, T, text.path);
  return 0;
}

int sample(const SampleOptions& options) {
  Trained trained = load_trained(options.checkpoint);
  AG_CHECK(options.tokens >= 0, "sample: --tokens must be ≥ 0, got {}", options.tokens);
  const std::vector<int64_t> prompt =
      trained.vocabulary.encode(tasks::decode_utf8(options.prompt, "--prompt"), "--prompt", options.drop_unknown);
  Generator gen(options.seed);
  const auto start = std::chrono::steady_clock::now();
  generate(*trained.model, prompt, options.tokens, {.temperature = options.temperature, .top_k = options.top_k}, gen,
           [&](int64_t token) {
             std::fputs(trained.vocabulary.decode(token).c_str(), stdout);
             std::fflush(stdout);
           });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fputs("\n", stdout);
  std::fprintf(stderr, "sampled %lld characters in %.3f s: %.0f characters/s\n", static_cast<long long>(options.tokens),
               seconds, seconds > 0 ? static_cast<double>(options.tokens) / seconds : 0.0);
  return 0;
}

}  // namespace ag::charlm
