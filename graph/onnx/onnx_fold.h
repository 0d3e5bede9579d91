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
// Three more steps make progress where folding cannot: an If whose condition is now a constant
// is replaced by the branch it takes, and a Loop whose trip count is by that many copies of its
// body (before step 2; control_flow.h), the frontier's ops that
// libonnx types by rank only get their dims from our shape rules (after step 2;
// shape_rules.h), and when a round folds
// nothing, the frontier's data-dependent outputs (NonZero, NonMaxSuppression, ...) get their
// upper bounds (size_bounds.h) and the rounds go on.
//
// Folding never changes what a shape is, only where libonnx can see it: values it folds are
// small host tensors (the shape arithmetic of dynamic exports), recorded as constants.
//
// All rounds run in one forked child process (libonnx crashes on some malformed models, and a
// child per round cost 4x the inference itself: a ShuffleNet's 28 rounds took 0.5 s, now 0.1 s),
// which sends back the nodes, types and initializers folding left.
//
// Files: onnx_fold.cc (the driver, steps 2-5), onnx_shape_inference.cc (step 1 and the child
// process), fold_eval.h (step 3, one node) over const_tensor.h (the tensors).
//
//   onnx::ModelProto model = ...;
//   MG_ASSIGN_OR_RETURN(FoldReport report, InferAndFold(model, FoldOptions{}));
//   // every value_info of `model` now carries what could be inferred
#ifndef MEMONGER_GRAPH_ONNX_ONNX_FOLD_H_
#define MEMONGER_GRAPH_ONNX_ONNX_FOLD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/onnx/const_tensor.h"
#include "graph/onnx/fold_eval.h"
#include "onnx/onnx_pb.h"

namespace memonger::graph::onnx_fold {

// The concrete dims of a tensor type; nullopt when it is not a tensor, has no shape, or a dim
// has no value.
std::optional<std::vector<int64_t>> StaticDims(const onnx::TypeProto& type);

struct FoldOptions {
  int64_t max_elements = kMaxFoldElements;
  // Each round runs libonnx once and folds the shape arithmetic the previous round revealed, so
  // a model needs about one per chain of dependent reshapes: maxvit_t with a dynamic batch 90,
  // the other zoo models far fewer. A round that changes nothing ends the folding; this only
  // bounds the work (ResourceExhausted when shapes are still unknown at the limit).
  int max_rounds = 1024;
  // Data-dependent sizes at this percentage of their bounds (rounded down): 100 plans for the
  // worst case; lower values type the net at a smaller run, which is how the importer checks
  // that every size computed from a bound grows with it.
  int bound_percent = 100;
  // Sizes a run measured for data-dependent outputs (by value name): used instead of their
  // bounds, and such an output is then neither bounded nor derived. Null: none.
  const absl::flat_hash_map<std::string, std::vector<int64_t>>* measured = nullptr;
};

struct FoldReport {
  std::vector<std::string> folded_values;  // now initializers of the model, in folding order
  int removed_nodes = 0;
  int inference_runs = 0;
  // Outputs sized at an upper bound (size_bounds.h), with why, in the order they were bounded.
  std::vector<std::pair<std::string, std::string>> bounded_values;
  // One line per If replaced by its branch and per Loop unrolled (control_flow.h), in order.
  std::vector<std::string> decided_control_flow;
  // Every value whose size or data follows from a bound (the bounded ones, what nodes compute
  // from them, values folded from them, the branch an If on them took), sorted by name, with
  // its level: how many bounds deep it is (a bounded output is one more than what its node
  // reads; anything else the most of what it is computed from). A node reading values of at
  // most level w can run once every bounded value of level <= w is measured.
  std::vector<std::pair<std::string, int>> derived_values;
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
