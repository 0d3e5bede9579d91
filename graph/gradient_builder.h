// The gradient builder: appends the backward ops of a forward net, as Caffe2's
// AddGradientOperators did for memonger's training nets.
//
//   MG_ASSIGN_OR_RETURN(Graph training, AddGradientOps(forward, {"loss"}));
//   // training: the forward ops (some with extra saved outputs), then the backward ops;
//   // every parameter's gradient is a declared param-grad output.
//
// Algorithm (one pass over the ops in reverse program order):
//   1. A value needs a gradient when it is a floating-point parameter, or a floating-point
//      output of an op with an input that needs one, and a loss depends on it.
//   2. Each loss L is seeded with L_autogen_grad = ConstantFill(L, value 1), Caffe2's name.
//   3. Going backwards, an op with a gradient on some output and an input that needs one gets
//      its gradient ops (rules below); each input receives a gradient *contribution*. All of a
//      value's consumers come after its producer, so when its producer is reached every
//      contribution is known: one is used as it is, several are summed (Sum). Pieces are named
//      as Caffe2's builder names them, so that Caffe2's `_grad` rule finds them in a net
//      written out without declarations: X_grad, then _X_grad_autosplit_0, _1, ..., summed in
//      place into X_grad (into a fresh X_grad_<k> when the first piece is another value's
//      gradient passed through).
//      A parameter's pieces are summed at its first reader, as soon as the last piece exists.
//   4. Parameters' gradients are declared param-grads and graph outputs (role gradient): the
//      optimizer reads them after the net.
//
// Every gradient op runs on the device of the forward op it differentiates (the loss seed: the
// loss producer's; a param's gradient sum: its first reader's), as Caffe2's AddGradientOperators
// copies the forward op's device_option.
//
// Rules (dY: the output's gradient; ops marked is_gradient_op, so their outputs have role
// gradient):
//   FC -> FCGradient(X, W, dY); MatMul -> MatMulGradient(dY, A, B); Relu, Softmax, Sigmoid,
//   Tanh -> <Op>Gradient(Y, dY); Gelu -> GeluGradient(dY, X); LabelCrossEntropy ->
//   LabelCrossEntropyGradient(X, label, dY); AveragedLoss -> AveragedLossGradient(X, dL);
//   LayerNormalization -> LayerNormalizationGradient(dY, X, Scale, Mean, InvStdDev) (the
//   forward op gains the Mean and InvStdDev outputs when it lacks them: saved statistics);
//   EfficientAttention -> EfficientAttentionGradient(dO, q, k, v, O, lse, [bias]) (the forward
//   op gains its lse output); Transpose -> Transpose by the inverse permutation; Reshape, Squeeze, Unsqueeze, Flatten -> Reshape to the input's dims;
//   Split -> Concat; Concat -> Split into the inputs' sizes; Cast -> Cast back; Identity,
//   Copy, AddAttentionBias (to S), Sum (to each input) -> the gradient itself; Conv ->
//   ConvGradient(X, W, dY) (no_bias when Conv has no bias); ConvTranspose -> dX = Conv(dY, W),
//   dW = ConvGradient(dY, W, X) (no_bias), db = ReduceSum of dY; SpatialBN (training: 5 outputs)
//   -> SpatialBNGradient(X, scale, dY, saved_mean, saved_var); MaxPool, AveragePool ->
//   <Op>Gradient(X, Y, dY);
//   Gemm (alpha, beta, transA, transB) -> for each input that needs it: dA, dB one Gemm each
//   (dY with B, A with dY; alpha and the transposes folded into the attributes), dC = beta dY
//   summed over C's broadcast dims (ReduceSum, Reshape to C's dims, Mul by a ConstantFill
//   scalar beta; only the steps needed; beta = 0: a ConstantFill of zeros);
//   ONNX BatchNormalization -> BatchNormalizationGradient(dY, X, scale, mean, var): in training
//   mode (graph/batch_normalization_mode.h) mean and var are the batch statistics, saved by the
//   forward op as outputs 3 and 4 (opset 9's saved_mean and saved_var, added when missing);
//   in inference mode they are input_mean and input_var, which get gradients too when they
//   need them.
// The ops torch.onnx.export writes (opsets 13-17), each composed of ops that have kernels, so
// that what a rule keeps is what the planners see: Add, Sub, Mul, Div of any two operands with
// numpy broadcasting (a gradient is summed back over the axes its operand broadcast along:
// ReduceSum keepdims, then Reshape); Pow (dY e X^(e-1); the exponent from the model's data, else
// computed: Cast, Sub, Pow; no gradient for the exponent); Sqrt, Exp (read Y), Log, Erf (read X),
// Neg, Reciprocal; LogSoftmax (dY - exp(Y) sum dY); Where (dY to the branch chosen, 0 to the
// other); Expand (summed back); Clip (dY strictly inside the bounds, as PyTorch's hardtanh);
// HardSigmoid, HardSwish (their slopes by Where); Dropout (the identity without training mode
// or at ratio 0, else dY mask / (1 - ratio); Caffe2's: DropoutGrad); ReduceSum, ReduceMean,
// GlobalAveragePool (dY, / count for a mean, Unsqueeze'd and Expand'ed back); Slice (unit
// steps: Pad; other steps, negative too: SliceGradient, dY into zeros at the elements read); Pad in constant mode without crops (a Slice of dY); Resize (ResizeGradient: its
// maps transposed); Gather (an embedding: ScatterND add of dY into a ConstantFill of zeros; one static
// index along any axis: Pad). Numbers a rule needs (exponents, ratios, axes, slice bounds) come
// from attributes or the model's static data; a computed one is Unimplemented.
// RNN, GRU, LSTM -> <Op>Gradient (kernels/cpu/rnn_cell.h: the forward inputs, Y, the output
// gradients; a gradient for each input that needs one): Y, the state of every step, is what it
// keeps (added to a node that omits it); the gates are recomputed from it.
// Four patterns keep less than the op-by-op rules would: MatMul(A, Transpose(W)) swapping W's
// last two dims (a 2-D weight; attention's keys, perm [0, 2, 1]) reads W with trans_b (the
// transposed copy dies in the forward pass), and the erf GELU
// exporters write (x * (1 + erf(x / sqrt 2)) * 0.5, intermediates read once, constants in the
// model's data) is one GeluGradient(dY, x); Slices that cut a value along one axis into pieces
// covering it once (a weight split into gates) give one Concat of their gradients, not a Pad of
// each and a Sum; and a value that is params or constants rearranged by moves alone (Slice,
// Concat, Transpose, the Reshape family: an exporter's reordered LSTM weight) is made again for
// the backward op that reads it instead of kept from the forward pass ("<value>_remade").
// Every op type without a rule on the path to a loss is named in one Unimplemented message.
// LayerNormalization, EfficientAttention, SpatialBN and BatchNormalization are differentiated
// through output 0 alone (their other outputs are statistics or scratch): a loss that depends
// on another of their outputs is Unimplemented naming the op and the output. So is an ONNX
// LayerNormalization or BatchNormalization node that omits an optional output before a present
// one (`onnx_output_slots`): its outputs are not at the positions the rules read.
//
// In-place writes: a gradient op reads forward values by name, which means their latest
// version. When a rule needs a value that a later op overwrote in place, the result is
// Unimplemented naming both (the value is gone when the backward pass runs), never a silent
// read of the wrong version. REQUIRES: `forward` is typed (shape inference done); the result is typed too.
//
// Complexity: O(ops + values) plus shape inference of the result.
#ifndef MEMONGER_GRAPH_GRADIENT_BUILDER_H_
#define MEMONGER_GRAPH_GRADIENT_BUILDER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace memonger::graph {

// `losses`: value names (their latest versions); empty: the graph's declared losses. The
// result's inputs keep the symbolic dims the forward net declared (its values are typed at the
// forward net's sizes).
// InvalidArgument for no loss, an unknown loss name, a loss that is not floating-point or that
// no parameter influences; Unimplemented as described above.
absl::StatusOr<Graph> AddGradientOps(const Graph& forward, const std::vector<std::string>& losses);

// True when the graph already has gradient ops (is_gradient_op or a type ending in Gradient).
bool HasGradientOps(const Graph& graph);

// The params a training step updates, ascending: those the net pairs with a gradient
// (param_grads), or, where it declares no pair (a Caffe2 NetDef as Caffe2 writes it), the params
// with a value named `<param>_grad`, Caffe2's own gradient naming. O(values).
std::vector<ValueId> TrainableParams(const Graph& graph);

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_GRADIENT_BUILDER_H_
