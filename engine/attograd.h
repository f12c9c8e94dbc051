// Everything a user of the engine needs: Tensor, autograd, every op, custom functions, the op
// registry and the gradient checker.
#pragma once

#include "engine/autocast.h"
#include "engine/autograd.h"
#include "engine/error.h"
#include "engine/forward_ad.h"
#include "engine/function.h"
#include "engine/functional.h"
#include "engine/generator.h"
#include "engine/gradcheck.h"
#include "engine/ops.h"
#include "engine/registry.h"
#include "engine/tensor.h"
#include "engine/threads.h"
