#include "tasks/g2p/task.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numbers>
#include <numeric>
#include <optional>

#include "engine/autograd.h"
#include "engine/io.h"
#include "engine/json.h"
#include "engine/ops/loss.h"
#include "engine/ops/shape.h"
#include "nn/checkpoint.h"
#include "nn/optim.h"
#include "tasks/common/checkpoint_config.h"
#include "tasks/common/corpus.h"
#include "tasks/common/memory.h"
#include "tasks/common/run_dir.h"
#include "tasks/common/text.h"
#include "tasks/g2p/data.h"
#include "tasks/g2p/decode.h"
#include "tasks/g2p/metrics.h"
#include "tasks/g2p/report.h"

namespace ag::g2p {

namespace {

using Seconds = std::chrono::duration<double>;

// A lexicon as the run reads it: CMUdict from the data cache, or the user's pairs.
Lexicon load_lexicon(const std::string& data, bool stress) {
  return data.empty() ? read_cmudict(tasks::corpus_path("cmudict/index.js"), stress) : read_pairs(data);
}

// The words of one split as ids, each with its references (every pronunciation, file order).
struct EvalSet {
  std::vector<std::string> words;
  std::vector<Ids> sources;
  std::vector<std::vector<Ids>> references;
};

EvalSet eval_set(const Lexicon& lexicon, Split split, const Symbols& source, const Symbols& target, int64_t limit) {
  std::vector<int64_t> indices = words_in(lexicon, split);
  if (limit > 0 && limit < static_cast<int64_t>(indices.size())) {  // the peer's evenly spaced subset
    std::vector<int64_t> subset;
    const double step = static_cast<double>(indices.size()) / static_cast<double>(limit);
    for (int64_t i = 0; i < limit; ++i) subset.push_back(indices[static_cast<size_t>(static_cast<double>(i) * step)]);
    indices = std::move(subset);
  }
  EvalSet set;
  for (const int64_t i : indices) {
    const std::string& word = lexicon.words[static_cast<size_t>(i)];
    set.words.push_back(word);
    set.sources.push_back(source.encode_word(word, lexicon.path));
    std::vector<Ids> refs;
    for (const Pronunciation& p : lexicon.prons[static_cast<size_t>(i)])
      refs.push_back(target.encode_phonemes(p, lexicon.path));
    set.references.push_back(std::move(refs));
  }
  return set;
}

// Rows of ids padded with kPad to the longest, each with `before` / `after` added → (N, L) i64.
Tensor pad_rows(const std::vector<const Ids*>& rows, std::optional<int64_t> before, std::optional<int64_t> after) {
  const auto extra = static_cast<size_t>(before.has_value()) + static_cast<size_t>(after.has_value());
  size_t width = 0;
  for (const Ids* r : rows) width = std::max(width, r->size() + extra);
  Tensor out = zeros({static_cast<int64_t>(rows.size()), static_cast<int64_t>(width)}, DType::i64);
  int64_t* p = out.data<int64_t>();
  for (const Ids* r : rows) {
    int64_t* q = p;
    if (before) *q++ = *before;
    q = std::copy(r->begin(), r->end(), q);
    if (after) *q = *after;
    p += width;
  }
  return out;
}

struct Pair {
  Ids source, target;
};

// The training pairs of the train split (a share of them for smoke runs, drawn from the seed); none
// is an error.
std::vector<Pair> training_pairs(const Lexicon& lexicon, const Symbols& source, const Symbols& target, double fraction,
                                 uint64_t seed) {
  std::vector<Pair> pairs;
  for (const int64_t i : words_in(lexicon, Split::train))
    for (const Pronunciation& p : lexicon.prons[static_cast<size_t>(i)])
      pairs.push_back({source.encode_word(lexicon.words[static_cast<size_t>(i)], lexicon.path),
                       target.encode_phonemes(p, lexicon.path)});
  if (fraction < 1.0) {
    std::vector<int64_t> order(pairs.size());
    std::iota(order.begin(), order.end(), 0);
    Generator gen(seed);
    shuffle(order, gen);
    order.resize(static_cast<size_t>(std::llround(fraction * static_cast<double>(pairs.size()))));
    std::sort(order.begin(), order.end());
    std::vector<Pair> kept;
    for (const int64_t i : order) kept.push_back(std::move(pairs[static_cast<size_t>(i)]));
    pairs = std::move(kept);
  }
  AG_CHECK(!pairs.empty(), "{}: no training pairs (the hash split puts 80% of the words in train; the data has {})",
           lexicon.path, lexicon.words.size());
  return pairs;
}

class G2PTask : public nn::TrainTask {
 public:
  G2PTask(G2PTransformer& model, std::vector<Pair> pairs, EvalSet validation, const G2POptions& options)
      : model_(model), pairs_(std::move(pairs)), validation_(std::move(validation)), options_(options) {}

  int64_t train_size() const override { return static_cast<int64_t>(pairs_.size()); }

  // The peer's batching: the shuffled pairs stable-sorted by (source length, target length), cut
  // into batches, the batches' order shuffled.
  std::vector<std::vector<int64_t>> batches(const std::vector<int64_t>& shuffled, int64_t batch_size,
                                            Generator& shuffle_gen) override {
    std::vector<int64_t> order = shuffled;
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      const Pair& x = pairs_[static_cast<size_t>(a)];
      const Pair& y = pairs_[static_cast<size_t>(b)];
      return std::pair(x.source.size(), x.target.size()) < std::pair(y.source.size(), y.target.size());
    });
    std::vector<std::vector<int64_t>> out = TrainTask::batches(order, batch_size, shuffle_gen);
    shuffle(out, shuffle_gen);
    return out;
  }

  // The loss is a mean over target tokens (padding ignored): a pair's phonemes and <eos>.
  double loss_terms(int64_t example) const override {
    return static_cast<double>(pairs_[static_cast<size_t>(example)].target.size() + 1);
  }

  Tensor loss(const std::vector<int64_t>& batch) override {
    std::vector<const Ids*> sources, targets;
    for (const int64_t i : batch) {
      const Pair& pair = pairs_[static_cast<size_t>(i)];
      sources.push_back(&pair.source);
      targets.push_back(&pair.target);
      tokens_ += static_cast<int64_t>(pair.source.size() + pair.target.size()) + 1;  // + <eos>
    }
    const Tensor source = pad_rows(sources, std::nullopt, std::nullopt);  // (B, S)
    const Tensor target_in = pad_rows(targets, kBos, std::nullopt);       // (B, T + 1): <bos> p1 … pn
    const Tensor target_out = pad_rows(targets, std::nullopt, kEos);      // (B, T + 1): p1 … pn <eos>
    const Tensor logits = model_.forward(source, target_in);              // (B, T + 1, V)
    Tensor loss = cross_entropy(reshape(logits, {-1, model_.config.target_vocab}), reshape(target_out, {-1}), kPad,
                                Reduction::mean, options_.label_smoothing);
    return loss;
  }

  // Greedy decoding of this rank's share of the validation words: PER and WER (as sums the Trainer
  // adds up over the ranks).
  nn::MetricSums evaluate(const nn::dist::Shard& shard) override {
    const auto n = static_cast<int64_t>(validation_.words.size());
    const std::vector<Ids> sources(validation_.sources.begin() + shard.begin(n),
                                   validation_.sources.begin() + shard.end(n));
    const std::vector<std::vector<Ids>> references(validation_.references.begin() + shard.begin(n),
                                                   validation_.references.begin() + shard.end(n));
    const std::vector<Ids> predictions =
        decode_all(model_, sources, {.max_extra = options_.max_extra}, options_.eval_batch_size);
    const ErrorRates rates = score(predictions, references);
    nn::MetricSums sums = {
        {"val_per", {100.0 * static_cast<double>(rates.edits), static_cast<double>(rates.ref_length)}},
        {"val_wer", {100.0 * static_cast<double>(rates.wrong), static_cast<double>(rates.words)}}};
    return sums;
  }

  nn::BestEpochRule best_epoch_rule() const override { return {.metric = "val_wer", .higher_is_better = false}; }

  int64_t tokens() const { return tokens_; }  // source characters + target tokens trained on so far

 private:
  G2PTransformer& model_;
  std::vector<Pair> pairs_;
  EvalSet validation_;
  const G2POptions& options_;
  int64_t tokens_ = 0;
};

// The run's config: the table's settings of `options` with the model as built (`model`: the data's
// vocabularies), the data it read (data_words, data_sha256: a resume refuses data that changed since
// the run began; eval notes other data).
nlohmann::json run_settings(G2POptions options, const ModelConfig& model, const Lexicon& lexicon) {
  options.model = model;
  options.data = tasks::recorded_data_path(options.data);  // "": CMUdict from the data cache
  nlohmann::json config = tasks::to_json(settings(), options);
  config.update({{"task", "g2p"},
                 {"model", "transformer"},
                 {"optimizer", "Adam"},
                 {"data_words", lexicon.words.size()},
                 {"data_sha256", tasks::data_file_sha256(lexicon.path)}});
  return config;
}

// A trained model and what it needs to read words: the checkpoint's config and symbols.
struct Trained {
  std::unique_ptr<G2PTransformer> model;
  Symbols source, target;
  nlohmann::json config;
};

Trained load_trained(const std::string& path) {
  const nn::Checkpoint checkpoint = nn::read_checkpoint(path);
  nlohmann::json config = checkpoint.settings;
  tasks::check_checkpoint_task(config, "g2p", path);
  for (const char* key : {"source_symbols", "target_symbols"})
    AG_CHECK(checkpoint.metadata.count(key), "{}: the checkpoint has no {}", path, key);
  Symbols source = Symbols::from_json(checkpoint.metadata.at("source_symbols"), path);
  Symbols target = Symbols::from_json(checkpoint.metadata.at("target_symbols"), path);
  const ModelConfig model_config = tasks::from_json(settings(), config, path, G2POptions{}).model;
  AG_CHECK(model_config.source_vocab == source.size() && model_config.target_vocab == target.size(),
           "{}: the config's vocabularies ({}, {}) differ from the symbols it stores ({}, {})", path,
           model_config.source_vocab, model_config.target_vocab, source.size(), target.size());
  auto model = nn::build_from_config(checkpoint, path, [&] { return std::make_unique<G2PTransformer>(model_config); });
  nn::load(path, *model);
  model->eval();
  return {std::move(model), std::move(source), std::move(target), std::move(config)};
}

// The words `predict` is given as the model's ids: each one not empty and short enough to decode (its
// letters, then up to max_extra phonemes and <eos>, in the model's max_len positions).
std::vector<Ids> encode_words(const Trained& trained, const std::vector<std::string>& words, int64_t max_extra) {
  const int64_t longest = trained.model->config.max_len - max_extra - 1;
  std::vector<Ids> sources;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string where = fmt::format("predict g2p: word {}", i + 1);
    AG_CHECK(!words[i].empty(), "{} is empty; expected a word to spell out", where);
    sources.push_back(trained.source.encode_word(words[i], where));
    AG_CHECK(static_cast<int64_t>(sources.back().size()) <= longest,
             "{} has {} characters, more than the {} this model decodes (its {} positions, less the run's "
             "--max-extra {} and one for the end)",
             where, sources.back().size(), longest, trained.model->config.max_len, max_extra);
  }
  return sources;
}

struct Decoded {
  std::vector<Ids> predictions;
  double seconds = 0;
  double words_per_second() const { return seconds > 0 ? static_cast<double>(predictions.size()) / seconds : 0; }
};

Decoded decode_timed(G2PTransformer& model, const std::vector<Ids>& sources, int64_t beam, int64_t max_extra,
                     int64_t batch_size, const std::function<void(int64_t)>& done = {}) {
  const auto start = std::chrono::steady_clock::now();
  Decoded d{decode_all(model, sources, {.beam = beam, .max_extra = max_extra}, batch_size, done)};
  d.seconds = Seconds(std::chrono::steady_clock::now() - start).count();
  return d;
}

void print_rates(const std::string& what, const ErrorRates& rates, const Decoded& decoded) {
  fmt::print(
      "{}: PER {:.2f}%  WER {:.2f}% on {} words ({} wrong, {} edits over {} phonemes); decoded in {:.2f} s = "
      "{:.0f} words/s\n",
      what, rates.per(), rates.wer(), rates.words, rates.wrong, rates.edits, rates.ref_length, decoded.seconds,
      decoded.words_per_second());
}

void print_confusions(const std::vector<Ids>& predictions, const std::vector<std::vector<Ids>>& references,
                      const Symbols& target, int64_t top) {
  const std::vector<Confusion> confusions = top_confusions(predictions, references, target, top);
  if (confusions.empty()) return;
  fmt::print("most frequent confusions (reference → predicted, ∅ = nothing):\n");
  for (const Confusion& c : confusions)
    fmt::print("  {:>4} → {:<4} {:6}\n", tasks::printable(c.reference), tasks::printable(c.predicted), c.count);
}

// The report (SVG): error rates by word length, the confusions, a few test words' alignments.
std::string report_of(const std::string& title, G2PTransformer& model, const EvalSet& test,
                      const std::vector<Ids>& predictions, const Symbols& source, const Symbols& target) {
  ReportData data;
  data.title = title;
  std::vector<int64_t> lengths;
  for (const Ids& s : test.sources) lengths.push_back(static_cast<int64_t>(s.size()));
  data.by_length = rates_by_length(predictions, test.references, lengths);
  data.confusions = top_confusions(predictions, test.references, target, 12);
  for (size_t k = 0; k < 4 && k < test.words.size(); ++k) {
    const size_t i = (k * 2 + 1) * test.words.size() / 9;  // a few words spread over the (sorted) split
    Alignment a;
    for (const int64_t id : test.sources[i]) a.letters.push_back(source.symbol(id));
    for (const int64_t id : predictions[i]) a.phonemes.push_back(target.symbol(id));
    for (const std::vector<double>& row : cross_attention(model, test.sources[i], predictions[i]))
      a.weights.insert(a.weights.end(), row.begin(), row.end());
    data.alignments.push_back(std::move(a));
  }
  return report_svg(data);
}

void print_table(const std::vector<nn::EpochRecord>& history) {
  fmt::print("{:>5} {:>10} {:>9} {:>9}\n", "epoch", "train_loss", "val_PER%", "val_WER%");
  for (const nn::EpochRecord& r : history)
    fmt::print("{:5} {:10.4f} {:9.3f} {:9.3f}\n", r.epoch, r.train_loss, r.metrics.at("val_per"),
               r.metrics.at("val_wer"));
}

// Note [memory estimate] for the encoder-decoder, in f32 values per row of a batch, S the longest
// source and T the longest target + 1 (the batches go by length, so the last holds both), D the
// width, F the feed-forward units, H the heads, V the phonemes. The step's peak is what the forward
// leaves for the backward (counted with a live-bytes tally of the engine's allocations: the
// backward frees saved tensors as fast as it makes gradients). Per encoder layer 10·S·D (q, k, v in
// heads, the attention's output, dropout's masks, the residual sums and norms), 3·S·F (linear1's
// output, dropout's mask and output) and 3·H·S² (the attention weights, dropout's mask and output);
// per decoder layer the same over T, plus 5·T·D + 2·S·D + 3·H·T·S for the cross-attention; 2·(S +
// T)·D for the embeddings, 3·T·V for the logits and their log-softmax. Decoding (validation, then
// the test words, --beam rows per word) keeps the memory (S·D) and, per decoder layer, the memory's
// keys and values (2·S·D) and the self-attention's growing cache (2·(S + max_extra)·D, copied once
// as it grows).
constexpr int64_t kPredictBatch = 512;  // words `predict g2p` decodes at once

// Decoding's peak, in bytes: `rows` (words × beam) of up to `longest_word` letters and max_extra more
// phonemes than letters (Note [memory estimate] below).
double decoding_bytes(const ModelConfig& c, int64_t rows, int64_t longest_word, int64_t max_extra) {
  const auto R = static_cast<double>(rows), W = static_cast<double>(longest_word),
             steps = W + static_cast<double>(max_extra) + 1, D = static_cast<double>(c.d_model),
             F = static_cast<double>(c.feed_forward), H = static_cast<double>(c.heads),
             Ld = static_cast<double>(c.decoder_layers);
  return 4 * std::max(R * D * (W * (1 + 2 * Ld) + 3 * Ld * steps),   // memory, caches
                      R * (6 * W * D + 2 * W * F + 2 * H * W * W));  // one encoder layer
}

tasks::MemoryEstimate memory_estimate(const G2POptions& o, const ModelConfig& c, int64_t parameters,
                                      const std::vector<Pair>& pairs, const EvalSet& validation, const EvalSet& test) {
  size_t longest_source = 1, longest_target = 1;
  for (const Pair& pair : pairs) {
    longest_source = std::max(longest_source, pair.source.size());
    longest_target = std::max(longest_target, pair.target.size());
  }
  size_t longest_word = 1;
  for (const EvalSet* set : {&validation, &test})
    for (const Ids& source : set->sources) longest_word = std::max(longest_word, source.size());
  const auto B = static_cast<double>(std::min<int64_t>(o.training.batch_size, static_cast<int64_t>(pairs.size()))) /
                 static_cast<double>(o.training.micro_batches);
  const auto S = static_cast<double>(longest_source), T = static_cast<double>(longest_target + 1),
             D = static_cast<double>(c.d_model), F = static_cast<double>(c.feed_forward),
             H = static_cast<double>(c.heads), V = static_cast<double>(c.target_vocab),
             Le = static_cast<double>(c.encoder_layers), Ld = static_cast<double>(c.decoder_layers);
  const double encoder_layer = 10 * S * D + 3 * S * F + 3 * H * S * S;
  const double decoder_layer = 15 * T * D + 2 * S * D + 3 * T * F + 3 * H * (T * T + T * S);
  const double row = Le * encoder_layer + Ld * decoder_layer + 2 * (S + T) * D + 3 * T * V;
  return {.task = "g2p",
          .parameters = parameters,
          .step_bytes = 4 * B * row,
          .step_settings = fmt::format("--batch-size {} x the longest pair's {} letters and {} phonemes (with "
                                       "--d-model {}, --ff {}, --heads {}, --enc-layers {}, --dec-layers {})",
                                       o.training.batch_size, longest_source, longest_target, c.d_model, c.feed_forward,
                                       c.heads, c.encoder_layers, c.decoder_layers),
          .eval_bytes = decoding_bytes(c, o.eval_batch_size * o.beam, longest_word, o.max_extra),
          .eval_settings = fmt::format("--eval-batch-size {} x --beam {} words of up to {} letters", o.eval_batch_size,
                                       o.beam, longest_word)};
}

// `eval` and `predict`: refuses decoding `sources` in batches of `batch_size` words (`batch_setting`
// names it) × `beam` rows that would not fit (tasks::check_memory_quietly), before decoding.
void check_decoding_memory(const std::string& command, const ModelConfig& c, const std::vector<Ids>& sources,
                           const DecodeOptions& decode, int64_t batch_size, const std::string& batch_setting,
                           int64_t max_memory_mb) {
  size_t longest_word = 1;
  for (const Ids& source : sources) longest_word = std::max(longest_word, source.size());
  const int64_t words = std::min(batch_size, static_cast<int64_t>(sources.size()));
  tasks::check_memory_quietly(
      {.command = command,
       .task = "g2p",
       .step_settings = "no training step",
       .eval_bytes = decoding_bytes(c, words * decode.beam, static_cast<int64_t>(longest_word), decode.max_extra),
       .eval_settings =
           fmt::format("{} x --beam {} words of up to {} letters", batch_setting, decode.beam, longest_word)},
      max_memory_mb);
}

}  // namespace

double learning_rate(int64_t step, int64_t total_steps, double lr, double min_lr, double warmup_frac) {
  const int64_t warmup = std::max<int64_t>(1, std::llround(warmup_frac * static_cast<double>(total_steps)));
  if (step < warmup) return lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  const double progress = std::min(
      1.0, static_cast<double>(step - warmup) / static_cast<double>(std::max<int64_t>(1, total_steps - 1 - warmup)));
  return min_lr + (lr - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

// The model training starts from: the flags' sizes with the data's symbol tables, initialised from
// the run's seed, built within the memory bound (tasks::build_within_memory).
std::unique_ptr<G2PTransformer> build_model(const G2POptions& options, const Symbols& source, const Symbols& target) {
  ModelConfig config = options.model;
  config.source_vocab = source.size();
  config.target_vocab = target.size();
  manual_seed(options.training.seed);
  return tasks::build_within_memory(
      "g2p",
      fmt::format("--d-model {}, --ff {}, --enc-layers {}, --dec-layers {}", config.d_model, config.feed_forward,
                  config.encoder_layers, config.decoder_layers),
      options.training.max_memory_mb, [&] { return std::make_unique<G2PTransformer>(config); });
}

StepLoss first_step_loss(const G2POptions& options, const tasks::BeforeForward& before_forward) {
  const Lexicon lexicon = load_lexicon(options.data, options.stress);
  const Symbols source = Symbols::source_of(lexicon), target = Symbols::target_of(lexicon);
  std::vector<Pair> pairs = training_pairs(lexicon, source, target, 1.0, options.training.seed);
  pairs.resize(std::min(pairs.size(), static_cast<size_t>(options.training.batch_size)));
  StepLoss step{build_model(options, source, target), {}};
  G2PTask task(*step.model, std::move(pairs), {}, options);
  if (before_forward) before_forward(step.model->named_parameters());
  step.loss = task.loss(tasks::first_batch(task, options.training.batch_size));
  return step;
}

int train(const G2POptions& options) {
  const Lexicon lexicon = load_lexicon(options.data, options.stress);
  for (const std::string& line : lexicon.summary) fmt::print("{}\n", line);
  const Symbols source = Symbols::source_of(lexicon), target = Symbols::target_of(lexicon);
  fmt::print("vocab: source {} symbols, target {} ({} phonemes)\n", source.size(), target.size(), target.size() - 3);
  for (const Split split : {Split::train, Split::val, Split::test}) {
    int64_t pairs = 0;
    const std::vector<int64_t> words = words_in(lexicon, split);
    for (const int64_t i : words) pairs += static_cast<int64_t>(lexicon.prons[static_cast<size_t>(i)].size());
    fmt::print("split: {:5} {:6} words {:6} pairs\n", split_name(split), words.size(), pairs);
  }
  std::vector<Pair> pairs = training_pairs(lexicon, source, target, options.train_fraction, options.training.seed);
  EvalSet validation = eval_set(lexicon, Split::val, source, target, options.eval_limit);
  const EvalSet test = eval_set(lexicon, Split::test, source, target, options.eval_limit);
  AG_CHECK(!validation.words.empty() && !test.words.empty(),
           "{}: the validation or test split is empty ({} and {} words); the hash split needs more words", lexicon.path,
           validation.words.size(), test.words.size());

  const std::unique_ptr<G2PTransformer> built = build_model(options, source, target);
  G2PTransformer& model = *built;
  const ModelConfig& config = model.config;
  nn::Adam optimizer(model.parameters(), {.lr = options.training.lr, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-9});
  const int64_t n_pairs = static_cast<int64_t>(pairs.size());
  const int64_t batches_per_epoch = (n_pairs + options.training.batch_size - 1) / options.training.batch_size;
  const int64_t total_steps = options.training.epochs * batches_per_epoch;
  fmt::print("model: preset {}, d_model {}, {} heads, {} + {} layers, ff {}, dropout {}: {} parameters\n",
             options.preset, config.d_model, config.heads, config.encoder_layers, config.decoder_layers,
             config.feed_forward, config.dropout, model.num_parameters());
  fmt::print(
      "train: {} pairs, batch {}, {} batches/epoch, {} epochs, {} steps, lr {} → {} cosine after {:.0f}% "
      "warm-up, label smoothing {}, clip {}, seed {}\n",
      n_pairs, options.training.batch_size, batches_per_epoch, options.training.epochs, total_steps,
      options.training.lr, options.min_lr, 100 * options.warmup_frac, options.label_smoothing, options.clip,
      options.training.seed);

  tasks::check_memory(memory_estimate(options, config, model.num_parameters(), pairs, validation, test),
                      options.training.max_memory_mb);
  G2PTask task(model, std::move(pairs), std::move(validation), options);
  const std::optional<tasks::TrainedRun> trained = tasks::run_training(
      model, optimizer, task, options.training, tasks::run_config(run_settings(options, config, lexicon), settings()),
      {{"source_symbols", source.to_json()}, {"target_symbols", target.to_json()}}, [&](nn::TrainerOptions& t) {
        t.lr_schedule = [&options, total_steps](int64_t step) {
          return learning_rate(step, total_steps, options.training.lr, options.min_lr, options.warmup_frac);
        };
        t.clip_grad_norm = options.clip;
        t.tokens_per_step = options.training.batch_size;
        t.rate_unit = "words";
      });
  if (!trained) return 0;  // another rank of a data-parallel job: rank 0 reports
  const std::vector<nn::EpochRecord>& history = trained->history;
  const std::vector<double>& step_seconds = trained->step_seconds;
  print_table(history);
  const double train_seconds = std::accumulate(step_seconds.begin(), step_seconds.end(), 0.0);
  if (train_seconds > 0)
    fmt::print("training: {} tokens (source characters + target tokens) in {:.1f} s of steps = {:.0f} tokens/s\n",
               task.tokens(), train_seconds, static_cast<double>(task.tokens()) / train_seconds);

  // The test set, with the epoch of the best validation WER.
  const std::string best = trained->folder->where(nn::RunFile::best_checkpoint);
  model.load_state_dict(trained->best->state);  // kept in memory: best is not read back
  model.eval();
  fmt::print("best epoch {} (lowest validation WER) -> {}\n", trained->best->epoch, best);
  // Ctrl-C here stops the decoding (minutes on CMUdict); the run's files are whole already.
  const auto stop_if_asked = [&](int64_t) {
    nn::stop_if_signalled(
        "while decoding the test words",
        fmt::format("{} holds the whole run (eval g2p --checkpoint {} decodes them)", trained->folder->where(), best));
  };
  const Decoded greedy =
      decode_timed(model, test.sources, 1, options.max_extra, options.eval_batch_size, stop_if_asked);
  print_rates("test (greedy)", score(greedy.predictions, test.references), greedy);
  const Decoded* reported = &greedy;
  Decoded beam;
  if (options.beam > 1) {
    beam = decode_timed(model, test.sources, options.beam, options.max_extra, options.eval_batch_size, stop_if_asked);
    print_rates(fmt::format("test (beam {})", options.beam), score(beam.predictions, test.references), beam);
    reported = &beam;
  }
  print_confusions(reported->predictions, test.references, target, 10);
  fmt::print("a few test words:\n");
  for (size_t k = 0; k < 8 && k < test.words.size(); ++k) {
    const size_t i = k * test.words.size() / 8;
    const WordScore s = nearest(reported->predictions[i], test.references[i]);
    fmt::print("  {:<16} {:<28} {}\n", test.words[i], target.decode(reported->predictions[i], " "),
               s.edits == 0 ? "right" : "reference " + target.decode(test.references[i][s.ref_index], " "));
  }
  if (options.report) {
    trained->folder->write("report.svg",
                           report_of(fmt::format("g2p {}, best epoch, test ({})", options.preset,
                                                 options.beam > 1 ? fmt::format("beam {}", options.beam) : "greedy"),
                                     model, test, reported->predictions, source, target));
    fmt::print("wrote {}/report.svg\n", options.training.out);
  }
  return 0;
}

int eval(const EvalOptions& options) {
  Trained trained = load_trained(options.checkpoint);
  AG_CHECK(options.split == "test" || options.split == "val" || options.split == "train",
           "eval g2p: --split must be test, val or train, got '{}'", options.split);
  const std::string data =
      options.data.empty() ? tasks::config_string(trained.config, "data", options.checkpoint) : options.data;
  const Lexicon lexicon = load_lexicon(data, tasks::config_bool(trained.config, "stress", options.checkpoint));
  tasks::note_if_not_the_runs_data(trained.config, options.checkpoint, lexicon.path);
  if (!options.report.empty()) check_not_an_input(options.report);  // before decoding, not after
  const Split split = options.split == "test" ? Split::test : options.split == "val" ? Split::val : Split::train;
  const EvalSet set = eval_set(lexicon, split, trained.source, trained.target, 0);
  AG_CHECK(!set.words.empty(), "{}: its {} split is empty", lexicon.path, options.split);
  const int64_t max_extra = tasks::config_whole(trained.config, "max_extra", options.checkpoint, 10);
  check_decoding_memory("eval", trained.model->config, set.sources, {.beam = options.beam, .max_extra = max_extra},
                        options.eval_batch_size, fmt::format("--eval-batch-size {}", options.eval_batch_size),
                        options.max_memory_mb);
  const Decoded decoded = decode_timed(*trained.model, set.sources, options.beam, max_extra, options.eval_batch_size);
  print_rates(fmt::format("{} ({})", options.split, options.beam > 1 ? fmt::format("beam {}", options.beam) : "greedy"),
              score(decoded.predictions, set.references), decoded);
  print_confusions(decoded.predictions, set.references, trained.target, options.confusions);
  if (!options.report.empty()) {
    write_file_atomically(options.report,
                          report_of(fmt::format("{}, {} ({})", options.checkpoint, options.split,
                                                options.beam > 1 ? fmt::format("beam {}", options.beam) : "greedy"),
                                    *trained.model, set, decoded.predictions, trained.source, trained.target));
    fmt::print("wrote {}\n", options.report);
  }
  return 0;
}

int predict(const PredictOptions& options) {
  Trained trained = load_trained(options.checkpoint);
  std::vector<std::string> words = options.words;
  if (!options.file.empty()) {
    const std::string text = tasks::read_text_file(options.file);
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      std::string word = text.substr(start, end - start);
      if (!word.empty() && word.back() == '\r') word.pop_back();
      if (!word.empty()) words.push_back(word);
      start = end + 1;
    }
  }
  AG_CHECK(!words.empty(), "predict g2p: no words given; expected WORD... or --file FILE (one word per line)");
  const int64_t max_extra = tasks::config_whole(trained.config, "max_extra", options.checkpoint, 10);
  const std::vector<Ids> sources = encode_words(trained, words, max_extra);
  const DecodeOptions decode{.beam = options.beam, .max_extra = max_extra};
  check_decoding_memory("predict", trained.model->config, sources, decode, kPredictBatch,
                        fmt::format("{} words at once", kPredictBatch), options.max_memory_mb);
  const std::vector<Ids> predictions = decode_all(*trained.model, sources, decode, kPredictBatch);
  for (size_t i = 0; i < words.size(); ++i)
    fmt::print("{}\t{}\n", tasks::printable(words[i]), tasks::printable(trained.target.decode(predictions[i], " ")));
  return 0;
}

}  // namespace ag::g2p
