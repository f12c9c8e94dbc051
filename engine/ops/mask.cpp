// PLACEHOLDER: being written (ops family mask).
#include "engine/registry.h"
namespace ag {
void register_mask_ops(Registry&) {}
}  // namespace ag
