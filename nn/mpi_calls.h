// The MPI calls nn/distributed.cpp and nn/gradient_reducer.cpp share. Internal to nn/.
#pragma once

#include <mpi.h>

#include <string>

#include "engine/dtype.h"

namespace ag::nn::dist {

// Throws an ag::Error naming the call and this rank unless `code` is MPI_SUCCESS.
void check_mpi(int code, const char* call);
// MPI's type of an f32 or f64 gradient (an ag::Error for any other dtype).
MPI_Datatype mpi_type(DType dtype);
// Waits for a non-blocking collective at most --collective-timeout, answering the other ranks'
// status questions meanwhile; past it, ends the whole job naming `what` and the ranks not arrived.
void wait_for(MPI_Request& request, const std::string& what);

}  // namespace ag::nn::dist
