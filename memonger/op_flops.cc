#include "memonger/op_flops.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "graph/einsum.h"

namespace memonger {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

int64_t Mul(std::initializer_list<int64_t> factors) {
  int64_t product = 1;
  for (int64_t f : factors) {
    if (f <= 0) return 0;
    if (product > kMax / f) return kMax;
    product *= f;
  }
  return product;
}

int64_t Elements(const std::vector<int64_t>& dims, size_t from = 0) {
  int64_t n = 1;
  for (size_t i = from; i < dims.size(); ++i) n = Mul({n, dims[i]});
  return n;
}

const std::vector<int64_t>* Dims(const graph::Graph& g, graph::ValueId id) {
  const graph::Value& v = g.value(id);
  return v.type.has_value() ? &v.type->dims : nullptr;
}

int64_t OutputElements(const graph::Graph& g, const graph::Op& op) {
  int64_t n = 0;
  for (graph::ValueId out : op.outputs) {
    const std::vector<int64_t>* d = Dims(g, out);
    if (d == nullptr) continue;
    const int64_t e = Elements(*d);
    n = n > kMax - e ? kMax : n + e;
  }
  return n;
}

// The elements a pooling window covers: ONNX's kernel_shape, Caffe2's kernels, kernel_h x
// kernel_w or kernel (each spatial dim of a rank-`rank` input); 0 where the op names none (a
// global pooling).
int64_t PoolWindow(const graph::Op& op, size_t rank) {
  const graph::AttributeView attrs = op.attributes();
  if (attrs.GetInt("global_pooling", 0) != 0) return 0;
  for (const char* name : {"kernel_shape", "kernels"}) {
    if (std::optional<std::vector<int64_t>> k = attrs.GetInts(name); k.has_value() && !k->empty()) {
      return Elements(*k);
    }
  }
  if (attrs.Has("kernel_h") || attrs.Has("kernel_w")) {
    return Mul({attrs.GetInt("kernel_h", 1), attrs.GetInt("kernel_w", 1)});
  }
  if (std::optional<int64_t> k = attrs.GetInt("kernel"); k.has_value() && rank > 2) {
    return Elements(std::vector<int64_t>(rank - 2, *k));
  }
  return 0;
}

bool IsPooling(absl::string_view t) {
  return t == "MaxPool" || t == "AveragePool" || t == "LpPool" || t == "MaxPool1D" ||
         t == "MaxPool2D" || t == "MaxPool3D" || t == "AveragePool1D" || t == "AveragePool2D" ||
         t == "AveragePool3D";
}

// Ops whose every input element is combined into the output: at least one FLOP per input.
bool IsReduction(absl::string_view t) {
  return absl::StartsWith(t, "Reduce") || absl::StartsWith(t, "Global") || t == "ArgMax" ||
         t == "ArgMin" || t == "AveragedLoss" || t == "SumElements";
}

// Over every point of the equation's label space, n operands' n - 1 multiplies and an add (one
// add for a single operand); 0 where the equation does not resolve.
int64_t EinsumFlops(const graph::Graph& g, const graph::Op& op) {
  const std::optional<std::string> equation = op.attributes().GetString("equation");
  if (!equation.has_value()) return 0;
  std::vector<std::vector<int64_t>> dims;
  for (graph::ValueId x : op.inputs) {
    const std::vector<int64_t>* d = Dims(g, x);
    if (d == nullptr) return 0;
    dims.push_back(*d);
  }
  const absl::StatusOr<graph::EinsumSpec> spec = graph::ResolveEinsum(*equation, dims);
  if (!spec.ok()) return 0;
  int64_t product = 1;
  for (int64_t size : spec->label_size) {
    if (size > 0) product = Mul({product, size});
  }
  // n operands: n - 1 multiplies and an add per point of the label space.
  const int64_t per_point = op.inputs.size() >= 2 ? static_cast<int64_t>(op.inputs.size()) : 1;
  return Mul({per_point, product});
}

}  // namespace

int64_t OpFlops(const graph::Graph& g, const graph::Op& op) {
  const std::string& t = op.type;
  const int64_t out = OutputElements(g, op);
  if (op.inputs.empty()) return out;
  const std::vector<int64_t>* a = Dims(g, op.inputs[0]);
  if (a == nullptr || a->empty()) return out;
  if (t == "MatMul" || t == "BatchMatMul") {
    // Each output element sums over A's last dim (Caffe2's trans_a: its second last).
    const bool trans_a = op.attributes().GetInt("trans_a", 0) != 0 && a->size() >= 2;
    return Mul({2, out, trans_a ? (*a)[a->size() - 2] : a->back()});
  }
  if ((t == "FC" || t == "FCTransposed" || t == "Gemm") && op.inputs.size() >= 2) {
    // One output row per row of X: every output element sums over X's inner dim (X flattened
    // to 2-D at axis 1 for FC; Gemm's A is [M, K], or [K, M] with transA).
    const int64_t axis = std::clamp<int64_t>(op.attributes().GetInt("axis", 1), 0,
                                             static_cast<int64_t>(a->size()));
    const int64_t inner = t != "Gemm"                                  ? Elements(*a, axis)
                          : op.attributes().GetInt("transA", 0) != 0 ? a->front()
                                                                       : a->back();
    return Mul({2, out, inner});
  }
  if ((t == "Conv" || t == "Conv1D" || t == "Conv2D" || t == "Conv3D") &&
      op.inputs.size() >= 2) {
    // W [M, C/group, k...] (NHWC: [M, k..., C/group]): each output sums over one filter.
    const std::vector<int64_t>* w = Dims(g, op.inputs[1]);
    if (w == nullptr || w->empty()) return out;
    return Mul({2, out, Elements(*w, 1)});
  }
  if (t == "ConvTranspose" && op.inputs.size() >= 2) {
    // W [C, M/group, k...] (NHWC: [C, k..., M/group]): each input element is scattered into
    // one filter's worth of outputs.
    const std::vector<int64_t>* w = Dims(g, op.inputs[1]);
    if (w == nullptr || w->empty()) return out;
    return Mul({2, Elements(*a), Elements(*w, 1)});
  }
  if (t == "Einsum") {
    const int64_t flops = EinsumFlops(g, op);
    return flops > 0 ? flops : out;
  }
  if (IsPooling(t)) {
    // Per element of Y (ONNX MaxPool's Indices come with it).
    const std::vector<int64_t>* y = Dims(g, op.outputs[0]);
    const int64_t pooled = y != nullptr ? Elements(*y) : out;
    const int64_t window = PoolWindow(op, a->size());
    return window > 0 ? Mul({pooled, window}) : std::max(pooled, Elements(*a));
  }
  if (IsReduction(t)) return std::max(out, Elements(*a));
  if (t == "EfficientAttention") {
    // Q [.., L, d]: scores Q K^T and P V, 2 x L x L x d each, per batch and head.
    if (a->size() < 2) return out;
    const int64_t l = (*a)[a->size() - 2];
    return Mul({4, Elements(*a), l});
  }
  if ((t == "RNN" || t == "GRU" || t == "LSTM") && op.inputs.size() >= 3) {
    // X [seq, batch, input] (either layout: seq x batch rows), W [dirs, G x hidden, input],
    // R [dirs, G x hidden, hidden]: X W^T and H R^T for every step and direction.
    const std::vector<int64_t>* w = Dims(g, op.inputs[1]);
    const std::vector<int64_t>* r = Dims(g, op.inputs[2]);
    if (a->size() != 3 || w == nullptr || r == nullptr || w->size() != 3 || r->size() != 3) {
      return out;
    }
    return Mul({2, (*a)[0], (*a)[1], (*w)[0], (*w)[1], (*w)[2] + (*r)[2]});
  }
  if (t == "Softmax" || t == "LayerNormalization" || t == "BatchNormalization" ||
      t == "SpatialBN") {
    return Mul({5, out});
  }
  return out;
}

}  // namespace memonger
