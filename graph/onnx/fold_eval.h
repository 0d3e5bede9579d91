// The constant evaluator of the shape folder (onnx_fold.h): one ONNX node over constant
// inputs. The ops are split by what they fold: fold_elementwise.cc (arithmetic, comparison,
// logic, Cast, with numpy broadcasting), fold_shape_ops.cc (Shape, Gather, Slice, Concat,
// Reshape and the other shape and data movement ops, reductions); fold_eval.cc dispatches.
//
//   std::vector<FoldInput> inputs = {{.present = true, .value = &shape_tensor}};
//   auto outputs = EvaluateNode(gather_node, inputs);  // nullopt: does not fold
#ifndef MEMONGER_GRAPH_ONNX_FOLD_EVAL_H_
#define MEMONGER_GRAPH_ONNX_FOLD_EVAL_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "graph/onnx/const_tensor.h"
#include "onnx/onnx_pb.h"

namespace memonger::graph::onnx_fold {

// What the evaluator knows of one input of a node.
struct FoldInput {
  bool present = false;                         // false: an omitted optional input ("")
  const ConstTensor* value = nullptr;           // its value, when constant
  const std::vector<int64_t>* dims = nullptr;   // its static shape, when known (Shape, Size)
};

// True for the ops EvaluateNode may fold (listed below), of the default ONNX domain.
bool IsFoldableOp(const onnx::NodeProto& node);

// Evaluates one node of the default ONNX domain: one tensor per output (omitted outputs get an
// empty placeholder). nullopt when the op is not one we fold, an input it needs is not known,
// the inputs are malformed, or a result would exceed `max_elements`.
// Folded ops: Constant, Shape, Size, Identity, Cast, Gather, Slice, Concat, Unsqueeze, Squeeze,
// Reshape, Flatten, Expand, Tile, Transpose, ConstantOfShape, Range, Where, the arithmetic and
// comparison ops (Add, Sub, Mul, Div, Mod, Pow, Min, Max, Sum, Equal, Less, Greater, ..., And,
// Or, Xor, Not, Neg, Abs, Floor, Ceil, Sqrt, Reciprocal, Sign) and ReduceProd/Sum/Min/Max/Mean.
std::optional<std::vector<ConstTensor>> EvaluateNode(const onnx::NodeProto& node,
                                                     const std::vector<FoldInput>& inputs,
                                                     int64_t max_elements = kMaxFoldElements);

}  // namespace memonger::graph::onnx_fold

#endif  // MEMONGER_GRAPH_ONNX_FOLD_EVAL_H_
