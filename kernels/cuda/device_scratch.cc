// The scratch block the device kernels need for a net (kernels_device.h): the largest single
// request of any op, as the kernels make them (device_kernels_matmul.h, device_kernels_rows.h).
#include <algorithm>
#include <cstdint>
#include <optional>

#include "graph/graph.h"
#include "kernels/cuda/kernels_device.h"
#include "util/checked_math.h"

namespace memonger::alloc {
namespace {

int64_t Elements(const graph::TensorType& t, size_t from = 0) {
  int64_t n = 1;
  for (size_t i = from; i < t.dims.size(); ++i) {
    const std::optional<int64_t> next = util::CheckedMul(n, t.dims[i]);
    if (!next.has_value()) return INT64_MAX / 8;
    n = *next;
  }
  return n;
}

int64_t OpScratchBytes(const graph::Graph& graph, const graph::Op& op) {
  constexpr int64_t kFloat = sizeof(float);
  if (op.type == "MatMulGradient") {
    // A float32 accumulator of one operand gradient at a time, when it sums over batches.
    int64_t most = 0;
    for (graph::ValueId out : op.outputs) {
      const auto& type = graph.value(out).type;
      if (type.has_value()) most = std::max(most, Elements(*type) * kFloat);
    }
    return most;
  }
  if (op.type == "LayerNormalizationGradient" && op.inputs.size() >= 2) {
    // dScale and dB in float32 per normalised element: 2 x n.
    const auto& x = graph.value(op.inputs[1]).type;
    if (!x.has_value() || x->dims.empty()) return 0;
    int64_t axis = op.attributes().GetInt("axis", -1);
    const int64_t rank = static_cast<int64_t>(x->dims.size());
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return 0;  // the kernel refuses it before asking for scratch
    return 2 * std::max<int64_t>(Elements(*x, static_cast<size_t>(axis)), 1) * kFloat;
  }
  return 0;
}

}  // namespace

int64_t DeviceScratchBytes(const graph::Graph& graph) {
  int64_t most = 0;
  for (const graph::Op& op : graph.ops()) most = std::max(most, OpScratchBytes(graph, op));
  return most;
}

}  // namespace memonger::alloc
