// optimize-net: loads a model, infers every value's type and reports what the model holds.
// Thin by design: parse flags, call the library, print, map the Status to an exit code.
//
// Exit codes: 0 success; 1 the input or the run failed (the message on stderr names the file,
// op or value); 2 usage error.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "graph/model_loader.h"
#include "graph/shape_inference.h"
#include "memonger/model_summary.h"
#include "util/status_macros.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

struct Flags {
  std::string model;
  std::vector<std::string> input_shapes;
  std::vector<std::string> dims;
  std::string format = "text";
  int top = 10;
};

absl::Status Run(const Flags& flags) {
  memonger::graph::LoadOptions options;
  for (const std::string& d : flags.dims) {
    MG_RETURN_IF_ERROR(memonger::graph::ParseDimBinding(d, options.bindings));
  }
  for (const std::string& s : flags.input_shapes) {
    MG_RETURN_IF_ERROR(memonger::graph::ParseInputShapeBinding(s, options.bindings));
  }
  MG_ASSIGN_OR_RETURN(memonger::graph::Graph graph,
                      memonger::graph::LoadModel(flags.model, options));
  MG_RETURN_IF_ERROR(memonger::graph::InferShapes(graph, options.bindings));
  MG_ASSIGN_OR_RETURN(memonger::ModelSummary summary,
                      memonger::SummarizeModel(graph, flags.model, flags.top));
  if (flags.format == "json") {
    std::cout << memonger::SummaryToJson(graph, summary);
  } else {
    std::cout << memonger::SummaryToText(graph, summary);
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "optimize-net: plans the memory of a neural-network graph.\n"
      "Loads MODEL (.onnx, .pb, .pbtxt), infers every value's dtype and shape, and reports\n"
      "the model's ops, values, parameter bytes, naive activation bytes and largest values."};
  app.set_version_flag("--version", "optimize-net 0.1.0");
  Flags flags;
  app.add_option("model", flags.model, "model file: .onnx, .pb (binary NetDef), .pbtxt (text)")
      ->required();
  app.add_option("--input-shape", flags.input_shapes,
                 "NAME=D0,D1,... : the shape of a graph input (repeatable)")
      ->take_all()
      ->allow_extra_args(false);
  app.add_option("--dim", flags.dims, "SYMBOL=VALUE : binds a symbolic dimension (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--format", flags.format, "text or json")
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option("--top", flags.top, "how many of the largest values to list")
      ->check(CLI::NonNegativeNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }
  const absl::Status status = Run(flags);
  if (!status.ok()) {
    std::cerr << "optimize-net: " << status.message() << "\n";
    return kExitFailed;
  }
  return kExitOk;
}
