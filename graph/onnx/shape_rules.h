// Shape rules for ops whose output dims follow from their inputs' dims alone, where libonnx 1.12
// leaves them unknown: Einsum (libonnx types its output by rank only, every dim unknown: a
// MaxViT's attention was refused as data-dependent). A step of the folding driver
// (onnx_fold.h), run on the frontier before anything is folded.
#ifndef MEMONGER_GRAPH_ONNX_SHAPE_RULES_H_
#define MEMONGER_GRAPH_ONNX_SHAPE_RULES_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"

namespace memonger::graph::onnx_fold {

// The static dims of a value, or nullptr while they are not known.
using StaticDimsOf = std::function<const std::vector<int64_t>*(const std::string&)>;

// For each node `frontier` names (indices into graph.node(), inputs all static) that has a rule
// here: writes its outputs' dims into graph.value_info (keeping the element type libonnx
// inferred, else the first input's). True when any output was typed. InvalidArgument, naming
// the node, for inputs the rule refuses (an Einsum whose dims do not agree with its equation).
absl::StatusOr<bool> ApplyShapeRules(onnx::GraphProto& graph, const std::vector<int>& frontier,
                                     const StaticDimsOf& static_dims);

}  // namespace memonger::graph::onnx_fold

#endif  // MEMONGER_GRAPH_ONNX_SHAPE_RULES_H_
