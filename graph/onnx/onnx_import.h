// graph/onnx/: ONNX models in. This header is the entry point; onnx_fold.h and the files it
// names fold the constant shape subgraphs that libonnx's inference leaves open.
//
// ONNX import: ModelProto -> Graph with every value typed.
//
//   ShapeBindings bindings;  // --dim and --input-shape
//   MG_ASSIGN_OR_RETURN(Graph graph, ImportOnnxFile("model.onnx", bindings));
//
// 1. Parse the ModelProto; refuse what cannot be planned with an Unimplemented or
//    InvalidArgument status naming the node (control flow other than If: Loop, Scan; an If
//    whose condition the shapes do not decide; see control_flow.h).
// 2. Bind graph input shapes: --input-shape NAME=... replaces an input's shape; --dim SYMBOL=N
//    fixes every dim_param SYMBOL.
// 3. ONNX shape inference (libonnx, with data propagation), then our folding of constant shape
//    subgraphs (Shape -> Gather/Slice -> Concat -> Reshape and friends, onnx_fold.h) where ONNX
//    leaves shapes unknown, repeated until nothing changes; Ifs the shapes decide are replaced
//    by their branch, and sizes that depend on tensor values get upper bounds (size_bounds.h,
//    recorded as Graph::data_dependent_sizes).
// 4. Build the Graph: initializers become params, Constant outputs constants, graph inputs and
//    outputs keep their roles, every other node output is an activation. A value whose type is
//    still unknown is an InvalidArgument naming it (and the unbound symbol, when there is one).
#ifndef MEMONGER_GRAPH_ONNX_ONNX_IMPORT_H_
#define MEMONGER_GRAPH_ONNX_ONNX_IMPORT_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "graph/shape_inference.h"
#include "util/limits.h"

namespace memonger::graph {

struct OnnxImportOptions {
  util::InputLimits limits;
  // The folder external data locations are relative to (graph/onnx/tensor_decode.h). Empty for
  // ImportOnnxFile: the model file's folder; for ImportOnnxBytes: none, and a tensor with
  // external data is an error naming its file.
  std::string model_dir;
  // Hand the static values' data on with the graph (Graph::static_data: initializers, Constant
  // nodes, folded values; external data read here). Executing needs it, planning does not;
  // without it external data is only checked (file, size), not read, and only tensors of at
  // most 16 elements are handed on (the numbers a rule reads: exponents, ratios, axes).
  bool keep_data = false;
  // Without keep_data: hand on, besides the small tensors, the data of every value the import
  // folded and of every Constant node, whatever its size, but not the initializers' (the
  // weights): what a run retyping the net needs (allocator/executor.h, RunMeasuring).
  bool keep_folded_data = false;
  // Fold nodes whose inputs are all static, parameters included (inference: weights are
  // constants). Training keeps a node that reads a parameter's values, so that its gradient
  // reaches the parameter.
  bool fold_params = true;
  // Where the import says what it decided for the user (an If replaced by the branch the shapes
  // choose, sizes planned at an upper bound), one line each; nullptr: not said.
  std::vector<std::string>* notes = nullptr;
  // Sizes a run measured for data-dependent outputs (value name -> dims), used instead of their
  // upper bounds: how a run retypes the net as it learns them (allocator/executor.h).
  absl::flat_hash_map<std::string, std::vector<int64_t>> measured_sizes;
};

// The file is read under `limits` (util::ReadInputFile); the ModelProto is parsed with
// limits.max_nesting_depth as protobuf's recursion limit.
absl::StatusOr<Graph> ImportOnnxFile(const std::string& path, const ShapeBindings& bindings,
                                     const OnnxImportOptions& options = {});
// `source_name` names the model in messages.
absl::StatusOr<Graph> ImportOnnxBytes(const std::string& bytes, const ShapeBindings& bindings,
                                      const std::string& source_name,
                                      const OnnxImportOptions& options = {});

// The model's bytes without the data of its large initializers (more than the 16 elements an
// import for planning hands on), each checked first as an import checks it: what a run that
// types the net at many bindings (--fit, ranges) imports at each, instead of copying every
// weight every time. Planning needs no weights, but folding does where it reads them
// (inference folds nodes whose inputs are all params): a caller that cannot rule that out
// compares one import of each (graph::SamePlanningGraph). Limits as ImportOnnxBytes.
absl::StatusOr<std::string> WithoutLargeTensorData(const std::string& bytes,
                                                   const std::string& source_name,
                                                   const util::InputLimits& limits);

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_ONNX_ONNX_IMPORT_H_
