// Shape inference: gives every value of a graph its element type and concrete dims.
//
// Graph inputs take their type from the bindings (--input-shape), else from their declaration
// with symbolic dims bound (--dim). Then, in dependency order, each op whose outputs are not yet
// typed runs its schema's shape function; a declared output type must agree with it. An op
// without a schema takes its outputs' declared types; when those are missing the result is
// Unimplemented naming the op and its type. Values already typed (by an importer such as the
// ONNX loader) are kept.
//
//   ShapeBindings b;
//   MG_RETURN_IF_ERROR(ParseDimBinding("N=18001", b));
//   MG_RETURN_IF_ERROR(InferShapes(graph, b));
#ifndef MEMONGER_GRAPH_SHAPE_INFERENCE_H_
#define MEMONGER_GRAPH_SHAPE_INFERENCE_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "graph/graph.h"
#include "graph/op_schema.h"

namespace memonger::graph {

struct ShapeBindings {
  std::map<std::string, int64_t> dims;                 // symbol -> size
  std::map<std::string, std::vector<int64_t>> inputs;  // input name -> dims
  std::map<std::string, DataType> input_types;         // input name -> element type
  // Shapes of the data a run was given for graph inputs (--inputs): the ONNX importer binds a
  // graph input's symbolic dims from them where neither --dim nor --input-shape sized them.
  // A name that is no graph input, or a rank other than the declared one, binds nothing (the
  // run's check of its inputs reports it).
  std::map<std::string, std::vector<int64_t>> data_shapes;
};

// Parses "N=18001" into bindings.dims. InvalidArgument for a malformed text, a negative size or
// a symbol bound twice (ParseInputShapeBinding: an input given twice).
absl::Status ParseDimBinding(absl::string_view text, ShapeBindings& bindings);
// Parses "x=1,3,224,224" (an empty list "x=" is a scalar) into bindings.inputs.
absl::Status ParseInputShapeBinding(absl::string_view text, ShapeBindings& bindings);

// The sizes --dim and --input-shape give symbolic dimensions, kept consistent: an
// --input-shape that sizes a symbolic dim of its input must agree with --dim and with the
// --input-shapes before it (NetDef and ONNX inputs alike).
class SymbolSizes {
 public:
  explicit SymbolSizes(const ShapeBindings& bindings) : sizes_(bindings.dims) {}
  // --input-shape `input` gives its dim k, the symbol `symbol`, the size `size`. InvalidArgument
  // naming both where --dim or another --input-shape gave the symbol another size.
  absl::Status Bind(const std::string& input, size_t k, const std::string& symbol, int64_t size);
  const std::map<std::string, int64_t>& sizes() const { return sizes_; }

 private:
  std::map<std::string, int64_t> sizes_;
  std::map<std::string, std::string> source_;  // symbol -> the input that sized it
};

// Parses "label=int32" into bindings.input_types. InvalidArgument for a malformed text, an
// unknown type name or an input given twice.
absl::Status ParseInputTypeBinding(absl::string_view text, ShapeBindings& bindings);

// The element type of graph input `input`: --input-type, else the net's declaration, else what
// the ops reading it fix (OpSchema::typed_inputs: the label of LabelCrossEntropy is int32, a
// Gather's indices int32 or int64, ...; the first type every reader allows), else float32, the
// type of Caffe2 blobs nobody declares. Readers are the ops reading the input directly.
// InvalidArgument naming two readers that allow no common type.
absl::StatusOr<DataType> GraphInputDtype(const Graph& graph, ValueId input,
                                         const ShapeBindings& bindings,
                                         const OpSchemaTable& schemas);

// The graph inputs whose shape nothing gives (no type yet, no --input-shape, no declared
// dims), in the net's order: InferShapes would refuse them.
std::vector<std::string> InputsWithoutShape(const Graph& graph, const ShapeBindings& bindings);

// --dim bindings that name no symbol of the model are mistakes (a typo binds nothing and the
// plan silently uses something else): InvalidArgument naming the symbol and the model's
// symbols. `symbols` are the model's dim symbols (DeclaredSymbols for a NetDef).
absl::Status CheckDimsUsed(const std::set<std::string>& symbols, const ShapeBindings& bindings);
// The symbols in the values' declared dims.
std::set<std::string> DeclaredSymbols(const Graph& graph);

// Resolves declared dims with the bound symbols; InvalidArgument naming `what` and the symbol
// when one is unbound, or naming a negative size.
absl::StatusOr<std::vector<int64_t>> ResolveDims(absl::Span<const DeclaredDim> dims,
                                                 const ShapeBindings& bindings,
                                                 absl::string_view what);

// Runs `schema`'s shape function on `op` with the given input types (which need not be the
// graph's: symbolic inference probes ops at other bindings): checks the op's input and output
// counts against the schema, supplies a Concat gradient's split sizes, and checks the number
// of types returned. Unimplemented, as the shape function says, when the output shapes depend
// on tensor values.
absl::StatusOr<std::vector<TensorType>> RunShapeFunction(const Graph& graph, const Op& op,
                                                         const OpSchema& schema,
                                                         std::vector<TensorType> inputs);

// Graph inputs are typed first (GraphInputDtype, then --input-shape or the declared dims).
absl::Status InferShapes(Graph& graph, const ShapeBindings& bindings,
                         const OpSchemaTable& schemas = OpSchemaTable::Builtin());

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_SHAPE_INFERENCE_H_
