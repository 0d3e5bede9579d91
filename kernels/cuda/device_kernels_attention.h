// Device kernels, our attention ops (docs/ops.md, "Attention ops"; the CPU kernels are
// kernels_cpu_attention.cc, kernels_cpu_attention_bias.cc, kernels_cpu_attention_backward.cc):
//   AlibiBias(coords) -> bias: one thread per bias element.
//   AddAttentionBias(S, bias) -> S': one thread per score (in place: S' may be S).
//   EfficientAttention(q, k, v, [bias]) -> O, workspace, [lse]: one launch per (batch, head),
//     one thread per query row, which walks every key once with the online softmax (running
//     max m, running sum s, accumulator a in its workspace row, the op's planned [L, d + 2]
//     float32 workspace exactly as the CPU kernel uses it): for key j with score x,
//     m' = max(m, x), a = a e^(m - m') + e^(x - m') v_j, s = s e^(m - m') + e^(x - m').
//     No L x L matrix exists; memory beyond the planned values is none.
//   EfficientAttentionGradient(dO, q, k, v, O, lse, [bias]) -> dq, dk, dv, workspace: per
//     (batch, head) four launches over the planned [L, 3d + 1] workspace: D_i = dO_i . O_i;
//     per query row i, dq_i = scale sum_j dS_ij k_j; per key row j, dk_j = scale sum_i dS_ij q_i
//     and dv_j = sum_i P_ij dO_i (P and dS recomputed from lse, so no atomics and no L x L
//     matrix); then the rounding into dq, dk, dv.
// A row whose scores are all -inf outputs 0 and has lse -inf (no NaN), as on the CPU.
//
// These are the simple kernels of the CUDA path: one thread per row does O(L d) work, so a
// launch has only L threads. They are exact ports of the CPU arithmetic (float32 throughout),
// not tuned GPU kernels; docs/kernels.md says what a fast one would change.
#ifndef MEMONGER_KERNELS_CUDA_DEVICE_KERNELS_ATTENTION_H_
#define MEMONGER_KERNELS_CUDA_DEVICE_KERNELS_ATTENTION_H_

#include <cmath>
#include <optional>
#include <string>

#include "kernels/cuda/device_kernel_util.h"

namespace memonger::alloc::device {

// ---- bodies ----------------------------------------------------------------------------------

struct AlibiBody {
  const void* coords{};
  bool coords_int64{};
  int64_t heads{}, n{}, cls{}, l{}, lp{};
  Out bias{};
  MG_HD float Coord(int64_t point, int axis) const {
    return coords_int64 ? static_cast<float>(static_cast<const int64_t*>(coords)[2 * point + axis])
                        : static_cast<const float*>(coords)[2 * point + axis];
  }
  MG_HD void operator()(int64_t e) const {
    const int64_t j = e % lp;
    const int64_t i = (e / lp) % l;
    const int64_t h = e / (lp * l);
    float v = 0.0f;
    if (i >= cls && j >= cls && j < l) {
      const float slope = exp2f(-8.0f * static_cast<float>(h + 1) / static_cast<float>(heads));
      const float dx = Coord(i - cls, 0) - Coord(j - cls, 0);
      const float dy = Coord(i - cls, 1) - Coord(j - cls, 1);
      v = -slope * sqrtf(dx * dx + dy * dy);
    }
    bias.Set(e, v);
  }
};

struct AddBiasBody {
  int64_t heads{}, l{}, lp{};
  bool broadcast{};
  In s{}, bias{};
  Out out{};
  MG_HD void operator()(int64_t e) const {
    const int64_t j = e % l;
    const int64_t i = (e / l) % l;
    const int64_t bh = e / (l * l);  // b * heads + h
    const int64_t bias_head = broadcast ? bh % heads : bh;
    out.Set(e, s[e] + bias[(bias_head * l + i) * lp + j]);
  }
};

// What the forward and backward bodies share: one (b, h) head's geometry.
struct HeadView {
  int64_t batch_index{}, head{}, heads{}, l{}, d{}, lp{};
  bool has_bias{};
  int64_t bias_head{};  // (bias batch or 0) * heads + h
  float scale{};
  In q{}, k{}, v{}, bias{};
  MG_HD int64_t Row(int64_t i) const { return ((batch_index * heads + head) * l + i) * d; }
  // [B, L, H*d]: row i of this head in a heads-merged tensor.
  MG_HD int64_t MergedRow(int64_t i) const { return (batch_index * l + i) * heads * d + head * d; }
  MG_HD float Score(int64_t i, int64_t j) const {
    const int64_t qi = Row(i), kj = Row(j);
    float s = 0.0f;
    for (int64_t t = 0; t < d; ++t) s += q[qi + t] * k[kj + t];
    s *= scale;
    if (has_bias) s += bias[(bias_head * l + i) * lp + j];
    return s;
  }
};

struct AttentionForwardBody {
  HeadView view{};
  float* workspace{};  // [L, d + 2]
  Out o{};
  float* lse{};        // [B, H, L] or null
  MG_HD void operator()(int64_t i) const {
    const int64_t d = view.d;
    float* acc = workspace + i * (d + 2);
    for (int64_t t = 0; t < d; ++t) acc[t] = 0.0f;
    float max = -INFINITY, sum = 0.0f;
    for (int64_t j = 0; j < view.l; ++j) {
      const float x = view.Score(i, j);
      if (x == -INFINITY) continue;  // masked: adds nothing
      const float new_max = x > max ? x : max;
      const float r = max == -INFINITY ? 0.0f : expf(max - new_max);
      const float p = expf(x - new_max);
      const int64_t vj = view.Row(j);
      for (int64_t t = 0; t < d; ++t) acc[t] = acc[t] * r + p * view.v[vj + t];
      sum = sum * r + p;
      max = new_max;
    }
    acc[d] = max;
    acc[d + 1] = sum;
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    const int64_t oi = view.MergedRow(i);
    for (int64_t t = 0; t < d; ++t) o.Set(oi + t, acc[t] * inv);
    if (lse != nullptr) {
      lse[(view.batch_index * view.heads + view.head) * view.l + i] =
          sum > 0.0f ? max + logf(sum) : -INFINITY;
    }
  }
};

// The backward's shared inputs: dO and O ([B, L, H*d]), lse, the workspace [L, 3d + 1] whose
// row i is [dq_i | dk_i | dv_i | D_i].
struct AttentionBackwardView {
  HeadView view{};
  In d_out{}, out{};
  const float* lse{};
  float* ws{};
  MG_HD float Lse(int64_t i) const {
    return lse[(view.batch_index * view.heads + view.head) * view.l + i];
  }
  MG_HD float* Ws(int64_t i) const { return ws + i * (3 * view.d + 1); }
  // P_ij and dS_ij = P_ij (dO_i . v_j - D_i).
  MG_HD void Probabilities(int64_t i, int64_t j, float* p, float* ds) const {
    const float li = Lse(i);
    if (li == -INFINITY) {
      *p = 0.0f;
      *ds = 0.0f;
      return;
    }
    *p = expf(view.Score(i, j) - li);
    const int64_t gi = view.MergedRow(i), vj = view.Row(j);
    float dp = 0.0f;
    for (int64_t t = 0; t < view.d; ++t) dp += d_out[gi + t] * view.v[vj + t];
    *ds = *p * (dp - Ws(i)[3 * view.d]);
  }
};

struct AttentionDeltaBody {  // D_i = dO_i . O_i
  AttentionBackwardView bw{};
  MG_HD void operator()(int64_t i) const {
    const int64_t row = bw.view.MergedRow(i);
    float dot = 0.0f;
    for (int64_t t = 0; t < bw.view.d; ++t) dot += bw.d_out[row + t] * bw.out[row + t];
    bw.Ws(i)[3 * bw.view.d] = dot;
  }
};

struct AttentionDqBody {  // dq_i = scale sum_j dS_ij k_j
  AttentionBackwardView bw{};
  MG_HD void operator()(int64_t i) const {
    const int64_t d = bw.view.d;
    float* dq = bw.Ws(i);
    for (int64_t t = 0; t < d; ++t) dq[t] = 0.0f;
    for (int64_t j = 0; j < bw.view.l; ++j) {
      float p, ds;
      bw.Probabilities(i, j, &p, &ds);
      if (ds == 0.0f) continue;
      const int64_t kj = bw.view.Row(j);
      for (int64_t t = 0; t < d; ++t) dq[t] += ds * bw.view.k[kj + t];
    }
    for (int64_t t = 0; t < d; ++t) dq[t] *= bw.view.scale;
  }
};

struct AttentionDkDvBody {  // dk_j = scale sum_i dS_ij q_i; dv_j = sum_i P_ij dO_i
  AttentionBackwardView bw{};
  MG_HD void operator()(int64_t j) const {
    const int64_t d = bw.view.d;
    float* dk = bw.Ws(j) + d;
    float* dv = dk + d;
    for (int64_t t = 0; t < 2 * d; ++t) dk[t] = 0.0f;
    for (int64_t i = 0; i < bw.view.l; ++i) {
      float p, ds;
      bw.Probabilities(i, j, &p, &ds);
      const int64_t qi = bw.view.Row(i), gi = bw.view.MergedRow(i);
      if (ds != 0.0f) {
        for (int64_t t = 0; t < d; ++t) dk[t] += ds * bw.view.q[qi + t];
      }
      if (p != 0.0f) {
        for (int64_t t = 0; t < d; ++t) dv[t] += p * bw.d_out[gi + t];
      }
    }
    for (int64_t t = 0; t < d; ++t) dk[t] *= bw.view.scale;
  }
};

struct AttentionStoreBody {  // rounds row i's dq, dk, dv into the outputs
  AttentionBackwardView bw{};
  Out dq{}, dk{}, dv{};
  MG_HD void operator()(int64_t i) const {
    const int64_t d = bw.view.d;
    const float* w = bw.Ws(i);
    const int64_t row = bw.view.Row(i);
    for (int64_t t = 0; t < d; ++t) {
      dq.Set(row + t, w[t]);
      dk.Set(row + t, w[d + t]);
      dv.Set(row + t, w[2 * d + t]);
    }
  }
};

// ---- kernels ---------------------------------------------------------------------------------

namespace attention_internal {
using kernel_internal::CheckArity;
using kernel_internal::KernelError;
using kernel_internal::NumElements;

// q, k, v [B, H, L, d] of one float type and the optional bias [1 or B, H, L, Lp >= L].
struct Shapes {
  int64_t batch = 0, heads = 0, l = 0, d = 0, bias_batch = 0, lp = 0;
  FloatType type = FloatType::kFloat32;
  float scale = 1.0f;
};

inline absl::StatusOr<Shapes> ResolveShapes(const KernelArgs& args, int q_input, int bias_input) {
  const graph::TensorType& tq = *args.input_types[q_input];
  MG_ASSIGN_OR_RETURN(const FloatType type, FloatTypeOf(args, tq));
  if (tq.dims.size() != 4 || *args.input_types[q_input + 1] != tq ||
      *args.input_types[q_input + 2] != tq) {
    return KernelError(args, absl::StrCat("q, k, v must be [B, H, L, d] of one type; q is ",
                                          graph::TensorTypeToString(tq)));
  }
  Shapes s;
  s.type = type;
  s.batch = tq.dims[0];
  s.heads = tq.dims[1];
  s.l = tq.dims[2];
  s.d = tq.dims[3];
  if (bias_input < static_cast<int>(args.inputs.size())) {
    const graph::TensorType& tb = *args.input_types[bias_input];
    if (tb.dtype != tq.dtype || tb.dims.size() != 4 || (tb.dims[0] != 1 && tb.dims[0] != s.batch) ||
        tb.dims[1] != s.heads || tb.dims[2] != s.l || tb.dims[3] < s.l) {
      return KernelError(args, absl::StrCat("bias must be [1 or B, H, L, Lp >= L] of q's type; got ",
                                            graph::TensorTypeToString(tb)));
    }
    s.bias_batch = tb.dims[0];
    s.lp = tb.dims[3];
  }
  MG_ASSIGN_OR_RETURN(const double scale,
                      kernel_internal::FloatAttr(
                          args, "scale", s.d > 0 ? 1.0 / std::sqrt(static_cast<double>(s.d)) : 1.0));
  s.scale = static_cast<float>(scale);
  return s;
}

inline HeadView MakeView(const KernelArgs& args, const Shapes& s, int q_input, int bias_input,
                         int64_t b, int64_t h) {
  HeadView view{b, h, s.heads, s.l, s.d, s.lp};
  view.has_bias = bias_input < static_cast<int>(args.inputs.size());
  view.bias_head = ((s.bias_batch == 1 ? 0 : b) * s.heads + h);
  view.scale = s.scale;
  view.q = In{args.inputs[q_input], s.type};
  view.k = In{args.inputs[q_input + 1], s.type};
  view.v = In{args.inputs[q_input + 2], s.type};
  if (view.has_bias) view.bias = In{args.inputs[bias_input], s.type};
  return view;
}
}  // namespace attention_internal

template <class Backend>
absl::Status DeviceAlibiBias(const Backend& be, const KernelArgs& args) {
  using namespace attention_internal;  // NOLINT
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 1));
  MG_RETURN_IF_ERROR(kernel_internal::CheckNoOverlapAll(args));
  MG_ASSIGN_OR_RETURN(const kernel_internal::AlibiGeometry g, kernel_internal::ResolveAlibi(args));
  AlibiBody body;
  body.coords = args.inputs[0];
  body.coords_int64 = args.input_types[0]->dtype == graph::DataType::kInt64;
  body.heads = g.heads;
  body.n = g.n;
  body.cls = g.cls;
  body.l = g.l;
  body.lp = g.lp;
  MG_ASSIGN_OR_RETURN(body.bias, OutputAt(args, 0));
  return be.Launch(NumElements(args.output_types[0]->dims), body);
}

template <class Backend>
absl::Status DeviceAddAttentionBias(const Backend& be, const KernelArgs& args) {
  using namespace attention_internal;  // NOLINT
  MG_RETURN_IF_ERROR(CheckArity(args, 2, 2, 1, 1));
  const graph::TensorType& s = *args.input_types[0];
  const graph::TensorType& bias = *args.input_types[1];
  if (*args.output_types[0] != s) return KernelError(args, "S' must have S's type");
  if (s.dims.size() != 4 || s.dims[2] != s.dims[3]) {
    return KernelError(args, absl::StrCat("S must be [B, H, L, L]; got ",
                                          graph::TensorTypeToString(s)));
  }
  if (bias.dtype != s.dtype || bias.dims.size() != 4 ||
      (bias.dims[0] != 1 && bias.dims[0] != s.dims[0]) || bias.dims[1] != s.dims[1] ||
      bias.dims[2] != s.dims[2] || bias.dims[3] < s.dims[2]) {
    return KernelError(args, absl::StrCat("bias must be [1 or B, H, L, Lp >= L] of S's type; got ",
                                          graph::TensorTypeToString(bias), " for S ",
                                          graph::TensorTypeToString(s)));
  }
  MG_RETURN_IF_ERROR(CheckSameOrApart(args, 0, 0));
  MG_RETURN_IF_ERROR(kernel_internal::CheckNoOverlap(args, 1, 0));
  AddBiasBody body{s.dims[1], s.dims[2], bias.dims[3], bias.dims[0] == 1};
  MG_ASSIGN_OR_RETURN(body.s, InputAt(args, 0));
  MG_ASSIGN_OR_RETURN(body.bias, InputAt(args, 1));
  MG_ASSIGN_OR_RETURN(body.out, OutputAt(args, 0));
  return be.Launch(NumElements(s.dims), body);
}

template <class Backend>
absl::Status DeviceEfficientAttention(const Backend& be, const KernelArgs& args) {
  using namespace attention_internal;  // NOLINT
  MG_RETURN_IF_ERROR(CheckArity(args, 3, 4, 2, 3));
  MG_RETURN_IF_ERROR(kernel_internal::CheckNoOverlapAll(args));
  MG_RETURN_IF_ERROR(CheckOutputsApart(args));
  MG_ASSIGN_OR_RETURN(const Shapes s, ResolveShapes(args, 0, 3));
  const graph::TensorType& to = *args.output_types[0];
  const graph::TensorType& tw = *args.output_types[1];
  if (to.dtype != args.input_types[0]->dtype || to.dims != Dims{s.batch, s.l, s.heads * s.d}) {
    return KernelError(args, absl::StrCat("O must be [B, L, H*d] = ",
                                          graph::DimsToString({s.batch, s.l, s.heads * s.d}),
                                          " of q's type; got ", graph::TensorTypeToString(to)));
  }
  if (tw.dtype != graph::DataType::kFloat32 || NumElements(tw.dims) < s.l * (s.d + 2)) {
    return KernelError(args, absl::StrCat("workspace must be float32 [L, d + 2] = [", s.l, ", ",
                                          s.d + 2, "]; got ", graph::TensorTypeToString(tw)));
  }
  float* lse = nullptr;
  if (args.outputs.size() == 3) {
    const graph::TensorType& tl = *args.output_types[2];
    if (tl.dtype != graph::DataType::kFloat32 || NumElements(tl.dims) != s.batch * s.heads * s.l) {
      return KernelError(args, absl::StrCat("lse must be float32 [B, H, L]; got ",
                                            graph::TensorTypeToString(tl)));
    }
    lse = reinterpret_cast<float*>(args.outputs[2]);
  }
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const AttentionForwardBody body{MakeView(args, s, 0, 3, b, h),
                                      reinterpret_cast<float*>(args.outputs[1]),
                                      Out{args.outputs[0], s.type}, lse};
      MG_RETURN_IF_ERROR(be.Launch(s.l, body));
    }
  }
  return absl::OkStatus();
}

template <class Backend>
absl::Status DeviceEfficientAttentionGradient(const Backend& be, const KernelArgs& args) {
  using namespace attention_internal;  // NOLINT
  MG_RETURN_IF_ERROR(CheckArity(args, 6, 7, 4, 4));
  MG_RETURN_IF_ERROR(kernel_internal::CheckNoOverlapAll(args));
  MG_RETURN_IF_ERROR(CheckOutputsApart(args));
  MG_ASSIGN_OR_RETURN(const Shapes s, ResolveShapes(args, 1, 6));
  const graph::TensorType& tq = *args.input_types[1];
  const graph::TensorType to{tq.dtype, {s.batch, s.l, s.heads * s.d}};
  if (*args.input_types[0] != to || *args.input_types[4] != to) {
    return KernelError(args, absl::StrCat("dO and O must be ", graph::TensorTypeToString(to)));
  }
  const graph::TensorType& tl = *args.input_types[5];
  if (tl.dtype != graph::DataType::kFloat32 || NumElements(tl.dims) != s.batch * s.heads * s.l) {
    return KernelError(args, "lse must be float32 [B, H, L]");
  }
  for (int out = 0; out < 3; ++out) {
    if (*args.output_types[out] != tq) return KernelError(args, "dq, dk, dv must have q's type");
  }
  const graph::TensorType& tw = *args.output_types[3];
  if (tw.dtype != graph::DataType::kFloat32 || NumElements(tw.dims) < s.l * (3 * s.d + 1)) {
    return KernelError(args, absl::StrCat("workspace must be float32 [L, 3d + 1] = [", s.l, ", ",
                                          3 * s.d + 1, "]; got ", graph::TensorTypeToString(tw)));
  }
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const AttentionBackwardView bw{MakeView(args, s, 1, 6, b, h), In{args.inputs[0], s.type},
                                     In{args.inputs[4], s.type},
                                     reinterpret_cast<const float*>(args.inputs[5]),
                                     reinterpret_cast<float*>(args.outputs[3])};
      // D first (the others read it), then dq and dk/dv (independent), then the rounding.
      MG_RETURN_IF_ERROR(be.Launch(s.l, AttentionDeltaBody{bw}));
      MG_RETURN_IF_ERROR(be.Launch(s.l, AttentionDqBody{bw}));
      MG_RETURN_IF_ERROR(be.Launch(s.l, AttentionDkDvBody{bw}));
      MG_RETURN_IF_ERROR(be.Launch(s.l, AttentionStoreBody{bw, Out{args.outputs[0], s.type},
                                                           Out{args.outputs[1], s.type},
                                                           Out{args.outputs[2], s.type}}));
    }
  }
  return absl::OkStatus();
}

template <class Backend>
void AddDeviceAttentionKernels(absl::flat_hash_map<std::string, Kernel>& kernels,
                               std::shared_ptr<const Backend> be) {
  kernels["AlibiBias"] = [be](const KernelArgs& a) { return DeviceAlibiBias(*be, a); };
  kernels["AddAttentionBias"] = [be](const KernelArgs& a) { return DeviceAddAttentionBias(*be, a); };
  kernels["EfficientAttention"] = [be](const KernelArgs& a) {
    return DeviceEfficientAttention(*be, a);
  };
  kernels["EfficientAttentionGradient"] = [be](const KernelArgs& a) {
    return DeviceEfficientAttentionGradient(*be, a);
  };
}

}  // namespace memonger::alloc::device

#endif  // MEMONGER_KERNELS_CUDA_DEVICE_KERNELS_ATTENTION_H_
