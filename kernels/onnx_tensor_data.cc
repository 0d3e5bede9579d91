#include "kernels/onnx_tensor_data.h"

#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "graph/onnx/onnx_fold.h"
#include "graph/onnx/tensor_decode.h"
#include "util/file_io.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

using graph::DataType;

// The model was read once already under the user's limit; this second read (for the data)
// keeps the default cap, which is protobuf's own ceiling.
absl::StatusOr<std::string> ReadFile(const std::string& path) {
  return util::ReadInputFile(path, util::InputLimits{});
}

}  // namespace

absl::StatusOr<TensorData> ReadTensorProtoFile(const std::string& path, DataType expected) {
  MG_ASSIGN_OR_RETURN(const std::string bytes, ReadFile(path));
  onnx::TensorProto tensor;
  if (!tensor.ParseFromString(bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a serialized TensorProto"));
  }
  absl::StatusOr<TensorData> data = graph::DecodeTensorProto(tensor, expected);
  if (!data.ok()) {
    return absl::Status(data.status().code(), absl::StrCat(path, ": ", data.status().message()));
  }
  return data;
}

absl::StatusOr<absl::flat_hash_map<std::string, TensorData>> ReadOnnxConstants(
    const std::string& path, const graph::Graph& graph) {
  MG_ASSIGN_OR_RETURN(const std::string bytes, ReadFile(path));
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes) || !model.has_graph()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not an ONNX model"));
  }
  absl::flat_hash_map<std::string, TensorData> out;
  auto add = [&](const onnx::TensorProto& t, const std::string& name) {
    absl::StatusOr<TensorData> data = graph::DecodeTensorProto(t);
    if (data.ok()) out[name] = *std::move(data);
  };
  for (const onnx::TensorProto& t : model.graph().initializer()) add(t, t.name());
  for (const onnx::NodeProto& node : model.graph().node()) {
    if (node.op_type() != "Constant" || node.output_size() == 0) continue;
    if (std::optional<onnx::TensorProto> t = graph::ConstantValue(node)) add(*t, node.output(0));
  }

  // Static values the file does not hold were folded by the importer: fold again.
  bool missing = false;
  for (const graph::Value& v : graph.values()) {
    missing = missing || (graph::IsStatic(v.role) && v.producer == graph::kNone &&
                          !out.contains(v.name));
  }
  if (!missing) return out;
  onnx::ModelProto copy = model;
  onnx::GraphProto& g = *copy.mutable_graph();
  absl::flat_hash_set<std::string> initializers;
  for (const onnx::TensorProto& t : g.initializer()) initializers.insert(t.name());
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> inputs;
  for (onnx::ValueInfoProto& vi : *g.mutable_input()) {
    if (initializers.contains(vi.name())) continue;
    if (std::optional<graph::ValueId> id = graph.FindValue(vi.name());
        id.has_value() && graph.value(*id).type.has_value()) {
      // The graph's bound shape replaces symbols.
      onnx::TensorShapeProto* shape = vi.mutable_type()->mutable_tensor_type()->mutable_shape();
      shape->clear_dim();
      for (int64_t d : graph.value(*id).type->dims) shape->add_dim()->set_dim_value(d);
    }
    inputs.Add()->Swap(&vi);
  }
  g.mutable_input()->Swap(&inputs);
  if (copy.ir_version() < 4) copy.set_ir_version(4);
  absl::StatusOr<graph::onnx_fold::FoldReport> report =
      graph::onnx_fold::InferAndFold(copy, graph::onnx_fold::FoldOptions{});
  if (!report.ok()) return out;  // best effort (see the header)
  const absl::flat_hash_set<std::string> folded(report->folded_values.begin(),
                                                report->folded_values.end());
  for (const onnx::TensorProto& t : g.initializer()) {
    if (folded.contains(t.name()) && !out.contains(t.name())) add(t, t.name());
  }
  return out;
}

}  // namespace memonger::alloc
