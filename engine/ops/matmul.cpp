// PLACEHOLDER: being written (ops family matmul).
#include "engine/registry.h"
namespace ag {
void register_matmul_ops(Registry&) {}
}  // namespace ag
