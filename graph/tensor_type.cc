#include "graph/tensor_type.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "util/checked_math.h"

namespace memonger::graph {

std::string DimsToString(const std::vector<int64_t>& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

std::string TensorTypeToString(const TensorType& type) {
  return absl::StrCat(DataTypeName(type.dtype), DimsToString(type.dims));
}

absl::StatusOr<int64_t> NumElements(const std::vector<int64_t>& dims, absl::string_view what) {
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": negative dimension ", d, " in shape ", DimsToString(dims)));
    }
  }
  for (int64_t d : dims) {
    const auto product = util::CheckedMul(count, d);
    if (!product) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": shape ", DimsToString(dims), " has more elements than fit in 64 bits"));
    }
    count = *product;
  }
  return count;
}

absl::StatusOr<int64_t> ByteSize(const TensorType& type, absl::string_view what) {
  if (type.dtype == DataType::kUndefined) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": element type is unknown"));
  }
  auto elements = NumElements(type.dims, what);
  if (!elements.ok()) return elements.status();
  const auto bytes = util::CheckedMul(*elements, DataTypeSize(type.dtype));
  if (!bytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", TensorTypeToString(type),
                                                   " is larger than 2^63 bytes"));
  }
  return *bytes;
}

}  // namespace memonger::graph
