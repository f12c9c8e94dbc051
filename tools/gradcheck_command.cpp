// `attograd gradcheck`: checks registered ops' gradients against finite differences.
#include <fmt/format.h>

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
  std::string op;
  std::string shapes;
  bool verbose = false;
  bool second_order = false;
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

// Checks one op at one shape set, prints its row (and its worst elements on failure).
bool check_row(const OpEntry& op, const std::vector<Shape>& shapes, bool verbose, bool second_order) {
  const GradcheckResult result = gradcheck_op(op, shapes, {}, second_order);
  fmt::print("{:<22} {:<28} {:>12.3e} {:>12.3e}  {}\n", op.name, shapes_str(shapes), result.max_abs_error,
             result.max_rel_error, result.ok ? "ok" : "FAIL");
  if (!result.ok || verbose) fmt::print("{}", result.report());
  return result.ok;
}

int run(const GradcheckArgs& args) {
  const Registry& registry = Registry::global();
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
  std::vector<std::pair<const OpEntry*, std::vector<Shape>>> rows;  // all checked before printing starts
  if (args.all) {
    for (const OpEntry& op : registry.ops()) {
      if (args.second_order && !op.no_double_backward.empty()) continue;  // listed by --list, with the reason
      for (const auto& shapes : op.shape_sets) rows.emplace_back(&op, shapes);
    }
  } else {
    const OpEntry& op = registry.find(args.op);
    if (!args.shapes.empty()) {
      rows.emplace_back(&op, parse_shape_list(args.shapes));
    } else {
      for (const auto& shapes : op.shape_sets) rows.emplace_back(&op, shapes);
    }
  }
  for (const auto& [op, shapes] : rows) check_op_shapes(*op, shapes);
  fmt::print("{:<22} {:<28} {:>12} {:>12}  {}\n", "op", "shapes", "max abs err", "max rel err", "ok");
  int failed = 0;
  for (const auto& [op, shapes] : rows)
    if (!check_row(*op, shapes, args.verbose, args.second_order)) ++failed;
  fmt::print("{} rows, {} passed, {} failed\n", rows.size(), rows.size() - failed, failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace

Command add_gradcheck_command(CLI::App& app) {
  auto args = std::make_shared<GradcheckArgs>();
  CLI::App* cmd = app.add_subcommand("gradcheck", "Check registered ops' gradients against finite differences (f64)");
  auto* all = cmd->add_flag("--all", args->all, "Check every registered op on all its shape sets");
  auto* list = cmd->add_flag("--list", args->list, "List the registered ops");
  auto* op = cmd->add_option("--op", args->op, "Check one op (see --list)");
  cmd->add_option("--shapes", args->shapes, "Input shapes for --op, e.g. 4x5,5 ('scalar' for 0-d)")->needs(op);
  cmd->add_flag("--verbose", args->verbose, "Print the worst elements of every row, not only of failures");
  cmd->add_flag("--second-order", args->second_order,
                "Check the gradient of the gradient (gradgradcheck) instead; --all skips the ops --list marks as "
                "having no double backward");
  all->excludes(op)->excludes(list);
  list->excludes(op);
  cmd->callback([all, list, op] {
    if (all->count() + list->count() + op->count() == 0)
      throw CLI::ValidationError("gradcheck", "expected one of --all, --op NAME or --list");
  });
  return {cmd, [args] { return run(*args); }};
}

}  // namespace ag::cli
