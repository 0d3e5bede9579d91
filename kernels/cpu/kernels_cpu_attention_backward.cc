// EfficientAttentionGradient on the CPU: the backward pass of EfficientAttention
// (kernels_cpu_attention.cc) in FlashAttention's manner, recomputing the softmax tile by tile
// from q, k, the bias and the forward's saved log-sum-exp, so that no L x L matrix ever exists.
//
//   EfficientAttentionGradient(dO, q, k, v, O, lse, [bias]) -> dq, dk, dv, workspace
//   dO, O [B, L, H*d] (heads merged, q's type); q, k, v [B, H, L, d]; lse float32 [B, H, L];
//   bias [1 or B, H, L, Lp >= L] of q's type (only the first L entries of a row are read; it
//   gets no gradient); attribute scale (default 1 / sqrt(d), as the forward op).
//   dq, dk, dv [B, H, L, d] in q's type; workspace float32 [L, 3d + 1].
//
// Per (b, h), with s_ij = q_i . k_j * scale + bias_ij and P_ij = exp(s_ij - lse_i) (the
// forward's softmax, exactly recomputed up to rounding):
//   1. D_i = dO_i . O_i for every row (workspace column 3d); dq, dk, dv accumulators cleared;
//   2. for each block of kQueryBlock query rows, for each tile of kKeyTile keys:
//        P tile; dv_j += sum_i P_ij dO_i; dP_ij = dO_i . v_j; dS_ij = P_ij (dP_ij - D_i);
//        dq_i += scale * sum_j dS_ij k_j; dk_j += scale * sum_i dS_ij q_i;
//   3. dq, dk, dv rounded once from the float32 accumulators into the outputs.
// Workspace row i holds [dq_i (d) | dk_i (d) | dv_i (d) | D_i]: the accumulators of one head
// live in the arena (planned memory); the tiles (O(tile * d) floats) are the kernel's scratch.
// A row whose lse is -inf (every score masked) has P = 0 and contributes nothing.
//
// Storage float32, float16 or bfloat16; everything computed in float32 in a fixed order, so the
// result does not depend on the plan. Outputs must not overlap the inputs or each other.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/kernel_float_io.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/kernel_util.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

using graph::DataType;
using graph::TensorType;
using namespace kernel_internal;  // NOLINT: the helpers of every kernel file

constexpr int64_t kQueryBlock = 64;
constexpr int64_t kKeyTile = 64;

absl::Status EfficientAttentionGradient(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 6, 7, 4, 4));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  MG_RETURN_IF_ERROR(CheckOutputsApart(args));
  const TensorType& tq = *args.input_types[1];
  const DataType dtype = tq.dtype;
  if (dtype != DataType::kFloat32 && dtype != DataType::kFloat16 && dtype != DataType::kBFloat16) {
    return UnsupportedDtype(args, dtype, "float32, float16, bfloat16");
  }
  if (tq.dims.size() != 4 || *args.input_types[2] != tq || *args.input_types[3] != tq) {
    return KernelError(args, "q, k, v must be [B, H, L, d] of one type");
  }
  const int64_t batch = tq.dims[0], heads = tq.dims[1], l = tq.dims[2], d = tq.dims[3];
  const TensorType to{dtype, {batch, l, heads * d}};
  if (*args.input_types[0] != to || *args.input_types[4] != to) {
    return KernelError(args, absl::StrCat("dO and O must be ", graph::TensorTypeToString(to)));
  }
  const TensorType& tl = *args.input_types[5];
  if (tl.dtype != DataType::kFloat32 || NumElements(tl.dims) != batch * heads * l) {
    return KernelError(args, "lse must be float32 [B, H, L]");
  }
  int64_t bias_batch = 0, lp = 0;
  if (args.inputs.size() == 7) {
    const TensorType& tb = *args.input_types[6];
    if (tb.dtype != dtype || tb.dims.size() != 4 || (tb.dims[0] != 1 && tb.dims[0] != batch) ||
        tb.dims[1] != heads || tb.dims[2] != l || tb.dims[3] < l) {
      return KernelError(args, absl::StrCat("bias must be [1 or B, H, L, Lp >= L] of q's type; got ",
                                            graph::TensorTypeToString(tb)));
    }
    bias_batch = tb.dims[0];
    lp = tb.dims[3];
  }
  for (int out = 0; out < 3; ++out) {
    if (*args.output_types[out] != tq) return KernelError(args, "dq, dk, dv must have q's type");
  }
  const TensorType& tw = *args.output_types[3];
  const int64_t ws_stride = 3 * d + 1;
  if (tw.dtype != DataType::kFloat32 || NumElements(tw.dims) < l * ws_stride) {
    return KernelError(args, absl::StrCat("workspace must be float32 [L, 3d + 1] = [", l, ", ",
                                          ws_stride, "]; got ", graph::TensorTypeToString(tw)));
  }
  MG_ASSIGN_OR_RETURN(const double scale_attr,
                      FloatAttr(args, "scale", d > 0 ? 1.0 / std::sqrt(static_cast<double>(d)) : 1.0));
  const float scale = static_cast<float>(scale_attr);
  MG_ASSIGN_OR_RETURN(const FloatLoader load, LoaderFor(args, tq));
  MG_ASSIGN_OR_RETURN(const FloatStorer store, StorerFor(args, tq));
  const float* lse = reinterpret_cast<const float*>(args.inputs[5]);
  float* ws = reinterpret_cast<float*>(args.outputs[3]);
  const float neg_inf = -std::numeric_limits<float>::infinity();

  std::vector<float> q_blk(static_cast<size_t>(kQueryBlock * d)), do_blk(q_blk.size());
  std::vector<float> k_tile(static_cast<size_t>(kKeyTile * d)), v_tile(k_tile.size());
  std::vector<float> p(static_cast<size_t>(kQueryBlock * kKeyTile)), ds(p.size());
  std::vector<float> bias_row(static_cast<size_t>(kKeyTile));
  std::vector<float> tmp(static_cast<size_t>(std::max<int64_t>(d, 1)));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t head = (b * heads + h) * l * d;          // q, k, v, dq, dk, dv
      const float* lse_head = lse + (b * heads + h) * l;
      const int64_t bias_head = ((bias_batch == 1 ? 0 : b) * heads + h) * l * lp;
      // 1. D_i = dO_i . O_i; clear the accumulators.
      for (int64_t i = 0; i < l; ++i) {
        const int64_t row = (b * l + i) * heads * d + h * d;
        const std::vector<float> o = load.Run(args.inputs[4], row, d);
        const std::vector<float> g = load.Run(args.inputs[0], row, d);
        float dot = 0.0f;
        for (int64_t kk = 0; kk < d; ++kk) dot += g[kk] * o[kk];
        float* w = ws + i * ws_stride;
        std::fill(w, w + 3 * d, 0.0f);
        w[3 * d] = dot;
      }
      // 2. Tiles.
      for (int64_t i0 = 0; i0 < l; i0 += kQueryBlock) {
        const int64_t rows = std::min(kQueryBlock, l - i0);
        for (int64_t i = 0; i < rows; ++i) {
          load.run(args.inputs[1], head + (i0 + i) * d, d, q_blk.data() + i * d);
          load.run(args.inputs[0], (b * l + i0 + i) * heads * d + h * d, d, do_blk.data() + i * d);
        }
        for (int64_t j0 = 0; j0 < l; j0 += kKeyTile) {
          const int64_t cols = std::min(kKeyTile, l - j0);
          load.run(args.inputs[2], head + j0 * d, cols * d, k_tile.data());
          load.run(args.inputs[3], head + j0 * d, cols * d, v_tile.data());
          for (int64_t i = 0; i < rows; ++i) {
            const float* qi = q_blk.data() + i * d;
            const float* gi = do_blk.data() + i * d;
            const float li = lse_head[i0 + i];
            const float di = ws[(i0 + i) * ws_stride + 3 * d];
            if (args.inputs.size() == 7) {  // the bias has q's type: the same loader
              load.run(args.inputs[6], bias_head + (i0 + i) * lp + j0, cols, bias_row.data());
            }
            for (int64_t j = 0; j < cols; ++j) {
              const float* kj = k_tile.data() + j * d;
              const float* vj = v_tile.data() + j * d;
              float s = 0.0f, dp = 0.0f;
              for (int64_t kk = 0; kk < d; ++kk) {
                s += qi[kk] * kj[kk];
                dp += gi[kk] * vj[kk];
              }
              s *= scale;
              if (args.inputs.size() == 7) s += bias_row[j];
              const float pij = li == neg_inf ? 0.0f : std::exp(s - li);
              p[i * kKeyTile + j] = pij;
              ds[i * kKeyTile + j] = pij * (dp - di);
            }
          }
          // dq_i += scale * sum_j dS_ij k_j.
          for (int64_t i = 0; i < rows; ++i) {
            float* dq = ws + (i0 + i) * ws_stride;
            std::fill(tmp.begin(), tmp.begin() + d, 0.0f);
            for (int64_t j = 0; j < cols; ++j) {
              const float w = ds[i * kKeyTile + j];
              if (w == 0.0f) continue;
              const float* kj = k_tile.data() + j * d;
              for (int64_t kk = 0; kk < d; ++kk) tmp[kk] += w * kj[kk];
            }
            for (int64_t kk = 0; kk < d; ++kk) dq[kk] += scale * tmp[kk];
          }
          // dk_j += scale * sum_i dS_ij q_i; dv_j += sum_i P_ij dO_i.
          for (int64_t j = 0; j < cols; ++j) {
            float* dk = ws + (j0 + j) * ws_stride + d;
            float* dv = dk + d;
            std::fill(tmp.begin(), tmp.begin() + d, 0.0f);
            for (int64_t i = 0; i < rows; ++i) {
              const float w = ds[i * kKeyTile + j];
              if (w == 0.0f) continue;
              const float* qi = q_blk.data() + i * d;
              for (int64_t kk = 0; kk < d; ++kk) tmp[kk] += w * qi[kk];
            }
            for (int64_t kk = 0; kk < d; ++kk) dk[kk] += scale * tmp[kk];
            for (int64_t i = 0; i < rows; ++i) {
              const float w = p[i * kKeyTile + j];
              if (w == 0.0f) continue;
              const float* gi = do_blk.data() + i * d;
              for (int64_t kk = 0; kk < d; ++kk) dv[kk] += w * gi[kk];
            }
          }
        }
      }
      // 3. Round the head's gradients into the outputs.
      for (int64_t i = 0; i < l; ++i) {
        const float* w = ws + i * ws_stride;
        store.run(args.outputs[0], head + i * d, d, w);
        store.run(args.outputs[1], head + i * d, d, w + d);
        store.run(args.outputs[2], head + i * d, d, w + 2 * d);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

void AddCpuAttentionBackwardKernels(KernelMap& kernels) {
  kernels["EfficientAttentionGradient"] = EfficientAttentionGradient;
}

}  // namespace memonger::alloc
