// `train g2p`'s settings, one row each (tasks/common/settings.h): the PyTorch peer's recipe; the
// model's sizes default to --preset's.
#include "tasks/g2p/task.h"

namespace ag::g2p {

const std::vector<tasks::Setting<G2POptions>>& settings() {
  using O = G2POptions;
  using tasks::Accepts;
  const Accepts size{Accepts::whole, 1, 8192}, fraction{Accepts::number, 0, 1};
  static const std::vector<tasks::Setting<O>> table = [&] {
    std::vector<tasks::Setting<O>> rows = tasks::lift_training<O>(tasks::common_settings("Peak Adam learning rate"));
    const std::vector<tasks::Setting<O>> own = {
        {"model", "", "the task (always transformer)"},
        {"preset",
         "--preset",
         "small: d 128, 4 heads, 2 + 2 layers, FF 512; base: d 256, 4 heads, 3 + 3 layers, FF 1024 (dropout 0.1 both)",
         [](O& o) { return &o.preset; },
         {Accepts::choice, 0, 0, {"small", "base"}}},
        {"data",
         "--data",
         "source<TAB>target lines (target tokens separated by spaces, the source taken as characters); default: "
         "CMUdict, fetched by tools/fetch_data.sh",
         [](O& o) { return &o.data; },
         {Accepts::existing_file}},
        {"data_words", "", "--data"},
        {"data_sha256", "", "--data, whose content differs"},
        {.key = "stress",
         .flag = "--stress",
         .help = "CMUdict: keep the stress digits (69 symbols instead of 39)",
         .field = [](O& o) { return &o.stress; },
         .excludes = "--data"},
        {"source_vocab", "", "--data", [](O& o) { return &o.model.source_vocab; }},
        {"target_vocab", "", "--data or --stress", [](O& o) { return &o.model.target_vocab; }},
        {"d_model", "--d-model", "Model width (default: the preset's)",
         [](O& o) { return &o.model.transformer.d_model; }, size},
        {"heads", "--heads", "Attention heads, dividing --d-model (default: the preset's)",
         [](O& o) { return &o.model.transformer.nhead; }, size},
        {"enc_layers", "--enc-layers", "Encoder layers (default: the preset's)",
         [](O& o) { return &o.model.transformer.num_encoder_layers; }, size},
        {"dec_layers", "--dec-layers", "Decoder layers (default: the preset's)",
         [](O& o) { return &o.model.transformer.num_decoder_layers; }, size},
        {"ff", "--ff", "Feed-forward width (default: the preset's)",
         [](O& o) { return &o.model.transformer.dim_feedforward; }, size},
        {"dropout",
         "--dropout",
         "Dropout (default: the preset's)",
         [](O& o) { return &o.model.transformer.dropout; },
         {Accepts::number, 0, 0.9}},
        {"max_len", "", "the program", [](O& o) { return &o.model.max_len; }},
        {"min_lr", "--min-lr", "Learning rate at the last step", [](O& o) { return &o.min_lr; }, fraction},
        {"warmup_frac", "--warmup-frac", "Share of the steps spent warming up", [](O& o) { return &o.warmup_frac; },
         fraction},
        {"label_smoothing", "--label-smoothing", "PyTorch's cross-entropy label smoothing",
         [](O& o) { return &o.label_smoothing; }, fraction},
        {"clip",
         "--clip",
         "Clip the gradients' global norm to this (0: no clipping)",
         [](O& o) { return &o.clip; },
         {Accepts::number, 0, 1e6}},
        {"max_extra",
         "--max-extra",
         "Decoding: at most (letters + this) phonemes",
         [](O& o) { return &o.max_extra; },
         {Accepts::whole, 0, 64},
         tasks::OnResume::carried_over,
         "",
         [](const O&) { return true; }},  // always written; an older run's checkpoint has none: 10
        {"beam",
         "--beam",
         "Beam width for the test set at the end (1: greedy; validation is greedy)",
         [](O& o) { return &o.beam; },
         {Accepts::whole, 1, 64}},
        {"train_fraction",
         "--train-fraction",
         "Smoke runs: train on this share of the pairs",
         [](O& o) { return &o.train_fraction; },
         {Accepts::number, 1e-6, 1}},
        {"eval_limit",
         "--eval-limit",
         "Smoke runs: validate and test on this many evenly spaced words (0: all)",
         [](O& o) { return &o.eval_limit; },
         {Accepts::whole, 0, 1e8}},
        {"optimizer", "", "the task (always Adam)"}};
    rows.insert(rows.end(), own.begin(), own.end());
    return rows;
  }();
  return table;
}

G2POptions preset_defaults(const G2POptions& chosen) {
  G2POptions defaults = chosen;
  defaults.model = preset_config(chosen.preset);
  return defaults;
}

}  // namespace ag::g2p
