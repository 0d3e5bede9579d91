// Element types for ONNX graph inputs that declare none.
//
// An exporter may write a graph input with a name only (onnx.helper's
// make_empty_tensor_value_info, converters that leave typing to the runtime). ONNX shape
// inference cannot start from such an input, so before it runs every graph input gets a type:
//
// 1. `--input-type NAME=DTYPE` (ShapeBindings::input_types), which also overrides a declared
//    type, as `--input-shape` overrides a declared shape;
// 2. else the declared element type;
// 3. else the type every node reading the input allows, from the libonnx schema of the node at
//    the model's opset (the formal parameter's type constraint): float32 where every reader
//    allows it, else the first of int64, int32, bool, float16, bfloat16, float64, int8, uint8,
//    int16 that every reader allows. A reader without a schema (a custom domain) constrains
//    nothing. Readers that allow no common type are an InvalidArgument naming two of them.
//
// A name in `--input-type` that is not a graph input (or is an initializer) is an error, as for
// `--input-shape`. Cost: one schema lookup per (reader, slot) of an untyped input.
#ifndef MEMONGER_GRAPH_ONNX_INPUT_TYPES_H_
#define MEMONGER_GRAPH_ONNX_INPUT_TYPES_H_

#include <map>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "graph/dtype.h"
#include "onnx/onnx_pb.h"

namespace memonger::graph {

// `opsets`: the model's opset_import, default domain as "". `params`: the initializers' names.
absl::Status TypeGraphInputs(onnx::GraphProto& graph,
                             const absl::flat_hash_map<std::string, int>& opsets,
                             const absl::flat_hash_set<std::string>& params,
                             const std::map<std::string, DataType>& input_types);

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_ONNX_INPUT_TYPES_H_
