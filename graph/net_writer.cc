#include "graph/net_writer.h"

#include <utility>

#include "graph/rebuild.h"
#include "graph/shape_inference.h"
#include "util/status_macros.h"

namespace memonger::graph {

void NetWriter::Input(const std::string& name, DataType dtype, const std::vector<int64_t>& dims,
                      Role role) {
  builder_.Declare(name, DeclarationOf(TensorType{dtype, dims}));
  builder_.DeclareRole(name, role);
  builder_.AddExternalInput(name);
}

void NetWriter::Op(const std::string& type, const std::string& name,
                   std::vector<std::string> inputs, std::vector<std::string> outputs,
                   std::vector<Attribute> attrs) {
  OpSpec op;
  op.type = type;
  op.name = name;
  op.inputs = std::move(inputs);
  op.outputs = std::move(outputs);
  op.attrs = std::move(attrs);
  builder_.AddOp(std::move(op));
}

absl::StatusOr<Graph> NetWriter::Finish() && {
  MG_ASSIGN_OR_RETURN(Graph graph, std::move(builder_).Build());
  MG_RETURN_IF_ERROR(InferShapes(graph, ShapeBindings{}));
  return graph;
}

}  // namespace memonger::graph
