// Tensor data in ONNX files outside a model: the test suites' serialized TensorProtos
// (input_K.pb, output_K.pb), and the constants of a model file read apart from its import.
// A loaded model carries its own data (Graph::static_data, read once by the importer): running
// it needs neither of these.
//
//   MG_ASSIGN_OR_RETURN(alloc::TensorData x, alloc::ReadTensorProtoFile("input_0.pb"));
//   MG_ASSIGN_OR_RETURN(auto constants, alloc::ReadOnnxConstants("model.onnx", graph));
//   // constants["W"].bytes: W's elements, little-endian, in W's element type
//
// Decoding is graph::DecodeTensorProto's (graph/onnx/tensor_decode.h).
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
#include "graph/onnx/tensor_decode.h"
#include "graph/tensor_data.h"
#include "graph/tensor_type.h"
#include "onnx/onnx_pb.h"

namespace memonger::alloc {

using graph::TensorData;
using graph::DecodeTensorProto;
// A file holding one serialized TensorProto (the test suites' input_K.pb / output_K.pb).
absl::StatusOr<TensorData> ReadTensorProtoFile(
    const std::string& path, graph::DataType expected = graph::DataType::kUndefined);

// Constant data of an ONNX model, by value name (see above). NotFound / InvalidArgument for a
// file that is missing or not a model.
absl::StatusOr<absl::flat_hash_map<std::string, TensorData>> ReadOnnxConstants(
    const std::string& path, const graph::Graph& graph);

}  // namespace memonger::alloc

#endif  // MEMONGER_KERNELS_ONNX_TENSOR_DATA_H_
