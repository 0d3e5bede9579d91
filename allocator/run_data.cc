#include "allocator/run_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/float16.h"
#include "util/limits.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

using graph::DataType;

// Element k of a tensor's bytes as a double.
double Element(const std::string& bytes, DataType dtype, int64_t k) {
  const char* p = bytes.data();
  auto read = [&](auto zero) {
    decltype(zero) v;
    std::memcpy(&v, p + k * static_cast<int64_t>(sizeof(v)), sizeof(v));
    return v;
  };
  switch (dtype) {
    case DataType::kFloat32: return read(float{});
    case DataType::kFloat64: return read(double{});
    case DataType::kFloat16: return HalfBitsToFloat(read(uint16_t{}));
    case DataType::kBFloat16: return BFloat16BitsToFloat(read(uint16_t{}));
    case DataType::kInt64: return static_cast<double>(read(int64_t{}));
    case DataType::kInt32: return read(int32_t{});
    case DataType::kInt16: return read(int16_t{});
    case DataType::kInt8: return read(int8_t{});
    case DataType::kUInt8: return read(uint8_t{});
    case DataType::kBool: return read(uint8_t{}) != 0 ? 1.0 : 0.0;
    default: return 0;
  }
}

std::string Names(const std::vector<std::string>& names) {
  return names.empty() ? std::string("none") : util::Quote(absl::StrJoin(names, ", "));
}

}  // namespace

absl::Status CheckRunInputs(const graph::Graph& graph,
                            const std::map<std::string, graph::TensorData>& inputs) {
  std::vector<std::string> names;
  absl::flat_hash_set<std::string> input_names;
  for (graph::ValueId id : graph.inputs()) {
    const graph::Value& v = graph.value(id);
    if (graph::IsStatic(v.role) || !input_names.insert(v.name).second) continue;
    names.push_back(v.name);
  }
  for (const auto& [name, data] : inputs) {
    if (!input_names.contains(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--inputs gives '", util::Quote(name), "', which is not an input of the model (its inputs: ",
          Names(names), ")"));
    }
  }
  for (const std::string& name : names) {
    auto it = inputs.find(name);
    if (it == inputs.end()) {
      return absl::InvalidArgumentError(absl::StrCat("--inputs gives no tensor for the model's input '",
                                                     util::Quote(name), "' (its inputs: ",
                                                     Names(names), ")"));
    }
    const graph::Value& v = graph.value(*graph.FindVersions(name).begin());
    if (it->second.type != *v.type) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--inputs: '", util::Quote(name), "' is ", graph::TensorTypeToString(it->second.type),
          ", but the model's input is ", graph::TensorTypeToString(*v.type),
          " as planned (bind its dims with --dim or --input-shape)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<OutputError>> CompareOutputs(
    const graph::Graph& /*graph*/, const HostRunReport& report,
    const std::map<std::string, graph::TensorData>& expected) {
  std::vector<std::string> names;
  for (const HostRunOutput& out : report.outputs) names.push_back(out.name);
  for (const auto& [name, data] : expected) {
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--expect gives '", util::Quote(name), "', which is not an output of the model (its outputs: ",
          Names(names), ")"));
    }
  }
  std::vector<OutputError> errors;
  for (const HostRunOutput& out : report.outputs) {
    auto it = expected.find(out.name);
    if (it == expected.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--expect gives no reference for the model's output '", util::Quote(out.name), "'"));
    }
    const graph::TensorData& ref = it->second;
    if (ref.type != out.type) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--expect: the reference for '", util::Quote(out.name), "' is ",
          graph::TensorTypeToString(ref.type), ", but the output is ",
          graph::TensorTypeToString(out.type)));
    }
    if (out.bytes.size() != ref.bytes.size()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the run kept no bytes of output '", util::Quote(out.name), "'"));
    }
    MG_ASSIGN_OR_RETURN(const int64_t bytes, graph::ByteSize(out.type, out.name));
    const int64_t n = bytes / std::max<int64_t>(graph::DataTypeSize(out.type.dtype), 1);
    OutputError e{out.name, 0, 0};
    double scale = 0;
    for (int64_t k = 0; k < n; ++k) {
      const double a = Element(out.bytes, out.type.dtype, k);
      const double b = Element(ref.bytes, ref.type.dtype, k);
      if (std::isfinite(b)) scale = std::max(scale, std::abs(b));
      double d = 0;
      if (std::isnan(a) || std::isnan(b)) {
        d = std::isnan(a) && std::isnan(b) ? 0 : INFINITY;
      } else if (std::isinf(a) || std::isinf(b)) {
        d = a == b ? 0 : INFINITY;
      } else {
        d = std::abs(a - b);
      }
      e.max_abs = std::max(e.max_abs, d);
    }
    e.relative = e.max_abs == 0 ? 0 : scale == 0 ? INFINITY : e.max_abs / scale;
    errors.push_back(e);
  }
  return errors;
}

}  // namespace memonger::alloc
