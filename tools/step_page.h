// The step page: one self-contained HTML file (`attograd graph TASK --format html`) showing one
// training step as the StepRecorder saw it: the graph as Graphviz drew it, a panel per node, and a
// slider that steps through backward in the engine's order. No network: the SVG, the recorded
// numbers (JSON) and the page's own script are all inside the file.
#pragma once

#include <string>

#include "engine/step_record.h"

namespace ag::cli {

// The page's template (tools/step_page.html, compiled in by CMake).
extern const char* const kStepPageTemplate;

// The recorded step as the page's JSON: the nodes (op, formula, scope, shapes, forward value,
// saved tensors, times, leaves' names and .grad) and the backward order with each node's gradient
// in and gradients out. Every tensor is a ValueSummary, so the JSON is a few KB per node.
std::string step_json(const StepRecorder& recorder, const std::string& note);

// The page: `svg` is Graphviz's drawing of graph_dot(recorder.graph()).
std::string step_page_html(const StepRecorder& recorder, const std::string& svg, const std::string& title,
                           const std::string& note);

}  // namespace ag::cli
