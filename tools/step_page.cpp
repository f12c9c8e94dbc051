#include "tools/step_page.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace ag::cli {

namespace {

using nlohmann::json;

// A number as the page shows it: 7 significant digits (f32's precision) keep the JSON short;
// NaN and ±Inf, which JSON has no words for, as strings.
json number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Inf" : "-Inf";
  return std::stod(fmt::format("{:.7g}", v));
}

json summary_json(const ValueSummary& s) {
  json values = json::array();
  for (double v : s.values) values.push_back(number(v));
  json j = {{"shape", s.shape},       {"dtype", dtype_name(s.dtype)},
            {"n", s.numel},           {"min", number(s.min)},
            {"mean", number(s.mean)}, {"max", number(s.max)},
            {"norm", number(s.norm)}, {"nan", s.nan_count},
            {"inf", s.inf_count},     {"values", values},
            {"whole", s.whole()}};
  if (!s.histogram.empty()) j["hist"] = s.histogram;
  return j;
}

json optional_summary(const ValueSummary* s) { return s != nullptr ? summary_json(*s) : json(); }

json node_json(const StepRecorder& recorder, const GraphNode& n, int id) {
  json inputs = json::array();
  for (size_t i = 0; i < n.inputs.size(); ++i)
    inputs.push_back(
        {{"id", n.inputs[i].id}, {"shape", n.inputs[i].shape}, {"dtype", dtype_name(n.node->inputs[i].dtype)}});
  json j = {{"id", id},
            {"op", n.op},
            {"formula", std::string(n.node->properties.formula)},
            {"scope", n.scope},
            {"name", n.name},
            {"leaf", n.is_leaf()},
            {"shape", n.shape},
            {"dtype", dtype_name(n.dtype)},
            {"saved_bytes", n.saved_bytes},
            {"inputs", inputs}};
  if (n.is_leaf()) {
    j["value"] = optional_summary(recorder.leaf_value(*n.node));
    j["grad"] = optional_summary(recorder.leaf_grad(*n.node));
    j["tangent"] = optional_summary(recorder.leaf_tangent(*n.node));
    return j;
  }
  const ForwardRecord* forward = recorder.forward(*n.node);
  j["value"] = forward != nullptr ? summary_json(forward->output) : json();
  j["tangent"] = forward != nullptr && forward->tangent ? summary_json(*forward->tangent) : json();
  json saved = json::array();
  if (forward != nullptr) {
    for (const SavedRecord& s : forward->saved)
      saved.push_back({{"what", s.what}, {"shape", s.shape}, {"dtype", dtype_name(s.dtype)}, {"bytes", s.bytes}});
    j["forward_seconds"] = forward->seconds;
  }
  j["saved"] = saved;
  return j;
}

json backward_json(const StepRecorder& recorder) {
  json order = json::array();
  for (const BackwardRecord& r : recorder.backward()) {
    json sent = json::array();
    for (const auto& s : r.sent) sent.push_back(s ? summary_json(*s) : json());
    order.push_back({{"id", recorder.graph().ids.at(r.node)},
                     {"grad", summary_json(r.grad)},
                     {"sent", sent},
                     {"seconds", r.seconds}});
  }
  return order;
}

// Replaces the one `marker` in `page` with `text`.
void fill(std::string& page, const std::string& marker, const std::string& text) {
  const size_t at = page.find(marker);
  AG_CHECK(at != std::string::npos, "step page: the template has no {}", marker);
  page.replace(at, marker.size(), text);
}

std::string html_escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}

// Graphviz's SVG without its XML prolog and DOCTYPE, to sit inside the page.
std::string svg_element(const std::string& svg) {
  const size_t start = svg.find("<svg");
  AG_CHECK(start != std::string::npos, "step page: Graphviz's output holds no <svg> element");
  return svg.substr(start);
}

}  // namespace

std::string step_json(const StepRecorder& recorder, const std::string& note) {
  json nodes = json::array();
  const Graph& graph = recorder.graph();
  for (size_t id = 0; id < graph.nodes.size(); ++id)
    nodes.push_back(node_json(recorder, graph.nodes[id], static_cast<int>(id)));
  const json bounds = {{"whole_values", ValueSummary::kWholeValues},
                       {"first_values", ValueSummary::kFirstValues},
                       {"histogram_bins", ValueSummary::kHistogramBins}};
  return json{{"note", note}, {"bounds", bounds}, {"nodes", nodes}, {"backward", backward_json(recorder)}}.dump();
}

std::string step_page_html(const StepRecorder& recorder, const std::string& svg, const std::string& title,
                           const std::string& note) {
  const std::string numbers = step_json(recorder, note);
  // "</" would end the <script> element holding the JSON; "<\/" reads the same to JSON.parse.
  std::string data;
  size_t from = 0;
  for (size_t at = numbers.find("</"); at != std::string::npos; from = at + 1, at = numbers.find("</", from))
    data.append(numbers, from, at + 1 - from).append("\\");
  data.append(numbers, from);
  std::string page = kStepPageTemplate;
  fill(page, "%%TITLE%%", html_escaped(title));
  fill(page, "%%TITLE%%", html_escaped(title));
  fill(page, "%%STEP_DATA%%", data);  // before the SVG, which could hold a marker's text in a label
  fill(page, "%%GRAPH_SVG%%", svg_element(svg));
  return page;
}

}  // namespace ag::cli
