// PLACEHOLDER: being written (ops family loss).
#include "engine/registry.h"
namespace ag {
void register_loss_ops(Registry&) {}
}  // namespace ag
