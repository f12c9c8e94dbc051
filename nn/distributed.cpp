#include "nn/distributed.h"

#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iostream>

#include "engine/error.h"
#include "engine/hash.h"

namespace ag::nn::dist {

namespace {

bool joined = false;  // MPI_Init ran: this process is a rank of an MPI job
int my_rank = 0, world_size = 1;

// Open MPI's mpirun (OMPI_*) or any PMI/PMIx launcher (srun, hydra's mpiexec) started us.
bool started_by_a_launcher() {
  for (const char* variable : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(variable) != nullptr) return true;
  return false;
}

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

}  // namespace

void init(int& argc, char**& argv) {
  if (joined || !started_by_a_launcher()) return;
  check_mpi(MPI_Init(&argc, &argv), "MPI_Init");
  joined = true;
  // Errors come back as codes (check_mpi turns them into exceptions, the CLI into abort_job).
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
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
  if (joined) MPI_Finalize();
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

void sum_over_ranks(std::span<double> values) {
  if (world_size == 1) return;
  check_mpi(
      MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
      "MPI_Allreduce");
}

void check_same_on_every_rank(uint64_t value, const std::string& what) {
  if (world_size == 1) return;
  uint64_t roots = value;
  check_mpi(MPI_Bcast(&roots, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD), "MPI_Bcast");
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

struct GradientReducer::Impl {
  struct Bucket {
    std::vector<size_t> params;  // indices into Impl::params
    std::vector<char> buffer;    // their gradients, back to back
    size_t full = 0;             // how many of `params` are ready this step
    MPI_Request request = MPI_REQUEST_NULL;
    bool started = false;
  };
  std::vector<Tensor> params;
  std::vector<size_t> bucket_of, offset_of;  // per parameter: its bucket, its byte offset there
  std::vector<bool> ready;                   // per parameter: its gradient is in its bucket
  std::vector<Bucket> buckets;
  size_t next_to_start = 0;
  bool armed = false;  // the running backward finishes the gradients

  size_t bytes_of(size_t param) const {
    return static_cast<size_t>(params[param].numel()) * dtype_size(params[param].dtype());
  }

  void on_ready(size_t param) {
    if (!armed) return;
    put_in_bucket(param);
    start_full_buckets();
  }

  // The parameter's gradient (zeros if it has none) into its bucket.
  void put_in_bucket(size_t param) {
    const Tensor& grad = params[param].grad();
    Bucket& bucket = buckets[bucket_of[param]];
    char* slot = bucket.buffer.data() + offset_of[param];
    if (grad.defined()) {
      std::memcpy(slot, grad.raw_data(), bytes_of(param));
    } else {
      std::memset(slot, 0, bytes_of(param));
    }
    if (!ready[param]) ++bucket.full;
    ready[param] = true;
  }

  // Starts the reductions of the full buckets, in order: a bucket waits for every earlier one.
  void start_full_buckets() {
    while (next_to_start < buckets.size() && buckets[next_to_start].full == buckets[next_to_start].params.size())
      start(buckets[next_to_start++]);
    for (Bucket& bucket : buckets) {  // lets Open MPI move the running reductions on
      if (!bucket.started || bucket.request == MPI_REQUEST_NULL) continue;
      int done = 0;
      check_mpi(MPI_Test(&bucket.request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    }
  }

  void start(Bucket& bucket) {
    const MPI_Datatype type = mpi_type(params[bucket.params.front()].dtype());
    const int count = static_cast<int>(bucket.buffer.size() / dtype_size(params[bucket.params.front()].dtype()));
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, bucket.buffer.data(), count, type, MPI_SUM, MPI_COMM_WORLD, &bucket.request),
              "MPI_Iallreduce");
    bucket.started = true;
  }
};

GradientReducer::GradientReducer(std::vector<Tensor> params, int64_t bucket_bytes) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.params = std::move(params);
  s.bucket_of.resize(s.params.size());
  s.offset_of.resize(s.params.size());
  s.ready.assign(s.params.size(), false);
  for (size_t i = s.params.size(); i-- > 0;) {
    const Tensor& p = s.params[i];
    AG_CHECK(p.is_leaf() && p.requires_grad(), "GradientReducer: parameter {} is not a leaf that requires grad", i);
    const bool fits = !s.buckets.empty() &&
                      s.buckets.back().buffer.size() + s.bytes_of(i) <= static_cast<size_t>(bucket_bytes) &&
                      s.params[s.buckets.back().params.front()].dtype() == p.dtype();
    if (!fits) s.buckets.emplace_back();
    Impl::Bucket& bucket = s.buckets.back();
    s.bucket_of[i] = s.buckets.size() - 1;
    s.offset_of[i] = bucket.buffer.size();
    bucket.params.push_back(i);
    bucket.buffer.resize(bucket.buffer.size() + s.bytes_of(i));
    Impl* state = impl_.get();
    p.register_post_accumulate_grad_hook([state, i](const Tensor&) {
      if (world_size > 1) state->on_ready(i);
    });
  }
}

GradientReducer::~GradientReducer() {
  // A step that threw: its reductions must end before the buffers go (every rank is stopping).
  for (Impl::Bucket& bucket : impl_->buckets)
    if (bucket.started) MPI_Wait(&bucket.request, MPI_STATUS_IGNORE);
}

void GradientReducer::arm() { impl_->armed = true; }

void GradientReducer::finish(std::span<double> extras) {
  if (world_size == 1) return;
  Impl& s = *impl_;
  s.armed = false;
  // The gradients the last backward did not reach (zeros where there are none); then the buckets
  // left start, in order.
  for (size_t i = 0; i < s.params.size(); ++i)
    if (!s.ready[i]) s.put_in_bucket(i);
  s.start_full_buckets();
  // The extras, and per parameter how many ranks have a gradient for it.
  std::vector<double> sums(extras.begin(), extras.end());
  for (const Tensor& param : s.params) sums.push_back(param.grad().defined() ? 1.0 : 0.0);
  sum_over_ranks(sums);
  std::copy(sums.begin(), sums.begin() + static_cast<std::ptrdiff_t>(extras.size()), extras.begin());
  for (Impl::Bucket& bucket : s.buckets) {
    check_mpi(MPI_Wait(&bucket.request, MPI_STATUS_IGNORE), "MPI_Wait");
    bucket.started = false;
    bucket.full = 0;
    for (size_t i : bucket.params) {
      Tensor& param = s.params[i];
      if (sums[extras.size() + i] == 0) continue;  // no rank has a gradient for it
      if (!param.grad().defined()) param.set_grad(zeros(param.shape(), param.dtype()));
      std::memcpy(param.grad().raw_data(), bucket.buffer.data() + s.offset_of[i], s.bytes_of(i));
    }
  }
  s.ready.assign(s.params.size(), false);
  s.next_to_start = 0;
}

}  // namespace ag::nn::dist
