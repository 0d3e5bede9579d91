// The data of an ONNX tensor (an initializer, a Constant's value) checked against its dims and
// element type: an element type ONNX does not define, a negative dim, or data whose size is not
// what the dims say is refused, naming the tensor. A file's data is never silently replaced,
// cut or padded.
//
//   MG_RETURN_IF_ERROR(CheckTensorData(initializer, "initializer 'w'"));
//
// Raw data must hold exactly elements x element size bytes; typed fields (float_data,
// int32_data, ...) exactly one entry per element (two for complex types). A tensor with no data
// at all is accepted (weights stripped from a model; --execute seeds them and says so), and so
// is external data (it lives in another file, checked when it is read).
#ifndef MEMONGER_GRAPH_ONNX_TENSOR_DATA_CHECK_H_
#define MEMONGER_GRAPH_ONNX_TENSOR_DATA_CHECK_H_

#include <string>

#include "absl/status/status.h"
#include "onnx/onnx_pb.h"

namespace memonger::graph {

absl::Status CheckTensorData(const onnx::TensorProto& tensor, const std::string& what);

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_ONNX_TENSOR_DATA_CHECK_H_
