// Reduction CPU kernels: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd,
// ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp, and ArgMax/ArgMin (ONNX).
// Axes come from the `axes` attribute (older opsets) or the second input (ReduceSum opset 13+,
// all of them from opset 18); none means every axis, unless noop_with_empty_axes=1, which
// copies the input. keepdims (default 1) only changes the output's dims, which the kernel takes
// from the output type.
//
// Accumulation is in the compute type (float32 for the half types and float32, float64 for
// float64, the integer itself for int32/int64), in the input's element order, into a buffer of
// the output's size; the output is rounded once at the end. Outputs overlapping the input are
// refused.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/kernel_util.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

using graph::TensorType;
using namespace kernel_internal;  // NOLINT: the helpers of every kernel file

template <typename C>
C AbsOf(C v) {
  if constexpr (std::is_unsigned_v<C>) {
    return v;
  } else {
    return v < 0 ? C(0) - v : v;
  }
}

enum class Reduce { kSum, kMean, kMax, kMin, kProd, kSumSquare, kL1, kL2, kLogSum, kLogSumExp };

Kernel ReduceKernel(Reduce op) {
  return [op](const KernelArgs& args) -> absl::Status {
    MG_RETURN_IF_ERROR(CheckArity(args, 1, 2, 1, 1));
    MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
    const TensorType& x = *args.input_types[0];
    const TensorType& y = *args.output_types[0];
    if (x.dtype != y.dtype) return KernelError(args, "the output must have the input's type");
    const int64_t rank = Rank(x);
    Dims axes;
    bool have_axes = false;
    if (args.inputs.size() == 2) {
      MG_ASSIGN_OR_RETURN(axes, ReadInts(args, 1, "axes"));
      have_axes = true;
    } else {
      MG_ASSIGN_OR_RETURN(std::optional<Dims> a, IntsAttr(args, "axes"));
      if (a.has_value()) {
        axes = *a;
        have_axes = true;
      }
    }
    MG_ASSIGN_OR_RETURN(const int64_t noop, IntAttr(args, "noop_with_empty_axes", 0));
    std::vector<bool> reduced(rank, false);
    if (!have_axes || axes.empty()) {
      if (noop != 0) {
        if (ByteSizeOf(x) != ByteSizeOf(y)) return KernelError(args, "a no-op reduction changes the size");
        std::memcpy(args.outputs[0], args.inputs[0], static_cast<size_t>(ByteSizeOf(x)));
        return absl::OkStatus();
      }
      reduced.assign(rank, true);
    } else {
      for (int64_t a : axes) {
        MG_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(args, a, rank, "axis"));
        reduced[axis] = true;
      }
    }
    // The output with kept dims: reduced dims are 1.
    Dims kept(x.dims);
    int64_t group = 1;  // input elements per output element
    for (int64_t d = 0; d < rank; ++d) {
      if (reduced[d]) {
        group *= x.dims[d];
        kept[d] = 1;
      }
    }
    const int64_t n_out = NumElements(kept);
    if (NumElements(y.dims) != n_out) {
      return KernelError(args, absl::StrCat("the output ", graph::TensorTypeToString(y),
                                            " does not hold the reduction of ",
                                            graph::TensorTypeToString(x)));
    }
    Dims out_strides = Strides(kept);
    for (int64_t d = 0; d < rank; ++d) {
      if (reduced[d]) out_strides[d] = 0;
    }
    return DispatchNumeric(args, x.dtype, [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      using C = Compute<T>;
      C init = C(0);
      if (op == Reduce::kMax) init = std::numeric_limits<C>::lowest();
      if (op == Reduce::kMin) init = std::numeric_limits<C>::max();
      if (op == Reduce::kProd) init = C(1);
      // LogSumExp subtracts each group's max first (no overflow): a first pass finds it.
      std::vector<C> group_max;
      if (op == Reduce::kLogSumExp) {
        if constexpr (std::is_integral_v<C>) {
          return UnsupportedDtype(args, x.dtype, "float32, float16, bfloat16, float64");
        }
        group_max.assign(static_cast<size_t>(n_out), -std::numeric_limits<C>::infinity());
        const T* in = reinterpret_cast<const T*>(args.inputs[0]);
        const std::array<Dims, 2> strides{out_strides, Strides(x.dims)};
        ForEachStrided<2>(x.dims, strides,
                          [&](int64_t n, const std::array<int64_t, 2>& base,
                              const std::array<int64_t, 2>& step) {
                            for (int64_t i = 0; i < n; ++i) {
                              C& m = group_max[base[0] + i * step[0]];
                              const C v = Load(in[base[1] + i * step[1]]);
                              m = v > m ? v : m;
                            }
                          });
        for (C& m : group_max) {
          if (std::isinf(static_cast<double>(m))) m = C(0);
        }
      }
      std::vector<C> acc(static_cast<size_t>(n_out), init);
      const T* in = reinterpret_cast<const T*>(args.inputs[0]);
      const std::array<Dims, 2> strides{out_strides, Strides(x.dims)};
      ForEachStrided<2>(x.dims, strides,
                        [&](int64_t n, const std::array<int64_t, 2>& base,
                            const std::array<int64_t, 2>& step) {
                          for (int64_t i = 0; i < n; ++i) {
                            C& a = acc[base[0] + i * step[0]];
                            const C v = Load(in[base[1] + i * step[1]]);
                            switch (op) {
                              case Reduce::kSum:
                              case Reduce::kMean: a = a + v; break;
                              case Reduce::kSumSquare:
                              case Reduce::kL2: a = a + v * v; break;
                              case Reduce::kL1: a = a + AbsOf(v); break;
                              case Reduce::kProd: a = a * v; break;
                              case Reduce::kLogSum: a = a + v; break;
                              case Reduce::kLogSumExp:
                                if constexpr (!std::is_integral_v<C>) {
                                  a = a + std::exp(v - group_max[base[0] + i * step[0]]);
                                }
                                break;
                              case Reduce::kMax:
                                a = (v > a || std::isnan(static_cast<double>(v))) ? v : a;
                                break;
                              case Reduce::kMin:
                                a = (v < a || std::isnan(static_cast<double>(v))) ? v : a;
                                break;
                            }
                          }
                        });
      T* out = reinterpret_cast<T*>(args.outputs[0]);
      for (int64_t i = 0; i < n_out; ++i) {
        C v = acc[i];
        if (op == Reduce::kMean) v = group > 0 ? v / static_cast<C>(group) : v;
        if constexpr (!std::is_integral_v<C>) {
          if (op == Reduce::kL2) v = std::sqrt(v);
          if (op == Reduce::kLogSum) v = std::log(v);
          if (op == Reduce::kLogSumExp) v = group_max[i] + std::log(v);
        } else {
          if (op == Reduce::kL2) v = static_cast<C>(std::sqrt(static_cast<double>(v)));
          if (op == Reduce::kLogSum) v = static_cast<C>(std::log(static_cast<double>(v)));
        }
        out[i] = Store<T>(v);
      }
      return absl::OkStatus();
    });
  };
}

// ArgMax / ArgMin: int64 index of the first (or, select_last_index=1, last) extreme along
// `axis` (default 0); keepdims only changes the output's dims.
Kernel ArgKernel(bool max) {
  return [max](const KernelArgs& args) -> absl::Status {
    MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 1));
    MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
    const TensorType& x = *args.input_types[0];
    MG_ASSIGN_OR_RETURN(const int64_t axis_attr, IntAttr(args, "axis", 0));
    MG_ASSIGN_OR_RETURN(const int64_t last, IntAttr(args, "select_last_index", 0));
    MG_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(args, axis_attr, Rank(x), "axis"));
    const int64_t outer = Product(x.dims, 0, axis);
    const int64_t n = x.dims[axis];
    const int64_t inner = Product(x.dims, axis + 1, x.dims.size());
    const TensorType& y = *args.output_types[0];
    if (y.dtype != graph::DataType::kInt64 || NumElements(y.dims) != outer * inner) {
      return KernelError(args, "the output must be int64 with the reduced dims");
    }
    int64_t* out = reinterpret_cast<int64_t*>(args.outputs[0]);
    return DispatchNumeric(args, x.dtype, [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      using C = Compute<T>;
      const T* in = reinterpret_cast<const T*>(args.inputs[0]);
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          int64_t best = 0;
          C best_value = Load(in[o * n * inner + i]);
          for (int64_t j = 1; j < n; ++j) {
            const C v = Load(in[(o * n + j) * inner + i]);
            const bool better = max ? (last ? v >= best_value : v > best_value)
                                    : (last ? v <= best_value : v < best_value);
            if (better) {
              best = j;
              best_value = v;
            }
          }
          out[o * inner + i] = best;
        }
      }
      return absl::OkStatus();
    });
  };
}

}  // namespace

void AddCpuReduceKernels(KernelMap& kernels) {
  kernels["ReduceProd"] = ReduceKernel(Reduce::kProd);
  kernels["ReduceL1"] = ReduceKernel(Reduce::kL1);
  kernels["ReduceL2"] = ReduceKernel(Reduce::kL2);
  kernels["ReduceLogSum"] = ReduceKernel(Reduce::kLogSum);
  kernels["ReduceLogSumExp"] = ReduceKernel(Reduce::kLogSumExp);
  kernels["ArgMax"] = ArgKernel(/*max=*/true);
  kernels["ArgMin"] = ArgKernel(/*max=*/false);
  kernels["ReduceSum"] = ReduceKernel(Reduce::kSum);
  kernels["ReduceMean"] = ReduceKernel(Reduce::kMean);
  kernels["ReduceMax"] = ReduceKernel(Reduce::kMax);
  kernels["ReduceMin"] = ReduceKernel(Reduce::kMin);
  kernels["ReduceSumSquare"] = ReduceKernel(Reduce::kSumSquare);
}

}  // namespace memonger::alloc
