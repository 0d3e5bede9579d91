// Sequences a model builds from tensors it knows: lowered to tensor ops.
//
// Scripted code appends to a Python list in a loop and stacks it (`outs.append(h)` ...
// `torch.stack(outs, 1)`); the exporter writes SequenceEmpty, one SequenceInsert per append (a
// value the Loop carries) and ConcatFromSequence. Once the Loop is unrolled (control_flow.h),
// the sequence is a chain of inserts whose elements are named tensors, and the concatenation is
// a Concat of them (each Unsqueezed first for `new_axis = 1`, as torch.stack). LowerSequences
// makes that replacement, then removes the sequence nodes nothing reads any more; a sequence
// read otherwise (SequenceAt, SequenceLength, a position given to an insert, a graph output)
// stays, and the importer refuses it as a sequence value.
#ifndef MEMONGER_GRAPH_ONNX_SEQUENCES_H_
#define MEMONGER_GRAPH_ONNX_SEQUENCES_H_

#include "onnx/onnx_pb.h"

namespace memonger::graph::onnx_fold {

// Replaces every ConcatFromSequence of the default domain whose input is a chain of
// SequenceInserts without positions (through Identity nodes) from a SequenceEmpty or a
// SequenceConstruct, of at least one element, by Unsqueezes (new_axis = 1; axes an input from
// opset 13) and a Concat; then removes sequence-producing nodes without readers. True when a
// ConcatFromSequence was replaced. O(nodes + chain lengths).
bool LowerSequences(onnx::GraphProto& graph, int opset);

}  // namespace memonger::graph::onnx_fold

#endif  // MEMONGER_GRAPH_ONNX_SEQUENCES_H_
