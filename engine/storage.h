// Storage: a tensor's bytes (64-byte aligned, shared by views, with the version counter of in-place
// writes); AllocationBudget, a cap on what one thread allocates; the machine's memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ag {

class AllocationBudget;

struct Storage {
  explicit Storage(size_t bytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data;
  size_t bytes;
  uint64_t version = 0;                    // bumped by every in-place write; views share it
  AllocationBudget* charged_to = nullptr;  // the budget that counted it (refunded while active)
};

// While one lives, the tensors this thread allocates and still holds may take at most `bytes` (each
// counted at least 64 bytes, as allocated; a tensor freed meanwhile gives its bytes back, so an
// initialisation's temporaries do not add up); one more throws ag::Error: "<what>: <detail>". For building a
// model from a file's description: a config asking for more than the file's tensors fails at
// once instead of allocating first. Budgets nest (the innermost applies).
class AllocationBudget {
 public:
  AllocationBudget(size_t bytes, std::string what);
  ~AllocationBudget();
  AllocationBudget(const AllocationBudget&) = delete;
  AllocationBudget& operator=(const AllocationBudget&) = delete;
  void charge(size_t bytes);  // called by every tensor allocation on this thread
  void refund(size_t bytes);  // by a tensor it counted, freed while it is still active: it counts live bytes

 private:
  size_t left_;
  size_t limit_;
  std::string what_;
  AllocationBudget* outer_;
};

// Bytes of tensor storage this thread has allocated since it started (freed ones included): the
// profiler's allocation column.
int64_t bytes_allocated_on_this_thread();

// The machine's physical memory in bytes: no single tensor larger than this is attempted.
size_t physical_memory_bytes();

}  // namespace ag
