#include "tasks/common/memory.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>

#include "engine/error.h"

namespace ag::tasks {

// Note [memory estimate]: the resident memory when training is about to start already holds the
// program, its libraries (oneDNN's code is most of it), the data and the model's weights; a run then
// adds the gradients (one value per parameter), the optimizer's state (optimizer_slots per
// parameter) and, at its peak, the larger of one training step (forward activations kept for the
// backward, then the backward's temporaries) and one evaluation chunk (no graph). Each task sizes the
// last two from its settings with a formula of its shapes (tasks/README.md, "Memory");
// `train --report-memory` prints the measured peak beside the estimate.

namespace {

constexpr double kMB = 1024.0 * 1024.0;

double estimated_peak = 0;  // the last estimate check_memory printed, for report_memory

double memory_available() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kilobytes = 0;
  while (meminfo >> key >> kilobytes) {
    if (key == "MemAvailable:") return kilobytes * 1024;
    meminfo.ignore(256, '\n');
  }
  return 0;  // unknown: no bound
}

}  // namespace

double resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  double size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<double>(::sysconf(_SC_PAGESIZE));
}

double memory_limit(int64_t max_memory_mb) {
  if (max_memory_mb > 0) return static_cast<double>(max_memory_mb) * kMB;
  const double available = memory_available();
  return available > 0 ? available + resident_bytes() : 0;
}

double peak_resident_bytes() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) * 1024;  // Linux: KiB
}

void report_memory() {
  const double peak = peak_resident_bytes();
  if (estimated_peak <= 0) {
    fmt::print("memory: measured peak {:.1f} MB (resident)\n", peak / kMB);
    return;
  }
  fmt::print("memory: measured peak {:.1f} MB (resident), estimated {:.1f} MB ({:.0f}% of the measured)\n", peak / kMB,
             estimated_peak / kMB, 100 * estimated_peak / peak);
}

int64_t rows_per_chunk(double bytes_per_row, int64_t most) {
  const double fit = std::floor(kEvalChunkBytes / std::max(bytes_per_row, 1.0));
  return std::max<int64_t>(1, fit >= static_cast<double>(most) ? most : static_cast<int64_t>(fit));
}

MemoryPlan plan_memory(const MemoryEstimate& e) {
  return {.resident_now = resident_bytes(),
          .state = 4.0 * static_cast<double>(e.parameters) * static_cast<double>(1 + e.optimizer_slots),
          .work = std::max(e.step_bytes, e.eval_bytes)};
}

namespace {

// Refuses (exit 1) a plan whose peak is above the limit, naming what costs the most.
void refuse_over_limit(const MemoryEstimate& e, const MemoryPlan& plan, int64_t max_memory_mb) {
  const double limit = memory_limit(max_memory_mb);
  if (limit <= 0 || plan.peak() <= limit) return;
  const bool step_larger = e.step_bytes >= e.eval_bytes;
  const std::string cause =
      plan.resident_now > std::max(plan.state, plan.work)
          ? fmt::format("the program, the model and the data already take {:.0f} MB", plan.resident_now / kMB)
      : plan.state > plan.work
          ? fmt::format("the model's {} parameters' gradients and optimizer state take {:.0f} MB", e.parameters,
                        plan.state / kMB)
          : fmt::format("{} takes {:.0f} MB, set by {}", step_larger ? "a training step" : "an evaluation chunk",
                        plan.work / kMB, step_larger ? e.step_settings : e.eval_settings);
  fail("{} {}: the estimated peak memory, {:.0f} MB, is more than the {:.0f} MB {}: {}; lower it{}", e.command, e.task,
       plan.peak() / kMB, limit / kMB,
       max_memory_mb > 0 ? "--max-memory allows" : "available (MemAvailable; --max-memory sets another bound)", cause,
       e.command == "train"
           ? " (the estimate is printed at the start of every run; --report-memory prints the measured peak)"
           : "");
}

}  // namespace

void check_memory(const MemoryEstimate& e, int64_t max_memory_mb) {
  const MemoryPlan plan = plan_memory(e);
  estimated_peak = plan.peak();
  const bool step_larger = e.step_bytes >= e.eval_bytes;
  fmt::print(
      "memory: estimated peak {:.0f} MB (now {:.0f} MB; gradients and optimizer state {:.0f} MB; {} {:.0f} MB)\n",
      plan.peak() / kMB, plan.resident_now / kMB, plan.state / kMB,
      step_larger ? "a training step" : "an evaluation chunk", plan.work / kMB);
  refuse_over_limit(e, plan, max_memory_mb);
}

void check_memory_quietly(const MemoryEstimate& e, int64_t max_memory_mb) {
  refuse_over_limit(e, plan_memory(e), max_memory_mb);
}

}  // namespace ag::tasks
