// Retyping a net at another binding of its symbols without importing its model again.
//
// A search over sizes (--fit) types one model at many bindings. Importing an ONNX model runs
// libonnx's shape inference and our folding (graph/onnx/onnx_fold.h) each time: 25 of
// densenet121's 30 ms per size, the plan itself 5. Where the import does not depend on the
// binding beyond the values' types (no shape arithmetic folded into constants, no If decided,
// nothing sized from a data-dependent bound), the net imported at one binding, retyped at
// another, is the net the import would give there. A Retyper is made from imports at two
// values `a` != `b` of one symbol, and checked there:
//
//   MG_ASSIGN_OR_RETURN(Retyper retyper, Retyper::Make(at_1, at_2, "batch", 1, 2, bindings));
//   MG_ASSIGN_OR_RETURN(Graph at_64, retyper.At(bindings_with_batch_64));
//
// At(): the import at `a`, every type cleared but static values' and then inferred again by our
// shape inference (graph/shape_inference.h) from the graph inputs' declared dims, except the
// outputs of ops whose shapes shape inference cannot give (no shape function, or one that
// depends on tensor data: a Pad or Reshape reading a constant tensor): those are *observed*,
// each dim on the line through its sizes at `a` and `b` (exact integers, or At() refuses).
// Static tensors that differ between the imports (shape arithmetic the importer folded into
// constants: a Reshape's target [batch, 197, 384]) are observed the same way, element by
// element, where they are integers. Make() refuses two imports that are not the same net but
// for their types and such tensors, and a retyping that does not give the import at `b`.
//
// What it does not guarantee: that the imports agree at a third binding (a constant folded
// from min(batch, 64) is the same at 1 and 2), nor that an observed dim is linear beyond a and
// b: a caller checks the values its answer rests on against a real import (tools/fit_nets.h).
#ifndef MEMONGER_GRAPH_RETYPE_H_
#define MEMONGER_GRAPH_RETYPE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "graph/shape_inference.h"
#include "graph/tensor_data.h"

namespace memonger::graph {

// True when `a` and `b` are the same net apart from their values' types: the same ops (type,
// name, domain, inputs, outputs, control inputs, attributes, view, device), values (name,
// version, role, producer, in-place base, alignment, declaration), graph inputs, outputs,
// losses and param gradients, the same static tensors, and no value sized from a bound nor a
// control-flow body (an attribute holding a graph) in either. O(ops + values + static bytes).
bool SameNetButTypes(const Graph& a, const Graph& b);

class Retyper {
 public:
  // `bindings_b`: the bindings `at_b` was imported at (`symbol` = b). InvalidArgument where
  // the nets differ but for types, a != b, or At(bindings_b) does not give at_b's types.
  static absl::StatusOr<Retyper> Make(Graph at_a, const Graph& at_b, const std::string& symbol,
                                      int64_t a, int64_t b, const ShapeBindings& bindings_b);

  // The net at `bindings` (its symbol bound to the value wanted). Errors: InferShapes', and
  // InvalidArgument where an observed dim is not a whole number there or is negative.
  // O(ops + values).
  absl::StatusOr<Graph> At(const ShapeBindings& bindings) const;

 private:
  struct Observed {
    ValueId value;
    DataType dtype;
    std::vector<int64_t> at_a, at_b;
  };
  Retyper(Graph at_a, std::string symbol, int64_t a, int64_t b)
      : at_a_(std::move(at_a)), symbol_(std::move(symbol)), a_(a), b_(b) {}
  Graph at_a_;
  std::string symbol_;
  int64_t a_, b_;
  std::vector<Observed> observed_;
  struct ObservedData {  // a static tensor that differs between the imports
    std::string name;
    TensorType type;
    std::vector<int64_t> at_a, at_b;
  };
  std::vector<ObservedData> observed_data_;
};

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_RETYPE_H_
