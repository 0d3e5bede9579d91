// Writing a net op by op from code (the workload generators): typed inputs with their roles,
// ops by blob name, then one typed Graph.
//
//   NetWriter net("mlp");
//   net.Input("data", DataType::kFloat32, {4, 10}, Role::kInput);
//   net.Input("w", DataType::kFloat32, {10, 10}, Role::kParam);
//   net.Op("MatMul", "fc", {"data", "w"}, {"fc"});
//   net.builder().AddExternalOutput("fc");
//   MG_ASSIGN_OR_RETURN(Graph g, std::move(net).Finish());   // built and typed
#ifndef MEMONGER_GRAPH_NET_WRITER_H_
#define MEMONGER_GRAPH_NET_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/attribute.h"
#include "graph/dtype.h"
#include "graph/graph.h"

namespace memonger::graph {

class NetWriter {
 public:
  explicit NetWriter(std::string name) : builder_(std::move(name)) {}

  // An external input (graph input, parameter or constant) of a concrete type.
  void Input(const std::string& name, DataType dtype, const std::vector<int64_t>& dims,
             Role role);

  void Op(const std::string& type, const std::string& name, std::vector<std::string> inputs,
          std::vector<std::string> outputs, std::vector<Attribute> attrs = {});

  // For outputs, losses and roles of op outputs.
  GraphBuilder& builder() { return builder_; }

  // Builds the graph and infers its types (GraphBuilder::Build, InferShapes errors).
  absl::StatusOr<Graph> Finish() &&;

 private:
  GraphBuilder builder_;
};

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_NET_WRITER_H_
