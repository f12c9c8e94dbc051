// Data parallelism over MPI (DESIGN.md "Scale-out"). attograd is one program: started by mpirun
// (or another MPI launcher) it is one rank of the job; started alone it is rank 0 of 1 and makes
// no MPI call at all (MPI_Init on its own costs ~0.4 s, too much for every command).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/tensor.h"

namespace ag::nn::dist {

// Joins the MPI job if a launcher started this process (first thing in main); on the ranks other
// than 0, standard output goes to /dev/null: rank 0 alone prints.
void init(int& argc, char**& argv);
void finalize();  // at a normal exit
int rank();
int ranks();
bool is_root();  // rank 0: it prints and writes the files
// Ends the whole job from this rank: `message` on stderr with the rank named, then MPI_Abort.
[[noreturn]] void abort_job(const std::string& message, int exit_code);

// The exit code of a job that one rank's collective timed out in (MPI_Abort's).
constexpr int kCollectiveTimeoutExit = 4;
// How long a rank waits for the others in any collective before it ends the job (seconds; the
// CLI's --collective-timeout). Plain MPI has no timeout of its own: a dead or unreachable peer would
// make every other rank wait forever.
void set_collective_timeout(double seconds);
double collective_timeout();

// What a rank starts a run from. Every rank meets the others once, in agree_to_start, before any
// other collective: a rank that failed on the way (a usage error, a missing file) brings its
// failure, a ready one its settings and data, so that no rank goes on to wait for one that stopped.
struct StartState {
  bool ready = true;
  int exit_code = 0;     // not ready: the exit code this rank would end with (2 usage, 1 runtime)
  std::string message;   // not ready: why
  std::string settings;  // ready: config.json's content (a JSON object)
  std::vector<std::pair<std::string, std::string>> files;  // ready: the data files read, their contents' sha256
};
// Why the job does not start: the first failing rank's message (its rank named) and exit code, or
// the settings or data in which the ranks differ (exit 2 for settings, 1 for data).
struct Refusal {
  int exit_code = 1;
  std::string message;
};
// Exchanges every rank's StartState (waiting at most collective_timeout()); every rank gets the
// same answer: nothing if all are ready with the same settings (but "threads") and the same data.
// Alone (no MPI job): a refusal exactly when this rank is not ready.
std::optional<Refusal> agree_to_start(const StartState& mine);
// Thrown on a ready rank whose job does not start (the CLI prints it once, on rank 0).
class StartRefused : public Error {
 public:
  explicit StartRefused(const Refusal& refusal) : Error(refusal.message), exit_code(refusal.exit_code) {}
  int exit_code;
};
// Whether this rank has been through agree_to_start (after it, a failing rank ends the job
// with abort_job: the others may be waiting in a collective).
bool agreed_to_start();

// Elementwise sums over the ranks, in place; every rank gets the same bits. `what` names them in a
// timeout's message.
void sum_over_ranks(std::span<double> values, const std::string& what);
// Fails on each rank whose value differs from rank 0's (e.g. a checksum of the parameters).
void check_same_on_every_rank(uint64_t value, const std::string& what);
// FNV-1a over the tensors' bytes, in order.
uint64_t checksum(const std::vector<Tensor>& tensors);

// One rank's share of a data-parallel job: rank `rank` of `ranks` takes the contiguous rows
// [n·rank/ranks, n·(rank+1)/ranks) of n (sizes differ by at most one).
struct Shard {
  int rank = 0;
  int ranks = 1;
  int64_t begin(int64_t n) const { return n * rank / ranks; }
  int64_t end(int64_t n) const { return n * (rank + 1) / ranks; }
};
Shard this_shard();

// Sums the parameters' gradients over the ranks while backward runs. The parameters are grouped
// into buckets of about `bucket_bytes`, last parameter first (roughly the order backward finishes
// them); a post-accumulate-grad hook copies each gradient into its bucket once it is final, and a
// bucket's MPI_Iallreduce starts as soon as it and every earlier bucket are full, so every rank
// starts the same reductions in the same order whatever the timing. finish() waits for them and
// writes the sums back into the gradients.
class GradientReducer {
 public:
  explicit GradientReducer(std::vector<Tensor> params, int64_t bucket_bytes = int64_t{1} << 18);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;
  // Before the backward that finishes the step's gradients (the last of its micro-batches): from
  // then on, a final gradient goes to its bucket. Earlier backwards only accumulate.
  void arm();
  // After that backward (or without one, on a rank whose shard is empty): every gradient summed
  // over the ranks, `extras` (a few numbers of the step) summed along. A parameter no rank gave a
  // gradient keeps none.
  // `step` names the step in a timeout's message.
  void finish(std::span<double> extras, const std::string& step);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ag::nn::dist
