// What `attograd walkthrough` prints (tools/walkthrough_command.cpp parses its flags and calls
// these): seed 003's worked self-attention example step by step, and each seed notebook's printed
// numbers beside ours.
#pragma once

#include <string>
#include <vector>

namespace ag::seeds {

// Plain `walkthrough`: seed 003's example from its printed weights, in f64 (single head, causal
// mask, the multi-head split of its toy example, then backward from context.sum() with every
// gradient checked by finite differences). Returns the exit code (0).
int walkthrough();

// The notebooks `walkthrough --notebook` takes: "000", "002", "003", "004".
std::vector<std::string> notebook_names();
// `walkthrough --notebook N`: every number notebook N prints beside ours (printed_values.h), the
// counts, and what it prints that is not compared. Returns the exit code (0).
int walkthrough_notebook(const std::string& notebook);

}  // namespace ag::seeds
