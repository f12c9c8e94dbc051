// `attograd gradcheck`: checks registered ops' gradients against finite differences.
#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/gradcheck.h"
#include "engine/registry.h"
#include "tools/commands.h"

namespace ag::cli {

namespace {

struct GradcheckArgs {
  bool all = false;
  bool list = false;
  bool json = false;
  std::string op;
  std::string shapes;
  bool verbose = false;
  bool second_order = false;
  std::string mode = "both";
};

// "4x5,5" → {{4,5},{5}}.
std::vector<Shape> parse_shape_list(const std::string& text) {
  std::vector<Shape> shapes;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    shapes.push_back(parse_shape(std::string_view(text).substr(start, comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return shapes;
}

// One input's domain as the registry JSON prints it.
nlohmann::ordered_json domain_json(const Domain& d) {
  return {{"low", d.low},
          {"high", d.high},
          {"kinks", std::vector<double>(d.kinks.begin(), d.kinks.end())},
          {"kink_margin", d.kink_margin}};
}

// The registry as JSON, for tools/golden/parity.py: per entry its name, input count, why it has no
// double backward or differs from PyTorch, and its PyTorch counterpart with the shapes and each
// input's domain to draw from.
void print_registry_json(const Registry& registry) {
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();
  for (const OpEntry& op : registry.ops()) {
    nlohmann::ordered_json entry = {{"name", op.name},
                                    {"inputs", op.shape_sets.front().size()},
                                    {"no_double_backward", op.no_double_backward},
                                    {"differs_from_pytorch", op.differs_from_pytorch}};
    if (!op.torch.expression.empty()) {
      nlohmann::ordered_json domains = nlohmann::ordered_json::array();
      for (size_t i = 0; i < op.shape_sets.front().size(); ++i)
        domains.push_back(domain_json(i < op.torch.domains.size() ? op.torch.domains[i] : Domain{}));
      const bool broadcast = op.torch.shapes == TorchCounterpart::Shapes::broadcast;
      entry["torch"] = {
          {"expression", op.torch.expression}, {"shapes", broadcast ? "broadcast" : "any"}, {"domains", domains}};
    }
    entries.push_back(std::move(entry));
  }
  fmt::print("{}\n", entries.dump(1));
}

int run(const GradcheckArgs& args) {
  const Registry& registry = Registry::global();
  if (args.list && args.json) {
    print_registry_json(registry);
    return 0;
  }
  if (args.list) {
    for (const OpEntry& op : registry.ops()) {
      if (op.no_double_backward.empty()) {
        fmt::print("{}\n", op.name);
      } else {
        fmt::print("{:<36} no double backward: {}\n", op.name, op.no_double_backward);
      }
    }
    return 0;
  }
  std::vector<GradcheckRow> rows;
  if (args.all) {
    for (const OpEntry& op : registry.ops()) {
      if (args.second_order && !op.no_double_backward.empty()) continue;  // listed by --list, with the reason
      for (GradcheckRow& row : gradcheck_rows(op)) rows.push_back(std::move(row));
    }
  } else {
    const OpEntry& op = registry.find(args.op);
    rows = args.shapes.empty() ? gradcheck_rows(op) : std::vector<GradcheckRow>{{&op, parse_shape_list(args.shapes)}};
  }
  const int failed = print_gradcheck_table(
      std::cout, rows,
      {.second_order = args.second_order, .mode = parse_gradcheck_mode(args.mode), .verbose = args.verbose});
  return failed == 0 ? 0 : 1;
}

}  // namespace

Command add_gradcheck_command(CLI::App& app) {
  auto args = std::make_shared<GradcheckArgs>();
  CLI::App* cmd = app.add_subcommand(
      "gradcheck", "Check registered ops' derivatives (backward and forward mode) against finite differences (f64)");
  auto* all = cmd->add_flag("--all", args->all, "Check every registered op on all its shape sets");
  auto* list = cmd->add_flag("--list", args->list, "List the registered ops");
  cmd->add_flag(
         "--json", args->json,
         "With --list: the registry as JSON, with each op's PyTorch counterpart (tools/golden/parity.py reads it)")
      ->needs(list);
  auto* op = cmd->add_option("--op", args->op, "Check one op (see --list)");
  auto* shapes =
      cmd->add_option("--shapes", args->shapes, "Input shapes for --op, e.g. 4x5,5 ('scalar' for 0-d)")->needs(op);
  cmd->add_flag("--verbose", args->verbose, "Print the worst elements of every row, not only of failures");
  cmd->add_flag("--second-order", args->second_order,
                "Check the gradient of the gradient (gradgradcheck) instead; --all skips the ops --list marks as "
                "having no double backward");
  cmd->add_option("--mode", args->mode,
                  "Which derivatives to check: reverse (the VJP, backward), forward (the JVP, forward mode) or both "
                  "(each against finite differences and against the other)")
      ->check(CLI::IsMember({"reverse", "forward", "both"}))
      ->capture_default_str();
  all->excludes(op)->excludes(list);
  list->excludes(op);
  cmd->callback([args, all, list, op, shapes] {
    if (all->count() + list->count() + op->count() == 0)
      throw CLI::ValidationError("gradcheck", "expected one of --all, --op NAME or --list");
    if (op->count() == 0) return;
    // Usage errors (exit 2) before any work: an unknown op, shapes that do not parse or do not fit it.
    try {
      const OpEntry& entry = Registry::global().find(args->op);
      if (shapes->count() == 0) return;
      AG_CHECK(!args->shapes.empty(), "--shapes: expected input shapes such as 4x5,5, got ''");
      check_op_shapes(entry, parse_shape_list(args->shapes));
    } catch (const Error& e) {
      throw CLI::ValidationError(e.what());
    }
  });
  return {cmd, [args] { return run(*args); }};
}

}  // namespace ag::cli
