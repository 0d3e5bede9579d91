// The type of one value: element type and concrete dims. Shape functions compute these.
#ifndef MEMONGER_GRAPH_TENSOR_TYPE_H_
#define MEMONGER_GRAPH_TENSOR_TYPE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "graph/dtype.h"

namespace memonger::graph {

struct TensorType {
  DataType dtype = DataType::kUndefined;
  std::vector<int64_t> dims;  // empty: a scalar

  friend bool operator==(const TensorType& a, const TensorType& b) {
    return a.dtype == b.dtype && a.dims == b.dims;
  }
  friend bool operator!=(const TensorType& a, const TensorType& b) { return !(a == b); }
};

// "[1,12,18001,18001]".
std::string DimsToString(const std::vector<int64_t>& dims);

// "float16[1,12,18001,18001]".
std::string TensorTypeToString(const TensorType& type);

// Product of dims. InvalidArgument naming `what` when a dim is negative or the product
// overflows int64.
absl::StatusOr<int64_t> NumElements(const std::vector<int64_t>& dims, absl::string_view what);

// NumElements * element size, overflow-checked; InvalidArgument naming `what` on error or
// when the dtype is undefined.
absl::StatusOr<int64_t> ByteSize(const TensorType& type, absl::string_view what);

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_TENSOR_TYPE_H_
