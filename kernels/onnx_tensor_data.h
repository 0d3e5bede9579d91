// Tensor *data* from ONNX files, for running imported models: the graph (graph::Graph) keeps
// only types, so the values of initializers, Constant nodes and the values the importer folded
// are read here, from the model file, when a net is run.
//
//   MG_ASSIGN_OR_RETURN(alloc::TensorData x, alloc::ReadTensorProtoFile("input_0.pb"));
//   MG_ASSIGN_OR_RETURN(auto constants, alloc::ReadOnnxConstants("model.onnx", graph));
//   // constants["W"].bytes: W's elements, little-endian, in W's element type
//
// TensorProto decoding: raw_data, or the typed fields (float_data; int32_data for int32, int16,
// int8, uint8, bool, and the bit patterns of float16 and bfloat16; int64_data; double_data).
// Refused: strings, external data, uint16/32/64 (no graph::DataType; except that a UINT16
// tensor is accepted as the bit patterns of a bfloat16 one when the caller expects bfloat16, as
// the ONNX test suites store bfloat16 references), and data whose length does not match dims.
//
// ReadOnnxConstants returns, by value name: every initializer; every Constant node's output
// (attributes value, value_float(s), value_int(s); sparse values are skipped); and, when the
// graph has static values that are neither, the values the importer's folding created: the
// model's graph inputs get the graph's (bound) shapes and the same folding (graph/onnx/onnx_fold.h)
// runs again. That last step is best effort: when it fails, those values are simply absent
// (the caller fills them otherwise, and says so).
#ifndef MEMONGER_KERNELS_ONNX_TENSOR_DATA_H_
#define MEMONGER_KERNELS_ONNX_TENSOR_DATA_H_

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "graph/tensor_type.h"
#include "onnx/onnx_pb.h"

namespace memonger::alloc {

struct TensorData {
  graph::TensorType type;
  std::string bytes;  // ByteSize(type) bytes, little-endian
};

// `expected` (kUndefined: none) only changes how UINT16 is read (see above).
absl::StatusOr<TensorData> DecodeTensorProto(
    const onnx::TensorProto& tensor, graph::DataType expected = graph::DataType::kUndefined);
// A file holding one serialized TensorProto (the test suites' input_K.pb / output_K.pb).
absl::StatusOr<TensorData> ReadTensorProtoFile(
    const std::string& path, graph::DataType expected = graph::DataType::kUndefined);

// Constant data of an ONNX model, by value name (see above). NotFound / InvalidArgument for a
// file that is missing or not a model.
absl::StatusOr<absl::flat_hash_map<std::string, TensorData>> ReadOnnxConstants(
    const std::string& path, const graph::Graph& graph);

}  // namespace memonger::alloc

#endif  // MEMONGER_KERNELS_ONNX_TENSOR_DATA_H_
