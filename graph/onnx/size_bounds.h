// Upper bounds for the sizes ONNX cannot know before a run: the outputs of ops that count or
// select by value (NonZero, NonMaxSuppression, Unique, Compress, TopK with a computed k).
//
// libonnx leaves such a dim unknown, and so does everything computed from it: the 180 NonZero
// and 90 TopK nodes of torchvision's SSD post-processing, the NonMaxSuppression of every
// detector. The shape folder (onnx_fold.h), once folding is stuck, gives each such output the
// largest size its inputs' shapes allow and folds on from there, so that the plan holds any run
// whose counts stay within those bounds:
//   NonZero(X)                         [rank(X), numel(X)]
//   NonMaxSuppression(boxes [B, N, 4], scores [B, C, N], max_per_class)
//                                      [B * C * min(N, max_per_class), 3]; max_per_class is N when
//                                      not a constant, 0 (ONNX's default) when omitted
//   Unique(X), no axis                 Y, indices, counts [numel(X)]; inverse_indices [numel(X)]
//   Unique(X, axis a)                  Y as X; indices, counts, inverse_indices [X.dims[a]]
//   Compress(X, condition [L]), axis a the axis' dim min(L, X.dims[a]); no axis [min(L, numel)]
//   TopK(X, K) with K not a constant   the axis' dim as X's
// A bound is exact for the worst case of its op; what is computed from it is planned at the
// size the bound gives, which is the largest only where that computation grows with it (the
// min, slice and concatenation of detection post-processing do; the importer's caller says in
// its notes which values are bounds).
#ifndef MEMONGER_GRAPH_ONNX_SIZE_BOUNDS_H_
#define MEMONGER_GRAPH_ONNX_SIZE_BOUNDS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "graph/onnx/const_tensor.h"
#include "onnx/onnx_pb.h"

namespace memonger::graph::onnx_fold {

struct SizeBound {
  std::vector<std::vector<int64_t>> output_dims;  // per output of the node ({} for omitted)
  std::string why;                                // "NonZero: at most the 3234 elements of 'x'"
};

// The bound of `node`'s outputs, from its inputs' static shapes (`dims_of`, nullptr when not
// static) and constant values (`value_of`, nullptr when not constant). nullopt when the node
// is not one of the ops above or an input shape it needs is not static or malformed.
std::optional<SizeBound> BoundDataDependentOutputs(
    const onnx::NodeProto& node,
    const std::function<const std::vector<int64_t>*(const std::string&)>& dims_of,
    const std::function<const ConstTensor*(const std::string&)>& value_of);

}  // namespace memonger::graph::onnx_fold

#endif  // MEMONGER_GRAPH_ONNX_SIZE_BOUNDS_H_
