// PLACEHOLDER: being written (ops family norm).
#include "engine/registry.h"
namespace ag {
void register_norm_ops(Registry&) {}
}  // namespace ag
