// LoadModel: one entry point for every model file memonger reads, chosen by extension:
//   .onnx            ONNX ModelProto (graph/onnx/onnx_import.h)
//   .pb              binary NetDef (graph/net_def.h)
//   .pbtxt .prototxt text NetDef
//   .json            usage records, schema memonger.records/v1 (graph/records.h)
//   .csv             a MiniMalloc trace (graph/records.h)
//
//   LoadOptions options;
//   MG_RETURN_IF_ERROR(ParseDimBinding("N=18001", options.bindings));
//   MG_ASSIGN_OR_RETURN(Graph g, LoadModel("model.onnx", options));
//   MG_RETURN_IF_ERROR(InferShapes(g, options.bindings));
#ifndef MEMONGER_GRAPH_MODEL_LOADER_H_
#define MEMONGER_GRAPH_MODEL_LOADER_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "graph/shape_inference.h"
#include "util/limits.h"

namespace memonger::graph {

struct LoadOptions {
  // ONNX import resolves shapes while loading, so it needs the bindings then; NetDefs use them
  // in InferShapes.
  ShapeBindings bindings;
  // Size and nesting caps on the file (util/limits.h).
  util::InputLimits limits;
  // Hand the model's tensor data (ONNX initializers and constants, external data included) on
  // with the graph (Graph::static_data): running the model needs it, planning does not.
  bool keep_data = false;
  // ONNX without keep_data: the data of folded values and Constant nodes of any size, not the
  // weights' (OnnxImportOptions::keep_folded_data).
  bool keep_folded_data = false;
  // ONNX: fold nodes that read parameters (OnnxImportOptions::fold_params); off for training.
  bool fold_params = true;
  // Where the loader says what it read but does not use (a records file's offsets) or what it
  // decided (an ONNX If replaced by its branch, sizes planned at an upper bound), one line
  // each; nullptr: not said.
  std::vector<std::string>* notes = nullptr;
  // ONNX: sizes a run measured for data-dependent outputs, used instead of their upper bounds
  // (OnnxImportOptions::measured_sizes).
  absl::flat_hash_map<std::string, std::vector<int64_t>> measured_sizes;
};

// InvalidArgument naming the file for content that is not the format its extension says,
// NotFound for a missing file, Unimplemented for an unknown extension or unsupported constructs.
// The extension is checked before the file is read; the file is read once, under
// options.limits (util::ReadInputFile).
absl::StatusOr<Graph> LoadModel(const std::string& path, const LoadOptions& options);

// The same for a model already in memory (Python's memonger.load(bytes)): `name` stands for the
// file, its extension chooses the format, its folder is where ONNX external data is looked for,
// and messages name it. `bytes` is checked as LoadModel checks a file's content (text formats:
// text; every format: options.limits' file size).
absl::StatusOr<Graph> LoadModelBytes(const std::string& bytes, const std::string& name,
                                     const LoadOptions& options);

// The bytes a load for planning at many bindings reads (--fit's search, a range's planner):
// an ONNX model without its large tensors' data (WithoutLargeTensorData), any other format as
// it is. Checked as LoadModelBytes checks them.
absl::StatusOr<std::string> PlanningBytes(const std::string& bytes, const std::string& name,
                                          const LoadOptions& options);

// True when `a` and `b` are the same net for planning: the same ops (type, name, inputs,
// outputs, view, device) and values (name, version, role, producer, in-place base, type), in
// the same order. O(ops + values).
bool SamePlanningGraph(const Graph& a, const Graph& b);

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_MODEL_LOADER_H_
