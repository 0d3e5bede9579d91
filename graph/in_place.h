// In-place reuse of a dying input: which inputs' bytes an output of an op may take, when that
// input is read by nothing after the op (LivenessOptions::in_place). This is the one table:
// liveness merges such a pair into one alias class, the verifier accepts their overlap only at
// the step where the input dies, and the kernel tests run every entry in place.
//
// An entry says that the op's CPU kernel (kernels/cpu) and, for the ops the CUDA kernels cover,
// its CUDA kernel compute the same bytes when the output is the input exactly (same address,
// same dims, same element size): each reads an element, or a whole row, of the input before it
// writes the output's. Elementwise unary and binary ops, activations, Cast between types of one
// size, Softmax and LayerNormalization (row buffers), BatchNormalization and
// InstanceNormalization, the n-ary Sum/Max/Min/Mean, Where's branches, the pointwise gradients
// over dY, and AddAttentionBias over the scores: output 0 each. What ONNX Runtime's MayInplace,
// TFLite's in-place ops and eager PyTorch's `inplace=True` do for the same ops.
//
// The recurrent gradients (RNNGradient, GRUGradient, LSTMGradient) read every input before
// they write any output, so each gradient may take its forward input's bytes: dX over X, dW
// over W, dR over R, dB over B, the initial states' and peepholes' gradients over theirs. That
// matters where W and R are activations (the reordered gates an exporter writes, remade for the
// backward pass): their gradients then need no memory of their own.
//
// The recurrent gradients' outputs and inputs are named by node position (their
// `onnx_output_slots` and `onnx_input_slots`), every other op's by index (its kernel's view).
//
//   if (graph::MayWriteOverInput(op, k, slot) && graph::InPlaceTypesMatch(in, out)) { ... }
#ifndef MEMONGER_GRAPH_IN_PLACE_H_
#define MEMONGER_GRAPH_IN_PLACE_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "graph/graph.h"
#include "graph/tensor_type.h"

namespace memonger::graph {

// Whether the output at node position `output` of an `op_type` op may take the bytes of its
// input at node position `input` (see above).
bool MayWriteOverInputAt(absl::string_view op_type, int64_t output, int64_t input);

// The same for `op`'s output `output` and input `input` (indices into op.outputs and
// op.inputs), through the op's node positions where its kernel reads operands by them.
bool MayWriteOverInput(const Op& op, int output, int input);

// Whether an `op_type` op's kernel reads its operands by node position (onnx_input_slots,
// onnx_output_slots): the recurrent gradients. Other ops' slots are indices.
bool ReadsOperandsByNodePosition(absl::string_view op_type);

// Whether an `op_type` op of the table broadcasts its inputs (numpy rules: Add, Sub, Mul, Div,
// Pow, Mod, Sum, Max, Min, Mean, Where), so that its output's shape can part from an input's at
// other sizes although the two agree at these.
bool BroadcastsInputs(absl::string_view op_type);

// The op types of the table, sorted (for docs and tests).
std::vector<std::string> InPlaceOpTypes();

// The types an in-place pair must have: the same dims and the same element size (the
// element-for-element identity every entry's kernel computes in place; Cast float32 -> int32
// keeps it, a broadcast does not).
bool InPlaceTypesMatch(const TensorType& input, const TensorType& output);

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_IN_PLACE_H_
