#include "workloads/workload_attention.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/gradient_builder.h"
#include "graph/net_writer.h"
#include "util/status_macros.h"

namespace memonger::graph {
namespace {

Attribute Int(const char* name, int64_t value) { return Attribute{name, value}; }
Attribute Ints(const char* name, std::vector<int64_t> values) {
  return Attribute{name, std::move(values)};
}
Attribute Str(const char* name, absl::string_view value) {
  return Attribute{name, std::string(value)};
}

// One pre-norm block: `x` in, `out` written.
void WriteBlock(NetWriter& net, const AttentionWorkload& w, int block, const std::string& x,
                const std::string& bias, const std::string& out) {
  const std::string p = absl::StrCat("b", block, "/");
  const int64_t D = w.dim, H = w.heads, d = w.dim / w.heads, F = w.mlp;
  const DataType dt = w.dtype;
  auto param = [&](const std::string& name, std::vector<int64_t> dims) {
    net.Input(p + name, dt, dims, Role::kParam);
    return p + name;
  };
  // Linear layer: MatMul, then the bias added in place.
  auto linear = [&](const std::string& in, const std::string& out, int64_t k, int64_t n,
                    const std::string& wname) {
    const std::string weight = param("w_" + wname, {k, n});
    const std::string bias_param = param("b_" + wname, {n});
    net.Op("MatMul", p + wname, {in, weight}, {p + out});
    net.Op("Add", p + wname + "_bias", {p + out, bias_param}, {p + out});
  };

  net.Op("LayerNormalization", p + "ln1",
         {x, param("ln1_scale", {D}), param("ln1_bias", {D})}, {p + "ln1"},
         {Int("axis", -1)});
  linear(p + "ln1", "qkv", D, 3 * D, "qkv");
  net.Op("Reshape", p + "qkv_heads", {p + "qkv"}, {p + "qkv5"},
         {Ints("shape", {0, 0, 3, H, d})});
  net.Op("Transpose", p + "qkv_heads_first", {p + "qkv5"}, {p + "qkv_t"},
         {Ints("perm", {2, 0, 3, 1, 4})});
  net.Op("Split", p + "split_qkv", {p + "qkv_t"}, {p + "q5", p + "k5", p + "v5"},
         {Int("axis", 0)});
  for (const char* t : {"q", "k", "v"}) {
    net.Op("Squeeze", p + "squeeze_" + t, {p + t + "5"}, {p + t}, {Ints("axes", {0})});
  }

  // The bias as this layer's kernel reads it: cast to the activations' dtype (a per-layer
  // copy, as autocast makes), and for the efficient kernel padded to rows of a multiple of 8.
  std::string layer_bias = bias;
  if (w.alibi && w.bias_dtype != dt) {
    net.Op("Cast", p + "bias_cast", {layer_bias}, {p + "bias_cast"},
           {Str("to", DataTypeName(dt))});
    layer_bias = p + "bias_cast";
  }
  const int64_t stored_row = w.bias_pad == 0 ? w.tokens()
                                              : (w.tokens() + w.bias_pad - 1) / w.bias_pad *
                                                    w.bias_pad;
  // A symbolic workload pads unless the stored rows are a multiple of 8 for every n (bias_pad
  // a multiple of 8): which n need the copy is not known when the net is written.
  const bool pad_rows =
      w.symbolic ? w.bias_pad == 0 || w.bias_pad % 8 != 0 : stored_row % 8 != 0;
  if (w.alibi && w.efficient && pad_rows) {
    net.Op("PadLastDim", p + "bias_pad", {layer_bias}, {p + "bias_padded"},
           {Int("multiple", 8)});
    layer_bias = p + "bias_padded";
  }

  std::string attended;
  if (w.efficient) {
    std::vector<std::string> inputs = {p + "q", p + "k", p + "v"};
    if (w.alibi) inputs.push_back(layer_bias);
    std::vector<std::string> outputs = {p + "attn", p + "attn_workspace"};
    net.builder().DeclareRole(p + "attn_workspace", Role::kWorkspace);
    if (w.training) outputs.push_back(p + "attn_lse");
    net.Op("EfficientAttention", p + "attention", inputs, outputs,
           {Attribute{"scale", 1.0 / std::sqrt(static_cast<double>(d))}});
    attended = p + "attn";
  } else {
    net.Op("Mul", p + "scale_q", {p + "q", "sqrt_scale"}, {p + "q"});
    net.Op("Transpose", p + "k_transpose", {p + "k"}, {p + "kT"}, {Ints("perm", {0, 1, 3, 2})});
    net.Op("Mul", p + "scale_k", {p + "kT", "sqrt_scale"}, {p + "kT"});
    net.Op("MatMul", p + "qk", {p + "q", p + "kT"}, {p + "scores"});
    if (w.alibi) {
      net.Op("AddAttentionBias", p + "add_bias", {p + "scores", layer_bias}, {p + "scores"});
    }
    net.Op("Softmax", p + "softmax", {p + "scores"}, {p + "probs"}, {Int("axis", -1)});
    net.Op("MatMul", p + "pv", {p + "probs", p + "v"}, {p + "heads_out"});
    net.Op("Transpose", p + "heads_last", {p + "heads_out"}, {p + "heads_t"},
           {Ints("perm", {0, 2, 1, 3})});
    net.Op("Reshape", p + "merge_heads", {p + "heads_t"}, {p + "attn"},
           {Ints("shape", {0, 0, D})});
    attended = p + "attn";
  }

  linear(attended, "proj", D, D, "proj");
  net.Op("Add", p + "residual1", {x, p + "proj"}, {p + "x1"});
  net.Op("LayerNormalization", p + "ln2",
         {p + "x1", param("ln2_scale", {D}), param("ln2_bias", {D})}, {p + "ln2"},
         {Int("axis", -1)});
  linear(p + "ln2", "fc1", D, F, "fc1");
  net.Op("Gelu", p + "gelu", {p + "fc1"}, {p + "gelu"});
  linear(p + "gelu", "fc2", F, D, "fc2");
  net.Op("Add", p + "residual2", {p + "x1", p + "fc2"}, {out});
}

}  // namespace

absl::StatusOr<AttentionWorkload> ParseAttentionWorkload(const WorkloadSpec& spec) {
  WorkloadParams params(spec, WorkloadKeys("attention"));
  AttentionWorkload w;
  // Bounds keep every tensor's element count far from int64 overflow; bytes are checked again
  // by shape inference.
  constexpr int64_t kMaxSize = int64_t{1} << 24;
  MG_ASSIGN_OR_RETURN(w.n, params.Int("n", w.n, 1, kMaxSize));
  MG_ASSIGN_OR_RETURN(w.cls, params.Int("cls", w.cls, 0, 1024));
  MG_ASSIGN_OR_RETURN(w.batch, params.Int("batch", w.batch, 1, 1 << 16));
  MG_ASSIGN_OR_RETURN(w.dim, params.Int("dim", w.dim, 1, 1 << 20));
  MG_ASSIGN_OR_RETURN(w.heads, params.Int("heads", w.heads, 1, 1 << 12));
  MG_ASSIGN_OR_RETURN(w.depth, params.Int("depth", w.depth, 1, 1 << 12));
  MG_ASSIGN_OR_RETURN(w.mlp, params.Int("mlp", w.mlp, 1, 1 << 22));
  MG_ASSIGN_OR_RETURN(w.dtype, params.FloatType("dtype", "fp16"));
  MG_ASSIGN_OR_RETURN(std::string kernel, params.Choice("kernel", "math", {"math", "efficient"}));
  w.efficient = kernel == "efficient";
  MG_ASSIGN_OR_RETURN(std::string bias, params.Choice("bias", "alibi", {"none", "alibi"}));
  w.alibi = bias == "alibi";
  MG_ASSIGN_OR_RETURN(w.bias_dtype, params.FloatType("bias_dtype", "fp32"));
  MG_ASSIGN_OR_RETURN(w.bias_pad, params.Int("bias_pad", w.bias_pad, 0, 4096));
  MG_ASSIGN_OR_RETURN(std::string broadcast,
                      params.Choice("broadcast", "expand", {"expand", "repeat"}));
  w.repeat = broadcast == "repeat";
  MG_ASSIGN_OR_RETURN(w.training, params.Training());
  MG_RETURN_IF_ERROR(params.Finish());
  if (w.dim % w.heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("attention workload: heads=", w.heads,
                                                   " does not divide dim=", w.dim));
  }
  if (!w.alibi && (params.Has("bias_dtype") || params.Has("bias_pad"))) {
    return absl::InvalidArgumentError(
        "attention workload: bias_dtype and bias_pad need bias=alibi");
  }
  return w;
}

absl::StatusOr<Graph> BuildAttentionGraph(const AttentionWorkload& w) {
  NetWriter net(absl::StrCat("attention_n", w.n, w.efficient ? "_efficient" : "_math"));
  const int64_t L = w.tokens();
  net.Input("x", w.dtype, {w.batch, L, w.dim}, Role::kInput);
  std::string bias;
  if (w.alibi) {
    net.Input("coords", DataType::kInt64, {w.n, 2}, Role::kInput);
    net.Op("AlibiBias", "alibi_bias", {"coords"}, {"alibi_bias"},
           {Int("heads", w.heads), Int("cls", w.cls), Int("pad", w.bias_pad),
            Str("dtype", DataTypeName(w.bias_dtype))});
    bias = "alibi_bias";
    if (w.repeat && w.batch > 1) {
      // Only the batch is given: Expand broadcasts the other dims, so the shape does not
      // fix the sequence length (a symbolic plan keeps n free).
      net.Op("Expand", "alibi_repeat", {bias}, {"alibi_bias_batched"},
             {Ints("shape", {w.batch, 1, 1, 1})});
      bias = "alibi_bias_batched";
    }
  }
  if (!w.efficient) {
    net.Input("sqrt_scale", w.dtype, {}, Role::kConstant);
  }
  std::string x = "x";
  for (int block = 0; block < w.depth; ++block) {
    const std::string out = block + 1 == w.depth ? "y" : absl::StrCat("b", block, "/out");
    WriteBlock(net, w, block, x, bias, out);
    x = out;
  }
  net.builder().AddExternalOutput("y");
  if (w.training) {
    // A surrogate loss: the mean of the output. What training holds in memory (saved
    // activations, gradients) does not depend on which scalar is differentiated.
    net.Op("AveragedLoss", "loss", {"y"}, {"loss"});
    net.builder().AddExternalOutput("loss");
    net.builder().AddLoss("loss");
  }
  MG_ASSIGN_OR_RETURN(Graph graph, std::move(net).Finish());
  if (w.training) {
    MG_ASSIGN_OR_RETURN(graph, AddGradientOps(graph, {"loss"}));
  }
  if (w.symbolic) {
    auto declare = [&](absl::string_view name, DeclaredDims dims) {
      for (ValueId id : graph.FindVersions(name)) {
        if (graph.value(id).producer == kNone) graph.mutable_value(id).declared.dims = dims;
      }
    };
    declare("x", {{0, "batch"}, {0, absl::StrCat("n + ", w.cls)}, {w.dim, ""}});
    if (w.alibi) declare("coords", {{0, "n"}, {2, ""}});
  }
  return graph;
}

}  // namespace memonger::graph
