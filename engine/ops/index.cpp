// PLACEHOLDER: being written (ops family index).
#include "engine/registry.h"
namespace ag {
void register_index_ops(Registry&) {}
}  // namespace ag
