#include "memonger/op_flops.h"

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <vector>

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

}  // namespace

int64_t OpFlops(const graph::Graph& g, const graph::Op& op) {
  const std::string& t = op.type;
  const int64_t out = OutputElements(g, op);
  if (op.inputs.empty()) return out;
  const std::vector<int64_t>* a = Dims(g, op.inputs[0]);
  if (a == nullptr || a->empty()) return out;
  if (t == "MatMul" || t == "BatchMatMul") {
    // Each output element sums over A's last dim.
    return Mul({2, out, a->back()});
  }
  if ((t == "FC" || t == "FCTransposed" || t == "Gemm") && op.inputs.size() >= 2) {
    // One output row per row of X: every output element sums over X's inner dim (X flattened
    // to 2-D at axis 1 for FC; Gemm's transA decides which dim, both the same for a square).
    const int64_t inner = t == "Gemm" ? a->back() : Elements(*a, 1);
    return Mul({2, out, inner});
  }
  if (t == "Conv" && op.inputs.size() >= 2) {
    const std::vector<int64_t>* w = Dims(g, op.inputs[1]);
    if (w == nullptr || w->empty()) return out;
    return Mul({2, out, Elements(*w, 1)});
  }
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
