// One OpenMP thread pool for attograd's kernels and oneDNN's (Debian's oneDNN 2.6 runs on the
// same libgomp), so one setting governs both.
#pragma once

namespace ag {

// Threads for every kernel from now on (this thread's OpenMP setting). Throws if n < 1.
void set_num_threads(int n);
int get_num_threads();

}  // namespace ag
