// The `attograd` program: everything is in ag::cli::run (tools/attograd.cpp).
#include "tools/commands.h"

int main(int argc, char** argv) { return ag::cli::run(argc, argv); }
