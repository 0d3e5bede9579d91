// Our attention ops (docs/ops.md, "Attention ops"):
//
// AlibiBias(coords) -> bias. coords [N, 2] (int64 or float32): the (x, y) grid position of each
// patch. Attributes: heads (required), cls (default 1: leading tokens without a position), pad
// (default 0). With L = N + cls and Lp = L (pad = 0) or ceil(L / pad) * pad, bias is
// [1, heads, L, Lp] in the output's element type:
//   bias[0, h, i, j] = -slope_h * sqrt((x_i - x_j)^2 + (y_i - y_j)^2)   for cls <= i, j < L,
//   slope_h = 2^(-8 (h + 1) / heads), (x_i, y_i) = coords[i - cls];
// zero in the first cls rows and columns and in the padding columns j >= L. Computed in
// float32, rounded once to the output type.
//
// EfficientAttention(q, k, v, [bias]) -> O, workspace, [lse]. q, k, v [B, H, L, d] (one type:
// float32, float16 or bfloat16); bias [1 or B, H, L, Lp], Lp >= L, q's type (only the first L
// entries of a row are read); attribute scale (default 1 / sqrt(d)). Per (b, h):
//   O[b, i, h*d : (h+1)*d] = softmax_j(q_i . k_j * scale + bias[b, h, i, j]) v
// written with the heads merged: O is [B, L, H*d] in q's type. workspace float32 [L, d + 2] is
// the scratch of one head: row i holds the float32 output accumulator (d values), the running
// max and the running sum of row i. lse float32 [B, H, L] (optional) is max + log(sum), the
// log-sum-exp of each row of scores, as a backward pass needs.
//
// The algorithm (flash attention's online softmax, on the CPU): for each block of kQueryBlock
// query rows, walk the keys in tiles of kKeyTile; compute the tile of scores in float32; for
// each row take the new running max m' = max(m, max_j s_ij), rescale the accumulator and the sum
// by exp(m - m'), and add exp(s_ij - m') and exp(s_ij - m') v_j. After the last tile O = acc /
// sum. Extra memory beyond the workspace is a few tiles (O(tile * d) floats); no L x L matrix
// exists at any time. A row whose scores are all -inf has no softmax: its output is 0 and its
// lse -inf (the materialised formula would give NaN).
//
// Outputs must not overlap the inputs or each other (FailedPrecondition).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/kernel_util.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

using graph::DataType;
using graph::TensorType;
using namespace kernel_internal;  // NOLINT: the helpers of every kernel file

constexpr int64_t kQueryBlock = 128;
constexpr int64_t kKeyTile = 64;

// ---- AlibiBias -------------------------------------------------------------------------------

absl::Status AlibiBias(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 1));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  const TensorType& coords = *args.input_types[0];
  const TensorType& out = *args.output_types[0];
  MG_ASSIGN_OR_RETURN(const AlibiGeometry g, ResolveAlibi(args));
  const int64_t heads = g.heads, cls = g.cls, n = g.n, l = g.l, lp = g.lp;
  std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
  if (coords.dtype == DataType::kInt64) {
    const int64_t* c = reinterpret_cast<const int64_t*>(args.inputs[0]);
    for (int64_t i = 0; i < n; ++i) {
      x[i] = static_cast<float>(c[2 * i]);
      y[i] = static_cast<float>(c[2 * i + 1]);
    }
  } else {  // float32 (ResolveAlibi refused anything else)
    const float* c = reinterpret_cast<const float*>(args.inputs[0]);
    for (int64_t i = 0; i < n; ++i) {
      x[i] = c[2 * i];
      y[i] = c[2 * i + 1];
    }
  }
  return DispatchFloat(args, out.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    T* bias = reinterpret_cast<T*>(args.outputs[0]);
    const T zero = Store<T>(Compute<T>(0));
    // The distances do not depend on the head: one row of them, scaled per head.
    std::vector<float> distance(static_cast<size_t>(n));
    for (int64_t h = 0; h < heads; ++h) {
      const float slope = std::exp2(-8.0f * static_cast<float>(h + 1) / static_cast<float>(heads));
      T* head = bias + h * l * lp;
      for (int64_t i = 0; i < l; ++i) {
        T* row = head + i * lp;
        if (i < cls) {
          std::fill(row, row + lp, zero);
          continue;
        }
        const float xi = x[i - cls];
        const float yi = y[i - cls];
        std::fill(row, row + cls, zero);
        for (int64_t j = 0; j < n; ++j) {
          const float dx = xi - x[j];
          const float dy = yi - y[j];
          row[cls + j] = Store<T>(static_cast<Compute<T>>(-slope * std::sqrt(dx * dx + dy * dy)));
        }
        std::fill(row + l, row + lp, zero);
      }
    }
    return absl::OkStatus();
  });
}

// ---- EfficientAttention ----------------------------------------------------------------------

// Eight floats as one value (GCC/Clang vector extension), as in gemm_cpu.cc: one AVX register
// or two SSE registers; + and * are the scalar IEEE operations lane by lane.
typedef float Vec8 __attribute__((vector_size(32)));
#define MG_LOAD_VEC(v, p) std::memcpy(&(v), (p), sizeof(Vec8))
#define MG_STORE_VEC(p, v) std::memcpy((p), &(v), sizeof(Vec8))

// scores[i][j] = sum_kk q[i][kk] * kt[kk][j] for i < rows, j < kKeyTile (row stride kKeyTile;
// q has kQueryBlock rows of d, rows past `rows` are read but not stored). Blocks of 4 rows x 16
// columns stay in registers while kk runs. Compiled also for AVX2 (the loader picks); no FMA
// contraction, so both give the same bits.
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
void ScoreTile(int64_t rows, int64_t d, const float* q, const float* kt, float* scores) {
  static_assert(kQueryBlock % 4 == 0 && kKeyTile % 16 == 0, "register blocks must tile");
  for (int64_t i0 = 0; i0 < rows; i0 += 4) {
    for (int64_t j0 = 0; j0 < kKeyTile; j0 += 16) {
      Vec8 acc[4][2] = {};
      for (int64_t kk = 0; kk < d; ++kk) {
        Vec8 b0, b1;
        MG_LOAD_VEC(b0, kt + kk * kKeyTile + j0);
        MG_LOAD_VEC(b1, kt + kk * kKeyTile + j0 + 8);
        for (int64_t r = 0; r < 4; ++r) {
          const float a = q[(i0 + r) * d + kk];
          acc[r][0] += a * b0;
          acc[r][1] += a * b1;
        }
      }
      for (int64_t r = 0; r < 4 && i0 + r < rows; ++r) {
        MG_STORE_VEC(scores + (i0 + r) * kKeyTile + j0, acc[r][0]);
        MG_STORE_VEC(scores + (i0 + r) * kKeyTile + j0 + 8, acc[r][1]);
      }
    }
  }
}

// acc[i][:] = acc[i][:] * rescale[i] + sum_j p[i][j] * v[j][:], for rows < rows, j < cols.
// Columns of acc go by 64 (eight vectors held in registers over j), the rest one by one.
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
void AccumulateTile(int64_t rows, int64_t cols, int64_t d, const float* p, const float* rescale,
                    const float* v, float* acc, int64_t acc_stride) {
  for (int64_t i = 0; i < rows; ++i) {
    float* a = acc + i * acc_stride;
    const float r = rescale[i];
    const float* pi = p + i * kKeyTile;
    int64_t c0 = 0;
    for (; c0 + 64 <= d; c0 += 64) {
      Vec8 x[8];
      for (int t = 0; t < 8; ++t) MG_LOAD_VEC(x[t], a + c0 + 8 * t);
      if (r != 1.0f) {
        for (int t = 0; t < 8; ++t) x[t] *= r;
      }
      for (int64_t j = 0; j < cols; ++j) {
        const float w = pi[j];
        if (w == 0.0f) continue;
        const float* vj = v + j * d + c0;
        for (int t = 0; t < 8; ++t) {
          Vec8 y;
          MG_LOAD_VEC(y, vj + 8 * t);
          x[t] += w * y;
        }
      }
      for (int t = 0; t < 8; ++t) MG_STORE_VEC(a + c0 + 8 * t, x[t]);
    }
    if (c0 == d) continue;
    if (r != 1.0f) {
      for (int64_t kk = c0; kk < d; ++kk) a[kk] *= r;
    }
    for (int64_t j = 0; j < cols; ++j) {
      const float w = pi[j];
      if (w == 0.0f) continue;
      const float* vj = v + j * d;
      for (int64_t kk = c0; kk < d; ++kk) a[kk] += w * vj[kk];
    }
  }
}

#undef MG_LOAD_VEC
#undef MG_STORE_VEC

absl::Status EfficientAttention(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 3, 4, 2, 3));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  MG_RETURN_IF_ERROR(CheckOutputsApart(args));
  const TensorType& tq = *args.input_types[0];
  const TensorType& tk = *args.input_types[1];
  const TensorType& tv = *args.input_types[2];
  const DataType dtype = tq.dtype;
  if (dtype != DataType::kFloat32 && dtype != DataType::kFloat16 && dtype != DataType::kBFloat16) {
    return UnsupportedDtype(args, dtype, "float32, float16, bfloat16");
  }
  if (tq.dims.size() != 4 || tk.dtype != dtype || tv.dtype != dtype || tk.dims != tq.dims ||
      tv.dims != tq.dims) {
    return KernelError(args, absl::StrCat("q, k, v must be [B, H, L, d] of one type; got ",
                                          graph::TensorTypeToString(tq), ", ",
                                          graph::TensorTypeToString(tk), ", ",
                                          graph::TensorTypeToString(tv)));
  }
  const int64_t batch = tq.dims[0];
  const int64_t heads = tq.dims[1];
  const int64_t l = tq.dims[2];
  const int64_t d = tq.dims[3];
  MG_ASSIGN_OR_RETURN(const double scale_attr,
                      FloatAttr(args, "scale", d > 0 ? 1.0 / std::sqrt(static_cast<double>(d)) : 1.0));
  const float scale = static_cast<float>(scale_attr);
  int64_t bias_batch = 0, lp = 0;
  if (args.inputs.size() == 4) {
    const TensorType& tb = *args.input_types[3];
    if (tb.dtype != dtype || tb.dims.size() != 4 || (tb.dims[0] != 1 && tb.dims[0] != batch) ||
        tb.dims[1] != heads || tb.dims[2] != l || tb.dims[3] < l) {
      return KernelError(args, absl::StrCat("bias must be [1 or B, H, L, Lp >= L] of q's type; got ",
                                            graph::TensorTypeToString(tb)));
    }
    bias_batch = tb.dims[0];
    lp = tb.dims[3];
  }
  const TensorType& to = *args.output_types[0];
  const TensorType& tw = *args.output_types[1];
  if (to.dtype != dtype || to.dims != Dims{batch, l, heads * d}) {
    return KernelError(args, absl::StrCat("O must be [B, L, H*d] = ",
                                          graph::DimsToString({batch, l, heads * d}),
                                          " of q's type; got ", graph::TensorTypeToString(to)));
  }
  if (tw.dtype != DataType::kFloat32 || NumElements(tw.dims) < l * (d + 2)) {
    return KernelError(args, absl::StrCat("workspace must be float32 [L, d + 2] = [", l, ", ",
                                          d + 2, "]; got ", graph::TensorTypeToString(tw)));
  }
  float* lse = nullptr;
  if (args.outputs.size() == 3) {
    const TensorType& tl = *args.output_types[2];
    if (tl.dtype != DataType::kFloat32 || NumElements(tl.dims) != batch * heads * l) {
      return KernelError(args, absl::StrCat("lse must be float32 [B, H, L]; got ",
                                            graph::TensorTypeToString(tl)));
    }
    lse = reinterpret_cast<float*>(args.outputs[2]);
  }
  float* workspace = reinterpret_cast<float*>(args.outputs[1]);
  const int64_t ws_stride = d + 2;

  return DispatchFloat(args, dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, double>) {
      return UnsupportedDtype(args, dtype, "float32, float16, bfloat16");
    } else {
      const T* q = reinterpret_cast<const T*>(args.inputs[0]);
      const T* k = reinterpret_cast<const T*>(args.inputs[1]);
      const T* v = reinterpret_cast<const T*>(args.inputs[2]);
      const T* bias = args.inputs.size() == 4 ? reinterpret_cast<const T*>(args.inputs[3]) : nullptr;
      T* out = reinterpret_cast<T*>(args.outputs[0]);
      // Tiles: a block of queries, one tile of keys (transposed) and values, its scores.
      std::vector<float> q_block(static_cast<size_t>(kQueryBlock * d));
      std::vector<float> k_tile(static_cast<size_t>(d * kKeyTile));
      std::vector<float> v_tile(static_cast<size_t>(kKeyTile * d));
      std::vector<float> scores(static_cast<size_t>(kQueryBlock * kKeyTile));
      std::vector<float> rescale(static_cast<size_t>(kQueryBlock));
      const float neg_inf = -std::numeric_limits<float>::infinity();
      for (int64_t b = 0; b < batch; ++b) {
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t head = (b * heads + h) * l * d;
          const T* bias_head = bias == nullptr ? nullptr
                                               : bias + ((bias_batch == 1 ? 0 : b) * heads + h) * l * lp;
          for (int64_t i0 = 0; i0 < l; i0 += kQueryBlock) {
            const int64_t rows = std::min(kQueryBlock, l - i0);
            for (int64_t i = 0; i < rows; ++i) {
              for (int64_t kk = 0; kk < d; ++kk) q_block[i * d + kk] = Load(q[head + (i0 + i) * d + kk]);
              float* w = workspace + (i0 + i) * ws_stride;
              std::fill(w, w + d, 0.0f);
              w[d] = neg_inf;  // running max
              w[d + 1] = 0.0f; // running sum
            }
            for (int64_t j0 = 0; j0 < l; j0 += kKeyTile) {
              const int64_t cols = std::min(kKeyTile, l - j0);
              for (int64_t j = 0; j < kKeyTile; ++j) {
                for (int64_t kk = 0; kk < d; ++kk) {
                  k_tile[kk * kKeyTile + j] = j < cols ? Load(k[head + (j0 + j) * d + kk]) : 0.0f;
                }
              }
              for (int64_t j = 0; j < cols; ++j) {
                for (int64_t kk = 0; kk < d; ++kk) v_tile[j * d + kk] = Load(v[head + (j0 + j) * d + kk]);
              }
              ScoreTile(rows, d, q_block.data(), k_tile.data(), scores.data());
              for (int64_t i = 0; i < rows; ++i) {
                float* s = scores.data() + i * kKeyTile;
                const T* brow = bias_head == nullptr ? nullptr : bias_head + (i0 + i) * lp + j0;
                float tile_max = neg_inf;
                for (int64_t j = 0; j < cols; ++j) {
                  float x = s[j] * scale;
                  if (brow != nullptr) x += Load(brow[j]);
                  s[j] = x;
                  tile_max = std::max(tile_max, x);
                }
                float* w = workspace + (i0 + i) * ws_stride;
                const float old_max = w[d];
                const float new_max = std::max(old_max, tile_max);
                if (new_max == neg_inf) {
                  // Everything so far is masked: nothing to add.
                  for (int64_t j = 0; j < cols; ++j) s[j] = 0.0f;
                  rescale[i] = 1.0f;
                  continue;
                }
                const float r = old_max == neg_inf ? 0.0f : std::exp(old_max - new_max);
                float sum = 0.0f;
                for (int64_t j = 0; j < cols; ++j) {
                  s[j] = std::exp(s[j] - new_max);
                  sum += s[j];
                }
                w[d] = new_max;
                w[d + 1] = w[d + 1] * r + sum;
                rescale[i] = r;
              }
              AccumulateTile(rows, cols, d, scores.data(), rescale.data(), v_tile.data(),
                             workspace + i0 * ws_stride, ws_stride);
            }
            for (int64_t i = 0; i < rows; ++i) {
              const float* w = workspace + (i0 + i) * ws_stride;
              const float sum = w[d + 1];
              const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
              T* o = out + (b * l + i0 + i) * heads * d + h * d;
              for (int64_t kk = 0; kk < d; ++kk) o[kk] = Store<T>(w[kk] * inv);
              if (lse != nullptr) {
                lse[(b * heads + h) * l + i0 + i] = sum > 0.0f ? w[d] + std::log(sum) : neg_inf;
              }
            }
          }
        }
      }
      return absl::OkStatus();
    }
  });
}

}  // namespace

void AddCpuAttentionKernels(KernelMap& kernels) {
  kernels["AlibiBias"] = AlibiBias;
  kernels["EfficientAttention"] = EfficientAttention;
}

}  // namespace memonger::alloc
