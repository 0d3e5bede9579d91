#include "graph/onnx/tensor_decode.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "util/limits.h"
#include "util/status_macros.h"

namespace memonger::graph {
namespace {

template <typename T, typename Field>
void AppendAs(const Field& field, std::string& out) {
  for (const auto& v : field) {
    const T t = static_cast<T>(v);
    out.append(reinterpret_cast<const char*>(&t), sizeof(T));
  }
}

std::string TensorLabel(const onnx::TensorProto& tensor) {
  return tensor.name().empty() ? std::string("a tensor")
                               : absl::StrCat("tensor '", util::Quote(tensor.name()), "'");
}

}  // namespace

bool HasExternalData(const onnx::TensorProto& tensor) {
  return tensor.data_location() == onnx::TensorProto::EXTERNAL;
}

absl::StatusOr<TensorData> DecodeTensorProto(const onnx::TensorProto& tensor,
                                             DataType expected) {
  const std::string what = TensorLabel(tensor);
  if (HasExternalData(tensor)) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": its data is in another file, not read yet"));
  }
  TensorData out;
  out.type.dims.assign(tensor.dims().begin(), tensor.dims().end());
  if (tensor.data_type() == onnx::TensorProto::UINT16 && expected == DataType::kBFloat16) {
    out.type.dtype = DataType::kBFloat16;
  } else {
    MG_ASSIGN_OR_RETURN(out.type.dtype, DataTypeFromProtoNumber(tensor.data_type()));
  }
  MG_ASSIGN_OR_RETURN(const int64_t bytes, ByteSize(out.type, what));
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
        return absl::UnimplementedError(
            absl::StrCat(what, ": element type ", DataTypeName(out.type.dtype)));
    }
  }
  if (static_cast<int64_t>(out.bytes.size()) != bytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", TensorTypeToString(out.type),
                                                   " needs ", bytes, " bytes of data, has ",
                                                   out.bytes.size()));
  }
  return out;
}

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

absl::Status ReadExternalData(onnx::TensorProto& tensor, const std::string& model_dir,
                              bool read_bytes) {
  if (!HasExternalData(tensor)) return absl::OkStatus();
  const std::string what = TensorLabel(tensor);
  std::string location;
  int64_t offset = 0;
  int64_t length = -1;
  for (const onnx::StringStringEntryProto& entry : tensor.external_data()) {
    if (entry.key() == "location") {
      location = entry.value();
    } else if (entry.key() == "offset" || entry.key() == "length") {
      int64_t n = 0;
      if (!absl::SimpleAtoi(entry.value(), &n) || n < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": external data ", entry.key(), " '", util::Quote(entry.value()),
            "' is not a byte count"));
      }
      (entry.key() == "offset" ? offset : length) = n;
    }
  }
  if (location.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": its data is external but names no file (no 'location')"));
  }
  if (model_dir.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": its data is in the file '", util::Quote(location),
        "' beside the model, and the model was given as bytes without its folder"));
  }
  const std::filesystem::path relative(location);
  if (relative.is_absolute()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": external data file '", util::Quote(location),
        "' is an absolute path; ONNX locations are relative to the model's folder"));
  }
  std::error_code error;
  const std::filesystem::path dir = std::filesystem::weakly_canonical(model_dir, error);
  const std::filesystem::path file =
      std::filesystem::weakly_canonical(std::filesystem::path(model_dir) / relative, error);
  const std::string file_text = (std::filesystem::path(model_dir) / relative).string();
  auto [dir_end, file_it] = std::mismatch(dir.begin(), dir.end(), file.begin(), file.end());
  if (error || dir_end != dir.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": external data file '", util::Quote(location),
        "' lies outside the model's folder '", util::Quote(model_dir), "'"));
  }
  if (!std::filesystem::is_regular_file(file, error)) {
    return absl::NotFoundError(absl::StrCat(what, ": its external data file '",
                                            util::Quote(file_text), "' does not exist"));
  }
  const auto file_size = static_cast<int64_t>(std::filesystem::file_size(file, error));
  if (error) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": cannot read '",
                                                   util::Quote(file_text), "'"));
  }
  TensorType type{DataType::kUndefined, {tensor.dims().begin(), tensor.dims().end()}};
  MG_ASSIGN_OR_RETURN(type.dtype, DataTypeFromProtoNumber(tensor.data_type()));
  MG_ASSIGN_OR_RETURN(const int64_t bytes, ByteSize(type, what));
  if (length < 0) length = file_size - std::min(offset, file_size);
  if (length != bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " ", TensorTypeToString(type), " needs ", bytes, " bytes, but its external data in '",
        util::Quote(file_text), "' is ", length, " bytes long"));
  }
  if (offset > file_size || length > file_size - offset) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": its external data is bytes ", offset, "..", offset + length, " of '",
        util::Quote(file_text), "', which has ", file_size));
  }
  if (!read_bytes) return absl::OkStatus();
  std::string data(static_cast<size_t>(length), '\0');
  std::ifstream in(file, std::ios::binary);
  in.seekg(offset);
  in.read(data.data(), static_cast<std::streamsize>(length));
  if (!in) {
    return absl::DataLossError(absl::StrCat(what, ": reading '", util::Quote(file_text),
                                            "' failed"));
  }
  tensor.clear_external_data();
  tensor.set_data_location(onnx::TensorProto::DEFAULT);
  tensor.set_raw_data(std::move(data));
  return absl::OkStatus();
}

}  // namespace memonger::graph
