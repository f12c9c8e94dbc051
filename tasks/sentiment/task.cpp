#include "tasks/sentiment/task.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "nn/checkpoint.h"
#include "nn/optim.h"
#include "nn/trainer.h"
#include "tasks/common/embedded.h"
#include "tasks/common/svg.h"
#include "tasks/sentiment/data.h"
#include "tasks/sentiment/model.h"

namespace ag::sentiment {

namespace {

// Seed 002's sentences, built into the program: "train.tsv" or "test.tsv".
std::vector<Example> seed_sentences(const std::string& file) {
  const std::string name = "sentiment/" + file;
  return parse_tsv(std::string(tasks::embedded_file(name)), name + " (built in)");
}

std::vector<std::string> texts_of(const std::vector<Example>& examples, const std::vector<int64_t>& rows) {
  std::vector<std::string> texts;
  for (int64_t i : rows) texts.push_back(examples[i].text);
  return texts;
}

Tensor labels_of(const std::vector<Example>& examples, const std::vector<int64_t>& rows) {
  std::vector<double> labels;
  for (int64_t i : rows) labels.push_back(examples[i].label);
  return tensor(labels, {static_cast<int64_t>(labels.size())});
}

std::vector<int64_t> all_rows(size_t n) {
  std::vector<int64_t> rows(n);
  for (size_t i = 0; i < n; ++i) rows[i] = static_cast<int64_t>(i);
  return rows;
}

class SentimentTask : public nn::TrainTask {
 public:
  SentimentTask(SentimentClassifier& model, const Vocabulary& vocab, std::vector<Example> train,
                std::vector<Example> validation)
      : model_(model), vocab_(vocab), train_(std::move(train)), validation_(std::move(validation)) {}

  int64_t train_size() const override { return static_cast<int64_t>(train_.size()); }

  Tensor loss(const std::vector<int64_t>& batch) override {
    return binary_cross_entropy_with_logits(logits(texts_of(train_, batch)), labels_of(train_, batch));
  }

  std::map<std::string, double> evaluate() override {
    std::map<std::string, double> metrics = {{"train_accuracy", accuracy(train_)}};
    if (!validation_.empty()) {
      const std::vector<int64_t> rows = all_rows(validation_.size());
      metrics["val_loss"] =
          binary_cross_entropy_with_logits(logits(texts_of(validation_, rows)), labels_of(validation_, rows)).item();
      metrics["val_accuracy"] = accuracy(validation_);
    }
    return metrics;
  }

  Tensor logits(const std::vector<std::string>& texts) {
    auto [indices, padding] = vocab_.encode(texts);
    return model_(indices, padding);
  }

  double accuracy(const std::vector<Example>& examples) {
    const Tensor out = logits(texts_of(examples, all_rows(examples.size())));
    int correct = 0;
    for (size_t i = 0; i < examples.size(); ++i)
      correct += (out.at({static_cast<int64_t>(i)}) > 0) == examples[i].label;
    return static_cast<double>(correct) / static_cast<double>(examples.size());
  }

 private:
  SentimentClassifier& model_;
  const Vocabulary& vocab_;
  std::vector<Example> train_;
  std::vector<Example> validation_;
};

std::string task_settings(const SentimentOptions& o, int64_t vocab_size) {
  nlohmann::json settings;
  settings["task"] = "sentiment";
  settings["model"] = o.heads > 0 ? "multihead" : "selfattn";
  settings["heads"] = o.heads;
  settings["vocab_size"] = vocab_size;
  settings["dim"] = o.dim;
  settings["data"] = o.data;
  settings["val_fraction"] = o.val_fraction;
  settings["optimizer"] = "AdamW";
  settings["weight_decay"] = o.weight_decay;
  return settings.dump();
}

void print_test_sentences(SentimentTask& task) {
  const std::vector<Example> test = seed_sentences("test.tsv");
  NoGradGuard no_grad;
  const Tensor probabilities = sigmoid(task.logits(texts_of(test, all_rows(test.size()))));
  int correct = 0;
  fmt::print("test sentences (seed 002):\n");
  for (size_t i = 0; i < test.size(); ++i) {
    const double p = probabilities.at({static_cast<int64_t>(i)});
    const bool right = (p > 0.5) == test[i].label;
    correct += right;
    fmt::print("  {:.3f} {} {:<28} (expected {}){}\n", p, p > 0.5 ? "positive" : "negative", test[i].text,
               test[i].label ? "positive" : "negative", right ? "" : "  ✗");
  }
  fmt::print("{} of {} test sentences right\n", correct, test.size());
}

}  // namespace

namespace {

std::vector<std::string> read_lines(const std::string& path) {
  AG_CHECK(!std::filesystem::is_directory(path), "{}: is a directory, expected a text file", path);
  AG_CHECK(std::filesystem::is_regular_file(path), "{}: is not a regular file, expected a text file", path);
  std::ifstream in(path);
  AG_CHECK(in.good(), "{}: cannot open the text file", path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

// The first text's attention weights over its real tokens, tokens on both axes. `weights` are
// (N, T, T), or (N, H, T, T) with several heads: then their mean over the heads.
void write_explanation(const std::string& path, const std::string& text, const Vocabulary& vocab,
                       const Tensor& all_weights) {
  const bool heads = all_weights.dim() == 4;
  const Tensor weights = heads ? mean(all_weights, {1}) : all_weights;  // (N, T, T)
  std::vector<std::string> labels;
  for (const std::string& word : tokenize(text))
    labels.push_back(vocab.index(word) == Vocabulary::kUnk ? word + " (unk)" : word);
  if (labels.empty()) labels.push_back("<unk>");
  const auto tokens = static_cast<int64_t>(labels.size());
  std::vector<double> cells;
  for (int64_t i = 0; i < tokens; ++i)
    for (int64_t j = 0; j < tokens; ++j) cells.push_back(weights.at({0, i, j}));
  write_file_atomically(
      path, plot::heatmap(fmt::format("attention weights{}: \"{}\" (row: query, column: key)",
                                      heads ? fmt::format(" (mean of {} heads)", all_weights.size(1)) : "", text),
                          labels, labels, cells));
}

// A classifier and its vocabulary as `train sentiment` saved them, in eval mode.
struct TrainedClassifier {
  explicit TrainedClassifier(const std::string& path) {
    const nn::Checkpoint checkpoint = nn::read_checkpoint(path);
    const nlohmann::json config = nlohmann::json::parse(checkpoint.config());
    AG_CHECK(config.value("task", "") == "sentiment", "{}: a checkpoint of task '{}', expected 'sentiment'", path,
             config.value("task", "?"));
    AG_CHECK(checkpoint.metadata.count("vocabulary"), "{}: the checkpoint holds no vocabulary", path);
    try {
      vocab = Vocabulary(nlohmann::json::parse(checkpoint.metadata.at("vocabulary")).get<std::vector<std::string>>());
      model = std::make_unique<SentimentClassifier>(vocab.size(), config.at("dim").get<int64_t>(),
                                                    config.value("heads", int64_t{0}));
    } catch (const std::exception& e) {  // json's errors name neither the file nor the setting's meaning
      fail("{}: the checkpoint's vocabulary or model settings (dim, heads) are malformed: {}", path, e.what());
    }
    nn::load(path, *model);
    model->eval();
  }

  Vocabulary vocab;
  std::unique_ptr<SentimentClassifier> model;
};

}  // namespace

int eval(const EvalOptions& options) {
  const TrainedClassifier trained(options.checkpoint);
  const std::vector<Example> examples = options.data.empty() ? seed_sentences("test.tsv") : read_tsv(options.data);
  const std::vector<int64_t> rows = all_rows(examples.size());
  NoGradGuard no_grad;
  auto [indices, padding] = trained.vocab.encode(texts_of(examples, rows));
  const Tensor logits = (*trained.model)(indices, padding);
  int correct = 0;
  for (int64_t i : rows) correct += (logits.at({i}) > 0) == examples[i].label;
  fmt::print("accuracy {:.1f}% ({} of {}), BCE loss {:.4f} on {}\n", 100.0 * correct / static_cast<double>(rows.size()),
             correct, rows.size(), binary_cross_entropy_with_logits(logits, labels_of(examples, rows)).item(),
             options.data.empty() ? "seed 002's test sentences" : options.data);
  return 0;
}

int predict(const PredictOptions& options) {
  AG_CHECK(options.texts.empty() != options.file.empty(), "predict: give either texts or --file, not {}",
           options.texts.empty() ? "neither" : "both");
  const std::vector<std::string> texts = options.file.empty() ? options.texts : read_lines(options.file);
  AG_CHECK(!texts.empty(), "predict: {} holds no text", options.file);
  const TrainedClassifier trained(options.checkpoint);
  const Vocabulary& vocab = trained.vocab;
  SentimentClassifier& model = *trained.model;
  NoGradGuard no_grad;
  auto [indices, padding] = vocab.encode(texts);
  // The attention module's weights as it computed them, taken by a forward hook.
  Tensor attention_weights;
  nn::HookHandle capture = model.attention->register_forward_hook([&](nn::Module& attention, const Tensor&) {
    attention_weights = static_cast<nn::AttentionModule&>(attention).last_attention_weights;
  });
  const Tensor probabilities = sigmoid(model(indices, padding));
  capture.remove();
  for (size_t i = 0; i < texts.size(); ++i) {
    const double p = probabilities.at({static_cast<int64_t>(i)});
    fmt::print("{:.3f}\t{}\t{}\n", p, p > 0.5 ? "positive" : "negative", texts[i]);
  }
  if (!options.explain.empty()) {
    write_explanation(options.explain, texts[0], vocab, attention_weights);
    fmt::print("wrote {} (attention of the first text)\n", options.explain);
  }
  return 0;
}

namespace {

// The training and validation examples of --data (or seed 002's) and the vocabulary of the
// training ones.
struct TrainingData {
  std::vector<Example> train, validation;
  Vocabulary vocab;
};

TrainingData training_data(const SentimentOptions& options) {
  AG_CHECK(options.val_fraction >= 0 && options.val_fraction < 1, "--val-fraction must be in [0, 1), got {}",
           options.val_fraction);
  std::vector<Example> examples = options.data.empty() ? seed_sentences("train.tsv") : read_tsv(options.data);
  const auto held_out = static_cast<size_t>(std::floor(options.val_fraction * static_cast<double>(examples.size())));
  AG_CHECK(held_out < examples.size(), "--val-fraction {} leaves no training examples", options.val_fraction);
  std::vector<Example> validation(examples.end() - static_cast<std::ptrdiff_t>(held_out), examples.end());
  examples.resize(examples.size() - held_out);
  Vocabulary vocab(examples);
  return {std::move(examples), std::move(validation), std::move(vocab)};
}

}  // namespace

StepLoss first_step_loss(const SentimentOptions& options) {
  const TrainingData data = training_data(options);
  manual_seed(options.training.seed);
  StepLoss step{std::make_unique<SentimentClassifier>(data.vocab.size(), options.dim, options.heads), {}};
  SentimentTask task(*step.model, data.vocab, data.train, data.validation);
  const auto batch = std::min<int64_t>(options.training.batch_size, task.train_size());
  std::vector<int64_t> rows(static_cast<size_t>(batch));
  std::iota(rows.begin(), rows.end(), 0);
  step.loss = task.loss(rows);
  return step;
}

int train(const SentimentOptions& options) {
  const TrainingData data = training_data(options);
  const std::vector<Example>& examples = data.train;
  const Vocabulary& vocab = data.vocab;
  manual_seed(options.training.seed);
  SentimentClassifier model(vocab.size(), options.dim, options.heads);
  nn::AdamW optimizer(model.parameters(), {.lr = options.training.lr, .weight_decay = options.weight_decay});
  SentimentTask task(model, vocab, examples, data.validation);
  const std::vector<nn::EpochRecord> history =
      tasks::run_training(model, optimizer, task, options.training,
                          tasks::config_json(options.training, task_settings(options, vocab.size())),
                          {{"vocabulary", nlohmann::json(vocab.words()).dump()}});

  std::vector<double> losses, accuracies;
  for (const auto& r : history) {
    losses.push_back(r.train_loss);
    accuracies.push_back(r.metrics.at("train_accuracy"));
  }
  write_file_atomically(options.training.out + "/losses.svg",
                        plot::line_chart("sentiment: training", "epoch", "BCE loss / accuracy",
                                         {{"train loss", losses}, {"train accuracy", accuracies}}));
  const nn::EpochRecord& last = history.back();
  fmt::print("epoch {}: train loss {:.4f}, train accuracy {:.1f}%\n", last.epoch, last.train_loss,
             100 * last.metrics.at("train_accuracy"));
  if (last.metrics.count("val_accuracy"))
    fmt::print("validation: loss {:.4f}, accuracy {:.1f}%\n", last.metrics.at("val_loss"),
               100 * last.metrics.at("val_accuracy"));
  model.eval();
  print_test_sentences(task);
  fmt::print("wrote {}/config.json, metrics.csv, losses.svg, last.safetensors, best.safetensors\n",
             options.training.out);
  return 0;
}

}  // namespace ag::sentiment
