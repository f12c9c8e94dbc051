#include "nn/distributed.h"

#include <fcntl.h>
#include <fmt/ranges.h>
#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/hash.h"
#include "nn/mpi_calls.h"

namespace ag::nn::dist {

namespace {

bool joined = false;  // MPI_Init ran: this process is a rank of an MPI job
int my_rank = 0, world_size = 1;
bool start_agreed = false;
double timeout_seconds = 300;
// Where this rank is: how many collectives it has waited for (every rank waits for the same ones
// in the same order), and what the current one is. A rank that times out asks the others for theirs
// over a communicator of their own, to say which ranks had not arrived.
int64_t collectives_waited = 0;
std::string waiting_for;
MPI_Comm status_comm = MPI_COMM_NULL;
constexpr int kAskTag = 1, kAnswerTag = 2;
constexpr size_t kAnswerBytes = 256;

// Open MPI's mpirun (OMPI_*) or any PMI/PMIx launcher (srun, hydra's mpiexec) started us.
bool started_by_a_launcher() {
  for (const char* variable : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(variable) != nullptr) return true;
  return false;
}

}  // namespace

void check_mpi(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  fail("{} failed on rank {}: {}", call, my_rank, std::string(text, static_cast<size_t>(length)));
}

MPI_Datatype mpi_type(DType dtype) {
  AG_CHECK(dtype == DType::f32 || dtype == DType::f64, "data parallelism: gradients must be f32 or f64, got {}",
           dtype_name(dtype));
  return dtype == DType::f32 ? MPI_FLOAT : MPI_DOUBLE;
}

namespace {

// "<collectives waited> <what this rank waits for>", at most kAnswerBytes with its terminating zero.
std::string where_this_rank_is() {
  return fmt::format("{} {}", collectives_waited, waiting_for).substr(0, kAnswerBytes - 1);
}

// Answers the ranks that timed out and ask where this one is (while it waits itself).
void answer_status_questions() {
  static char answer[kAnswerBytes];  // outlives the sends, which are never waited for
  for (;;) {
    int asked = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kAskTag, status_comm, &asked, &status);
    if (!asked) return;
    int64_t theirs = 0;
    MPI_Recv(&theirs, 1, MPI_INT64_T, status.MPI_SOURCE, kAskTag, status_comm, MPI_STATUS_IGNORE);
    std::snprintf(answer, sizeof answer, "%s", where_this_rank_is().c_str());
    MPI_Request reply;
    MPI_Isend(answer, kAnswerBytes, MPI_CHAR, status.MPI_SOURCE, kAnswerTag, status_comm, &reply);
    MPI_Request_free(&reply);
  }
}

// After a timeout: asks every other rank where it is, for a few seconds, and says which ranks are
// waiting in the same collective and which had not arrived.
std::string where_the_others_are() {
  constexpr double kAskSeconds = 5;
  std::vector<MPI_Request> asks(world_size, MPI_REQUEST_NULL), answers(world_size, MPI_REQUEST_NULL);
  std::vector<std::array<char, kAnswerBytes>> answer(world_size);
  std::vector<bool> answered(world_size, false);
  for (int r = 0; r < world_size; ++r) {
    if (r == my_rank) continue;
    MPI_Isend(&collectives_waited, 1, MPI_INT64_T, r, kAskTag, status_comm, &asks[r]);
    MPI_Irecv(answer[r].data(), kAnswerBytes, MPI_CHAR, r, kAnswerTag, status_comm, &answers[r]);
  }
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < kAskSeconds) {
    answer_status_questions();
    bool all = true;
    for (int r = 0; r < world_size; ++r) {
      if (r == my_rank || answered[r]) continue;
      int done = 0;
      MPI_Test(&answers[r], &done, MPI_STATUS_IGNORE);
      answered[r] = done != 0;
      all = all && answered[r];
    }
    if (all) break;
    ::usleep(10000);
  }
  std::vector<std::string> there, elsewhere, silent;
  for (int r = 0; r < world_size; ++r) {
    if (r == my_rank) continue;
    if (!answered[r]) {
      silent.push_back(std::to_string(r));
      continue;
    }
    answer[r].back() = 0;
    const std::string text = answer[r].data();
    const size_t space = text.find(' ');
    if (std::stoll(text.substr(0, space)) == collectives_waited)
      there.push_back(std::to_string(r));
    else
      elsewhere.push_back(fmt::format("rank {} waits in {}", r, text.substr(space + 1)));
  }
  std::vector<std::string> parts;
  if (!silent.empty())
    parts.push_back(fmt::format("rank {} had not arrived and did not answer in {:.0f} s (ended, stuck or unreachable)",
                                fmt::join(silent, ", "), kAskSeconds));
  for (const std::string& e : elsewhere) parts.push_back(e + " (had not arrived)");
  if (!there.empty()) parts.push_back(fmt::format("rank {} waits there too", fmt::join(there, ", ")));
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace

// Waits for a non-blocking collective, at most timeout_seconds; then ends the whole job, saying
// which collective (`what`) and which ranks had not arrived. Polls, yielding the core, then sleeping
// in steps of 0.1-1 ms: a reduction that ends late costs at most that.
void wait_for(MPI_Request& request, const std::string& what) {
  ++collectives_waited;
  waiting_for = what;
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    int done = 0;
    check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) return;
    answer_status_questions();
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > timeout_seconds)
      abort_job(fmt::format("error: {} did not complete in {:.0f} s (--collective-timeout): {}; the last checkpoints "
                            "are whole (continue with --resume)",
                            what, waited, where_the_others_are()),
                kCollectiveTimeoutExit);
    if (waited < 0.01)
      ::sched_yield();
    else
      ::usleep(waited < 1 ? 100 : 1000);
  }
}

namespace {

// Every rank's `mine`, in rank order.
std::vector<std::string> gather_from_every_rank(const std::string& mine, const std::string& what) {
  int length = static_cast<int>(mine.size());
  std::vector<int> lengths(world_size), offsets(world_size);
  MPI_Request request;
  check_mpi(MPI_Iallgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD, &request),
            "MPI_Iallgather");
  wait_for(request, what + " (its sizes)");
  for (int r = 1; r < world_size; ++r) offsets[r] = offsets[r - 1] + lengths[r - 1];
  std::string all(static_cast<size_t>(offsets.back() + lengths.back()), '\0');
  check_mpi(MPI_Iallgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR,
                            MPI_COMM_WORLD, &request),
            "MPI_Iallgatherv");
  wait_for(request, what);
  std::vector<std::string> each;
  for (int r = 0; r < world_size; ++r) each.push_back(all.substr(offsets[r], lengths[r]));
  return each;
}

nlohmann::json to_json(const StartState& s) {
  return {{"ready", s.ready},
          {"exit_code", s.exit_code},
          {"message", s.message},
          {"settings", s.settings},
          {"files", s.files}};
}

StartState start_state_from_json(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text);
  return {j.at("ready").get<bool>(), j.at("exit_code").get<int>(), j.at("message").get<std::string>(),
          j.at("settings").get<std::string>(), j.at("files").get<std::vector<std::pair<std::string, std::string>>>()};
}

// Settings a rank may hold its own value of: they change no number of the run.
bool may_differ_between_ranks(const std::string& setting) { return setting == "threads"; }

// Entries of a config that record what the data holds, not a flag (g2p's data_sha256, data_words):
// when they differ, the flags are the same and the data is not.
bool records_the_data(const std::string& setting) { return setting.ends_with("_sha256") || setting == "data_words"; }

// The first setting in which `theirs` (rank r's) differs from rank 0's `first`.
std::optional<Refusal> compare_settings(const std::string& first, const std::string& theirs, int r) {
  const nlohmann::json a = nlohmann::json::parse(first.empty() ? "{}" : first, nullptr, false);
  const nlohmann::json b = nlohmann::json::parse(theirs.empty() ? "{}" : theirs, nullptr, false);
  if (!a.is_object() || !b.is_object()) {
    if (first == theirs) return std::nullopt;
    return Refusal{2, fmt::format("the ranks' settings differ: rank 0's are {}, rank {}'s {}", first, r, theirs)};
  }
  nlohmann::json keys = nlohmann::json::object();
  for (const auto& [key, _] : a.items()) keys[key] = true;
  for (const auto& [key, _] : b.items()) keys[key] = true;
  for (const auto& [key, _] : keys.items()) {  // in key order
    if (may_differ_between_ranks(key)) continue;
    const std::string here = a.contains(key) ? a[key].dump() : "(none)";
    const std::string there = b.contains(key) ? b[key].dump() : "(none)";
    if (here != there && records_the_data(key))
      return Refusal{1, fmt::format("the ranks' data differ: config.json's {} is {} on rank 0, {} on rank {}; every "
                                    "rank must read the same data (the same file, or the same corpus in its data "
                                    "cache)",
                                    key, here, there, r)};
    if (here != there)
      return Refusal{2, fmt::format("the ranks' settings differ: config.json's {} is {} on rank 0, {} on rank {}; "
                                    "start every rank with the same flags",
                                    key, here, there, r)};
  }
  return std::nullopt;
}

// The first data file whose content (or whose count) differs between rank 0 and rank r.
std::optional<Refusal> compare_files(const StartState& first, const StartState& theirs, int r) {
  const auto& a = first.files;
  const auto& b = theirs.files;
  const auto names = [](const auto& files) {
    std::vector<std::string> paths;
    for (const auto& [path, _] : files) paths.push_back(path);
    return fmt::format("{}", fmt::join(paths, ", "));
  };
  if (a.size() != b.size())
    return Refusal{1, fmt::format("the ranks read different data: rank 0 read {} file(s) ({}), rank {} read {} ({})",
                                  a.size(), names(a), r, b.size(), names(b))};
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].second != b[i].second)
      return Refusal{1, fmt::format("the ranks' data differ: {} on rank 0 and {} on rank {} have different contents "
                                    "(sha256 {} and {}); every rank must train on the same data",
                                    a[i].first, b[i].first, r, a[i].second, b[i].second)};
  return std::nullopt;
}

}  // namespace

void set_collective_timeout(double seconds) { timeout_seconds = seconds; }
double collective_timeout() { return timeout_seconds; }
bool agreed_to_start() { return start_agreed; }

std::optional<Refusal> agree_to_start(const StartState& mine) {
  start_agreed = true;
  if (world_size == 1) return mine.ready ? std::nullopt : std::optional<Refusal>(Refusal{mine.exit_code, mine.message});
  std::vector<StartState> states;
  for (const std::string& text : gather_from_every_rank(to_json(mine).dump(), "the start-up agreement"))
    states.push_back(start_state_from_json(text));
  std::vector<std::string> failed;
  for (int r = 0; r < world_size; ++r)
    if (!states[r].ready) failed.push_back(std::to_string(r));
  if (!failed.empty()) {
    const int first = std::stoi(failed.front());
    if (states[first].message.empty()) return Refusal{states[first].exit_code, ""};  // --help, say: said already
    std::string message = fmt::format("rank {} of {}: {}", first, world_size, states[first].message);
    if (failed.size() > 1)
      message += fmt::format(" (rank {} failed too)", fmt::join(failed.begin() + 1, failed.end(), ", "));
    return Refusal{states[first].exit_code, message};
  }
  for (int r = 1; r < world_size; ++r)
    if (auto refusal = compare_settings(states[0].settings, states[r].settings, r)) return refusal;
  for (int r = 1; r < world_size; ++r)
    if (auto refusal = compare_files(states[0], states[r], r)) return refusal;
  return std::nullopt;
}

void init(int& argc, char**& argv) {
  if (joined || !started_by_a_launcher()) return;
  check_mpi(MPI_Init(&argc, &argv), "MPI_Init");
  joined = true;
  // Errors come back as codes (check_mpi turns them into exceptions, the CLI into abort_job).
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Comm_dup(MPI_COMM_WORLD, &status_comm);
  if (my_rank != 0) {
    const int null_device = ::open("/dev/null", O_WRONLY);
    if (null_device >= 0) {
      std::cout.flush();
      ::dup2(null_device, STDOUT_FILENO);
      ::close(null_device);
    }
  }
}

void finalize() {
  if (joined) {
    MPI_Comm_free(&status_comm);
    MPI_Finalize();
  }
  joined = false;
}

int rank() { return my_rank; }
int ranks() { return world_size; }
bool is_root() { return my_rank == 0; }
Shard this_shard() { return {my_rank, world_size}; }

void abort_job(const std::string& message, int exit_code) {
  std::cerr << fmt::format("attograd: rank {} of {}: {}\n", my_rank, world_size, message) << std::flush;
  if (joined) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

void sum_over_ranks(std::span<double> values, const std::string& what) {
  if (world_size == 1) return;
  MPI_Request request;
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_DOUBLE, MPI_SUM,
                           MPI_COMM_WORLD, &request),
            "MPI_Iallreduce");
  wait_for(request, what);
}

void check_same_on_every_rank(uint64_t value, const std::string& what) {
  if (world_size == 1) return;
  uint64_t roots = value;
  MPI_Request request;
  check_mpi(MPI_Ibcast(&roots, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD, &request), "MPI_Ibcast");
  wait_for(request, "the comparison of " + what);
  // The ranks that differ say so (and end the job); the others go on until it ends.
  AG_CHECK(roots == value,
           "data parallelism: rank {} differs from rank 0 in {} (checksum {:016x}, rank 0's {:016x}); every rank "
           "must build the same model from the same seed, flags and files",
           my_rank, what, value, roots);
}

uint64_t checksum(const std::vector<Tensor>& tensors) {
  uint64_t hash = kFnv1a64OffsetBasis;
  for (const Tensor& t : tensors)
    hash =
        fnv1a64({static_cast<const char*>(t.raw_data()), static_cast<size_t>(t.numel()) * dtype_size(t.dtype())}, hash);
  return hash;
}

}  // namespace ag::nn::dist
