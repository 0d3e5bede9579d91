// Static shapes for ONNX models: libonnx's shape inference plus our folding of constant shape
// subgraphs. Used by the ONNX importer (graph/onnx/onnx_import.h); its own header so that tests can
// reach the evaluator without going through a file.
//
// libonnx (with data propagation) resolves most shapes, but stops at ops whose output shape
// depends on the *values* of an input it cannot see: Reshape, Expand, Tile, ConstantOfShape,
// Range, Slice, ... fed by a shape computed at run time (Shape -> Gather -> Concat -> Reshape).
// Once every graph input has a concrete shape, such shape tensors are constants. InferAndFold:
//
//   1. runs libonnx shape inference on the model;
//   2. finds the frontier: nodes whose inputs all have static shapes while some output has not;
//   3. evaluates, in node order, every node whose inputs are known constants (initializers,
//      Constant nodes, earlier folded nodes; Shape and Size need only a static input shape),
//      refusing any tensor of more than `max_elements` elements;
//   4. for each frontier node, turns the folded nodes that feed it into initializers (when
//      nothing feeds it that way but the node itself folds, the node), removes those nodes and
//      every folded node left without a reader;
//   5. repeats from 1 until the frontier is empty or a round folds nothing new.
//
// Folding never changes what a shape is, only where libonnx can see it: values it folds are
// small host tensors (the shape arithmetic of dynamic exports), recorded as constants.
//
//   onnx::ModelProto model = ...;
//   MG_ASSIGN_OR_RETURN(FoldReport report, InferAndFold(model, FoldOptions{}));
//   // every value_info of `model` now carries what could be inferred
#ifndef MEMONGER_GRAPH_ONNX_ONNX_FOLD_H_
#define MEMONGER_GRAPH_ONNX_ONNX_FOLD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"

namespace memonger::graph::onnx_fold {

// A small constant tensor. Integer and bool elements live in `ints`, floating-point ones in
// `reals` (exactly one of the two holds NumElements(dims) entries).
struct ConstTensor {
  int32_t dtype = 0;  // onnx::TensorProto::DataType
  std::vector<int64_t> dims;
  std::vector<int64_t> ints;
  std::vector<double> reals;

  bool is_real() const;
  int64_t size() const;  // number of elements
};

// Tensors are folded only up to this many elements (8 MiB of int64).
inline constexpr int64_t kMaxFoldElements = int64_t{1} << 20;

// True for the element types the evaluator handles: float, double, bool and the signed and
// unsigned integers up to 64 bits (uint64 values above 2^63 are not foldable).
bool IsFoldableType(int32_t dtype);

// nullopt when the tensor cannot be folded: unsupported element type, external or segmented
// data, more than `max_elements` elements, or data that does not match its dims.
std::optional<ConstTensor> TensorFromProto(const onnx::TensorProto& proto,
                                           int64_t max_elements = kMaxFoldElements);
onnx::TensorProto TensorToProto(const ConstTensor& tensor, const std::string& name);

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

// The concrete dims of a tensor type; nullopt when it is not a tensor, has no shape, or a dim
// has no value.
std::optional<std::vector<int64_t>> StaticDims(const onnx::TypeProto& type);

struct FoldOptions {
  int64_t max_elements = kMaxFoldElements;
  int max_rounds = 64;
};

struct FoldReport {
  std::vector<std::string> folded_values;  // now initializers of the model, in folding order
  int removed_nodes = 0;
  int inference_runs = 0;
};

// Steps 1-5 above. Mutates `model`: inferred types land in graph.value_info, folded values in
// graph.initializer, and folded nodes are removed. REQUIRES: graph nodes in dependency order.
// Errors: those of RunOnnxShapeInference.
absl::StatusOr<FoldReport> InferAndFold(onnx::ModelProto& model, const FoldOptions& options);

// libonnx's shape inference, once: check_type off, data propagation on; `strict` selects
// error_mode 1 (node-level inference errors are thrown rather than skipped). Every exception
// becomes an InvalidArgument carrying libonnx's message (which names the node).
//
// libonnx 1.12's shape functions trust ranks, axes and equations: some malformed models crash
// them (a Conv whose weight rank exceeds its input's, an Einsum equation with an unknown
// letter, a LayerNormalization axis far out of range). So inference runs in a forked child
// process that sends the inferred types back through a pipe; a child killed by a signal is an
// InvalidArgument. The child only runs libonnx and protobuf (the schema registry is set up
// before the fork); when fork or pipe fail, inference runs in this process.
absl::Status RunOnnxShapeInference(onnx::ModelProto& model, bool strict);

}  // namespace memonger::graph::onnx_fold

#endif  // MEMONGER_GRAPH_ONNX_ONNX_FOLD_H_
