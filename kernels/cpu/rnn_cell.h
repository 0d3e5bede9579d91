// What the recurrent kernels share (kernels_cpu_rnn.cc runs RNN, GRU and LSTM forward,
// kernels_cpu_rnn_backward.cc their gradients): the cell kinds, ONNX's activation functions with
// their derivatives, and one op's geometry resolved from its attributes and tensor types.
//
// Node positions. The forward op is ONNX's: inputs X 0, W 1, R 2, B 3, sequence_lens 4,
// initial_h 5, initial_c 6, P 7; outputs Y 0, Y_h 1, Y_c 2. The gradient op (<Cell>Gradient,
// ours) reads the forward inputs at the same positions, then Y 8 (required: the hidden state of
// every step, which the backward pass recomputes the gates from), dY 9, dY_h 10, dY_c 11; it
// writes dX 0, dW 1, dR 2, dB 3, dinitial_h 4, dinitial_c 5, dP 6. Omitted positions are
// recorded as an importer records ONNX's (`onnx_input_slots`, `onnx_output_slots`).
#ifndef MEMONGER_KERNELS_CPU_RNN_CELL_H_
#define MEMONGER_KERNELS_CPU_RNN_CELL_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/kernel.h"

namespace memonger::alloc::rnn_internal {

enum class Cell { kRnn, kGru, kLstm };

// 1 (RNN), 3 (GRU: gates z, r, h) or 4 (LSTM: gates i, o, f, c), ONNX's order.
int GateCount(Cell cell);

// One activation function of ONNX's recurrent ops, with its parameters.
struct Activation {
  enum Kind {
    kRelu, kTanh, kSigmoid, kAffine, kLeakyRelu, kThresholdedRelu, kScaledTanh, kHardSigmoid,
    kElu, kSoftsign, kSoftplus
  } kind = kTanh;
  float alpha = 0;
  float beta = 0;

  float operator()(float x) const;
  // d f / d x at x; at a kink the right-hand slope except Relu's (0 at 0, as PyTorch's).
  float Derivative(float x) const;
};

// The op's geometry and options, checked against every present input and output.
struct RnnSpec {
  Cell cell = Cell::kRnn;
  int gates = 1;
  int directions = 1;
  bool reverse_only = false;  // direction 'reverse'
  int64_t seq = 0, batch = 0, input = 0, hidden = 0;
  bool batch_major = false;  // layout 1
  float clip = 0;            // 0: no clip
  bool linear_before_reset = false;
  std::vector<Activation> activations;  // per direction: f, g[, h]
  // Positions in args.inputs / args.outputs; -1 when omitted. X, W and R are inputs 0-2.
  int b = -1, lens = -1, initial_h = -1, initial_c = -1, peepholes = -1;
  int y = -1, y_h = -1, y_c = -1;  // forward: outputs; gradient: y is input 8
  // The gradient op only: incoming gradients (inputs) and the gradients written (outputs).
  int dy = -1, dy_h = -1, dy_c = -1;
  int dx = -1, dw = -1, dr = -1, db = -1, d_initial_h = -1, d_initial_c = -1, dp = -1;

  int64_t GateWidth() const { return gates * hidden; }
  // Element offsets of step t, direction d, batch row b in Y (and dY), and of (d, b) in a
  // state tensor (initial_h, Y_h, ...), in the op's layout.
  int64_t YAt(int64_t t, int64_t d, int64_t b) const {
    return batch_major ? ((b * seq + t) * directions + d) * hidden
                       : ((t * directions + d) * batch + b) * hidden;
  }
  int64_t StateAt(int64_t d, int64_t b) const {
    return batch_major ? (b * directions + d) * hidden : (d * batch + b) * hidden;
  }
  // Element offset of step t, batch row b in X.
  int64_t XAt(int64_t t, int64_t b) const {
    return batch_major ? (b * seq + t) * input : (t * batch + b) * input;
  }
  // Gate input x after `clip`, and d clip / d x (0 where the clip bounds it).
  float Clip(float x) const { return clip > 0 ? (x < -clip ? -clip : x > clip ? clip : x) : x; }
  float ClipSlope(float x) const { return clip > 0 && (x < -clip || x > clip) ? 0.0f : 1.0f; }
};

// The forward op (`gradient` false) or its gradient op (true): see the positions above.
absl::StatusOr<RnnSpec> ResolveRnn(const KernelArgs& args, Cell cell, bool gradient);

// Every row's sequence length (sequence_lens, or seq for all rows), each checked in [0, seq].
absl::StatusOr<std::vector<int64_t>> SequenceLengths(const KernelArgs& args, const RnnSpec& s);

// The forward inputs as float32, an omitted one as zeros (B, initial states, peepholes).
struct RnnInputs {
  std::vector<float> x, w, r, bias, initial_h, initial_c, peepholes;
};
absl::StatusOr<RnnInputs> LoadInputs(const KernelArgs& args, const RnnSpec& s);

// All of input `index` as float32 (zeros of `count` elements when the input is omitted).
absl::StatusOr<std::vector<float>> LoadAll(const KernelArgs& args, int index, int64_t count);

// Stores `values` into output `index` in its element type (nothing when omitted).
absl::Status StoreAll(const KernelArgs& args, int index, const std::vector<float>& values);

// X's rows in step-major order (row t * batch + b), whatever the layout.
std::vector<float> StepMajorRows(const RnnSpec& s, const std::vector<float>& x);

}  // namespace memonger::alloc::rnn_internal

#endif  // MEMONGER_KERNELS_CPU_RNN_CELL_H_
