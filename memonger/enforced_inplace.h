// Ops that must write in place (Caffe2's EnforceInplace): their output j is the memory of their
// input i, so the net must name the two alike, and no plan may separate them. A net that
// separates them (memonger_test's IndexFreeze(A) -> B) is refused before planning, as Caffe2's
// schema check refused it before memonger ran (pytorch PRs #46378, #46560).
//
//   MG_RETURN_IF_ERROR(CheckEnforcedInPlace(graph));
//
// The table: IndexFreeze {0->0}; Adagrad {0->0, 1->1}; Adam {0->0, 1->1, 2->2};
// MomentumSGDUpdate {0->0, 1->1, 3->2}; Caffe2's ops only (an op with an ONNX domain, such as
// ai.onnx.preview.training's Adam, is not checked). O(ops).
#ifndef MEMONGER_MEMONGER_ENFORCED_INPLACE_H_
#define MEMONGER_MEMONGER_ENFORCED_INPLACE_H_

#include "absl/status/status.h"
#include "graph/graph.h"

namespace memonger {

// InvalidArgument naming the op, its type, the input and the output that must be one blob.
absl::Status CheckEnforcedInPlace(const graph::Graph& graph);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_ENFORCED_INPLACE_H_
