// ONNX tensor data decoded into our byte layout, and external data read from beside the model.
//
//   MG_ASSIGN_OR_RETURN(TensorData w, DecodeTensorProto(initializer));
//   MG_RETURN_IF_ERROR(ReadExternalData(initializer, "/models/gpt", limits));  // now inline
//
// DecodeTensorProto: raw_data, or the typed fields (float_data; int32_data for int32, int16,
// int8, uint8, bool, and the bit patterns of float16 and bfloat16; int64_data; double_data).
// Refused: strings, data still external (read it first), uint16/32/64 (no graph::DataType;
// except that a UINT16 tensor is accepted as the bit patterns of a bfloat16 one when the caller
// expects bfloat16, as the ONNX test suites store bfloat16 references), and data whose length
// does not match the dims.
//
// ReadExternalData: a tensor whose data_location is EXTERNAL names a file ("location", relative
// to the model's folder), an "offset" (default 0) and a "length" (default: the rest of the
// file), as onnx.save(..., save_as_external_data=True) and torch.onnx.export above 2 GB write
// them. The file must lie inside the model's folder (an absolute path, or one that leaves the
// folder through '..' or a link, is refused), hold offset + length bytes, and length must be the
// tensor's byte size. The bytes become the tensor's raw_data. Each error names the tensor and
// the file.
#ifndef MEMONGER_GRAPH_ONNX_TENSOR_DECODE_H_
#define MEMONGER_GRAPH_ONNX_TENSOR_DECODE_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/tensor_data.h"
#include "onnx/onnx_pb.h"

namespace memonger::graph {

// `expected` (kUndefined: none) only changes how UINT16 is read (see above).
absl::StatusOr<TensorData> DecodeTensorProto(const onnx::TensorProto& tensor,
                                             DataType expected = DataType::kUndefined);

// A Constant node's value as a TensorProto (attributes value, value_float(s), value_int(s));
// nullopt for sparse or missing values.
std::optional<onnx::TensorProto> ConstantValue(const onnx::NodeProto& node);

// True when the tensor's data lives in another file.
bool HasExternalData(const onnx::TensorProto& tensor);

// Reads an external tensor's bytes into its raw_data (see above); with `read_bytes` false only
// checks that they can be read (the file, its size), leaving the tensor as it is. `model_dir`
// is the folder the locations are relative to; empty when the model came as bytes without one
// (then any external tensor is an error saying so).
absl::Status ReadExternalData(onnx::TensorProto& tensor, const std::string& model_dir,
                              bool read_bytes = true);

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_ONNX_TENSOR_DECODE_H_
