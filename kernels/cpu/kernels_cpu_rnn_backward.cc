// The gradients of RNN, GRU and LSTM (RNNGradient, GRUGradient, LSTMGradient; ours): from the
// forward inputs, Y (the hidden state of every step) and the incoming gradients dY, dY_h, dY_c
// (any present), the gradients of X, W, R, B, initial_h, initial_c and P that are asked for
// (node positions: kernels/cpu/rnn_cell.h). sequence_lens gets none.
//
// What it keeps and what it recomputes: the forward op's gates are not saved. A step's previous
// state is read from Y (initial_h at a row's first step), so all the gates' inputs come back in
// two matrix products over every step at once, X x W^T and H_prev x R^T; LSTM's cell states then
// by one elementwise pass along each row's steps, GRU's (r (.) H_prev) x R_h^T (without
// linear_before_reset) by a third product. The backward pass walks the steps in reverse
// processing order, one product dG x R over the batch per step for the previous state's
// gradient; dX, dW and dR are then one product each over every step. Storage types as the
// forward kernel's (float32, float16, bfloat16, float64; every product and gate in float32);
// where Y is stored at a lower precision the gates are recomputed from the rounded states, so
// the gradient is that of the recurrence through the stored Y.
//
// Cost O(seq * batch * G * hidden * (input + hidden)), the forward's twice over. Scratch outside
// the arena, as the forward kernel's: the gates' inputs and their gradients, 4 * seq * batch *
// G * hidden floats, plus seq * batch * (input + 3 * hidden). Derivatives at a clip bound or an
// activation's kink are one-sided (rnn_cell.h). Every input is read (into float32 copies)
// before any output is written, so a gradient may take its forward input's exact bytes
// (graph/in_place.h: dW over an exporter's reordered W); no other overlap is allowed.
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

// C (m x n, row-major) = op(A) x op(B), or += with `accumulate`; every operand float32.
absl::Status Product(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, bool ta,
                     const float* b, int64_t ldb, bool tb, float* c, int64_t ldc,
                     bool accumulate) {
  if (m == 0 || n == 0) return absl::OkStatus();
  if (k == 0) {
    if (!accumulate) {
      for (int64_t i = 0; i < m; ++i) std::fill_n(c + i * ldc, n, 0.0f);
    }
    return absl::OkStatus();
  }
  return GemmCpu(m, n, k,
                 GemmOperand{DataType::kFloat32, reinterpret_cast<const std::byte*>(a), lda, ta},
                 GemmOperand{DataType::kFloat32, reinterpret_cast<const std::byte*>(b), ldb, tb},
                 [&](int64_t row, int64_t col, int64_t count, const float* acc) {
                   float* out = c + row * ldc + col;
                   for (int64_t j = 0; j < count; ++j) {
                     out[j] = accumulate ? out[j] + acc[j] : acc[j];
                   }
                 });
}

absl::Status RunRecurrentGradient(const KernelArgs& args, Cell cell) {
  MG_ASSIGN_OR_RETURN(const RnnSpec s, ResolveRnn(args, cell, /*gradient=*/true));
  const int64_t S = s.seq, B = s.batch, I = s.input, H = s.hidden;
  const int64_t GH = s.GateWidth();
  const int64_t SB = S * B;
  const int64_t dirs = s.directions;
  const int per_direction = static_cast<int>(s.activations.size()) / s.directions;
  const bool lbr = s.linear_before_reset;

  MG_ASSIGN_OR_RETURN(const std::vector<int64_t> lens, SequenceLengths(args, s));
  MG_ASSIGN_OR_RETURN(const RnnInputs in, LoadInputs(args, s));
  const auto& [x, w, r, bias, h0, c0, peep] = in;
  MG_ASSIGN_OR_RETURN(const std::vector<float> y, LoadAll(args, s.y, 0));
  MG_ASSIGN_OR_RETURN(const std::vector<float> dy, LoadAll(args, s.dy, 0));
  MG_ASSIGN_OR_RETURN(const std::vector<float> dy_h, LoadAll(args, s.dy_h, dirs * B * H));
  MG_ASSIGN_OR_RETURN(const std::vector<float> dy_c, LoadAll(args, s.dy_c, dirs * B * H));
  const std::vector<float> x_rows = StepMajorRows(s, x);
  const int64_t longest = lens.empty() ? 0 : *std::max_element(lens.begin(), lens.end());

  std::vector<float> dx_rows(s.dx >= 0 ? static_cast<size_t>(SB * I) : 0, 0.0f);
  std::vector<float> dw(static_cast<size_t>(dirs * GH * I)), dr(static_cast<size_t>(dirs * GH * H));
  std::vector<float> db(static_cast<size_t>(dirs * 2 * GH), 0.0f);
  std::vector<float> dh0(static_cast<size_t>(dirs * B * H)), dc0(dh0.size());
  std::vector<float> dp(static_cast<size_t>(dirs * 3 * H), 0.0f);

  // Per direction; rows of these are step-major (t * B + b), zero where t >= the row's length.
  std::vector<float> xw(static_cast<size_t>(SB * GH)), hr(xw.size());
  std::vector<float> hp(static_cast<size_t>(SB * H));          // the state before step t
  std::vector<float> cp, cs;                                    // LSTM: cell before / after
  std::vector<float> rgate, rh, rhr;                            // GRU without lbr
  std::vector<float> dgx(xw.size()), dgr(xw.size());            // d gate inputs: X side, R side
  std::vector<float> step_dgr(static_cast<size_t>(B * GH));
  std::vector<float> dh(static_cast<size_t>(B * H)), dc(dh.size()), direct(dh.size());
  std::vector<float> back(dh.size()), d_rh(static_cast<size_t>(H));
  if (cell == Cell::kLstm) {
    cp.assign(hp.size(), 0.0f);
    cs.assign(hp.size(), 0.0f);
  }
  if (cell == Cell::kGru && !lbr) {
    rgate.assign(hp.size(), 0.0f);
    rh.assign(hp.size(), 0.0f);
    rhr.assign(hp.size(), 0.0f);
  }
  auto step_of = [&](bool reverse, int64_t b, int64_t k) { return reverse ? lens[b] - 1 - k : k; };

  for (int64_t d = 0; d < dirs; ++d) {
    const bool reverse = s.reverse_only || d == 1;
    const float* wd = w.data() + d * GH * I;
    const float* rd = r.data() + d * GH * H;
    const float* wb = bias.data() + d * 2 * GH;
    const float* rb = wb + GH;
    const float* pd = peep.data() + d * 3 * H;
    const Activation* act = s.activations.data() + d * per_direction;
    auto gate = [&](const Activation& f, float pre, float* slope) {
      const float clipped = s.Clip(pre);
      *slope = f.Derivative(clipped) * s.ClipSlope(pre);
      return f(clipped);
    };

    // 1. The gates' inputs of every step, as the forward pass computed them.
    MG_RETURN_IF_ERROR(Product(SB, GH, I, x_rows.data(), I, false, wd, I, true, xw.data(), GH,
                               /*accumulate=*/false));
    for (int64_t row = 0; row < SB; ++row) {
      for (int64_t j = 0; j < GH; ++j) xw[row * GH + j] += wb[j];
    }
    std::fill(hp.begin(), hp.end(), 0.0f);
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t k = 0; k < lens[b]; ++k) {
        const int64_t t = step_of(reverse, b, k);
        const float* prev = k == 0 ? h0.data() + s.StateAt(d, b)
                                   : y.data() + s.YAt(step_of(reverse, b, k - 1), d, b);
        std::copy_n(prev, H, hp.begin() + (t * B + b) * H);
      }
    }
    MG_RETURN_IF_ERROR(Product(SB, GH, H, hp.data(), H, false, rd, H, true, hr.data(), GH,
                               /*accumulate=*/false));
    if (cell == Cell::kLstm) {
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t k = 0; k < lens[b]; ++k) {
          const int64_t row = step_of(reverse, b, k) * B + b;
          const float* prev = k == 0 ? c0.data() + s.StateAt(d, b)
                                     : cs.data() + (step_of(reverse, b, k - 1) * B + b) * H;
          const float* xg = xw.data() + row * GH;
          const float* hg = hr.data() + row * GH;
          float slope;
          for (int64_t j = 0; j < H; ++j) {
            const float c_prev = prev[j];
            const float i = gate(act[0], xg[j] + hg[j] + rb[j] + pd[j] * c_prev, &slope);
            const float f = gate(act[0], xg[2 * H + j] + hg[2 * H + j] + rb[2 * H + j] +
                                             pd[2 * H + j] * c_prev, &slope);
            const float g = gate(act[1], xg[3 * H + j] + hg[3 * H + j] + rb[3 * H + j], &slope);
            cp[row * H + j] = c_prev;
            cs[row * H + j] = f * c_prev + i * g;
          }
        }
      }
    }
    if (cell == Cell::kGru && !lbr) {
      std::fill(rh.begin(), rh.end(), 0.0f);
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t k = 0; k < lens[b]; ++k) {
          const int64_t row = step_of(reverse, b, k) * B + b;
          float slope;
          for (int64_t j = 0; j < H; ++j) {
            const float rj = gate(act[0], xw[row * GH + H + j] + hr[row * GH + H + j] + rb[H + j],
                                  &slope);
            rgate[row * H + j] = rj;
            rh[row * H + j] = rj * hp[row * H + j];
          }
        }
      }
      MG_RETURN_IF_ERROR(Product(SB, H, H, rh.data(), H, false, rd + 2 * H * H, H, true,
                                 rhr.data(), H, /*accumulate=*/false));
    }

    // 2. Backwards through the steps: dh, dc carry the state's gradient of each row.
    for (int64_t b = 0; b < B; ++b) {
      std::copy_n(dy_h.begin() + s.StateAt(d, b), H, dh.begin() + b * H);
      std::copy_n(dy_c.begin() + s.StateAt(d, b), H, dc.begin() + b * H);
    }
    std::fill(dgx.begin(), dgx.end(), 0.0f);
    std::fill(dgr.begin(), dgr.end(), 0.0f);
    float* dpd = dp.data() + d * 3 * H;
    for (int64_t k = longest - 1; k >= 0; --k) {
      std::fill(step_dgr.begin(), step_dgr.end(), 0.0f);
      for (int64_t b = 0; b < B; ++b) {
        if (k >= lens[b]) continue;
        const int64_t t = step_of(reverse, b, k);
        const int64_t row = t * B + b;
        const float* xg = xw.data() + row * GH;
        const float* hg = hr.data() + row * GH;
        const float* hprev = hp.data() + row * H;
        float* gx = dgx.data() + row * GH;
        float* gr = dgr.data() + row * GH;
        float* dhb = dh.data() + b * H;
        float* dcb = dc.data() + b * H;
        float* direct_b = direct.data() + b * H;
        for (int64_t j = 0; j < H; ++j) {
          if (!dy.empty()) dhb[j] += dy[s.YAt(t, d, b) + j];
        }
        switch (cell) {
          case Cell::kRnn:
            for (int64_t j = 0; j < H; ++j) {
              float slope;
              gate(act[0], xg[j] + hg[j] + rb[j], &slope);
              gx[j] = gr[j] = dhb[j] * slope;
              direct_b[j] = 0;
            }
            break;
          case Cell::kGru: {
            for (int64_t j = 0; j < H; ++j) {
              float sz, sr, sh;
              const float z = gate(act[0], xg[j] + hg[j] + rb[j], &sz);
              const float rj = gate(act[0], xg[H + j] + hg[H + j] + rb[H + j], &sr);
              const float linear = hg[2 * H + j] + rb[2 * H + j];  // lbr: (H_prev R_h^T + Rb_h)
              const float pre = lbr ? xg[2 * H + j] + rj * linear
                                    : xg[2 * H + j] + rhr[row * H + j] + rb[2 * H + j];
              const float candidate = gate(act[1], pre, &sh);
              const float dpre = dhb[j] * (1.0f - z) * sh;
              gx[j] = dhb[j] * (hprev[j] - candidate) * sz;
              gx[2 * H + j] = dpre;
              direct_b[j] = dhb[j] * z;
              if (lbr) {
                gx[H + j] = dpre * linear * sr;
                gr[2 * H + j] = dpre * rj;
              }
              gr[j] = gx[j];
            }
            if (!lbr) {
              // d(r (.) H_prev) = dpre x R_h; then to r and to H_prev.
              std::fill(d_rh.begin(), d_rh.end(), 0.0f);
              for (int64_t j = 0; j < H; ++j) {
                const float g = gx[2 * H + j];
                const float* row_j = rd + (2 * H + j) * H;
                for (int64_t i = 0; i < H; ++i) d_rh[i] += g * row_j[i];
              }
              for (int64_t i = 0; i < H; ++i) {
                float sr;
                gate(act[0], xg[H + i] + hg[H + i] + rb[H + i], &sr);
                gx[H + i] = d_rh[i] * hprev[i] * sr;
                direct_b[i] += d_rh[i] * rgate[row * H + i];
              }
            }
            for (int64_t j = 0; j < H; ++j) gr[H + j] = gx[H + j];
            break;
          }
          case Cell::kLstm:
            for (int64_t j = 0; j < H; ++j) {
              const float c_prev = cp[row * H + j];
              const float c_new = cs[row * H + j];
              float si, sf, sg, so;
              const float i = gate(act[0], xg[j] + hg[j] + rb[j] + pd[j] * c_prev, &si);
              const float f = gate(act[0], xg[2 * H + j] + hg[2 * H + j] + rb[2 * H + j] +
                                               pd[2 * H + j] * c_prev, &sf);
              const float g = gate(act[1], xg[3 * H + j] + hg[3 * H + j] + rb[3 * H + j], &sg);
              const float o =
                  gate(act[0], xg[H + j] + hg[H + j] + rb[H + j] + pd[H + j] * c_new, &so);
              const float cell_out = act[2](c_new);
              const float dpo = dhb[j] * cell_out * so;
              const float dct = dcb[j] + dhb[j] * o * act[2].Derivative(c_new) + dpo * pd[H + j];
              const float dpi = dct * g * si;
              const float dpf = dct * c_prev * sf;
              const float dpc = dct * i * sg;
              dcb[j] = dct * f + dpi * pd[j] + dpf * pd[2 * H + j];
              dpd[j] += dpi * c_prev;
              dpd[H + j] += dpo * c_new;
              dpd[2 * H + j] += dpf * c_prev;
              gx[j] = gr[j] = dpi;
              gx[H + j] = gr[H + j] = dpo;
              gx[2 * H + j] = gr[2 * H + j] = dpf;
              gx[3 * H + j] = gr[3 * H + j] = dpc;
              direct_b[j] = 0;
            }
            break;
        }
        std::copy_n(gr, GH, step_dgr.begin() + b * GH);
      }
      // The previous state's gradient: what the gates' R side sends back, plus the direct part.
      MG_RETURN_IF_ERROR(Product(B, H, GH, step_dgr.data(), GH, false, rd, H, false, back.data(),
                                 H, /*accumulate=*/false));
      for (int64_t b = 0; b < B; ++b) {
        if (k >= lens[b]) continue;
        for (int64_t j = 0; j < H; ++j) dh[b * H + j] = direct[b * H + j] + back[b * H + j];
      }
    }
    for (int64_t b = 0; b < B; ++b) {
      std::copy_n(dh.begin() + b * H, H, dh0.begin() + s.StateAt(d, b));
      std::copy_n(dc.begin() + b * H, H, dc0.begin() + s.StateAt(d, b));
    }

    // 3. The parameters' and X's gradients, each one product over every step.
    if (s.dx >= 0) {
      MG_RETURN_IF_ERROR(Product(SB, I, GH, dgx.data(), GH, false, wd, I, false, dx_rows.data(),
                                 I, /*accumulate=*/d > 0));
    }
    MG_RETURN_IF_ERROR(Product(GH, I, SB, dgx.data(), GH, true, x_rows.data(), I, false,
                               dw.data() + d * GH * I, I, /*accumulate=*/false));
    MG_RETURN_IF_ERROR(Product(GH, H, SB, dgr.data(), GH, true, hp.data(), H, false,
                               dr.data() + d * GH * H, H, /*accumulate=*/false));
    if (cell == Cell::kGru && !lbr) {  // R_h multiplies r (.) H_prev
      MG_RETURN_IF_ERROR(Product(H, H, SB, dgx.data() + 2 * H, GH, true, rh.data(), H, false,
                                 dr.data() + d * GH * H + 2 * H * H, H, /*accumulate=*/true));
    }
    float* dwb = db.data() + d * 2 * GH;
    float* drb = dwb + GH;
    for (int64_t row = 0; row < SB; ++row) {
      for (int64_t j = 0; j < GH; ++j) {
        dwb[j] += dgx[row * GH + j];
        drb[j] += dgr[row * GH + j];
      }
      if (cell == Cell::kGru && !lbr) {  // Rb_h is added beside (r (.) H_prev) R_h^T
        for (int64_t j = 2 * H; j < GH; ++j) drb[j] += dgx[row * GH + j];
      }
    }
  }
  if (s.dx >= 0) {
    std::vector<float> dx(static_cast<size_t>(SB * I));
    for (int64_t t = 0; t < S; ++t) {
      for (int64_t b = 0; b < B; ++b) {
        std::copy_n(dx_rows.begin() + (t * B + b) * I, I, dx.begin() + s.XAt(t, b));
      }
    }
    MG_RETURN_IF_ERROR(StoreAll(args, s.dx, dx));
  }
  MG_RETURN_IF_ERROR(StoreAll(args, s.dw, dw));
  MG_RETURN_IF_ERROR(StoreAll(args, s.dr, dr));
  MG_RETURN_IF_ERROR(StoreAll(args, s.db, db));
  MG_RETURN_IF_ERROR(StoreAll(args, s.d_initial_h, dh0));
  MG_RETURN_IF_ERROR(StoreAll(args, s.d_initial_c, dc0));
  MG_RETURN_IF_ERROR(StoreAll(args, s.dp, dp));
  return absl::OkStatus();
}

}  // namespace

void AddCpuRnnGradientKernels(KernelMap& kernels) {
  kernels["RNNGradient"] = [](const KernelArgs& args) {
    return RunRecurrentGradient(args, Cell::kRnn);
  };
  kernels["GRUGradient"] = [](const KernelArgs& args) {
    return RunRecurrentGradient(args, Cell::kGru);
  };
  kernels["LSTMGradient"] = [](const KernelArgs& args) {
    return RunRecurrentGradient(args, Cell::kLstm);
  };
}

}  // namespace memonger::alloc
