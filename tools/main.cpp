// The `attograd` program: everything is in ag::cli::run (tools/attograd.cpp). Started by mpirun,
// it is one rank of a data-parallel job (nn/distributed.h).
#include "nn/distributed.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  ag::nn::dist::init(argc, argv);
  const int status = ag::cli::run(argc, argv);
  ag::nn::dist::finalize();
  return status;
}
