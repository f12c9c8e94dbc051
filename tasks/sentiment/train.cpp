// `train sentiment`: the data, the classifier training starts from, the TrainTask, and what the end
// of a run prints and writes; `first_step_loss` (`attograd graph sentiment`).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>
#include <numbers>
#include <numeric>
#include <optional>

#include "engine/autograd.h"
#include "engine/ops/loss.h"
#include "nn/optim.h"
#include "nn/trainer.h"
#include "tasks/common/corpus.h"
#include "tasks/common/memory.h"
#include "tasks/common/run_dir.h"
#include "tasks/common/svg.h"
#include "tasks/common/text.h"
#include "tasks/sentiment/sentences.h"
#include "tasks/sentiment/task.h"
#include "tasks/sentiment/uci.h"

namespace ag::sentiment {

namespace {

// The UCI corpus's embeddings start at N(0, 0.02²), the peer's choice (RESULTS.md §8, note 1);
// seed 002's at nn.Embedding's N(0, 1), as before.
constexpr double kUciEmbeddingStd = 0.02;

// The rows of n that are the shard's.
std::vector<int64_t> shard_rows(const nn::dist::Shard& shard, int64_t n) {
  std::vector<int64_t> rows(static_cast<size_t>(shard.end(n) - shard.begin(n)));
  std::iota(rows.begin(), rows.end(), shard.begin(n));
  return rows;
}

bool is_uci(const SentimentOptions& o) { return o.dataset == "uci"; }

bool batch_by_length(const SentimentOptions& o) {
  AG_CHECK(o.batching == "length" || o.batching == "shuffled", "--batching: expected length or shuffled, got '{}'",
           o.batching);
  return o.batching == "length";
}

nn::BestEpochRule best_epoch_rule(const SentimentOptions& options) {
  if (is_uci(options)) return {.metric = "val_accuracy", .higher_is_better = true};
  return {};
}

class SentimentTask : public nn::TrainTask {
 public:
  // As the options ask: seed 002's data (and a TSV file's) also reports the accuracy on the whole
  // training set every epoch; the UCI corpus keeps the epoch of the best validation accuracy;
  // --batching length puts sentences of similar length in a batch (batches_by_length).
  SentimentTask(SentimentClassifier& model, const EncodedSentences& train, const EncodedSentences& validation,
                const SentimentOptions& options)
      : model_(model),
        train_(train),
        validation_(validation),
        track_train_accuracy_(!is_uci(options)),
        best_epoch_rule_(sentiment::best_epoch_rule(options)),
        batch_by_length_(batch_by_length(options)) {}

  int64_t train_size() const override { return train_.size(); }

  Tensor loss(const std::vector<int64_t>& batch) override {
    auto [indices, padding] = train_.batch(batch);
    return binary_cross_entropy_with_logits(model_(indices, padding), train_.labels(batch));
  }

  // Over the shard's sentences of each set.
  nn::MetricSums evaluate(const nn::dist::Shard& shard) override {
    nn::MetricSums metrics;
    if (track_train_accuracy_) {
      const std::vector<int64_t> rows = shard_rows(shard, train_.size());
      metrics["train_accuracy"] = {static_cast<double>(correct_count(logits_of(model_, train_, rows), train_, rows)),
                                   static_cast<double>(rows.size())};
    }
    if (validation_.size() > 0) {
      const std::vector<int64_t> rows = shard_rows(shard, validation_.size());
      const Tensor logits = logits_of(model_, validation_, rows);
      const Tensor loss_sum =
          rows.empty() ? scalar(0) : binary_cross_entropy_with_logits(logits, validation_.labels(rows), Reduction::sum);
      metrics["val_loss"] = {loss_sum.item(), static_cast<double>(rows.size())};
      metrics["val_accuracy"] = {static_cast<double>(correct_count(logits, validation_, rows)),
                                 static_cast<double>(rows.size())};
    }
    return metrics;
  }

  nn::BestEpochRule best_epoch_rule() const override { return best_epoch_rule_; }

  // By length: the shuffled sentences stable-sorted by length, cut into batch_size rows, the
  // batches shuffled (the usual bucketing: little padding, still a random order of batches).
  std::vector<std::vector<int64_t>> batches(const std::vector<int64_t>& shuffled, int64_t batch_size,
                                            Generator& shuffle) override {
    if (!batch_by_length_) return TrainTask::batches(shuffled, batch_size, shuffle);
    const BatchLimits limits{.max_rows = static_cast<size_t>(batch_size), .max_cells = SIZE_MAX};
    std::vector<std::vector<int64_t>> batches = batches_by_length(shuffled, train_.lengths, limits);
    ag::shuffle(batches, shuffle);
    return batches;
  }

 private:
  SentimentClassifier& model_;
  const EncodedSentences& train_;
  const EncodedSentences& validation_;
  bool track_train_accuracy_;
  nn::BestEpochRule best_epoch_rule_;
  bool batch_by_length_;
};

// The lr of each step, counted from 0: constant, or a half cosine from lr to 0 over the run's
// total_steps (torch's CosineAnnealingLR with T_max = total_steps, stepped every batch).
std::function<double(int64_t)> lr_schedule(const SentimentOptions& o, int64_t total_steps) {
  AG_CHECK(o.lr_schedule == "constant" || o.lr_schedule == "cosine",
           "--lr-schedule: expected constant or cosine, got '{}'", o.lr_schedule);
  if (o.lr_schedule == "constant") return {};
  return [lr = o.training.lr, total = static_cast<double>(total_steps)](int64_t step) {
    return 0.5 * lr * (1 + std::cos(std::numbers::pi * static_cast<double>(step) / total));
  };
}

ClassifierConfig classifier_config(const SentimentOptions& o, int64_t vocab_size) {
  return {.vocab_size = vocab_size,
          .dim = o.dim,
          .heads = o.heads,
          .dropout = o.dropout,
          .embedding_std = is_uci(o) ? kUciEmbeddingStd : 1.0};
}

// The run's config: the table's settings and what the task derives from them and the data.
nlohmann::json run_settings(SentimentOptions o, const Vocabulary& vocab) {
  // The file's content as read, so --resume and eval notice a file rewritten in place (the UCI
  // corpus is pinned: tasks::read_corpus checks it).
  const std::string sha256 = o.data.empty() ? "" : tasks::data_file_sha256(o.data);
  o.data = tasks::recorded_data_path(o.data);
  nlohmann::json config = tasks::to_json(settings(), o);
  config.update({{"task", "sentiment"},
                 {"model", o.heads > 0 ? "multihead" : "selfattn"},
                 {"vocab_size", vocab.size()},
                 {"optimizer", "AdamW"}});
  if (!sha256.empty()) config["data_sha256"] = sha256;
  if (is_uci(o)) config.update({{"tokenizer", tokenizer_name(vocab.tokenizer())}, {"embedding_std", kUciEmbeddingStd}});
  return config;
}

void print_test_sentences(SentimentClassifier& model, const Vocabulary& vocab) {
  const EncodedSentences test(seed_sentences("test.tsv"), vocab);
  NoGradGuard no_grad;
  const Predictions predictions = predictions_of(all_logits(model, test), test);
  int correct = 0;
  fmt::print("test sentences (seed 002):\n");
  for (size_t i = 0; i < test.examples.size(); ++i) {
    const Example& e = test.examples[i];
    const double p = predictions.probabilities[i];
    const bool right = (p > 0.5) == e.label;
    correct += right;
    fmt::print("  {:.3f} {} {:<28} (expected {}){}\n", p, p > 0.5 ? "positive" : "negative", e.text,
               e.label ? "positive" : "negative", right ? "" : "  ✗");
  }
  fmt::print("{} of {} test sentences right\n", correct, test.examples.size());
}

// The training, validation and test sentences (seed 002's, --data's or the UCI corpus's), the
// vocabulary of the training ones, and for the UCI corpus the records dropped per source.
struct TrainingData {
  std::vector<Example> train, validation, test;
  Vocabulary vocab;
  std::map<std::string, int64_t> dropped;
};

TrainingData seed_or_tsv_data(const SentimentOptions& options) {
  AG_CHECK(options.val_fraction >= 0 && options.val_fraction < 1, "--val-fraction must be in [0, 1), got {}",
           options.val_fraction);
  std::vector<Example> examples = options.data.empty() ? seed_sentences("train.tsv") : read_tsv(options.data);
  const auto held_out = static_cast<size_t>(std::floor(options.val_fraction * static_cast<double>(examples.size())));
  AG_CHECK(held_out < examples.size(), "--val-fraction {} leaves no training examples", options.val_fraction);
  std::vector<Example> validation(examples.end() - static_cast<std::ptrdiff_t>(held_out), examples.end());
  examples.resize(examples.size() - held_out);
  Vocabulary vocab(examples, Tokenizer::seed002, options.min_count);
  return {std::move(examples), std::move(validation), {}, std::move(vocab), {}};
}

TrainingData training_data(const SentimentOptions& options) {
  AG_CHECK(options.dataset == "seed" || options.dataset == "uci", "--dataset: expected seed or uci, got '{}'",
           options.dataset);
  if (!is_uci(options)) return seed_or_tsv_data(options);
  AG_CHECK(options.data.empty() && options.val_fraction == 0,
           "--dataset uci has its own split: --data and --val-fraction are for TSV files");
  uci::Corpus corpus = uci::read_corpus();
  Vocabulary vocab(corpus.train, Tokenizer::words, options.min_count);
  return {std::move(corpus.train), std::move(corpus.validation), std::move(corpus.test), std::move(vocab),
          std::move(corpus.dropped)};
}

// The share of the words of `examples` that are not in the vocabulary.
double unknown_share(const std::vector<Example>& examples, const Vocabulary& vocab) {
  int64_t words = 0, unknown = 0;
  for (const Example& e : examples)
    for (const std::string& w : vocab.tokenize(e.text)) {
      ++words;
      unknown += vocab.index(w) == Vocabulary::kUnk;
    }
  return static_cast<double>(unknown) / static_cast<double>(std::max<int64_t>(1, words));
}

void print_uci_data(const TrainingData& data) {
  std::string dropped;
  for (const auto& [source, count] : data.dropped)
    dropped += fmt::format("{}{} from {}.json", dropped.empty() ? "" : ", ", count, source);
  fmt::print("UCI sentiment sentences: dropped records with an empty text or no class 0/1: {}\n", dropped);
  fmt::print("hash split (FNV-1a 64 of the text % 10: 0 test, 1 validation, else train):\n");
  fmt::print("  {:<8} {:>6} {:>6} {:>6}\n", "source", "train", "val", "test");
  std::vector<std::string> sources(uci::kSources.begin(), uci::kSources.end());
  sources.push_back("");
  for (const std::string& source : sources)
    fmt::print("  {:<8} {:>6} {:>6} {:>6}\n", source.empty() ? "total" : source, count_from(data.train, source),
               count_from(data.validation, source), count_from(data.test, source));
  fmt::print(
      "vocabulary: {} training words + <pad> <unk>; <unk> is {:.1f}% of validation words, {:.1f}% of test words\n",
      data.vocab.size() - 2, 100 * unknown_share(data.validation, data.vocab),
      100 * unknown_share(data.test, data.vocab));
}

// The train loss and every metric the task reported, per epoch.
void write_losses_svg(const SentimentOptions& options, tasks::RunDir& folder,
                      const std::vector<nn::EpochRecord>& history) {
  const std::map<std::string, std::string> names = {
      {"train_accuracy", "train accuracy"}, {"val_loss", "validation loss"}, {"val_accuracy", "validation accuracy"}};
  std::vector<plot::Series> series = {{"train loss", {}}};
  for (const auto& r : history) series[0].values.push_back(r.train_loss);
  for (const auto& [metric, _] : history.back().metrics) {
    series.push_back({names.count(metric) ? names.at(metric) : metric, {}});
    for (const auto& r : history) series.back().values.push_back(r.metrics.at(metric));
  }
  folder.write("losses.svg", plot::line_chart(is_uci(options) ? "sentiment (UCI): training" : "sentiment: training",
                                              "epoch", "BCE loss / accuracy", series));
}

// The end of a UCI run: the best epoch's checkpoint on the test split, printed and in report.svg.
void report_uci(const SentimentOptions& options, const tasks::TrainedRun& trained, SentimentClassifier& model,
                const Vocabulary& vocab, const std::vector<Example>& test) {
  tasks::RunDir& folder = *trained.folder;
  const std::string best = folder.where(nn::RunFile::best_checkpoint);
  model.load_state_dict(trained.best->state);  // kept in memory: best is not read back
  model.eval();
  const EncodedSentences sentences(test, vocab);
  NoGradGuard no_grad;
  const Predictions predictions = predictions_of(all_logits(model, sentences), sentences);
  fmt::print("best epoch (highest validation accuracy, the earliest on ties): {} -> {}\n", trained.best->epoch, best);
  print_report(predictions, "test");
  folder.write("report.svg",
               report_svg(predictions, fmt::format("sentiment on UCI's review sentences: test accuracy of "
                                                   "epoch {} (best on validation), seed {}",
                                                   trained.best->epoch, options.training.seed)));
}

// The classifier training starts from (build_model), within the memory bound
// (tasks::build_within_memory) as every task's model.
std::unique_ptr<SentimentClassifier> build_to_train(const SentimentOptions& options, const Vocabulary& vocab) {
  return tasks::build_within_memory(
      "sentiment",
      fmt::format("--dim {}, --heads {}, the vocabulary's {} words", options.dim, options.heads, vocab.size()),
      options.training.max_memory_mb, [&] { return build_model(options, vocab.size()); });
}

}  // namespace

std::unique_ptr<SentimentClassifier> build_model(const SentimentOptions& options, int64_t vocab_size) {
  manual_seed(options.training.seed);
  return std::make_unique<SentimentClassifier>(classifier_config(options, vocab_size));
}

// Note [memory estimate] for the classifier, in f32 values: a step keeps about 12·B·T·D (embeddings,
// q, k, v, attention output, their gradients) and 3·B·H·T² (scores, weights, their gradient), T
// the longest sentence; evaluation runs in batches of at most BatchLimits' rows, without a graph.
tasks::MemoryEstimate memory_estimate(const SentimentOptions& o, const SentimentClassifier& model,
                                      const EncodedSentences& train, const EncodedSentences& validation) {
  size_t longest = 1;
  for (const EncodedSentences* set : {&train, &validation})
    for (const size_t length : set->lengths) longest = std::max(longest, length);
  const auto B = static_cast<double>(std::min<size_t>(o.training.batch_size, train.size())) /
                 static_cast<double>(o.training.micro_batches);
  const auto T = static_cast<double>(longest), D = static_cast<double>(o.dim),
             H = static_cast<double>(std::max<int64_t>(1, o.heads)),
             rows = static_cast<double>(std::min<size_t>(BatchLimits{}.max_rows, validation.examples.size()));
  return {.task = "sentiment",
          .parameters = model.num_parameters(),
          .step_bytes = 4 * (12 * B * T * D + 3 * B * H * T * T),
          .step_settings = fmt::format("--batch-size {} x the longest sentence's {} words (with --dim {}, --heads {})",
                                       o.training.batch_size, longest, o.dim, o.heads),
          .eval_bytes = 4 * (6 * rows * T * D + 2 * rows * H * T * T),
          .eval_settings = fmt::format("{} sentences of up to {} words", rows, longest)};
}

StepLoss first_step_loss(const SentimentOptions& options, const tasks::BeforeForward& before_forward) {
  const TrainingData data = training_data(options);
  StepLoss step{build_to_train(options, data.vocab), {}};
  const EncodedSentences train(data.train, data.vocab), validation(data.validation, data.vocab);
  SentimentTask task(*step.model, train, validation, options);
  if (before_forward) before_forward(step.model->named_parameters());
  step.loss = task.loss(tasks::first_batch(task, options.training.batch_size));
  return step;
}

int train(const SentimentOptions& options) {
  const TrainingData data = training_data(options);
  if (is_uci(options)) print_uci_data(data);
  const Vocabulary& vocab = data.vocab;
  const std::unique_ptr<SentimentClassifier> built = build_to_train(options, vocab);
  SentimentClassifier& model = *built;
  nn::AdamW optimizer(model.parameters(), {.lr = options.training.lr, .weight_decay = options.weight_decay});
  const EncodedSentences train(data.train, vocab), validation(data.validation, vocab);
  tasks::check_memory(memory_estimate(options, model, train, validation), options.training.max_memory_mb);
  SentimentTask task(model, train, validation, options);
  const std::optional<tasks::TrainedRun> trained = tasks::run_training(
      model, optimizer, task, options.training, tasks::run_config(run_settings(options, vocab), settings()),
      {{"vocabulary", nlohmann::json(vocab.words()).dump()}}, [&](nn::TrainerOptions& t) {
        // An epoch is ceil(n / batch_size) steps, by length as shuffled (each cut at batch_size rows).
        const int64_t steps = (task.train_size() + t.batch_size - 1) / t.batch_size;
        t.lr_schedule = lr_schedule(options, t.epochs * steps);
      });
  if (!trained) return 0;  // another rank of a data-parallel job: rank 0 reports
  const std::vector<nn::EpochRecord>& history = trained->history;
  write_losses_svg(options, *trained->folder, history);
  const nn::EpochRecord& last = history.back();
  if (is_uci(options)) {
    fmt::print("epoch {}: train loss {:.4f}; validation loss {:.4f}, accuracy {:.2f}%\n", last.epoch, last.train_loss,
               last.metrics.at("val_loss"), 100 * last.metrics.at("val_accuracy"));
    report_uci(options, *trained, model, vocab, data.test);
    tasks::print_files_written(options.training.out, {"losses.svg", "report.svg"});
    return 0;
  }
  fmt::print("epoch {}: train loss {:.4f}, train accuracy {:.1f}%\n", last.epoch, last.train_loss,
             100 * last.metrics.at("train_accuracy"));
  if (last.metrics.count("val_accuracy"))
    fmt::print("validation: loss {:.4f}, accuracy {:.1f}%\n", last.metrics.at("val_loss"),
               100 * last.metrics.at("val_accuracy"));
  model.eval();
  print_test_sentences(model, vocab);
  tasks::print_files_written(options.training.out, {"losses.svg"});
  return 0;
}

}  // namespace ag::sentiment
