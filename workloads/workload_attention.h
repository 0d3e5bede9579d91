// The attention workload: a pre-norm ViT encoder (a TITAN-like slide encoder by default) with an
// optional 2-D ALiBi bias, as an ordinary net, so that the planners, the report and the
// executor treat it like any loaded model.
//
//   optimize-net --workload attention:n=18000,kernel=efficient,bias_dtype=fp16,bias_pad=8
//
// Keys (defaults: TITAN as released, which is what users arrive with when they run out of
// memory): n (patch tokens, 18000), cls (class tokens, 1), batch (1), dim (768), heads (12),
// depth (6), mlp (3072), dtype (fp16 | bf16 | fp32: activations and weights, fp16), kernel
// (math | efficient, math), bias (none | alibi, alibi), bias_dtype (fp32 | fp16 | bf16, fp32),
// bias_pad (row padding of the stored bias in elements, 0 = rows of L), broadcast (expand |
// repeat, expand: batch > 1 reads the [1, H, L, Lp] bias by broadcasting; repeat: a
// materialised [B, H, L, Lp] copy), mode (inference | training).
//
// The net, with L = n + cls tokens, d = dim / heads (docs/attention.md has the table):
//   once:      bias = AlibiBias(coords)                      [1, H, L, Lp], resident to the end
//              (+ Expand to [B, H, L, Lp] when broadcast=repeat and batch > 1)
//   per block: ln1 = LayerNormalization(x); qkv = MatMul(ln1, Wqkv); qkv += bqkv (in place);
//              q, k, v = Reshape, Transpose, Split, Squeeze of qkv      [B, H, L, d] each
//     math:    [bias16 = Cast(bias)]   when bias_dtype differs from dtype (a per-layer copy)
//              q *= sqrt(scale); kT = Transpose(k); kT *= sqrt(scale) (in place)
//              S = MatMul(q, kT) [B, H, L, L]; S = AddAttentionBias(S, bias) (in place)
//              P = Softmax(S); O = MatMul(P, v); a = Reshape(Transpose(O)) [B, L, D]
//     efficient: [Cast], [PadLastDim(bias, 8)] when the stored rows are not a multiple of 8
//              (a per-layer padded copy); a, workspace = EfficientAttention(q, k, v, bias)
//     tail:    a = MatMul(a, Wproj); a += bproj; x1 = x + a; ln2 = LayerNormalization(x1);
//              h = MatMul(ln2, Wfc1); h += bfc1; g = Gelu(h); m = MatMul(g, Wfc2); m += bfc2;
//              x = x1 + m
// Weights are params (static: outside the arena unless --plan-static). Op and value names are
// "b<i>/<name>" per block. mode=training adds loss = AveragedLoss(y) (a surrogate: what training
// holds does not depend on which scalar is differentiated) and the backward ops of
// graph/gradient_builder.h; the efficient kernel then also outputs its lse.
#ifndef MEMONGER_WORKLOADS_WORKLOAD_ATTENTION_H_
#define MEMONGER_WORKLOADS_WORKLOAD_ATTENTION_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "graph/dtype.h"
#include "graph/graph.h"
#include "workloads/workload_spec.h"

namespace memonger::graph {

struct AttentionWorkload {
  int64_t n = 18000;
  int64_t cls = 1;
  int64_t batch = 1;
  int64_t dim = 768;
  int64_t heads = 12;
  int64_t depth = 6;
  int64_t mlp = 3072;
  DataType dtype = DataType::kFloat16;
  bool efficient = false;  // kernel=efficient
  bool alibi = true;       // bias=alibi
  DataType bias_dtype = DataType::kFloat32;
  int64_t bias_pad = 0;
  bool repeat = false;  // broadcast=repeat
  bool training = false;
  // Declare the inputs with the symbols n and batch (x [batch, n + cls, dim], coords [n, 2]),
  // for plans over a range of n and batch (--dim n=LO..HI); the graph stays typed at the
  // workload's own n and batch. The efficient kernel's bias is then padded to rows of a
  // multiple of 8 unless bias_pad makes them so for every n.
  bool symbolic = false;

  int64_t tokens() const { return n + cls; }
};

// InvalidArgument for unknown keys, values out of range (n, batch, dim, heads, depth, mlp >= 1;
// cls, bias_pad >= 0), heads that do not divide dim, unknown choices.
absl::StatusOr<AttentionWorkload> ParseAttentionWorkload(const WorkloadSpec& spec);

// The net, typed (shape inference done).
absl::StatusOr<Graph> BuildAttentionGraph(const AttentionWorkload& workload);

}  // namespace memonger::graph

#endif  // MEMONGER_WORKLOADS_WORKLOAD_ATTENTION_H_
