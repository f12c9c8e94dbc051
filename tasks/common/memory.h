// A training run's peak memory, estimated from its settings before the work starts (Note [memory
// estimate] in memory.cpp), printed at the start of every `train`, and refused when it does not fit
// the memory available or --max-memory.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

#include "engine/tensor.h"

namespace ag::tasks {

// What a task knows about its run once the model and the data are in memory. A new task fills one
// from its settings (see tasks/README.md, "Memory") and passes it to check_memory before training.
struct MemoryEstimate {
  std::string command = "train";  // "eval", "predict": named in messages
  std::string task;               // "charlm", named in messages
  int64_t parameters = 0;         // f32 values in the model
  int64_t optimizer_slots = 2;    // f32 values the optimizer keeps per parameter (Adam, AdamW: 2)
  double step_bytes = 0;          // one training step's activations, saved tensors and temporaries
  std::string step_settings;      // the flags that size them: "--batch-size 12 × --block-size 64"
  double eval_bytes = 0;          // one evaluation chunk's peak
  std::string eval_settings;      // the flags or sizes that size it
};

// What one chunk of an evaluation or prediction may take (its activations, no graph): a task cuts its
// data into chunks of as many rows as fit, from its settings alone (so the numbers do not depend on
// the machine), instead of a fixed count.
inline constexpr double kEvalChunkBytes = 64.0 * 1024 * 1024;

// Rows of `bytes_per_row` each that fit in kEvalChunkBytes: at least 1, at most `most`.
int64_t rows_per_chunk(double bytes_per_row, int64_t most);

// The peak: what the process holds now (program, libraries, data, model) plus the gradients and
// the optimizer state, plus the larger of a training step and an evaluation chunk.
struct MemoryPlan {
  double resident_now = 0, state = 0, work = 0;
  double peak() const { return resident_now + state + work; }
};
MemoryPlan plan_memory(const MemoryEstimate& estimate);

// Prints the estimate ("memory: estimated peak … MB …"); refuses (exit 1) when it is more than
// `max_memory_mb` (0: the memory available, /proc/meminfo's MemAvailable plus what this process
// holds), naming the setting that costs the most and both figures.
void check_memory(const MemoryEstimate& estimate, int64_t max_memory_mb);
// check_memory without printing the estimate, for `eval` and `predict` (parameters 0: no gradients or
// optimizer state; eval_bytes their decoding's or evaluation's peak), whose output stays their figures.
void check_memory_quietly(const MemoryEstimate& estimate, int64_t max_memory_mb);

// The memory a run may take, in bytes: --max-memory (`max_memory_mb` > 0), else the memory available
// (/proc/meminfo's MemAvailable) plus what this process holds; 0 when unknown.
double memory_limit(int64_t max_memory_mb);

// Builds a task's model (`build()`, returning it) under an AllocationBudget of a quarter of
// memory_limit (the parameters, their gradients and Adam's two slots each take as much): a model
// that cannot train is refused, naming its size flags (`sizes`), before it takes the machine's
// memory; check_memory then weighs the whole run.
template <class Build>
auto build_within_memory(const std::string& task, const std::string& sizes, int64_t max_memory_mb, Build&& build) {
  const double limit = memory_limit(max_memory_mb);
  if (limit <= 0) return build();
  AllocationBudget budget(static_cast<size_t>(limit / 4),
                          fmt::format("train {}: the model ({}) is too large: its parameters, their gradients and "
                                      "Adam's state would take more than the {:.0f} MB {}",
                                      task, sizes, limit / (1024 * 1024),
                                      max_memory_mb > 0 ? "--max-memory allows" : "available (MemAvailable)"));
  return build();
}

// This process's resident memory now (/proc/self/statm), in bytes.
double resident_bytes();

// This process's peak resident memory so far (getrusage's ru_maxrss), in bytes.
double peak_resident_bytes();

// `train --report-memory`: prints the measured peak beside the estimate check_memory printed
// ("memory: measured peak … MB, estimated … MB (…% of the measured)").
void report_memory();

}  // namespace ag::tasks
