#include "graph/in_place.h"

#include <algorithm>
#include <initializer_list>
#include <iterator>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "graph/dtype.h"

namespace memonger::graph {
namespace {

constexpr int kEveryInput = -1;

using Table = absl::flat_hash_map<std::string, std::vector<int>>;

// Their kernels read every input before writing any output (kernels_cpu_rnn_backward.cc).
constexpr absl::string_view kRecurrentGradients[] = {"GRUGradient", "LSTMGradient", "RNNGradient"};

bool IsRecurrentGradient(absl::string_view op_type) {
  return std::find(std::begin(kRecurrentGradients), std::end(kRecurrentGradients), op_type) !=
         std::end(kRecurrentGradients);
}

void Set(Table& table, std::initializer_list<absl::string_view> types, std::vector<int> inputs) {
  for (absl::string_view type : types) table[std::string(type)] = inputs;
}

// Built once, never changed (as OpSchemaTable::Builtin).
const Table& Builtin() {
  static const Table* const kTable = [] {
    auto* table = new Table();
    // Unary elementwise: kernels_cpu_elementwise.cc's UnaryKernel and its kin write element i
    // after reading it; the CUDA pointwise kernels give each thread one element.
    Set(*table,
        {"Relu", "LeakyRelu", "Elu", "Celu", "Selu", "ThresholdedRelu", "HardSigmoid", "HardSwish",
         "Sigmoid", "Tanh", "Gelu", "Softplus", "Softsign", "Exp", "Log", "Sqrt", "Erf",
         "Reciprocal", "Neg", "Abs", "Sign", "Floor", "Ceil", "Round", "Sin", "Cos", "Tan",
         "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Clip", "Cast",
         "Dropout", "Identity"},
        {0});
    // PRelu(X, slope): over X (the slope is a parameter, broadcast).
    Set(*table, {"PRelu"}, {0});
    // Binary with broadcasting: over whichever operand has the output's dims.
    Set(*table, {"Add", "Sub", "Mul", "Div", "Pow", "Mod"}, {0, 1});
    Set(*table, {"Sum", "Max", "Min", "Mean"}, {kEveryInput});
    // Where(condition, X, Y): over a branch (the condition is bool, of another size).
    Set(*table, {"Where"}, {1, 2});
    // Row-wise and per-channel normalisation: each row is read into a buffer before it is
    // written (kernels_cpu_nn.cc, kernels_cpu_batchnorm.cc, CUDA's row kernels).
    Set(*table,
        {"Softmax", "LogSoftmax", "LayerNormalization", "InstanceNormalization",
         "BatchNormalization", "SpatialBN"},
        {0});
    // Gradients over dY, as Caffe2's AllowInplace({{1, 0}}) for ReluGradient and kin.
    Set(*table, {"ReluGradient", "SigmoidGradient", "TanhGradient", "SoftmaxGradient"}, {1});
    Set(*table, {"GeluGradient"}, {0});
    // AddAttentionBias(S, bias): S += bias, one thread (or loop step) per score.
    Set(*table, {"AddAttentionBias"}, {0});
    // ScatterND/ScatterElements(data, indices, updates): data with the updates written in; the
    // CPU kernels check every index, then copy data only where the output is elsewhere (an
    // embedding's gradient: the updates go straight into the zeros).
    Set(*table, {"ScatterND", "ScatterElements"}, {0});
    return table;
  }();
  return *kTable;
}

}  // namespace

bool BroadcastsInputs(absl::string_view op_type) {
  for (absl::string_view type :
       {"Add", "Sub", "Mul", "Div", "Pow", "Mod", "Sum", "Max", "Min", "Mean", "Where"}) {
    if (op_type == type) return true;
  }
  return false;
}

bool MayWriteOverInputAt(absl::string_view op_type, int64_t output, int64_t input) {
  if (output < 0 || input < 0) return false;
  if (IsRecurrentGradient(op_type)) {
    // Gradient positions (kernels/cpu/rnn_cell.h): dX 0, dW 1, dR 2, dB 3, d_initial_h 4,
    // d_initial_c 5, dP 6; their forward inputs X 0, W 1, R 2, B 3, initial_h 5, initial_c
    // 6, P 7 (sequence_lens, 4, has none).
    return output <= 6 && input == (output < 4 ? output : output + 1);
  }
  if (output != 0) return false;
  const Table& table = Builtin();
  const auto it = table.find(op_type);
  if (it == table.end()) return false;
  return std::any_of(it->second.begin(), it->second.end(),
                     [input](int slot) { return slot == kEveryInput || slot == input; });
}

bool ReadsOperandsByNodePosition(absl::string_view op_type) {
  return IsRecurrentGradient(op_type);
}

bool MayWriteOverInput(const Op& op, int output, int input) {
  const auto position = [&](absl::string_view attr, int index, size_t count) -> int64_t {
    if (index < 0 || static_cast<size_t>(index) >= count) return -1;
    // Only the recurrent gradients read their operands by node position (the gradient builder
    // writes both lists); the other kernels read them by index, whatever a file declares.
    if (!IsRecurrentGradient(op.type)) return index;
    const std::optional<std::vector<int64_t>> slots = op.attributes().GetInts(attr);
    if (slots.has_value() && slots->size() == count) return (*slots)[index];
    return index;
  };
  return MayWriteOverInputAt(op.type, position("onnx_output_slots", output, op.outputs.size()),
                             position("onnx_input_slots", input, op.inputs.size()));
}

std::vector<std::string> InPlaceOpTypes() {
  std::vector<std::string> types(std::begin(kRecurrentGradients), std::end(kRecurrentGradients));
  for (const auto& [type, inputs] : Builtin()) types.push_back(type);
  std::sort(types.begin(), types.end());
  return types;
}

bool InPlaceTypesMatch(const TensorType& input, const TensorType& output) {
  return input.dims == output.dims && DataTypeSize(input.dtype) == DataTypeSize(output.dtype) &&
         DataTypeSize(input.dtype) > 0;
}

}  // namespace memonger::graph
