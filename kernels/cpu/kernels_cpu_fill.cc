// ConstantFill (Caffe2) and ConstantOfShape (ONNX): Y filled with the `value` attribute (default
// 0; an integer attribute is exact for int64 outputs), rounded to Y's element
// type (to nearest for the half types; truncated toward zero for integers; bool: value != 0).
// Y's type comes from shape inference (the `shape`, `extra_shape`, `dtype` attributes or the
// optional input's dims), so the kernel reads only `value`; the input, if any, is not read. The
// gradient builder seeds each loss gradient with ConstantFill(loss, value=1, dtype=<name>).
//
// Range(start, limit, delta) (ONNX, torch.arange): Y[i] = start + i * delta for the
// max(ceil((limit - start) / delta), 0) elements the scalars give, in Y's element type (int16,
// int32, int64, float32, float64, the inputs' type). Y's size was planned from the values the
// importer saw (constants, or a binding's shape arithmetic); the kernel checks it against the
// values it runs on and refuses a mismatch, rather than write past the planned bytes.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <variant>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/kernel_util.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

using graph::TensorType;
using namespace kernel_internal;  // NOLINT: the helpers of every kernel file

absl::Status ConstantFill(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 0, 1, 1, 1));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  if (FindAttr(args, "value_not_carried") != nullptr) {
    return KernelUnimplemented(args, "the fill value of the model could not be carried");
  }
  MG_ASSIGN_OR_RETURN(const double value, FloatAttr(args, "value", 0.0));
  // An integer value is used as it is (an int64 beyond 2^53 does not survive a double).
  const graph::Attribute* given = FindAttr(args, "value");
  const int64_t* exact = given != nullptr ? std::get_if<int64_t>(&given->data) : nullptr;
  const TensorType& y = *args.output_types[0];
  return DispatchAny(args, y.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    T v;
    if constexpr (std::is_same_v<T, bool>) {
      v = value != 0;
    } else if constexpr (std::is_same_v<T, int64_t>) {
      if (exact == nullptr && (!std::isfinite(value) || std::abs(value) > 9.2e18)) {
        return KernelError(args, absl::StrCat("value ", value, " does not fit int64"));
      }
      v = exact != nullptr ? *exact : static_cast<int64_t>(value);
    } else if constexpr (std::is_integral_v<T>) {
      if (!std::isfinite(value) || value < static_cast<double>(std::numeric_limits<T>::lowest()) ||
          value > static_cast<double>(std::numeric_limits<T>::max())) {
        return KernelError(args, absl::StrCat("value ", value, " does not fit ",
                                              graph::DataTypeName(y.dtype)));
      }
      v = static_cast<T>(value);
    } else {
      v = Store<T>(static_cast<Compute<T>>(value));
    }
    T* out = reinterpret_cast<T*>(args.outputs[0]);
    const int64_t n = NumElements(y.dims);
    for (int64_t i = 0; i < n; ++i) out[i] = v;
    return absl::OkStatus();
  });
}

absl::Status Range(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 3, 3, 1, 1));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  const TensorType& y = *args.output_types[0];
  for (int k = 0; k < 3; ++k) {
    if (args.input_types[k]->dtype != y.dtype || NumElements(args.input_types[k]->dims) != 1) {
      return KernelError(args, "start, limit and delta must be scalars of the output's type");
    }
  }
  if (y.dims.size() != 1) return KernelError(args, "the output must have rank 1");
  auto run = [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    T start, limit, delta;
    std::memcpy(&start, args.inputs[0], sizeof(T));
    std::memcpy(&limit, args.inputs[1], sizeof(T));
    std::memcpy(&delta, args.inputs[2], sizeof(T));
    if (delta == T(0)) return KernelError(args, "delta is 0");
    const double count = std::ceil((static_cast<double>(limit) - static_cast<double>(start)) /
                                   static_cast<double>(delta));
    const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
    if (n != y.dims[0]) {
      return KernelError(args, absl::StrCat("start, limit and delta give ", n,
                                            " elements, but the output was planned with ",
                                            y.dims[0]));
    }
    T* out = reinterpret_cast<T*>(args.outputs[0]);
    for (int64_t i = 0; i < n; ++i) {
      out[i] = static_cast<T>(start + static_cast<T>(i) * delta);
    }
    return absl::OkStatus();
  };
  switch (y.dtype) {
    case graph::DataType::kInt64: return run(int64_t{});
    case graph::DataType::kInt32: return run(int32_t{});
    case graph::DataType::kInt16: return run(int16_t{});
    case graph::DataType::kFloat32: return run(float{});
    case graph::DataType::kFloat64: return run(double{});
    default: return UnsupportedDtype(args, y.dtype, "int16, int32, int64, float32, float64");
  }
}

}  // namespace

void AddCpuFillKernels(KernelMap& kernels) {
  kernels["ConstantFill"] = ConstantFill;
  // ONNX ConstantOfShape(shape): Y (typed from the shape's values by inference) filled with the
  // 'value' the importer carried from the tensor attribute (default 0.0).
  kernels["ConstantOfShape"] = ConstantFill;
  kernels["Range"] = Range;
}

}  // namespace memonger::alloc
