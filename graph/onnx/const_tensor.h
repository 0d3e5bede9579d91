// Small constant tensors of ONNX models, the values the shape folder (onnx_fold.h) computes
// with: decoded from and encoded to TensorProto, with a cap on their size.
//
//   std::optional<ConstTensor> shape = TensorFromProto(initializer);  // nullopt: not foldable
//   if (shape && !shape->is_real()) { /* shape->ints, shape->dims */ }
#ifndef MEMONGER_GRAPH_ONNX_CONST_TENSOR_H_
#define MEMONGER_GRAPH_ONNX_CONST_TENSOR_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "onnx/onnx_pb.h"

namespace memonger::graph::onnx_fold {

// A small constant tensor. Integer and bool elements live in `ints`, floating-point ones in
// `reals` (exactly one of the two holds NumElements(dims) entries).
struct ConstTensor {
  int32_t dtype = 0;  // onnx::TensorProto::DataType
  std::vector<int64_t> dims;
  std::vector<int64_t> ints;
  std::vector<double> reals;

  bool is_real() const;
  int64_t size() const;  // number of elements
};

// Tensors are folded only up to this many elements (8 MiB of int64).
inline constexpr int64_t kMaxFoldElements = int64_t{1} << 20;

// True for the element types the evaluator handles: float, double, bool and the signed and
// unsigned integers up to 64 bits (uint64 values above 2^63 are not foldable).
bool IsFoldableType(int32_t dtype);

// nullopt when the tensor cannot be folded: unsupported element type, external or segmented
// data, more than `max_elements` elements, or data that does not match its dims.
std::optional<ConstTensor> TensorFromProto(const onnx::TensorProto& proto,
                                           int64_t max_elements = kMaxFoldElements);
onnx::TensorProto TensorToProto(const ConstTensor& tensor, const std::string& name);

}  // namespace memonger::graph::onnx_fold

#endif  // MEMONGER_GRAPH_ONNX_CONST_TENSOR_H_
