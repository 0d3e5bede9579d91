#include "graph/onnx/tensor_data_check.h"

#include <cstdint>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "util/checked_math.h"

namespace memonger::graph {
namespace {

using onnx::TensorProto;

// Bytes per element in raw_data; nullopt for types without a fixed size (strings).
std::optional<int64_t> RawElementBytes(int32_t type) {
  switch (type) {
    case TensorProto::BOOL:
    case TensorProto::INT8:
    case TensorProto::UINT8: return 1;
    case TensorProto::INT16:
    case TensorProto::UINT16:
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16: return 2;
    case TensorProto::FLOAT:
    case TensorProto::INT32:
    case TensorProto::UINT32: return 4;
    case TensorProto::DOUBLE:
    case TensorProto::INT64:
    case TensorProto::UINT64:
    case TensorProto::COMPLEX64: return 8;
    case TensorProto::COMPLEX128: return 16;
    default: return std::nullopt;
  }
}

// The typed field a type's data goes in, its entry count, and entries per element.
struct TypedField {
  const char* name;
  int64_t entries;
  int64_t per_element;
};

std::optional<TypedField> TypedFieldOf(const TensorProto& t) {
  switch (t.data_type()) {
    case TensorProto::FLOAT: return TypedField{"float_data", t.float_data_size(), 1};
    case TensorProto::COMPLEX64: return TypedField{"float_data", t.float_data_size(), 2};
    case TensorProto::DOUBLE: return TypedField{"double_data", t.double_data_size(), 1};
    case TensorProto::COMPLEX128: return TypedField{"double_data", t.double_data_size(), 2};
    case TensorProto::INT64: return TypedField{"int64_data", t.int64_data_size(), 1};
    case TensorProto::UINT32:
    case TensorProto::UINT64: return TypedField{"uint64_data", t.uint64_data_size(), 1};
    case TensorProto::STRING: return TypedField{"string_data", t.string_data_size(), 1};
    case TensorProto::BOOL:
    case TensorProto::INT8:
    case TensorProto::UINT8:
    case TensorProto::INT16:
    case TensorProto::UINT16:
    case TensorProto::INT32:
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16: return TypedField{"int32_data", t.int32_data_size(), 1};
    default: return std::nullopt;
  }
}

}  // namespace

absl::Status CheckTensorData(const TensorProto& t, const std::string& what) {
  if (t.data_type() == TensorProto::UNDEFINED || !TensorProto::DataType_IsValid(t.data_type())) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": element type ", t.data_type(), " is not an ONNX element type"));
  }
  int64_t elements = 1;
  for (int k = 0; k < t.dims_size(); ++k) {
    if (t.dims(k) < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": dim ", k, " has negative size ", t.dims(k)));
    }
    const std::optional<int64_t> product = util::CheckedMul(elements, t.dims(k));
    if (!product.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": its element count does not fit in 64 bits"));
    }
    elements = *product;
  }
  if (t.data_location() == TensorProto::EXTERNAL) return absl::OkStatus();
  if (t.has_raw_data()) {
    const std::optional<int64_t> element_bytes = RawElementBytes(t.data_type());
    if (!element_bytes.has_value()) return absl::OkStatus();  // strings, packed 4-bit types
    const std::optional<int64_t> expected = util::CheckedMul(elements, *element_bytes);
    if (!expected.has_value() || static_cast<int64_t>(t.raw_data().size()) != *expected) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": raw_data holds ", t.raw_data().size(), " bytes, but ", elements,
          " elements of ", *element_bytes, " bytes need ",
          expected.has_value() ? absl::StrCat(*expected) : std::string("more than 2^63")));
    }
    return absl::OkStatus();
  }
  const std::optional<TypedField> field = TypedFieldOf(t);
  if (!field.has_value() || field->entries == 0) return absl::OkStatus();  // no data: seeded
  const std::optional<int64_t> expected = util::CheckedMul(elements, field->per_element);
  if (!expected.has_value() || field->entries != *expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", field->name, " holds ", field->entries, " entries, but its dims [",
        absl::StrJoin(t.dims(), ","), "] need ",
        expected.has_value() ? absl::StrCat(*expected) : std::string("more than 2^63")));
  }
  return absl::OkStatus();
}

}  // namespace memonger::graph
