// The allocator under every tensor: 64-byte aligned buffers, small ones recycled per thread, each
// charged to the thread's AllocationBudget while one is active.
#include "engine/storage.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdlib>
#include <vector>

#include "engine/error.h"

namespace ag {

namespace {

// Small buffers are recycled through a per-thread cache: a training step frees and allocates
// the same small sizes every step, and aligned_alloc costs more than a tiny op's arithmetic.
// Sizes round up to a power of two from 64 bytes to 64 KiB; each size keeps at most 64 buffers
// (none under AddressSanitizer, which must see every free to catch a use after it).
class SmallBufferCache {
 public:
#ifdef __SANITIZE_ADDRESS__
  static constexpr size_t kPerSize = 0;
#else
  static constexpr size_t kPerSize = 64;
#endif
  static constexpr size_t kMinBytes = 64, kMaxBytes = size_t{1} << 16;

  // The size a buffer of `bytes` is allocated with: a cached size class, or 64-byte multiples.
  static size_t allocation_size(size_t bytes) {
    if (bytes > kMaxBytes) return (bytes + 63) / 64 * 64;
    return std::max(kMinBytes, std::bit_ceil(bytes));
  }
  void* take(size_t size) {
    if (size > kMaxBytes || free_[bucket(size)].empty()) return nullptr;
    void* data = free_[bucket(size)].back();
    free_[bucket(size)].pop_back();
    return data;
  }
  bool give(void* data, size_t size) {
    if (size > kMaxBytes || free_[bucket(size)].size() >= kPerSize) return false;
    free_[bucket(size)].push_back(data);
    return true;
  }
  ~SmallBufferCache() {
    for (auto& buffers : free_)
      for (void* data : buffers) std::free(data);
    destroyed = true;
  }
  // Set once the thread's cache is gone: static tensors freed after it bypass it.
  static thread_local inline bool destroyed = false;

 private:
  static size_t bucket(size_t size) { return static_cast<size_t>(std::countr_zero(size / kMinBytes)); }
  std::array<std::vector<void*>, 11> free_;  // 64 B … 64 KiB
};

thread_local SmallBufferCache small_buffers;

thread_local AllocationBudget* allocation_budget = nullptr;

thread_local int64_t bytes_allocated = 0;

}  // namespace

int64_t bytes_allocated_on_this_thread() { return bytes_allocated; }

AllocationBudget::AllocationBudget(size_t bytes, std::string what)
    : left_(bytes), limit_(bytes), what_(std::move(what)), outer_(allocation_budget) {
  allocation_budget = this;
}

AllocationBudget::~AllocationBudget() { allocation_budget = outer_; }

void AllocationBudget::charge(size_t bytes) {
  AG_CHECK(bytes <= left_, "{} (its tensors would take more than {} bytes)", what_, limit_);
  left_ -= bytes;
}

void AllocationBudget::refund(size_t bytes) { left_ = std::min(limit_, left_ + bytes); }

size_t physical_memory_bytes() {
  static const size_t bytes =
      static_cast<size_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(::sysconf(_SC_PAGE_SIZE));
  return bytes;
}

Storage::Storage(size_t bytes) : bytes(bytes) {
  const size_t size = SmallBufferCache::allocation_size(bytes);
  bytes_allocated += static_cast<int64_t>(size);
  if (allocation_budget) {
    allocation_budget->charge(size);
    charged_to = allocation_budget;
  }
  data = SmallBufferCache::destroyed ? nullptr : small_buffers.take(size);
  if (data == nullptr) data = std::aligned_alloc(64, size);
  if (data == nullptr) fail("out of memory allocating {} bytes", bytes);
}

Storage::~Storage() {
  if (charged_to != nullptr && charged_to == allocation_budget)
    allocation_budget->refund(SmallBufferCache::allocation_size(bytes));
  if (SmallBufferCache::destroyed || !small_buffers.give(data, SmallBufferCache::allocation_size(bytes)))
    std::free(data);
}

}  // namespace ag
