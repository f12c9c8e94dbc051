// PLACEHOLDER: being written (ops family dropout).
#include "engine/registry.h"
namespace ag {
void register_dropout_ops(Registry&) {}
}  // namespace ag
