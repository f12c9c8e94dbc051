#include "engine/threads.h"

#include <omp.h>

#include "engine/error.h"

namespace ag {

void set_num_threads(int n) {
  AG_CHECK(n >= 1, "set_num_threads: expected at least 1 thread, got {}", n);
  omp_set_num_threads(n);
}

int get_num_threads() { return omp_get_max_threads(); }

}  // namespace ag
