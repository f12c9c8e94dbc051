// `train sentiment`'s settings, one row each (tasks/common/settings.h); with --dataset uci the
// settings not given take its recipe's values (tasks/README.md), and its own settings are written.
#include "tasks/sentiment/task.h"

namespace ag::sentiment {

namespace {

bool uci(const SentimentOptions& o) { return o.dataset == "uci"; }

}  // namespace

const std::vector<tasks::Setting<SentimentOptions>>& settings() {
  using O = SentimentOptions;
  using tasks::Accepts;
  const auto carried = tasks::OnResume::carried_over;
  static const std::vector<tasks::Setting<O>> table = [&] {
    std::vector<tasks::Setting<O>> rows = tasks::lift_training<O>(tasks::common_settings("AdamW learning rate"));
    const std::vector<tasks::Setting<O>> own = {
        {"model", "", "--heads (0: selfattn, N: multihead)"},
        {"dataset",
         "--dataset",
         "seed: seed 002's 50 sentences; uci: UCI's 3,000 Amazon, IMDB and Yelp review sentences (hash split; its "
         "defaults: --epochs 20 --lr 0.002 --lr-schedule cosine --batch-size 32 --dim 64 --weight-decay 0.01 "
         "--dropout 0.7 --batching length --out runs/sentiment-uci)",
         [](O& o) { return &o.dataset; },
         {Accepts::choice, 0, 0, {"seed", "uci"}},
         carried,
         "",
         uci},
        {.key = "data",
         .flag = "--data",
         .help = "Training data: label<TAB>text lines (default: seed 002's)",
         .field = [](O& o) { return &o.data; },
         .accepts = {Accepts::existing_file},
         .excludes = "--dataset"},
        {"data_sha256", "", "--data, whose content differs"},
        {"val_fraction",
         "--val-fraction",
         "Share of --data held out for validation",
         [](O& o) { return &o.val_fraction; },
         {Accepts::number, 0, 0.9}},
        {"vocab_size", "", "--data"},
        {"dim", "--dim", "Embedding and attention width", [](O& o) { return &o.dim; }, {Accepts::whole, 1, 4096}},
        {"heads",
         "--heads",
         "0: SelfAttention; N: seed 003's MultiHeadAttention (causal) with N heads dividing --dim",
         [](O& o) { return &o.heads; },
         {Accepts::whole, 0, 4096}},
        {"optimizer", "", "the task (always AdamW)"},
        {"weight_decay",
         "--weight-decay",
         "AdamW's decoupled weight decay",
         [](O& o) { return &o.weight_decay; },
         {Accepts::number, 0, 1}},
        {"lr_schedule",
         "--lr-schedule",
         "constant, or cosine: each step's lr falls from --lr to 0 along a half cosine over the run (--dataset uci's "
         "default)",
         [](O& o) { return &o.lr_schedule; },
         {Accepts::choice, 0, 0, {"constant", "cosine"}},
         carried,
         "",
         [](const O& o) { return uci(o) || o.lr_schedule != "constant"; }},
        // Seed 002's config stays as it was: these are written with --dataset uci only.
        {"tokenizer", "", "--dataset"},
        {"min_count",
         "--min-count",
         "Times a word must occur in the training sentences to enter the vocabulary",
         [](O& o) { return &o.min_count; },
         {Accepts::whole, 1, 1e6},
         carried,
         "",
         uci},
        {"dropout",
         "--dropout",
         "Dropout on the embeddings while training",
         [](O& o) { return &o.dropout; },
         {Accepts::number, 0, 0.9},
         carried,
         "",
         uci},
        {"embedding_std", "", "--dataset"},
        {"batching",
         "--batching",
         "shuffled: batches of shuffled sentences; length: of sentences of similar length, in a shuffled order "
         "(--dataset uci's default)",
         [](O& o) { return &o.batching; },
         {Accepts::choice, 0, 0, {"shuffled", "length"}},
         carried,
         "",
         uci}};
    rows.insert(rows.end(), own.begin(), own.end());
    return rows;
  }();
  return table;
}

SentimentOptions dataset_defaults(const SentimentOptions& chosen) {
  SentimentOptions o = chosen;
  if (!uci(chosen)) return o;
  o.training.epochs = 20;
  o.training.lr = 2e-3;
  o.training.batch_size = 32;
  o.training.out = "runs/sentiment-uci";
  o.dim = 64;
  o.weight_decay = 0.01;
  o.batching = "length";
  o.dropout = 0.7;
  o.lr_schedule = "cosine";
  return o;
}

}  // namespace ag::sentiment
