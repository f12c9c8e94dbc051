// `attograd export`: a run's checkpoint as a model file, the weights for use (nn/checkpoint.h).
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "engine/io.h"
#include "nn/checkpoint.h"
#include "tasks/common/checkpoint_config.h"
#include "tools/commands.h"
#include "tools/flag_checks.h"

namespace ag::cli {

namespace {

struct ExportOptions {
  std::string checkpoint, out, dtype = "f32";
};

// The tasks `eval` has a subcommand for: those whose checkpoints are exported.
std::vector<std::string> known_tasks(const CLI::App& app) {
  std::vector<std::string> tasks;
  for (const CLI::App* task : app.get_subcommand("eval")->get_subcommands({})) tasks.push_back(task->get_name());
  return tasks;
}

int export_model(const ExportOptions& options, const std::vector<std::string>& tasks) {
  const nn::Checkpoint checkpoint = nn::read_checkpoint(options.checkpoint);
  const std::string task = tasks::config_string(checkpoint.settings, "task", options.checkpoint);
  AG_CHECK(std::find(tasks.begin(), tasks.end(), task) != tasks.end(),
           "{}: a checkpoint of task '{}', expected one of {}", options.checkpoint, task, fmt::join(tasks, ", "));
  const DType dtype = options.dtype == "bf16" ? DType::bf16 : DType::f32;
  const std::string bytes = nn::model_file_bytes(checkpoint, dtype);
  write_file_atomically(options.out, bytes);
  fmt::print("wrote {}: {} tensors of {} ({}), {} bytes, {}\n", options.out, checkpoint.model.size(), task,
             checkpoint.metadata.contains("epoch") ? "epoch " + checkpoint.metadata.at("epoch") : "no epoch",
             bytes.size(), options.dtype);
  return 0;
}

}  // namespace

Command add_export_command(CLI::App& app) {
  auto options = std::make_shared<ExportOptions>();
  CLI::App* command = app.add_subcommand(
      "export", "Write a run's checkpoint as a model file: the weights, config and symbol tables to predict with");
  command->add_option("--checkpoint", options->checkpoint, "A checkpoint written by `train` (RUN/best.safetensors)")
      ->check(kPath)
      ->required();
  command->add_option("--out", options->out, "The model file to write (replaced if it exists)")
      ->check(kPath)
      ->required();
  command
      ->add_option("--dtype", options->dtype,
                   "f32: the checkpoint's weights bit for bit; bf16: each rounded to the nearest bf16 (half the "
                   "bytes), run in f32 when loaded")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  command->footer(
      "A model file is a checkpoint without the optimizer's state and the run's resume entries (history, random "
      "states): `eval`, `predict` and `sample` read it wherever they read a checkpoint, checked the same way; "
      "`train --resume` cannot continue from it. Its metadata \"model_file\" names the checkpoint, epoch and dtype "
      "it came from.");
  return {command, [options, &app] { return export_model(*options, known_tasks(app)); }};
}

}  // namespace ag::cli
