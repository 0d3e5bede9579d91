// Rewriting a typed graph into a new one (the gradient builder, fp16 storage): the pieces every
// rewrite starts from, so that a rebuilt net keeps the original's interface and types.
//
//   GraphBuilder out(graph.name());
//   CopyInterface(graph, out);                       // inputs, outputs, roles, declared types
//   for (const Op& op : graph.ops()) out.AddOp(SpecOf(graph, op));  // ... plus new ops
#ifndef MEMONGER_GRAPH_REBUILD_H_
#define MEMONGER_GRAPH_REBUILD_H_

#include "graph/graph.h"

namespace memonger::graph {

// Adds `graph`'s external inputs and outputs, losses and param-grads to `builder`, declares the
// roles that are not derived (param, constant, workspace), and declares the type of every
// external input and of every blob whose versions all have one type (a gradient summed in
// place), so that the rebuilt net re-infers the same types even where an op type has no schema; the static data (Graph::static_data) goes
// with it. REQUIRES: `graph` is typed.
void CopyInterface(const Graph& graph, GraphBuilder& builder);

// CopyInterface less the names of inputs, outputs, losses and param-grads: the static data,
// roles and declared types, for a rewrite that changes the interface (graph/update_in_backward.h).
void CopyDeclarations(const Graph& graph, GraphBuilder& builder);

// After a rebuild typed at `source`'s sizes: each graph input of `rebuilt` gets back the
// symbolic dims `source` declared for it (a model's dynamic axes), so that the rebuilt net is
// expressible over them as the source is (a plan for a range of --dim reads them: without, an
// input's size would be a constant, its size at the range's top).
void RestoreSymbolicInputs(const Graph& source, Graph& rebuilt);

// `op` as the builder takes it: value ids back to blob names.
OpSpec SpecOf(const Graph& graph, const Op& op);

// The declaration of a concrete type.
Declaration DeclarationOf(const TensorType& type);

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_REBUILD_H_
