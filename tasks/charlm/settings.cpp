// `train charlm`'s settings, one row each (tasks/common/settings.h): nanoGPT's names in config.json
// (n_layer, n_head, n_embd), the flags a reader of nanoGPT's train.py expects.
#include "tasks/charlm/task.h"

namespace ag::charlm {

const std::vector<tasks::Setting<CharLMOptions>>& settings() {
  using O = CharLMOptions;
  using tasks::Accepts;
  const Accepts count{Accepts::whole, 1, 1e6}, fraction{Accepts::number, 0, 1};
  static const std::vector<tasks::Setting<O>> table = [&] {
    std::vector<tasks::Setting<O>> rows =
        tasks::lift_training<O>(tasks::common_settings("Peak AdamW learning rate", /*epochs_flag=*/false));
    const std::vector<tasks::Setting<O>> own = {
        {"model", "", "the task (always gpt)"},
        {"data",
         "--data",
         "A UTF-8 text file (default: Moby-Dick, fetched by tools/fetch_data.sh)",
         [](O& o) { return &o.data; },
         {Accepts::path}},
        {"data_chars", "", "--data"},
        {"data_sha256", "", "--data, whose content differs"},
        {"vocab_size", "", "--data", [](O& o) { return &o.model.vocab_size; }},
        {"iters", "--iters", "Optimizer steps", [](O& o) { return &o.iters; }, count, tasks::OnResume::may_change,
         "may grow past the evaluation intervals done x eval_interval; the cosine schedule then decays to the new "
         "end, from the next step; recorded"},
        {"eval_interval", "--eval-interval", "Iterations between validation losses and checkpoints",
         [](O& o) { return &o.eval_interval; }, count},
        {"warmup_iters",
         "--warmup-iters",
         "Linear warm-up, then cosine decay to --min-lr",
         [](O& o) { return &o.warmup_iters; },
         {Accepts::whole, 0, 1e6}},
        {"min_lr",
         "--min-lr",
         "Learning rate at the last iteration",
         [](O& o) { return &o.min_lr; },
         {Accepts::positive}},
        {"weight_decay", "--weight-decay", "AdamW's decoupled weight decay (matrices only)",
         [](O& o) { return &o.weight_decay; }, fraction},
        {"beta2",
         "--beta2",
         "AdamW's beta2, the decay of its squared-gradient average (nanoGPT's beta2)",
         [](O& o) { return &o.beta2; },
         {Accepts::number, 0, 0.9999},
         tasks::OnResume::carried_over,
         "",
         [](const O& o) { return o.beta2 != O{}.beta2; }},  // at its default, as runs made before it
        {"grad_clip",
         "--grad-clip",
         "Clip the gradients' global norm to this (0: no clipping)",
         [](O& o) { return &o.grad_clip; },
         {Accepts::number, 0, 1e6}},
        {"optimizer", "", "the task (always AdamW)"},
        {"block_size",
         "--block-size",
         "Context length (characters)",
         [](O& o) { return &o.model.block_size; },
         {Accepts::whole, 1, 4096}},
        {"n_layer", "--layers", "Transformer blocks", [](O& o) { return &o.model.n_layer; }, {Accepts::whole, 1, 64}},
        {"n_head",
         "--heads",
         "Attention heads (dividing --width)",
         [](O& o) { return &o.model.n_head; },
         {Accepts::whole, 1, 256}},
        {"n_embd",
         "--width",
         "Embedding width (n_embd)",
         [](O& o) { return &o.model.n_embd; },
         {Accepts::whole, 1, 8192}},
        {"dropout",
         "--dropout",
         "Dropout (embeddings, attention weights, residuals)",
         [](O& o) { return &o.model.dropout; },
         {Accepts::number, 0, 0.9}},
        {"bias", "--bias", "Biases in the Linears and LayerNorms (nanoGPT's train.py: none)",
         [](O& o) { return &o.model.bias; }}};
    rows.insert(rows.end(), own.begin(), own.end());
    return rows;
  }();
  return table;
}

}  // namespace ag::charlm
