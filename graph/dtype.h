// Element types of values and their byte sizes.
#ifndef MEMONGER_GRAPH_DTYPE_H_
#define MEMONGER_GRAPH_DTYPE_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace memonger::graph {

// Numbering follows ONNX's TensorProto.DataType (and proto/memonger.proto's DataType).
enum class DataType : int {
  kUndefined = 0,
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kBFloat16 = 16,
};

// Bytes per element; 0 for kUndefined.
int64_t DataTypeSize(DataType dtype);

// Canonical lower-case name: "float32", "float16", "bfloat16", ... ("undefined").
absl::string_view DataTypeName(DataType dtype);

// Accepts canonical names and common aliases: fp32/float, fp16/half, bf16, fp64/double,
// int8, uint8, int16, int32, int64, bool (case-insensitive).
absl::StatusOr<DataType> ParseDataType(absl::string_view name);

// Maps an ONNX or memonger.proto element type number; unsupported numbers are an error
// (strings, complex numbers, float8 have no place in a memory plan we can execute).
absl::StatusOr<DataType> DataTypeFromProtoNumber(int number);

inline bool IsFloatingPoint(DataType d) {
  return d == DataType::kFloat32 || d == DataType::kFloat16 || d == DataType::kBFloat16 ||
         d == DataType::kFloat64;
}

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_DTYPE_H_
