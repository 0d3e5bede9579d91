// The recurrent ops RNN, GRU and LSTM (ONNX opsets 7-14, as torch.onnx.export writes nn.RNN,
// nn.GRU and nn.LSTM, one node per layer):
//
//   X [seq, batch, input] (layout 1: [batch, seq, input]), W [dirs, G*hidden, input],
//   R [dirs, G*hidden, hidden], optional B [dirs, 2*G*hidden] (W's biases, then R's),
//   sequence_lens [batch], initial_h (and LSTM's initial_c) [dirs, batch, hidden], LSTM's
//   peepholes P [dirs, 3*hidden]
//   -> Y [seq, dirs, batch, hidden] (layout 1: [batch, seq, dirs, hidden]), Y_h (and LSTM's
//   Y_c) [dirs, batch, hidden] (layout 1: [batch, dirs, hidden]); each output may be omitted.
//
// G is 1 (RNN), 3 (GRU: gates z, r, h) or 4 (LSTM: gates i, o, f, c), in ONNX's order. The
// equations are ONNX's (GRU's linear_before_reset both ways; LSTM's peepholes), with the
// activations of `activations` (default: Tanh; Sigmoid, Tanh; Sigmoid, Tanh, Tanh) and their
// `activation_alpha`/`activation_beta`, and `clip` bounding every gate's input. `direction`
// forward, reverse or bidirectional (two directions, each with its own weights, written side
// by side in Y). A batch row with sequence length L runs L steps (reverse: from step L-1 down
// to 0); Y is zero beyond L, and Y_h/Y_c hold the state after its last step.
//
// The algorithm: per direction, X x W^T (+ W's bias) for every step at once in one matrix
// product (GemmCpu); then per step one product H x R^T over the batch and the gate arithmetic.
// O(seq * batch * G * hidden * (input + hidden)). Storage float32, float16, bfloat16, float64;
// every product and gate in float32; outputs rounded once. The state lives outside the arena
// (O(batch * G * hidden) floats, plus seq * batch * G * hidden for X x W^T), as the matrix
// product's own packing does. LSTM's input_forget=1 is refused (Unimplemented); outputs must
// not overlap inputs or each other.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/gemm_cpu.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cpu/rnn_cell.h"
#include "kernels/kernel_util.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

using graph::DataType;
using namespace rnn_internal;  // NOLINT: the recurrent kernels' shared parts

absl::Status RunRecurrent(const KernelArgs& args, Cell cell) {
  MG_ASSIGN_OR_RETURN(const RnnSpec s, ResolveRnn(args, cell, /*gradient=*/false));
  const int64_t S = s.seq, B = s.batch, I = s.input, H = s.hidden;
  const int64_t GH = s.GateWidth();
  const int64_t dirs = s.directions;
  const int per_direction = static_cast<int>(s.activations.size()) / s.directions;

  MG_ASSIGN_OR_RETURN(const std::vector<int64_t> lens, SequenceLengths(args, s));
  MG_ASSIGN_OR_RETURN(const RnnInputs in, LoadInputs(args, s));
  const auto& [x, w, r, bias, h0, c0, peep] = in;
  const std::vector<float> x_rows = StepMajorRows(s, x);
  auto y_at = [&](int64_t t, int64_t d, int64_t b) { return s.YAt(t, d, b); };
  auto state_at = [&](int64_t d, int64_t b) { return s.StateAt(d, b); };
  std::vector<float> y;
  if (s.y >= 0) y.assign(static_cast<size_t>(S * dirs * B * H), 0.0f);
  std::vector<float> h_out(static_cast<size_t>(dirs * B * H)), c_out(h_out.size());

  std::vector<float> xw(static_cast<size_t>(S * B * GH));
  std::vector<float> hr(static_cast<size_t>(B * GH));
  std::vector<float> h(static_cast<size_t>(B * H)), c(h.size());
  std::vector<float> rh(static_cast<size_t>(H)), candidate(static_cast<size_t>(H));
  auto clip = [&](float v) { return s.Clip(v); };
  for (int64_t d = 0; d < dirs; ++d) {
    const bool reverse = s.reverse_only || d == 1;
    const float* wd = w.data() + d * GH * I;
    const float* rd = r.data() + d * GH * H;
    const float* wb = bias.data() + d * 2 * GH;
    const float* rb = wb + GH;
    const float* pd = peep.data() + d * 3 * H;
    const Activation* act = s.activations.data() + d * per_direction;
    // X x W^T + W's bias, for every step.
    MG_RETURN_IF_ERROR(GemmCpu(
        S * B, GH, I, GemmOperand{DataType::kFloat32, reinterpret_cast<const std::byte*>(x_rows.data()), I, false},
        GemmOperand{DataType::kFloat32, reinterpret_cast<const std::byte*>(wd), I, true},
        [&](int64_t row, int64_t col, int64_t count, const float* acc) {
          float* out = xw.data() + row * GH + col;
          for (int64_t j = 0; j < count; ++j) out[j] = acc[j] + wb[col + j];
        }));
    for (int64_t b = 0; b < B; ++b) {
      std::copy_n(h0.begin() + state_at(d, b), H, h.begin() + b * H);
      std::copy_n(c0.begin() + state_at(d, b), H, c.begin() + b * H);
    }
    for (int64_t k = 0; k < S; ++k) {
      // H x R^T over the batch (rows whose sequence has ended are computed and ignored).
      MG_RETURN_IF_ERROR(GemmCpu(
          B, GH, H, GemmOperand{DataType::kFloat32, reinterpret_cast<const std::byte*>(h.data()), H, false},
          GemmOperand{DataType::kFloat32, reinterpret_cast<const std::byte*>(rd), H, true},
          [&](int64_t row, int64_t col, int64_t count, const float* acc) {
            std::copy_n(acc, count, hr.begin() + row * GH + col);
          }));
      for (int64_t b = 0; b < B; ++b) {
        if (k >= lens[b]) continue;
        const int64_t t = reverse ? lens[b] - 1 - k : k;
        const float* xg = xw.data() + (t * B + b) * GH;
        const float* hg = hr.data() + b * GH;
        float* hb = h.data() + b * H;
        float* cb = c.data() + b * H;
        switch (cell) {
          case Cell::kRnn:
            for (int64_t j = 0; j < H; ++j) hb[j] = act[0](clip(xg[j] + hg[j] + rb[j]));
            break;
          case Cell::kGru: {
            // Gates z (0), r (1), h (2). rh = r (.) H_prev, needed before H is overwritten.
            for (int64_t j = 0; j < H; ++j) {
              const float rj = act[0](clip(xg[H + j] + hg[H + j] + rb[H + j]));
              rh[j] = s.linear_before_reset ? rj * (hg[2 * H + j] + rb[2 * H + j]) : rj * hb[j];
            }
            for (int64_t j = 0; j < H; ++j) {
              float pre = xg[2 * H + j];
              if (s.linear_before_reset) {
                pre += rh[j];
              } else {
                const float* row = rd + (2 * H + j) * H;  // R_h's row j
                float dot = 0;
                for (int64_t i = 0; i < H; ++i) dot += rh[i] * row[i];
                pre += dot + rb[2 * H + j];
              }
              candidate[j] = act[1](clip(pre));
            }
            for (int64_t j = 0; j < H; ++j) {
              const float z = act[0](clip(xg[j] + hg[j] + rb[j]));
              hb[j] = (1.0f - z) * candidate[j] + z * hb[j];
            }
            break;
          }
          case Cell::kLstm:
            // Gates i (0), o (1), f (2), c (3); peepholes i, o, f.
            for (int64_t j = 0; j < H; ++j) {
              const float c_prev = cb[j];
              const float i = act[0](clip(xg[j] + hg[j] + rb[j] + pd[j] * c_prev));
              const float f = act[0](clip(xg[2 * H + j] + hg[2 * H + j] + rb[2 * H + j] +
                                          pd[2 * H + j] * c_prev));
              const float g = act[1](clip(xg[3 * H + j] + hg[3 * H + j] + rb[3 * H + j]));
              const float c_new = f * c_prev + i * g;
              const float o = act[0](clip(xg[H + j] + hg[H + j] + rb[H + j] + pd[H + j] * c_new));
              cb[j] = c_new;
              hb[j] = o * act[2](c_new);
            }
            break;
        }
        if (!y.empty()) std::copy_n(hb, H, y.begin() + y_at(t, d, b));
      }
    }
    for (int64_t b = 0; b < B; ++b) {
      std::copy_n(h.begin() + b * H, H, h_out.begin() + state_at(d, b));
      std::copy_n(c.begin() + b * H, H, c_out.begin() + state_at(d, b));
    }
  }
  MG_RETURN_IF_ERROR(StoreAll(args, s.y, y));
  MG_RETURN_IF_ERROR(StoreAll(args, s.y_h, h_out));
  MG_RETURN_IF_ERROR(StoreAll(args, s.y_c, c_out));
  return absl::OkStatus();
}

}  // namespace

void AddCpuRnnKernels(KernelMap& kernels) {
  kernels["RNN"] = [](const KernelArgs& args) { return RunRecurrent(args, Cell::kRnn); };
  kernels["GRU"] = [](const KernelArgs& args) { return RunRecurrent(args, Cell::kGru); };
  kernels["LSTM"] = [](const KernelArgs& args) { return RunRecurrent(args, Cell::kLstm); };
}

}  // namespace memonger::alloc
