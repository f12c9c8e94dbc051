// `train g2p`: the training pairs, the model training starts from, the TrainTask (the peer's batching
// and loss), the run's config, and the end of a run (the best epoch on the test words, report.svg);
// `first_step_loss` (`attograd graph g2p`).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numbers>
#include <numeric>
#include <optional>

#include "engine/autograd.h"
#include "engine/ops/loss.h"
#include "engine/ops/shape.h"
#include "nn/distributed.h"
#include "nn/optim.h"
#include "tasks/common/memory.h"
#include "tasks/common/run_dir.h"
#include "tasks/common/text.h"
#include "tasks/g2p/decode.h"
#include "tasks/g2p/evaluation.h"
#include "tasks/g2p/metrics.h"
#include "tasks/g2p/task.h"

namespace ag::g2p {

namespace {

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

  int64_t tokens() const { return tokens_; }  // source characters + target tokens this rank trained on so far

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
// heads, the attention's output, dropout's masks, the residual sums and norms), S·F (the
// feed-forward's hidden layer, dropped in place: linear_relu_dropout) and 3·H·S² (the attention
// weights, dropout's mask and output); per decoder layer the same over T, plus 5·T·D + 2·S·D + 3·H·T·S for the cross-attention; 2·(S +
// T)·D for the embeddings, 3·T·V for the logits and their log-softmax. Decoding (validation, then
// the test words, --beam rows per word) keeps the memory (S·D) and, per decoder layer, the memory's
// keys and values (2·S·D) and the self-attention's growing cache (2·(S + max_extra)·D, copied once
// as it grows).

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
             D = static_cast<double>(c.transformer.d_model), F = static_cast<double>(c.transformer.dim_feedforward),
             H = static_cast<double>(c.transformer.nhead), V = static_cast<double>(c.target_vocab),
             Le = static_cast<double>(c.transformer.num_encoder_layers),
             Ld = static_cast<double>(c.transformer.num_decoder_layers);
  const double encoder_layer = 10 * S * D + S * F + 3 * H * S * S;
  const double decoder_layer = 15 * T * D + 2 * S * D + T * F + 3 * H * (T * T + T * S);
  const double row = Le * encoder_layer + Ld * decoder_layer + 2 * (S + T) * D + 3 * T * V;
  return {.task = "g2p",
          .parameters = parameters,
          .step_bytes = 4 * B * row,
          .step_settings = fmt::format("--batch-size {} x the longest pair's {} letters and {} phonemes (with "
                                       "--d-model {}, --ff {}, --heads {}, --enc-layers {}, --dec-layers {})",
                                       o.training.batch_size, longest_source, longest_target, c.transformer.d_model,
                                       c.transformer.dim_feedforward, c.transformer.nhead,
                                       c.transformer.num_encoder_layers, c.transformer.num_decoder_layers),
          .eval_bytes = std::max(all_decoding_bytes(c, parameters, static_cast<int64_t>(validation.sources.size()),
                                                    o.eval_batch_size, o.beam, longest_word, o.max_extra),
                                 all_decoding_bytes(c, parameters, static_cast<int64_t>(test.sources.size()),
                                                    o.eval_batch_size, o.beam, longest_word, o.max_extra)),
          .eval_settings = fmt::format("--eval-batch-size {} x --beam {} words of up to {} letters", o.eval_batch_size,
                                       o.beam, longest_word)};
}

// The symbol tables' sizes and the words and pairs of each split.
void print_sizes(const Lexicon& lexicon, const Symbols& source, const Symbols& target) {
  fmt::print("vocab: source {} symbols, target {} ({} phonemes)\n", source.size(), target.size(), target.size() - 3);
  for (const Split split : {Split::train, Split::val, Split::test}) {
    int64_t pairs = 0;
    const std::vector<int64_t> words = words_in(lexicon, split);
    for (const int64_t i : words) pairs += static_cast<int64_t>(lexicon.prons[static_cast<size_t>(i)].size());
    fmt::print("split: {:5} {:6} words {:6} pairs\n", split_name(split), words.size(), pairs);
  }
}

// The model's sizes and the recipe, before training.
void print_recipe(const G2POptions& options, const G2PTransformer& model, int64_t n_pairs, int64_t batches_per_epoch,
                  int64_t total_steps) {
  const ModelConfig& config = model.config;
  fmt::print("model: preset {}, d_model {}, {} heads, {} + {} layers, ff {}, dropout {}: {} parameters\n",
             options.preset, config.transformer.d_model, config.transformer.nhead,
             config.transformer.num_encoder_layers, config.transformer.num_decoder_layers,
             config.transformer.dim_feedforward, config.transformer.dropout, model.num_parameters());
  fmt::print(
      "train: {} pairs, batch {}, {} batches/epoch, {} epochs, {} steps, lr {} → {} cosine after {:.0f}% "
      "warm-up, label smoothing {}, clip {}, seed {}\n",
      n_pairs, options.training.batch_size, batches_per_epoch, options.training.epochs, total_steps,
      options.training.lr, options.min_lr, 100 * options.warmup_frac, options.label_smoothing, options.clip,
      options.training.seed);
}

// The end of a run: the best epoch's model (kept in memory: best is not read back) on the test
// words, greedy and with --beam; its confusions, a few words, and report.svg.
void test_best_epoch(const G2POptions& options, const tasks::TrainedRun& trained, G2PTransformer& model,
                     const EvalSet& test, const Symbols& source, const Symbols& target) {
  const std::string best = trained.folder->where(nn::RunFile::best_checkpoint);
  model.load_state_dict(trained.best->state);
  model.eval();
  fmt::print("best epoch {} (lowest validation WER) -> {}\n", trained.best->epoch, best);
  // Ctrl-C here stops the decoding (minutes on CMUdict); the run's files are whole already.
  const auto stop_if_asked = [&](int64_t) {
    nn::stop_if_signalled(
        "while decoding the test words",
        fmt::format("{} holds the whole run (eval g2p --checkpoint {} decodes them)", trained.folder->where(), best));
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
  if (!options.report) return;
  trained.folder->write("report.svg",
                        report_of(fmt::format("g2p {}, best epoch, test ({})", options.preset,
                                              options.beam > 1 ? fmt::format("beam {}", options.beam) : "greedy"),
                                  model, test, reported->predictions, source, target));
  fmt::print("wrote {}/report.svg\n", options.training.out);
}

// The model training starts from (build_model), within the memory bound (tasks::build_within_memory).
std::unique_ptr<G2PTransformer> build_to_train(const G2POptions& options, const Symbols& source,
                                               const Symbols& target) {
  const ModelConfig& m = options.model;
  return tasks::build_within_memory(
      "g2p",
      fmt::format("--d-model {}, --ff {}, --enc-layers {}, --dec-layers {}", m.transformer.d_model,
                  m.transformer.dim_feedforward, m.transformer.num_encoder_layers, m.transformer.num_decoder_layers),
      options.training.max_memory_mb, [&] { return build_model(options, source, target); });
}

}  // namespace

double learning_rate(int64_t step, int64_t total_steps, double lr, double min_lr, double warmup_frac) {
  const int64_t warmup = std::max<int64_t>(1, std::llround(warmup_frac * static_cast<double>(total_steps)));
  if (step < warmup) return lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  const double progress = std::min(
      1.0, static_cast<double>(step - warmup) / static_cast<double>(std::max<int64_t>(1, total_steps - 1 - warmup)));
  return min_lr + (lr - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

std::unique_ptr<G2PTransformer> build_model(const G2POptions& options, const Symbols& source, const Symbols& target) {
  ModelConfig config = options.model;
  config.source_vocab = source.size();
  config.target_vocab = target.size();
  manual_seed(options.training.seed);
  return std::make_unique<G2PTransformer>(config);
}

StepLoss first_step_loss(const G2POptions& options, const tasks::BeforeForward& before_forward) {
  const Lexicon lexicon = load_lexicon(options.data, options.stress);
  const Symbols source = Symbols::source_of(lexicon), target = Symbols::target_of(lexicon);
  std::vector<Pair> pairs = training_pairs(lexicon, source, target, 1.0, options.training.seed);
  pairs.resize(std::min(pairs.size(), static_cast<size_t>(options.training.batch_size)));
  StepLoss step{build_to_train(options, source, target), {}};
  G2PTask task(*step.model, std::move(pairs), {}, options);
  if (before_forward) before_forward(step.model->named_parameters());
  step.loss = task.loss(tasks::first_batch(task, options.training.batch_size));
  return step;
}

int train(const G2POptions& options) {
  const Lexicon lexicon = load_lexicon(options.data, options.stress);
  for (const std::string& line : lexicon.summary) fmt::print("{}\n", line);
  const Symbols source = Symbols::source_of(lexicon), target = Symbols::target_of(lexicon);
  print_sizes(lexicon, source, target);
  std::vector<Pair> pairs = training_pairs(lexicon, source, target, options.train_fraction, options.training.seed);
  EvalSet validation = eval_set(lexicon, Split::val, source, target, options.eval_limit);
  const EvalSet test = eval_set(lexicon, Split::test, source, target, options.eval_limit);
  AG_CHECK(!validation.words.empty() && !test.words.empty(),
           "{}: the validation or test split is empty ({} and {} words); the hash split needs more words", lexicon.path,
           validation.words.size(), test.words.size());

  const std::unique_ptr<G2PTransformer> built = build_to_train(options, source, target);
  G2PTransformer& model = *built;
  const ModelConfig& config = model.config;
  nn::Adam optimizer(model.parameters(), {.lr = options.training.lr, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-9});
  const int64_t n_pairs = static_cast<int64_t>(pairs.size());
  const int64_t batches_per_epoch = (n_pairs + options.training.batch_size - 1) / options.training.batch_size;
  const int64_t total_steps = options.training.epochs * batches_per_epoch;
  print_recipe(options, model, n_pairs, batches_per_epoch, total_steps);

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
  // Each rank counted the tokens of its shards; the rate is the whole batches' over rank 0's steps
  // (each of which waited for the other ranks' gradients), as one process's is.
  double tokens = static_cast<double>(task.tokens());
  nn::dist::sum_over_ranks({&tokens, 1}, "the count of the training tokens");
  if (!trained) return 0;  // another rank of a data-parallel job: rank 0 reports
  const std::vector<double>& step_seconds = trained->step_seconds;
  print_table(trained->history);
  const double train_seconds = std::accumulate(step_seconds.begin(), step_seconds.end(), 0.0);
  if (train_seconds > 0)
    fmt::print("training: {:.0f} tokens (source characters + target tokens) in {:.1f} s of steps = {:.0f} tokens/s\n",
               tokens, train_seconds, tokens / train_seconds);
  test_best_epoch(options, *trained, model, test, source, target);
  return 0;
}

}  // namespace ag::g2p
