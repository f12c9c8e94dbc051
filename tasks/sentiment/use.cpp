// `eval sentiment` and `predict sentiment`: a classifier read back from a checkpoint (its vocabulary
// and tokenizer with it), on labelled sentences or on a user's texts.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "engine/autograd.h"
#include "engine/io.h"
#include "engine/json.h"
#include "engine/ops/loss.h"
#include "engine/ops/pointwise.h"
#include "engine/ops/reduce.h"
#include "nn/checkpoint.h"
#include "tasks/common/checkpoint_config.h"
#include "tasks/common/svg.h"
#include "tasks/common/text.h"
#include "tasks/sentiment/sentences.h"
#include "tasks/sentiment/task.h"
#include "tasks/sentiment/uci.h"

namespace ag::sentiment {

namespace {

// The non-empty lines of a text file, one text each.
std::vector<std::string> read_lines(const std::string& path) {
  std::vector<std::string> lines = tasks::split_lines(tasks::read_text_file(path));
  std::erase_if(lines, [](const std::string& line) { return line.empty(); });
  return lines;
}

// The first text's attention weights over its real tokens, tokens on both axes. `weights` are
// (N, T, T), or (N, H, T, T) with several heads: then their mean over the heads.
void write_explanation(const std::string& path, const std::string& text, const Vocabulary& vocab,
                       const Tensor& all_weights) {
  const bool heads = all_weights.dim() == 4;
  const Tensor weights = heads ? mean(all_weights, {1}) : all_weights;  // (N, T, T)
  std::vector<std::string> labels;
  for (const std::string& word : vocab.tokenize(text))
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
    const nlohmann::json& config = checkpoint.settings;
    tasks::check_checkpoint_task(config, "sentiment", path);
    AG_CHECK(checkpoint.metadata.count("vocabulary"), "{}: the checkpoint holds no vocabulary", path);
    const SentimentOptions run = tasks::from_json(sentiment::settings(), config, path, SentimentOptions{});
    const std::string tokenizer = tasks::config_string(config, "tokenizer", path, "seed002");
    try {
      vocab = Vocabulary(parse_json(checkpoint.metadata.at("vocabulary"), "vocabulary").get<std::vector<std::string>>(),
                         tokenizer_named(tokenizer));
      epoch = std::stoll(checkpoint.metadata.count("epoch") ? checkpoint.metadata.at("epoch") : "0");
    } catch (const std::exception& e) {  // json's errors name neither the file nor the setting's meaning
      fail("{}: the checkpoint's vocabulary, tokenizer or epoch is malformed: {}", path, json_error_text(e));
    }
    model = nn::build_from_config(checkpoint, path, [&] { return build_model(run, vocab.size()); });
    nn::load(path, *model);
    model->eval();
  }

  Vocabulary vocab;
  std::unique_ptr<SentimentClassifier> model;
  int64_t epoch = 0;  // the training epoch it was saved after; 0 if unknown
};

// The UCI sentences of one split ("train", "val" or "test").
std::vector<Example> uci_split(const uci::Corpus& corpus, const std::string& split) {
  if (split == "train") return corpus.train;
  if (split == "val") return corpus.validation;
  AG_CHECK(split == "test", "--split: expected train, val or test, got '{}'", split);
  return corpus.test;
}

int eval_uci(const TrainedClassifier& trained, const std::string& split) {
  const EncodedSentences sentences(uci_split(uci::read_corpus(), split), trained.vocab);
  NoGradGuard no_grad;
  const Tensor logits = all_logits(*trained.model, sentences);
  const Tensor labels = sentences.labels(all_rows(sentences.examples.size()));
  fmt::print("UCI {} split: accuracy {:.2f}% ({} of {}), BCE loss {:.4f}\n", split,
             100 * accuracy_of(logits, sentences), correct_count(logits, sentences), sentences.size(),
             binary_cross_entropy_with_logits(logits, labels).item());
  const Predictions predictions = predictions_of(logits, sentences);
  print_report(predictions, split);
  return 0;
}

}  // namespace

int eval(const EvalOptions& options) {
  const TrainedClassifier trained(options.checkpoint);
  if (options.dataset == "uci") return eval_uci(trained, options.split);
  AG_CHECK(options.split == "test",
           "--split {}: seed 002's data has test sentences only (--split is for --dataset uci)", options.split);
  const EncodedSentences sentences(options.data.empty() ? seed_sentences("test.tsv") : read_tsv(options.data),
                                   trained.vocab);
  NoGradGuard no_grad;
  const Tensor logits = all_logits(*trained.model, sentences);
  fmt::print("accuracy {:.1f}% ({} of {}), BCE loss {:.4f} on {}\n", 100 * accuracy_of(logits, sentences),
             correct_count(logits, sentences), sentences.size(),
             binary_cross_entropy_with_logits(logits, sentences.labels(all_rows(sentences.examples.size()))).item(),
             options.data.empty() ? "seed 002's test sentences" : options.data);
  return 0;
}

int predict(const PredictOptions& options) {
  AG_CHECK(options.texts.empty() != options.file.empty(), "predict: give either texts or --file, not {}",
           options.texts.empty() ? "neither" : "both");
  std::vector<std::string> texts = options.file.empty() ? options.texts : read_lines(options.file);
  if (options.file.empty())  // the command line's texts, checked as a file's are
    for (size_t i = 0; i < texts.size(); ++i) texts[i] = tasks::as_text(texts[i], fmt::format("text {}", i + 1));
  AG_CHECK(!texts.empty(), "predict: {} holds no text", options.file);
  const TrainedClassifier trained(options.checkpoint);
  SentimentClassifier& model = *trained.model;
  std::vector<Example> unlabelled;
  for (const std::string& text : texts) unlabelled.push_back({.text = text});
  const EncodedSentences sentences(std::move(unlabelled), trained.vocab);
  NoGradGuard no_grad;
  const Tensor probabilities = sigmoid(all_logits(model, sentences));
  for (size_t i = 0; i < texts.size(); ++i) {
    const double p = probabilities.at({static_cast<int64_t>(i)});
    fmt::print("{:.3f}\t{}\t{}\n", p, p > 0.5 ? "positive" : "negative", texts[i]);
  }
  if (!options.explain.empty()) {
    // The attention module's weights on the first text alone, taken by a forward hook.
    Tensor attention_weights;
    nn::HookHandle capture = model.attention->register_forward_hook([&](nn::Module& attention, const Tensor&) {
      attention_weights = static_cast<seeds::AttentionModule&>(attention).last_attention_weights;
    });
    auto [indices, padding] = sentences.batch({0});
    model(indices, padding);
    capture.remove();
    write_explanation(options.explain, texts[0], trained.vocab, attention_weights);
    fmt::print("wrote {} (attention of the first text)\n", options.explain);
  }
  return 0;
}

}  // namespace ag::sentiment
