#include "kernels/onnx_tensor_data.h"

#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "graph/onnx/onnx_fold.h"
#include "util/file_io.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

using graph::DataType;

template <typename T, typename Field>
void AppendAs(const Field& field, std::string& out) {
  for (const auto& v : field) {
    const T t = static_cast<T>(v);
    out.append(reinterpret_cast<const char*>(&t), sizeof(T));
  }
}

// The model was read once already under the user's limit; this second read (for the data)
// keeps the default cap, which is protobuf's own ceiling.
absl::StatusOr<std::string> ReadFile(const std::string& path) {
  return util::ReadInputFile(path, util::InputLimits{});
}

// A Constant node's value as a TensorProto (nullopt for sparse or missing values).
std::optional<onnx::TensorProto> ConstantValue(const onnx::NodeProto& node) {
  for (const onnx::AttributeProto& a : node.attribute()) {
    onnx::TensorProto t;
    if (a.name() == "value" && a.has_t()) return a.t();
    if (a.name() == "value_float") {
      t.set_data_type(onnx::TensorProto::FLOAT);
      t.add_float_data(a.f());
      return t;
    }
    if (a.name() == "value_floats") {
      t.set_data_type(onnx::TensorProto::FLOAT);
      t.add_dims(a.floats_size());
      for (float f : a.floats()) t.add_float_data(f);
      return t;
    }
    if (a.name() == "value_int") {
      t.set_data_type(onnx::TensorProto::INT64);
      t.add_int64_data(a.i());
      return t;
    }
    if (a.name() == "value_ints") {
      t.set_data_type(onnx::TensorProto::INT64);
      t.add_dims(a.ints_size());
      for (int64_t i : a.ints()) t.add_int64_data(i);
      return t;
    }
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<TensorData> DecodeTensorProto(const onnx::TensorProto& tensor,
                                             DataType expected) {
  const std::string what = tensor.name().empty() ? std::string("a tensor")
                                                 : absl::StrCat("tensor '", tensor.name(), "'");
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    return absl::UnimplementedError(absl::StrCat(what, ": external data is not read"));
  }
  TensorData out;
  out.type.dims.assign(tensor.dims().begin(), tensor.dims().end());
  if (tensor.data_type() == onnx::TensorProto::UINT16 && expected == DataType::kBFloat16) {
    out.type.dtype = DataType::kBFloat16;
  } else {
    MG_ASSIGN_OR_RETURN(out.type.dtype, graph::DataTypeFromProtoNumber(tensor.data_type()));
  }
  MG_ASSIGN_OR_RETURN(const int64_t bytes, graph::ByteSize(out.type, what));
  if (tensor.has_raw_data()) {
    out.bytes = tensor.raw_data();
  } else {
    switch (out.type.dtype) {
      case DataType::kFloat32: AppendAs<float>(tensor.float_data(), out.bytes); break;
      case DataType::kFloat64: AppendAs<double>(tensor.double_data(), out.bytes); break;
      case DataType::kInt64: AppendAs<int64_t>(tensor.int64_data(), out.bytes); break;
      case DataType::kInt32: AppendAs<int32_t>(tensor.int32_data(), out.bytes); break;
      case DataType::kInt16: AppendAs<int16_t>(tensor.int32_data(), out.bytes); break;
      case DataType::kInt8: AppendAs<int8_t>(tensor.int32_data(), out.bytes); break;
      case DataType::kUInt8: AppendAs<uint8_t>(tensor.int32_data(), out.bytes); break;
      case DataType::kBool: AppendAs<bool>(tensor.int32_data(), out.bytes); break;
      case DataType::kFloat16:
      case DataType::kBFloat16: AppendAs<uint16_t>(tensor.int32_data(), out.bytes); break;
      default:
        return absl::UnimplementedError(absl::StrCat(what, ": element type ",
                                                     graph::DataTypeName(out.type.dtype)));
    }
  }
  if (static_cast<int64_t>(out.bytes.size()) != bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " ", graph::TensorTypeToString(out.type), " needs ", bytes, " bytes of data, has ",
        out.bytes.size()));
  }
  return out;
}

absl::StatusOr<TensorData> ReadTensorProtoFile(const std::string& path, DataType expected) {
  MG_ASSIGN_OR_RETURN(const std::string bytes, ReadFile(path));
  onnx::TensorProto tensor;
  if (!tensor.ParseFromString(bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a serialized TensorProto"));
  }
  absl::StatusOr<TensorData> data = DecodeTensorProto(tensor, expected);
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
    absl::StatusOr<TensorData> data = DecodeTensorProto(t);
    if (data.ok()) out[name] = *std::move(data);
  };
  for (const onnx::TensorProto& t : model.graph().initializer()) add(t, t.name());
  for (const onnx::NodeProto& node : model.graph().node()) {
    if (node.op_type() != "Constant" || node.output_size() == 0) continue;
    if (std::optional<onnx::TensorProto> t = ConstantValue(node)) add(*t, node.output(0));
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
