// Every op of the engine: the umbrella over engine/ops/<family>.h. Each family lives in
// engine/ops/<family>.cpp with forward, backward and registry entry side by side; its kernels are
// in engine/kernels/. All ops are differentiable in every floating input unless marked "not
// differentiable". Code inside the engine includes the families it uses, so that adding an op
// rebuilds only its family and what uses it (engine/README.md, "Adding an op").
#pragma once

#include "engine/ops/arithmetic.h"
#include "engine/ops/attention.h"
#include "engine/ops/dropout.h"
#include "engine/ops/index.h"
#include "engine/ops/loss.h"
#include "engine/ops/mask.h"
#include "engine/ops/matmul.h"
#include "engine/ops/norm.h"
#include "engine/ops/pointwise.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "engine/ops/softmax.h"
