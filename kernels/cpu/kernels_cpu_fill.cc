// ConstantFill (Caffe2): Y filled with the `value` attribute (default 0), rounded to Y's element
// type (to nearest for the half types; truncated toward zero for integers; bool: value != 0).
// Y's type comes from shape inference (the `shape`, `extra_shape`, `dtype` attributes or the
// optional input's dims), so the kernel reads only `value`; the input, if any, is not read. The
// gradient builder seeds each loss gradient with ConstantFill(loss, value=1, dtype=<name>).
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

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
  MG_ASSIGN_OR_RETURN(const double value, FloatAttr(args, "value", 0.0));
  const TensorType& y = *args.output_types[0];
  return DispatchAny(args, y.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    T v;
    if constexpr (std::is_same_v<T, bool>) {
      v = value != 0;
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

}  // namespace

void AddCpuFillKernels(KernelMap& kernels) { kernels["ConstantFill"] = ConstantFill; }

}  // namespace memonger::alloc
