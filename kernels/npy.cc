#include "kernels/npy.h"

#include <cstdint>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "util/status_macros.h"

namespace memonger::alloc {

absl::StatusOr<std::string> NpyDescr(graph::DataType dtype) {
  switch (dtype) {
    case graph::DataType::kFloat32: return std::string("<f4");
    case graph::DataType::kFloat16: return std::string("<f2");
    case graph::DataType::kFloat64: return std::string("<f8");
    case graph::DataType::kBFloat16: return std::string("<u2");
    case graph::DataType::kInt64: return std::string("<i8");
    case graph::DataType::kInt32: return std::string("<i4");
    case graph::DataType::kInt16: return std::string("<i2");
    case graph::DataType::kInt8: return std::string("|i1");
    case graph::DataType::kUInt8: return std::string("|u1");
    case graph::DataType::kBool: return std::string("|b1");
    default: break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("no NumPy element type for ", graph::DataTypeName(dtype)));
}

absl::StatusOr<std::string> NpyBytes(const graph::TensorType& type, const std::byte* data) {
  MG_ASSIGN_OR_RETURN(const std::string descr, NpyDescr(type.dtype));
  MG_ASSIGN_OR_RETURN(const int64_t bytes, graph::ByteSize(type, "npy tensor"));
  // A 1-tuple needs its trailing comma: (3,).
  std::string shape = absl::StrCat("(", absl::StrJoin(type.dims, ", "),
                                   type.dims.size() == 1 ? ",)" : ")");
  std::string header =
      absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ", shape, ", }");
  // magic (6) + version (2) + length (2) + header + '\n' is a multiple of 64.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  const uint16_t length = static_cast<uint16_t>(header.size());
  out.push_back(static_cast<char>(length & 0xff));
  out.push_back(static_cast<char>(length >> 8));
  out += header;
  out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(bytes));
  return out;
}

absl::Status WriteNpy(const std::string& path, const graph::TensorType& type,
                      const std::byte* data) {
  MG_ASSIGN_OR_RETURN(const std::string bytes, NpyBytes(type, data));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot write the file"));
  return absl::OkStatus();
}

std::string NpyFileName(absl::string_view value_name) {
  std::string name;
  for (char c : value_name) {
    const bool safe = absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ||
                      c == '-' || c == '.';
    name.push_back(safe ? c : '_');
  }
  if (name.empty() || name[0] == '.') name.insert(name.begin(), '_');
  return name + ".npy";
}

}  // namespace memonger::alloc
