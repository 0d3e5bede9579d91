#include "graph/dtype.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "util/limits.h"

namespace memonger::graph {

int64_t DataTypeSize(DataType dtype) {
  switch (dtype) {
    case DataType::kUndefined: return 0;
    case DataType::kBool:
    case DataType::kInt8:
    case DataType::kUInt8: return 1;
    case DataType::kInt16:
    case DataType::kFloat16:
    case DataType::kBFloat16: return 2;
    case DataType::kInt32:
    case DataType::kFloat32: return 4;
    case DataType::kInt64:
    case DataType::kFloat64: return 8;
  }
  return 0;
}

absl::string_view DataTypeName(DataType dtype) {
  switch (dtype) {
    case DataType::kUndefined: return "undefined";
    case DataType::kFloat32: return "float32";
    case DataType::kUInt8: return "uint8";
    case DataType::kInt8: return "int8";
    case DataType::kInt16: return "int16";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kBool: return "bool";
    case DataType::kFloat16: return "float16";
    case DataType::kFloat64: return "float64";
    case DataType::kBFloat16: return "bfloat16";
  }
  return "undefined";
}

absl::StatusOr<DataType> ParseDataType(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  if (n == "float32" || n == "fp32" || n == "float" || n == "f32") return DataType::kFloat32;
  if (n == "float16" || n == "fp16" || n == "half" || n == "f16") return DataType::kFloat16;
  if (n == "bfloat16" || n == "bf16") return DataType::kBFloat16;
  if (n == "float64" || n == "fp64" || n == "double" || n == "f64") return DataType::kFloat64;
  if (n == "int8") return DataType::kInt8;
  if (n == "uint8") return DataType::kUInt8;
  if (n == "int16") return DataType::kInt16;
  if (n == "int32") return DataType::kInt32;
  if (n == "int64") return DataType::kInt64;
  if (n == "bool") return DataType::kBool;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown dtype '", util::Quote(name),
      "' (expected float32, float16, bfloat16, float64, int8, uint8, int16, int32, int64, bool)"));
}

absl::StatusOr<DataType> DataTypeFromProtoNumber(int number) {
  switch (number) {
    case 0: return DataType::kUndefined;
    case 1: return DataType::kFloat32;
    case 2: return DataType::kUInt8;
    case 3: return DataType::kInt8;
    case 5: return DataType::kInt16;
    case 6: return DataType::kInt32;
    case 7: return DataType::kInt64;
    case 9: return DataType::kBool;
    case 10: return DataType::kFloat16;
    case 11: return DataType::kFloat64;
    case 16: return DataType::kBFloat16;
    default: break;
  }
  static constexpr const char* kOnnxNames[] = {
      "UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64", "STRING",
      "BOOL", "FLOAT16", "DOUBLE", "UINT32", "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
  const std::string label =
      number >= 0 && number <= 16 ? absl::StrCat(kOnnxNames[number], " (", number, ")")
                                  : absl::StrCat(number);
  return absl::UnimplementedError(absl::StrCat("element type ", label, " is not supported"));
}

}  // namespace memonger::graph
