// Symbolic shape inference: every value's dims and bytes as expressions of the model's symbols
// (graph/dim_expr.h), valid for every binding in a box (issue #13).
//
//   SymbolicShapeOptions options;
//   options.box = box;                      // N=256..65536
//   options.reference = {{"N", 65536}};     // the binding `graph` is typed at
//   MG_ASSIGN_OR_RETURN(SymbolicShapes s, InferSymbolicShapes(graph, bindings, options));
//   s.bytes[v].ToString();                  // "24*N^2 + 48*N + 24"
//
// The graph is typed at one binding of the box (`reference`); that typing gives each value's
// dtype and rank and is the check of every rule: an expression that disagrees with the
// reference type is an Internal error naming the op. The symbols enter through the graph
// inputs' declared dims (a symbol, or an expression such as "n + 1"; --input-shape fixes an
// input's dims to constants; symbols bound by a plain --dim are constants). Then, in
// dependency order:
// - an op none of whose inputs depends on a symbol (neither its dims nor, through the ops that
//   computed it, its data: a Shape's output carries its input's dims as data) keeps the
//   reference types, which are then the same at every binding;
// - Reshape with a `shape` attribute, Flatten, FlattenToVec, Concat, Split, AlibiBias,
//   PadLastDim, Conv and pooling have rules written for them (sums, products, exact
//   quotients, ceil-divisions: a window's output is cdiv(in + pads - dilated kernel + 1,
//   stride), ceil_mode excepted);
// - every other op with a schema is *probed*: its shape function runs at two bindings where
//   the distinct input dim expressions take distinct values (and again at every corner of the
//   box);
//   each output dim must then be a constant (the same at every probe, equal to no input dim's
//   value) or equal, at every probe, to exactly one input dim expression, which it then is.
//   This is exact for the ops whose output dims are input dims or numbers from attributes
//   (elementwise and broadcasting ops, MatMul, Transpose, Softmax, normalisation, gradient
//   ops, attention kernels); an op that computes a dim (2·N) matches nothing and is refused.
// - an op whose output shape depends on tensor data (a Reshape fed by a shape computed from
//   `Shape`, which an ONNX importer folds into a constant at each binding; ConstantOfShape;
//   an op without a schema) is *observed* when `graph_at` is given: the net is typed at two
//   bindings where every symbol differs and at every corner, and each output dim must be a
//   constant or exactly one input dim expression there, as for a probe, or else the only dim
//   expression of the net so far with those values (a dim carried by data); one dim that is
//   none of these is solved from the element count when the op keeps its input's (a
//   Reshape's -1) and checked at every observed binding. Data that an importer folded (a constant input of the net: Role
//   kConstant) may differ between bindings, so ops reading it are never taken as constant.
// A value none of these express (an op without a schema, a shape read from tensor data, a
// non-monotone size: a valid convolution's H - 2 times anything) is an InvalidArgument naming it, or, with `upper_bound` set, takes the
// constant size it has in that graph (typed at the box's high corner), and so do the values
// computed from it; SymbolicShapes::fallback says why for each.
//
// Costs: O(ops) rule applications, each a few shape-function calls for a probed op.
// Not guaranteed: a value whose true size is not monotone in the symbols has no expression
// (DimExpr is monotone by construction); a fallback size is an upper bound only where the
// size is monotone, which the symbolic planner checks at its sample bindings.
#ifndef MEMONGER_GRAPH_SYMBOLIC_SHAPES_H_
#define MEMONGER_GRAPH_SYMBOLIC_SHAPES_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/dim_expr.h"
#include "graph/graph.h"
#include "graph/op_schema.h"
#include "graph/shape_inference.h"
#include "graph/symbol_box.h"

namespace memonger::graph {

struct SymbolicShapes {
  std::vector<std::vector<DimExpr>> dims;  // per value; empty for a fallback value
  std::vector<DimExpr> bytes;              // per value: elements times element size
  std::vector<std::string> fallback;       // per value: "" or why its size is a bound
  // The symbols of the box that some value's size depends on.
  std::vector<std::string> symbols;
};

struct SymbolicShapeOptions {
  SymbolBox box;
  SymbolBindings reference;  // the binding `graph` is typed at; inside the box
  // Typed at box.High(): fallback sizes come from it. nullptr: no fallback.
  const Graph* upper_bound = nullptr;
  // The same net typed at another binding (an importer's shape inference there), for ops whose
  // output shapes depend on tensor data (the observed rule above). Empty: no such rule.
  std::function<absl::StatusOr<Graph>(const SymbolBindings&)> graph_at;
};

absl::StatusOr<SymbolicShapes> InferSymbolicShapes(
    const Graph& graph, const ShapeBindings& bindings, const SymbolicShapeOptions& options,
    const OpSchemaTable& schemas = OpSchemaTable::Builtin());

// Product of dims times the element size of `dtype`; InvalidArgument naming `what` when the
// product is not monotone or overflows.
absl::StatusOr<DimExpr> SymbolicByteSize(const std::vector<DimExpr>& dims, DataType dtype,
                                         absl::string_view what);

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_SYMBOLIC_SHAPES_H_
