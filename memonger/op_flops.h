// The arithmetic an op does, in floating-point operations, from its inferred types: what
// recomputing it costs (memonger/recompute.h).
//
//   int64_t cost = OpFlops(graph, graph.op(id));  // 2 * M * N * K for a MatMul
//
// Counted: matrix products (MatMul, BatchMatMul with Caffe2's trans_a, FC, FCTransposed at
// their axis, Gemm with its transA: 2 per multiply-add), convolutions (Conv, Caffe2's
// Conv1D/2D/3D: 2 x output elements x the weight's elements per output channel; ConvTranspose:
// 2 x input elements x the weight's elements per input channel), Einsum (n per point of its
// label space for n >= 2 operands), attention (EfficientAttention:
// the two products of L x L scores), the recurrent ops (RNN, GRU, LSTM: X W^T and H R^T for
// every step), pooling (Y's elements x the window; a global one: its input elements),
// reductions (Reduce*, Global*, ArgMax/ArgMin, AveragedLoss, SumElements: one per input
// element), 5 per element for the normalisations (Softmax, LayerNormalization,
// BatchNormalization, SpatialBN); every other op one per output element. An estimate for
// ranking recomputation choices, not a profile: memory traffic is not counted. Saturates at
// INT64_MAX instead of overflowing.
#ifndef MEMONGER_MEMONGER_OP_FLOPS_H_
#define MEMONGER_MEMONGER_OP_FLOPS_H_

#include <cstdint>

#include "graph/graph.h"

namespace memonger {

// REQUIRES: the op's values are typed.
int64_t OpFlops(const graph::Graph& graph, const graph::Op& op);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_OP_FLOPS_H_
