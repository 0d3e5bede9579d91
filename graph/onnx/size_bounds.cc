#include "graph/onnx/size_bounds.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "graph/onnx/fold_internal.h"

namespace memonger::graph::onnx_fold {

namespace {

using DimsOf = std::function<const Dims*(const std::string&)>;

// The element count of `dims`; nullopt on a negative dim or int64 overflow.
std::optional<int64_t> Elements(const Dims& dims) {
  return CountElements(dims, std::numeric_limits<int64_t>::max());
}

const Dims* InputDims(const onnx::NodeProto& node, int k, const DimsOf& dims_of) {
  if (k >= node.input_size() || node.input(k).empty()) return nullptr;
  return dims_of(node.input(k));
}

std::optional<SizeBound> NonZero(const onnx::NodeProto& node, const DimsOf& dims_of) {
  const Dims* x = InputDims(node, 0, dims_of);
  if (x == nullptr || node.output_size() != 1) return std::nullopt;
  const std::optional<int64_t> n = Elements(*x);
  if (!n) return std::nullopt;
  return SizeBound{{{static_cast<int64_t>(x->size()), *n}},
                   absl::StrCat("NonZero: at most the ", *n, " elements of '", node.input(0),
                                "'")};
}

std::optional<SizeBound> NonMaxSuppression(
    const onnx::NodeProto& node, const DimsOf& dims_of,
    const std::function<const ConstTensor*(const std::string&)>& value_of) {
  const Dims* boxes = InputDims(node, 0, dims_of);
  const Dims* scores = InputDims(node, 1, dims_of);
  if (boxes == nullptr || scores == nullptr || boxes->size() != 3 || scores->size() != 3 ||
      node.output_size() != 1) {
    return std::nullopt;
  }
  const int64_t batch = (*scores)[0], classes = (*scores)[1], spatial = (*scores)[2];
  int64_t per_class = 0;  // ONNX: an omitted max_output_boxes_per_class selects nothing
  std::string limit = "max_output_boxes_per_class omitted: 0";
  if (node.input_size() > 2 && !node.input(2).empty()) {
    per_class = spatial;
    limit = absl::StrCat(spatial, " boxes each");
    const ConstTensor* max = value_of(node.input(2));
    if (max != nullptr && !max->is_real() && max->size() == 1) {
      per_class = std::clamp<int64_t>(max->ints[0], 0, spatial);
      limit = absl::StrCat("min(", spatial, " boxes, max_output_boxes_per_class ", max->ints[0],
                           ") each");
    }
  }
  const std::optional<int64_t> n = Elements({batch, classes, per_class});
  if (!n) return std::nullopt;
  return SizeBound{{{*n, 3}}, absl::StrCat("NonMaxSuppression: at most ", batch, " batches x ",
                                           classes, " classes x ", limit, " = ", *n,
                                           " selections")};
}

std::optional<SizeBound> Unique(const onnx::NodeProto& node, const DimsOf& dims_of) {
  const Dims* x = InputDims(node, 0, dims_of);
  if (x == nullptr || node.output_size() < 1 || node.output_size() > 4) return std::nullopt;
  SizeBound b;
  const std::optional<int64_t> axis_attr = AttrInt(node, "axis");
  int64_t n = 0;
  Dims y;
  if (axis_attr.has_value()) {
    const std::optional<int64_t> axis = NormalizeAxis(*axis_attr, static_cast<int64_t>(x->size()));
    if (!axis) return std::nullopt;
    n = (*x)[*axis];
    y = *x;
    b.why = absl::StrCat("Unique: at most the ", n, " slices of '", node.input(0), "' along axis ",
                         *axis);
  } else {
    const std::optional<int64_t> count = Elements(*x);
    if (!count) return std::nullopt;
    n = *count;
    y = {n};
    b.why = absl::StrCat("Unique: at most the ", n, " elements of '", node.input(0), "'");
  }
  // Y, indices, inverse_indices (one per input element or slice: exact), counts.
  const std::vector<Dims> all = {y, {n}, {n}, {n}};
  b.output_dims.assign(all.begin(), all.begin() + node.output_size());
  return b;
}

std::optional<SizeBound> Compress(const onnx::NodeProto& node, const DimsOf& dims_of) {
  const Dims* x = InputDims(node, 0, dims_of);
  const Dims* condition = InputDims(node, 1, dims_of);
  if (x == nullptr || condition == nullptr || condition->size() != 1 || node.output_size() != 1) {
    return std::nullopt;
  }
  const int64_t length = (*condition)[0];
  if (const std::optional<int64_t> axis_attr = AttrInt(node, "axis")) {
    const std::optional<int64_t> axis = NormalizeAxis(*axis_attr, static_cast<int64_t>(x->size()));
    if (!axis) return std::nullopt;
    Dims y = *x;
    y[*axis] = std::min(length, (*x)[*axis]);
    return SizeBound{{y}, absl::StrCat("Compress: at most ", y[*axis], " slices of '",
                                       node.input(0), "' along axis ", *axis)};
  }
  const std::optional<int64_t> count = Elements(*x);
  if (!count) return std::nullopt;
  const int64_t n = std::min(length, *count);
  return SizeBound{{{n}}, absl::StrCat("Compress: at most ", n, " elements of '", node.input(0),
                                       "'")};
}

std::optional<SizeBound> TopK(const onnx::NodeProto& node, const DimsOf& dims_of) {
  const Dims* x = InputDims(node, 0, dims_of);
  if (x == nullptr || node.output_size() != 2) return std::nullopt;
  const std::optional<int64_t> axis =
      NormalizeAxis(AttrInt(node, "axis").value_or(-1), static_cast<int64_t>(x->size()));
  if (!axis) return std::nullopt;
  return SizeBound{{*x, *x}, absl::StrCat("TopK: k computed at run time, at most the ",
                                          (*x)[*axis], " entries of '", node.input(0),
                                          "' along axis ", *axis)};
}

}  // namespace

std::optional<SizeBound> BoundDataDependentOutputs(
    const onnx::NodeProto& node, const DimsOf& dims_of,
    const std::function<const ConstTensor*(const std::string&)>& value_of) {
  if (!IsDefaultDomain(node.domain())) return std::nullopt;
  const std::string& op = node.op_type();
  if (op == "NonZero") return NonZero(node, dims_of);
  if (op == "NonMaxSuppression") return NonMaxSuppression(node, dims_of, value_of);
  if (op == "Unique") return Unique(node, dims_of);
  if (op == "Compress") return Compress(node, dims_of);
  if (op == "TopK") return TopK(node, dims_of);
  return std::nullopt;
}

}  // namespace memonger::graph::onnx_fold
