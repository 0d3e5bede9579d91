// Plain SGD inside the backward pass: each trained param is updated as soon as its gradient is
// complete, instead of every gradient waiting for an optimizer step after the net.
//
//   MG_ASSIGN_OR_RETURN(Graph step, UpdateInBackward(training, /*learning_rate=*/0.01));
//
// For each param-grad pair (p, dp) of `training`, two ops go right after the last of dp's
// producer, dp's readers and p's readers (a backward op that still reads the old p or dp, such
// as the gradient of a product for the other operand, comes first):
//   dp = Mul(dp, lr)       (op "<dp>_step") in place by name, so that every planner and the
//                          recomputation model count it in dp's bytes
//   p  = Sub(p, dp)        (op "<p>_update") in place over the param, outside the arena
// Both run on the gradient's device, which must be the param's (its first reader's). A
// recomputed forward op that reads p runs before the update (memonger/recompute.h). So dp dies
// there instead of living to the end: the arena no longer holds every parameter gradient at
// once, which on a CNN or a small transformer is most of a training step's memory
// (PyTorch's "optimizer step in the backward pass", LOMO). The updated params are the net's
// outputs in place of the gradients, and the param-grad pairs are dropped: nothing reads a
// gradient after the net.
//
// The result is the step the plain net's gradients followed by p - lr * dp would take, in the
// param's dtype, each operation rounded (Mul, then Sub; no fused multiply-add): byte for byte.
// Not done: optimizers with state (momentum, Adam: their state would be inputs updated in place
// too), clipping by a global norm (it needs every gradient first), gradient accumulation.
//
// InvalidArgument for a learning rate that is not finite and > 0, a net without param-grad
// pairs, a pair whose param is written by an op (updated twice), whose gradient is not made by
// an op of the net or is not its name's latest version, or whose param and gradient live on two
// devices.
// Complexity: O(ops + values) plus shape inference of the result.
#ifndef MEMONGER_GRAPH_UPDATE_IN_BACKWARD_H_
#define MEMONGER_GRAPH_UPDATE_IN_BACKWARD_H_

#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace memonger::graph {

absl::StatusOr<Graph> UpdateInBackward(const Graph& training, double learning_rate);

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_UPDATE_IN_BACKWARD_H_
