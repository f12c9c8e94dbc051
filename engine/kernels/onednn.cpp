#include "engine/kernels/onednn.h"

#include <omp.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>
#include <unordered_map>

#include "engine/kernels/dnnl_compat.h"
#include "engine/kernels/parallel.h"

namespace ag::onednn {

namespace {

// Sets OpenMP's thread count for oneDNN (which reads it when a primitive is built and when it
// runs) for the scope's life; restores the caller's on leaving.
class ThreadsScope {
 public:
  explicit ThreadsScope(int threads) : caller_(omp_get_max_threads()) {
    if (threads != caller_) omp_set_num_threads(threads);
  }
  ~ThreadsScope() {
    if (omp_get_max_threads() != caller_) omp_set_num_threads(caller_);
  }
  ThreadsScope(const ThreadsScope&) = delete;
  ThreadsScope& operator=(const ThreadsScope&) = delete;

 private:
  int caller_;
};

// The calling thread's scratchpad for every primitive it runs (dnnl_compat.h, caller_scratchpad): at least
// `bytes`, page-aligned, grown as needed and kept for the thread's life.
void* thread_scratchpad(size_t bytes) {
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  static thread_local std::unique_ptr<void, Free> buffer;
  static thread_local size_t capacity = 0;
  if (bytes > capacity) {
    constexpr size_t kPage = 4096;
    capacity = (bytes + kPage - 1) / kPage * kPage;
    buffer.reset(std::aligned_alloc(kPage, capacity));
    if (!buffer) throw std::bad_alloc();
  }
  return buffer.get();
}

}  // namespace

class Primitive {
 public:
  Primitive(const Built& built, int threads) : primitive_(built.primitive), threads_(threads) {
    for (const auto& [id, desc] : built.args) {
      args_.emplace(id, dnnl::memory(desc, cpu_engine(), nullptr));
      if (id == DNNL_ARG_SCRATCHPAD) scratchpad_bytes_ = desc.get_size();
    }
  }

  void run(std::initializer_list<std::pair<int, const void*>> data) {
    static thread_local dnnl::stream stream(cpu_engine());
    for (const auto& [id, pointer] : data) {
      auto arg = args_.find(id);
      if (arg != args_.end()) arg->second.set_data_handle(const_cast<void*>(pointer));
    }
    if (scratchpad_bytes_ > 0) args_.at(DNNL_ARG_SCRATCHPAD).set_data_handle(thread_scratchpad(scratchpad_bytes_));
    ThreadsScope scope(threads_);
    primitive_.execute(stream, args_);
    stream.wait();
  }

 private:
  dnnl::primitive primitive_;
  std::unordered_map<int, dnnl::memory> args_;  // memory objects reused: only their pointers change
  int threads_;                                 // what it was built for
  size_t scratchpad_bytes_ = 0;
};

namespace {

struct KeyHash {
  size_t operator()(const Key& key) const {
    size_t h = 0;
    for (int64_t v : key) h = h * 1000003u ^ std::hash<int64_t>()(v);
    return h;
  }
};

std::atomic<int64_t> created{0};
thread_local bool enabled = true;

}  // namespace

Primitive* cached(Key key, int64_t work, const std::function<Built()>& make) {
  static thread_local std::unordered_map<Key, std::unique_ptr<Primitive>, KeyHash> cache;
  if (!enabled) return nullptr;
  // Inside a parallel region (a thread's share of a split product) the primitive runs on its thread alone.
  const int threads = work < kParallelGrain || omp_in_parallel() ? 1 : omp_get_max_threads();
  key.push_back(threads);
  auto found = cache.find(key);
  if (found != cache.end()) return found->second.get();
  ++created;
  std::unique_ptr<Primitive> primitive;
  try {
    ThreadsScope scope(threads);
    const Built built = make();
    if (built.impl.rfind("ref", 0) != 0) primitive = std::make_unique<Primitive>(built, threads);
  } catch (const dnnl::error&) {
    // oneDNN does not take this problem: the caller's own kernel runs it
  }
  return cache.emplace(key, std::move(primitive)).first->second.get();
}

void execute(Primitive& p, std::initializer_list<std::pair<int, const void*>> data) { p.run(data); }

void set_enabled(bool on) { enabled = on; }

int64_t primitives_created() { return created.load(); }

}  // namespace ag::onednn
