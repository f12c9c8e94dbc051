// `attograd graph <task>`: the autograd graph of one training step's loss, as a numbered list
// (text), Graphviz DOT, SVG drawn by Graphviz's `dot`, or the step page (html: tools/step_page.h).
#include <cstdlib>
#include <iostream>

#include "engine/forward_ad.h"
#include "engine/generator.h"
#include "engine/graph.h"
#include "engine/inspect.h"
#include "engine/io.h"
#include "engine/step_record.h"
#include "seeds/seed_attention.h"
#include "tasks/charlm/task.h"
#include "tasks/g2p/task.h"
#include "tasks/sentiment/task.h"
#include "tasks/squares/task.h"
#include "tools/commands.h"
#include "tools/flag_checks.h"
#include "tools/settings_flags.h"
#include "tools/step_page.h"

namespace ag::cli {

namespace {

struct GraphOptions {
  std::string format = "text";
  std::string out;  // empty: stdout
  bool trace_backward = false;
  std::string tangent;  // the leaf the step page's forward gives a tangent (empty: none)
  uint64_t tangent_seed = 0;
};

// Runs `dot -Tsvg` on the DOT text and returns the drawing. The text and the drawing go through
// memory (ag::run_program), so a graph killed while dot draws leaves no file anywhere.
std::string render_svg(const std::string& dot) {
  AG_CHECK(std::system("command -v dot > /dev/null 2>&1") == 0,
           "graph: --format svg needs Graphviz's `dot` on the PATH (Debian package graphviz; tools/setup.sh installs "
           "it); use --format dot and render it elsewhere");
  return run_program({"dot", "-Tsvg"}, dot);
}

// One training step's loss, the names of its model's parameters, and the model, kept alive while
// the graph is exported and the backward runs.
struct TaskStep {
  Tensor loss;
  ParameterNames names;
  std::shared_ptr<const void> model;
};
// Computes the step; calls its argument, if given, with the named leaves before the forward.
using StepMaker = std::function<TaskStep(const tasks::BeforeForward&)>;

nn::Module& module_of(squares::SquaresModel& model) { return model.module(); }
nn::Module& module_of(nn::Module& model) { return model; }

// A task's first step as `export_graph` takes it: `first_step` is the task's first_step_loss, which
// returns the model (a unique_ptr) and its loss.
template <typename Options, typename Step>
StepMaker first_step_of(Step (*first_step)(const Options&, const tasks::BeforeForward&),
                        std::shared_ptr<Options> task) {
  return [first_step, task](const tasks::BeforeForward& before_forward) {
    Step step = first_step(*task, before_forward);
    const ParameterNames names = parameter_names(module_of(*step.model).named_parameters());
    return TaskStep{step.loss, names, std::shared_ptr<const void>(std::move(step.model))};
  };
}

// The leaves' names an unknown --tangent NAME may have meant: those containing NAME, else all; at
// most ten of them, and how many there are.
std::string names_meant(const NamedTensors& leaves, const std::string& name) {
  std::vector<std::string> meant;
  for (const auto& leaf : leaves)
    if (leaf.first.find(name) != std::string::npos) meant.push_back(leaf.first);
  const bool close = !meant.empty();
  if (!close)
    for (const auto& leaf : leaves) meant.push_back(leaf.first);
  const size_t shown = std::min<size_t>(meant.size(), 10);
  std::string text = close ? "did you mean " : fmt::format("its {} are ", meant.size());
  for (size_t i = 0; i < shown; ++i) text += (i > 0 ? ", " : "") + meant[i];
  if (shown < meant.size())
    text += fmt::format(", … ({} in all; `graph … --format text` names every one)", meant.size());
  return text;
}

// The step computed under a forward-AD level in which the leaf named options.tangent carries a
// tangent drawn from N(0, 1) (its own generator, seeded by --tangent-seed: the step's dropout draws
// stay what they are without --tangent). The level ends before the backward runs.
TaskStep step_with_tangent(const GraphOptions& options, const StepMaker& make_step) {
  const fw::DualLevel level;
  bool given = false;
  TaskStep step = make_step([&](const NamedTensors& leaves) {
    const auto leaf =
        std::find_if(leaves.begin(), leaves.end(), [&](const auto& l) { return l.first == options.tangent; });
    AG_CHECK(leaf != leaves.end(), "graph: --tangent {}: the step has no parameter of that name; {}", options.tangent,
             names_meant(leaves, options.tangent));
    AG_CHECK(is_floating(leaf->second.dtype()), "graph: --tangent {}: the parameter is {}, not floating",
             options.tangent, dtype_name(leaf->second.dtype()));
    Generator generator(options.tangent_seed);
    fw::set_tangent(leaf->second, randn(leaf->second.shape(), leaf->second.dtype(), generator), "graph --tangent");
    given = true;
  });
  AG_CHECK(given, "graph: --tangent {}: the step never offered its parameters for a tangent", options.tangent);
  return step;
}

// The step page: the step is computed (with --tangent, its forward carries that leaf's tangent) and
// its backward run under a StepRecorder, then the page (Graphviz's SVG of the graph, the recorded
// numbers, the page's script) is written.
int export_page(const GraphOptions& options, const StepMaker& make_step, const std::string& title) {
  StepRecorder recorder;
  const TaskStep step = options.tangent.empty() ? make_step({}) : step_with_tangent(options, make_step);
  recorder.name_parameters(step.names);
  step.loss.backward();
  std::string note = fmt::format("{}: {} nodes, {} ran in backward; loss {:.6g}", title, recorder.graph().nodes.size(),
                                 recorder.backward().size(), step.loss.item());
  if (!options.tangent.empty())
    note += fmt::format("; tangents: the forward's derivative along {} + ε·v, v ~ N(0, 1) (--tangent-seed {})",
                        options.tangent, options.tangent_seed);
  const std::string page = step_page_html(recorder, render_svg(graph_dot(recorder.graph())), title, note);
  if (options.out.empty()) {
    std::cout << page << std::flush;
  } else {
    write_file_atomically(options.out, page);
    std::cerr << fmt::format("wrote {} ({} nodes, {:.1f} KiB)\n", options.out, recorder.graph().nodes.size(),
                             static_cast<double>(page.size()) / 1024);
  }
  return 0;
}

// Exports the graph of the step's loss as asked; then, with --trace-backward, runs the backward
// under a trace (on stderr, so that stdout keeps only the graph).
int export_graph(const GraphOptions& options, const StepMaker& make_step, const std::string& title) {
  if (options.format == "html") return export_page(options, make_step, title);
  const TaskStep step = make_step({});
  const Graph graph = capture_graph(step.loss, step.names);
  std::string text = options.format == "text" ? graph_text(graph) : graph_dot(graph);
  if (options.format == "svg") text = render_svg(text);
  if (options.out.empty()) {
    std::cout << text << std::flush;
  } else {
    write_file_atomically(options.out, text);
    std::cerr << fmt::format("wrote {} ({} nodes)\n", options.out, graph.nodes.size());
  }
  if (options.trace_backward) {
    const BackwardTrace trace(&std::cerr, 1, step.names);
    step.loss.backward();
  }
  return 0;
}

void add_output_flags(CLI::App* app, GraphOptions& options) {
  app->add_option("--format", options.format,
                  "text: the tape as a numbered list in creation order; dot: Graphviz, clustered by module; svg: "
                  "drawn by Graphviz's dot; html: the step page (one self-contained file: click a node for its "
                  "values, gradients and saved tensors, step through backward with the arrow keys)")
      ->check(CLI::IsMember({"text", "dot", "svg", "html"}))
      ->capture_default_str();
  app->add_option("--out", options.out, "Write to this file (default: stdout)")->check(kPath);
  app->add_flag("--trace-backward", options.trace_backward,
                "Then run the backward and trace it node by node on stderr (gradient norms, times, summary by op)");
  app->add_option("--tangent", options.tangent,
                  "html only: run the forward in forward mode with this parameter (a state_dict name, or the "
                  "walkthrough's inputs, W_query, W_key, W_value) given a random tangent v, and show every node's "
                  "tangent, the derivative of its value along v, beside the value");
  app->add_option("--tangent-seed", options.tangent_seed, "Seed of the tangent v's N(0, 1) draws")
      ->check(kSeed)
      ->capture_default_str();
  app->parse_complete_callback([&options] {
    if (!options.tangent.empty() && options.format != "html")
      throw CLI::ValidationError("--tangent", "tangents are shown on the step page only; add --format html");
    if (options.format == "html" && options.trace_backward)
      throw CLI::ValidationError("--trace-backward",
                                 "the html page already shows the backward node by node; drop --trace-backward or "
                                 "choose --format text|dot|svg");
  });
}

Command add_graph_squares(CLI::App* graph) {
  auto options = std::make_shared<GraphOptions>();
  auto task = std::make_shared<squares::SquaresOptions>();
  CLI::App* app = graph->add_subcommand("squares", "The graph of `train squares`'s loss on its first batch");
  add_output_flags(app, *options);
  add_setting_flags(app, squares::settings(), *task, {"--model", "--heads", "--batch-size", "--seed"});
  const CLI::Option* heads = app->get_option("--heads");
  return {app, [options, task, heads] {
            const int64_t chosen_heads = task->model.heads;
            task->model = squares::default_model_config(task->model.model);
            if (heads->count() > 0) task->model.heads = chosen_heads;
            if (task->model.model == "transformer")
              check_heads_divide(task->model.heads, "--heads", task->model.d_model, "the transformer's d_model");
            return export_graph(*options, first_step_of(squares::first_step_loss, task),
                                "squares (" + task->model.model + ")");
          }};
}

Command add_graph_sentiment(CLI::App* graph) {
  auto options = std::make_shared<GraphOptions>();
  auto task = std::make_shared<sentiment::SentimentOptions>();
  CLI::App* app = graph->add_subcommand("sentiment", "The graph of `train sentiment`'s loss on its first batch");
  add_output_flags(app, *options);
  add_setting_flags(app, sentiment::settings(), *task, {"--heads", "--dim", "--batch-size", "--seed"});
  return {app, [options, task] {
            if (task->heads > 0) check_heads_divide(task->heads, "--heads", task->dim, "--dim");
            return export_graph(*options, first_step_of(sentiment::first_step_loss, task), "sentiment");
          }};
}

Command add_graph_charlm(CLI::App* graph) {
  auto options = std::make_shared<GraphOptions>();
  auto task = std::make_shared<charlm::CharLMOptions>();
  CLI::App* app = graph->add_subcommand(
      "charlm", "The graph of `train charlm`'s loss on the first --batch-size windows of the training text");
  add_output_flags(app, *options);
  add_setting_flags(app, charlm::settings(), *task,
                    {"--data", "--batch-size", "--block-size", "--layers", "--heads", "--width", "--seed"});
  return {app,
          [options, task] { return export_graph(*options, first_step_of(charlm::first_step_loss, task), "charlm"); }};
}

Command add_graph_g2p(CLI::App* graph) {
  auto options = std::make_shared<GraphOptions>();
  auto task = std::make_shared<g2p::G2POptions>();
  CLI::App* app = graph->add_subcommand(
      "g2p", "The graph of `train g2p`'s loss (the encoder-decoder) on the first --batch-size training pairs");
  add_output_flags(app, *options);
  add_setting_flags(app, g2p::settings(), *task, {"--data", "--preset", "--batch-size", "--seed"});
  return {app, [options, task] {
            task->model = g2p::preset_config(task->preset);
            return export_graph(*options, first_step_of(g2p::first_step_loss, task), "g2p (" + task->preset + ")");
          }};
}

Command add_graph_walkthrough(CLI::App* graph) {
  auto options = std::make_shared<GraphOptions>();
  CLI::App* app = graph->add_subcommand(
      "walkthrough", "The graph of `walkthrough`'s seed 003 attention step: context.sum() from six tokens (f64)");
  add_output_flags(app, *options);
  return {app, [options] {
            return export_graph(
                *options,
                [](const tasks::BeforeForward& before_forward) {
                  auto step = std::make_shared<seeds::SeedAttentionStep>(seeds::seed_attention_step(before_forward));
                  return TaskStep{step->loss, seeds::seed_attention_leaf_names(*step), step};  // step keeps the leaves
                },
                "walkthrough (seed 003)");
          }};
}

}  // namespace

std::vector<Command> add_graph_commands(CLI::App& app) {
  CLI::App* graph = app.add_subcommand(
      "graph", "Export the autograd graph of one training step's loss (ops, module scopes, shapes, saved bytes)");
  graph->require_subcommand(1);
  return {add_graph_squares(graph), add_graph_sentiment(graph), add_graph_charlm(graph), add_graph_g2p(graph),
          add_graph_walkthrough(graph)};
}

}  // namespace ag::cli
