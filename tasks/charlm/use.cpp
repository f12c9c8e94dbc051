// `eval charlm` and `sample`: a GPT read back from a checkpoint with its vocabulary, its loss on a
// text's windows, and text drawn from it (`generate`, with a KV cache).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "engine/autograd.h"
#include "engine/json.h"
#include "engine/ops/shape.h"
#include "nn/checkpoint.h"
#include "tasks/charlm/model.h"
#include "tasks/charlm/task.h"
#include "tasks/common/checkpoint_config.h"
#include "tasks/common/text.h"

namespace ag::charlm {

namespace {

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
  const CharLMOptions run = tasks::from_json(settings(), config, path, CharLMOptions{});
  const nn::GPTConfig& model_config = run.model;
  check_model_config(model_config, path);
  AG_CHECK(model_config.vocab_size == vocabulary.size(), "{}: vocab_size {} but a vocabulary of {} characters", path,
           model_config.vocab_size, vocabulary.size());
  auto model = nn::build_from_config(checkpoint, path, [&] { return build_model(run, vocabulary.size()); });
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

}  // namespace

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
