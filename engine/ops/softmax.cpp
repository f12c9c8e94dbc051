// PLACEHOLDER: being written (ops family softmax).
#include "engine/registry.h"
namespace ag {
void register_softmax_ops(Registry&) {}
}  // namespace ag
