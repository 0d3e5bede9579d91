// Loads a model through the installed memonger library and prints its op count.
#include <iostream>

#include "graph/model_loader.h"
#include "graph/shape_inference.h"
#include "report/model_summary.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: consumer MODEL [SYMBOL=VALUE...]\n";
    return 2;
  }
  memonger::graph::LoadOptions options;
  for (int i = 2; i < argc; ++i) {
    if (!memonger::graph::ParseDimBinding(argv[i], options.bindings).ok()) return 2;
  }
  auto graph = memonger::graph::LoadModel(argv[1], options);
  if (!graph.ok()) {
    std::cerr << graph.status().message() << "\n";
    return 1;
  }
  const absl::Status shapes = memonger::graph::InferShapes(*graph, options.bindings);
  if (!shapes.ok()) {
    std::cerr << shapes.message() << "\n";
    return 1;
  }
  auto summary = memonger::SummarizeModel(*graph, argv[1]);
  if (!summary.ok()) return 1;
  std::cout << "ops " << summary->num_ops << "\n";
  return 0;
}
