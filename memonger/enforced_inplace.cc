#include "memonger/enforced_inplace.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace memonger {
namespace {

struct EnforcedPairs {
  absl::string_view type;
  std::vector<std::pair<int, int>> pairs;  // (input, output)
};

const std::vector<EnforcedPairs>& Table() {
  static const auto* const kTable = new std::vector<EnforcedPairs>{
      {"IndexFreeze", {{0, 0}}},
      {"Adagrad", {{0, 0}, {1, 1}}},
      {"Adam", {{0, 0}, {1, 1}, {2, 2}}},
      {"MomentumSGDUpdate", {{0, 0}, {1, 1}, {3, 2}}},
  };
  return *kTable;
}

}  // namespace

absl::Status CheckEnforcedInPlace(const graph::Graph& graph) {
  for (const graph::Op& op : graph.ops()) {
    // Caffe2's ops only: ONNX's Adagrad and Adam (ai.onnx.preview.training) write new tensors.
    if (!op.domain.empty()) continue;
    for (const EnforcedPairs& entry : Table()) {
      if (op.type != entry.type) continue;
      for (const auto& [in, out] : entry.pairs) {
        if (in >= static_cast<int>(op.inputs.size()) ||
            out >= static_cast<int>(op.outputs.size())) {
          continue;
        }
        const graph::Value& input = graph.value(op.inputs[in]);
        const graph::Value& output = graph.value(op.outputs[out]);
        if (output.inplace_of == op.inputs[in]) continue;
        return absl::InvalidArgumentError(absl::StrCat(
            op.Label(), " must write its output ", out, " in place over its input ", in,
            " (Caffe2 enforces it for ", op.type, "), but it reads '", input.DisplayName(),
            "' and writes '", output.DisplayName(), "': name them alike"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace memonger
