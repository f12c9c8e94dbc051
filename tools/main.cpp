// The `attograd` program: everything is in ag::cli::run (tools/attograd.cpp). Started by mpirun,
// it is one rank of a data-parallel job (nn/distributed.h).
#include <strings.h>
#include <unistd.h>

#include <cstdlib>

#ifdef ATTOGRAD_TCMALLOC
#include <gperftools/malloc_extension.h>
#endif

#include "nn/distributed.h"
#include "tools/commands.h"

namespace {

// Note [waiting threads]: between parallel regions libgomp's threads spin for up to 300,000
// iterations (its default) before they sleep. On a quiet machine that saves a wake-up; with
// another job on one of two vCPUs the spinning thread holds the core its partner needs: a
// 2-thread Transformer step took 521 ms there against 266 ms on 1 thread. A spin of 3,000 kept
// the quiet times and cut that to about 330 ms (tools/bench/omp_wait.sh; figures in
// tools/bench/README.md, "Waiting threads"). libgomp reads the setting once, as it loads, before
// main: so the program sets it and starts itself again, unless the user chose (OMP_WAIT_POLICY or
// GOMP_SPINCOUNT set), a preloaded tool (valgrind, heaptrack) is watching this process, or the
// user binds threads to places (OMP_PROC_BIND other than false, or OMP_PLACES): libgomp has then
// already bound this thread to the first place as it loaded, and the restarted process would
// inherit that one CPU and put every thread on it (a 2-thread bf16 Transformer step took 60 ms,
// the time of one thread, against 33 ms).
bool binds_threads() {
  const char* bind = std::getenv("OMP_PROC_BIND");
  if (bind != nullptr && strcasecmp(bind, "false") == 0) return false;  // libgomp reads it case-blind
  return bind != nullptr || std::getenv("OMP_PLACES") != nullptr;
}

void spin_briefly_between_regions(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT") || std::getenv("LD_PRELOAD") || binds_threads())
    return;
  setenv("GOMP_SPINCOUNT", "3000", 1);
  execv("/proc/self/exe", argv);  // returns only if it failed: run on with libgomp's default
  unsetenv("GOMP_SPINCOUNT");
}

// Note [resident activations]: a training step frees its activations and allocates them again in
// the next step. By default tcmalloc hands freed pages back to the system a little at a time, so the
// next step faults them in afresh: about 100 minor faults a step in a bf16 Transformer step, on one
// thread or two. Keeping them (release rate 0) makes a step of fixed shapes fault no page at all; the
// heap never grows past the largest step's. Measured against Debian's mimalloc and jemalloc in
// tools/bench/README.md, "Allocators". A rate the user set (TCMALLOC_RELEASE_RATE) stands.
void keep_freed_pages() {
#ifdef ATTOGRAD_TCMALLOC
  if (!std::getenv("TCMALLOC_RELEASE_RATE")) MallocExtension::instance()->SetMemoryReleaseRate(0);
#endif
}

}  // namespace

int main(int argc, char** argv) {
  spin_briefly_between_regions(argv);
  keep_freed_pages();
  ag::nn::dist::init(argc, argv);
  const int status = ag::cli::run(argc, argv);
  ag::nn::dist::finalize();
  return status;
}
