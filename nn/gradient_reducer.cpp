// dist::GradientReducer: gradients summed over the ranks in buckets, each bucket's non-blocking
// all-reduce started as soon as its last gradient is ready in the backward (nn/distributed.h).
#include <mpi.h>

#include <algorithm>
#include <cstring>

#include "nn/distributed.h"
#include "nn/mpi_calls.h"

namespace ag::nn::dist {

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
      if (ranks() > 1) state->on_ready(i);
    });
  }
}

GradientReducer::~GradientReducer() {
  // A step that threw: its reductions must end before the buffers go (or the job ends).
  try {
    for (size_t b = 0; b < impl_->buckets.size(); ++b)
      if (impl_->buckets[b].started) wait_for(impl_->buckets[b].request, fmt::format("gradient bucket {}", b + 1));
  } catch (const Error&) {  // an MPI error: the job is ending
  }
}

void GradientReducer::arm() { impl_->armed = true; }

void GradientReducer::finish(std::span<double> extras, const std::string& step) {
  if (ranks() == 1) return;
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
  sum_over_ranks(sums, "the loss and stop requests of " + step);
  std::copy(sums.begin(), sums.begin() + static_cast<std::ptrdiff_t>(extras.size()), extras.begin());
  for (Impl::Bucket& bucket : s.buckets) {
    wait_for(bucket.request, fmt::format("gradient bucket {} of {} ({} KB) of {}", &bucket - s.buckets.data() + 1,
                                         s.buckets.size(), bucket.buffer.size() / 1024, step));
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
