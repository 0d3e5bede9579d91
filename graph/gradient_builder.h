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
//   4. Parameters' gradients are declared param-grads and graph outputs (role gradient): the
//      optimizer reads them after the net.
//
// Rules (dY: the output's gradient; ops marked is_gradient_op, so their outputs have role
// gradient):
//   FC -> FCGradient(X, W, dY); MatMul -> MatMulGradient(dY, A, B); Relu, Softmax, Sigmoid,
//   Tanh -> <Op>Gradient(Y, dY); Gelu -> GeluGradient(dY, X); LabelCrossEntropy ->
//   LabelCrossEntropyGradient(X, label, dY); AveragedLoss -> AveragedLossGradient(X, dL);
//   LayerNormalization -> LayerNormalizationGradient(dY, X, Scale, Mean, InvStdDev) (the
//   forward op gains the Mean and InvStdDev outputs when it lacks them: saved statistics);
//   EfficientAttention -> EfficientAttentionGradient(dO, q, k, v, O, lse, [bias]) (the forward
//   op gains its lse output); Add -> the gradient itself for an operand of the output's shape,
//   ReduceSum over the broadcast leading dims for a trailing-dims operand (a bias);
//   Mul by a value without gradient -> Mul(dC, B); Transpose -> Transpose by the inverse
//   permutation; Reshape, Squeeze, Unsqueeze, Flatten -> Reshape to the input's dims;
//   Split -> Concat; Concat -> Split into the inputs' sizes; Cast -> Cast back; Identity,
//   Copy, AddAttentionBias (to S), Sum (to each input) -> the gradient itself; Conv ->
//   ConvGradient(X, W, dY) (no_bias when Conv has no bias); SpatialBN (training: 5 outputs)
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
// LayerNormalization, EfficientAttention, SpatialBN and BatchNormalization are differentiated
// through output 0 alone (their other outputs are statistics or scratch): a loss that depends
// on another of their outputs is Unimplemented naming the op and the output. So is an ONNX
// LayerNormalization or BatchNormalization node that omits an optional output before a present
// one (`onnx_output_slots`): its outputs are not at the positions the rules read.
//
// In-place writes: a gradient op reads forward values by name, which means their latest
// version. When a rule needs a value that a later op overwrote in place, the result is
// Unimplemented naming both (the value is gone when the backward pass runs), never a silent
// read of the wrong version. Ops without a rule on the path to a loss are Unimplemented, naming
// the op. REQUIRES: `forward` is typed (shape inference done); the result is typed too.
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

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_GRADIENT_BUILDER_H_
