// Elementwise CPU kernels: unary functions (Relu, Gelu, Sigmoid, Tanh, Exp, Log, Sqrt, ...),
// binary arithmetic with numpy broadcasting or Caffe2's legacy broadcast (Add, Sub, Mul, Div,
// Pow), comparisons and logic, the n-ary Sum/Max/Min/Mean, Where, Cast.
//
// Every kernel computes element by element: output element i is written after the input
// elements it needs have been read, and no later element needs them. So an output may share
// its memory with an input exactly (same address, same dims, same element size: Caffe2's
// in-place `Add(S, bias) -> S`); any other overlap is refused (FailedPrecondition).
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/kernel_util.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

using graph::DataType;
using graph::TensorType;
using namespace kernel_internal;  // NOLINT: the helpers of every kernel file

// Output `out` may share memory with input `in` only as the identity: the same address, the
// same number of elements (so, broadcasting, the same dims) and the same element size.
absl::Status CheckElementwiseAlias(const KernelArgs& args, int in, int out = 0) {
  const TensorType& ti = *args.input_types[in];
  const TensorType& to = *args.output_types[out];
  if (!Overlaps(args.inputs[in], ByteSizeOf(ti), args.outputs[out], ByteSizeOf(to))) {
    return absl::OkStatus();
  }
  const bool identity = args.inputs[in] == args.outputs[out] &&
                        NumElements(ti.dims) == NumElements(to.dims) &&
                        graph::DataTypeSize(ti.dtype) == graph::DataTypeSize(to.dtype);
  if (identity) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      args.op->type, ": output ", out, " ", graph::TensorTypeToString(to),
      " overlaps input ", in, " ", graph::TensorTypeToString(ti),
      " without being the same elements (only an exact in-place write is computed)"));
}

absl::Status CheckAllAliases(const KernelArgs& args) {
  for (int in = 0; in < static_cast<int>(args.inputs.size()); ++in) {
    MG_RETURN_IF_ERROR(CheckElementwiseAlias(args, in));
  }
  return absl::OkStatus();
}

// Input strides in the output's index space: numpy broadcasting, or Caffe2's legacy
// `broadcast=1` (B's dims sit at A's dims [axis, axis + rank_b); default axis: trailing).
absl::StatusOr<Dims> OperandStrides(const KernelArgs& args, int in, const Dims& out_dims) {
  const Dims& dims = args.input_types[in]->dims;
  MG_ASSIGN_OR_RETURN(const int64_t legacy, IntAttr(args, "broadcast", 0));
  if (legacy == 0 || in == 0) {
    if (!BroadcastsTo(dims, out_dims)) {
      return KernelError(args, absl::StrCat("input ", in, " ", graph::DimsToString(dims),
                                            " does not broadcast to the output ",
                                            graph::DimsToString(out_dims)));
    }
    return BroadcastStrides(dims, out_dims);
  }
  const int64_t rank_a = static_cast<int64_t>(out_dims.size());
  const int64_t rank_b = static_cast<int64_t>(dims.size());
  MG_ASSIGN_OR_RETURN(int64_t axis, IntAttr(args, "axis", -1));
  if (axis == -1) axis = rank_a - rank_b;
  if (axis < 0 || axis + rank_b > rank_a) {
    return KernelError(args, absl::StrCat("broadcast=1: axis ", axis, " does not place B inside A"));
  }
  Dims strides(out_dims.size(), 0);
  const Dims own = Strides(dims);
  for (int64_t i = 0; i < rank_b; ++i) {
    if (dims[i] != 1 && dims[i] != out_dims[axis + i]) {
      return KernelError(args, absl::StrCat("broadcast=1: B does not match A at axis ", axis));
    }
    strides[axis + i] = dims[i] == 1 ? 0 : own[i];
  }
  return strides;
}

// ---- unary -----------------------------------------------------------------------------------

// out[i] = Store(fn(Load(in[i]))) for i < n, where `out` is `in` (in place) or does not overlap
// it. Not inlined: inlined into a kernel's type dispatch GCC left Clip's loop scalar (not
// if-converted; a ReLU6 over MobileNetV2's activations took a tenth of its forward). In place
// gets a loop of one pointer: the vectoriser guards a two-pointer loop with an overlap check
// that equal pointers fail.
template <typename T, typename Fn>
__attribute__((noinline)) void MapElements(const T* in, T* out, int64_t n, Fn fn) {
  if (in == out) {
    for (int64_t i = 0; i < n; ++i) out[i] = Store<T>(fn(Load(out[i])));
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = Store<T>(fn(Load(in[i])));
  }
}

// FloatOnly: the function is defined on floating-point types only (Exp, Tanh, ...); else on
// int32 and int64 too (Relu, Neg, Abs).
template <bool FloatOnly, typename Fn>
Kernel UnaryKernel(Fn fn) {
  return [fn](const KernelArgs& args) -> absl::Status {
    MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 1));
    const TensorType& x = *args.input_types[0];
    if (x != *args.output_types[0]) {
      return KernelError(args, absl::StrCat("output ", graph::TensorTypeToString(*args.output_types[0]),
                                            " differs from the input ", graph::TensorTypeToString(x)));
    }
    MG_RETURN_IF_ERROR(CheckElementwiseAlias(args, 0));
    auto run = [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      const T* in = reinterpret_cast<const T*>(args.inputs[0]);
      T* out = reinterpret_cast<T*>(args.outputs[0]);
      MapElements(in, out, NumElements(x.dims), fn);
      return absl::OkStatus();
    };
    if constexpr (FloatOnly) {
      return DispatchFloat(args, x.dtype, run);
    } else {
      return DispatchNumeric(args, x.dtype, run);
    }
  };
}

template <typename C>
C GeluErf(C x) {
  return C(0.5) * x * (C(1) + std::erf(x * C(0.70710678118654752440)));
}
template <typename C>
C GeluTanh(C x) {
  const C inner = C(0.79788456080286535588) * (x + C(0.044715) * x * x * x);
  return C(0.5) * x * (C(1) + std::tanh(inner));
}

// Gelu: ONNX's `approximate` attribute: "none" (default, the erf form) or "tanh".
absl::Status Gelu(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 1));
  MG_ASSIGN_OR_RETURN(std::optional<std::string> approximate, StringAttr(args, "approximate"));
  const bool tanh_form = approximate.has_value() && *approximate == "tanh";
  if (approximate.has_value() && !tanh_form && *approximate != "none") {
    return KernelError(args, absl::StrCat("approximate '", *approximate,
                                          "' must be 'none' or 'tanh'"));
  }
  if (tanh_form) {
    return UnaryKernel<true>([](auto x) { return GeluTanh(x); })(args);
  }
  return UnaryKernel<true>([](auto x) { return GeluErf(x); })(args);
}

// LeakyRelu (alpha, default 0.01), Elu (alpha, 1.0): one attribute each.
template <typename Make>
Kernel AlphaKernel(double default_alpha, Make make) {
  return [default_alpha, make](const KernelArgs& args) -> absl::Status {
    MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 1));
    MG_ASSIGN_OR_RETURN(const double alpha, FloatAttr(args, "alpha", default_alpha));
    return UnaryKernel<true>(make(alpha))(args);
  };
}

// HardSigmoid: max(0, min(1, alpha x + beta)), alpha 0.2, beta 0.5.
absl::Status HardSigmoid(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 1));
  MG_ASSIGN_OR_RETURN(const double alpha, FloatAttr(args, "alpha", 0.2));
  MG_ASSIGN_OR_RETURN(const double beta, FloatAttr(args, "beta", 0.5));
  return UnaryKernel<true>([alpha, beta](auto x) {
    using C = decltype(x);
    const C y = static_cast<C>(alpha) * x + static_cast<C>(beta);
    return y < C(0) ? C(0) : (y > C(1) ? C(1) : y);
  })(args);
}

// Selu: gamma (x > 0 ? x : alpha (e^x - 1)), ONNX's default alpha and gamma.
absl::Status Selu(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 1));
  MG_ASSIGN_OR_RETURN(const double alpha, FloatAttr(args, "alpha", 1.67326319217681884765625));
  MG_ASSIGN_OR_RETURN(const double gamma, FloatAttr(args, "gamma", 1.05070102214813232421875));
  return UnaryKernel<true>([alpha, gamma](auto x) {
    using C = decltype(x);
    return static_cast<C>(gamma) * (x > C(0) ? x : static_cast<C>(alpha) * (std::exp(x) - C(1)));
  })(args);
}

// Clip: bounds from the inputs min, max (ONNX opset 11+, either may be omitted: the importer's
// onnx_input_slots say which) or the attributes min, max (opset 6, Caffe2).
absl::Status Clip(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 3, 1, 1));
  const TensorType& x = *args.input_types[0];
  if (x != *args.output_types[0]) return KernelError(args, "the output must have X's type");
  MG_RETURN_IF_ERROR(CheckAllAliases(args));
  const int min_in = FindInputSlot(args, 1);
  const int max_in = FindInputSlot(args, 2);
  for (int in : {min_in, max_in}) {
    if (in >= 0 && (args.input_types[in]->dtype != x.dtype || NumElements(args.input_types[in]->dims) != 1)) {
      return KernelError(args, "min and max must be one element of X's type");
    }
  }
  MG_ASSIGN_OR_RETURN(const double min_attr, FloatAttr(args, "min", -INFINITY));
  MG_ASSIGN_OR_RETURN(const double max_attr, FloatAttr(args, "max", INFINITY));
  return DispatchNumeric(args, x.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    auto bound = [&](int in, double attr, C fallback) -> C {
      if (in >= 0) return Load(*reinterpret_cast<const T*>(args.inputs[in]));
      if (std::isinf(attr)) return fallback;
      return static_cast<C>(attr);
    };
    const C lo = bound(min_in, min_attr, std::numeric_limits<C>::lowest());
    const C hi = bound(max_in, max_attr, std::numeric_limits<C>::max());
    // Two selects, not nested ones, so that the loop vectorises (max then min; NaN stays NaN).
    MapElements(reinterpret_cast<const T*>(args.inputs[0]), reinterpret_cast<T*>(args.outputs[0]),
                NumElements(x.dims), [lo, hi](C v) {
                  v = v < lo ? lo : v;
                  return v > hi ? hi : v;
                });
    return absl::OkStatus();
  });
}

absl::Status IsNaN(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 1));
  if (args.output_types[0]->dtype != DataType::kBool ||
      args.output_types[0]->dims != args.input_types[0]->dims) {
    return KernelError(args, "the output must be bool with X's dims");
  }
  MG_RETURN_IF_ERROR(CheckElementwiseAlias(args, 0));
  return DispatchFloat(args, args.input_types[0]->dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* in = reinterpret_cast<const T*>(args.inputs[0]);
    bool* out = reinterpret_cast<bool*>(args.outputs[0]);
    const int64_t n = NumElements(args.input_types[0]->dims);
    for (int64_t i = 0; i < n; ++i) out[i] = std::isnan(Load(in[i]));
    return absl::OkStatus();
  });
}

// ---- binary ----------------------------------------------------------------------------------

enum class Arith { kAdd, kSub, kMul, kDiv, kPow };

template <typename C>
C ApplyArith(Arith op, C a, C b) {
  switch (op) {
    case Arith::kAdd: return a + b;
    case Arith::kSub: return a - b;
    case Arith::kMul: return a * b;
    case Arith::kDiv: return a / b;
    case Arith::kPow:
      if constexpr (std::is_integral_v<C>) {
        return static_cast<C>(std::pow(static_cast<double>(a), static_cast<double>(b)));
      } else {
        return std::pow(a, b);
      }
  }
  return a;
}

// Runs `fn(a, b) -> out element` over the broadcast of inputs 0 and 1 (typed In and Out).
template <typename In, typename Out, typename Fn>
absl::Status BinaryLoop(const KernelArgs& args, Fn fn) {
  const Dims& out_dims = args.output_types[0]->dims;
  MG_ASSIGN_OR_RETURN(Dims sa, OperandStrides(args, 0, out_dims));
  MG_ASSIGN_OR_RETURN(Dims sb, OperandStrides(args, 1, out_dims));
  const In* a = reinterpret_cast<const In*>(args.inputs[0]);
  const In* b = reinterpret_cast<const In*>(args.inputs[1]);
  Out* out = reinterpret_cast<Out*>(args.outputs[0]);
  const std::array<Dims, 3> strides{Strides(out_dims), std::move(sa), std::move(sb)};
  ForEachStrided<3>(out_dims, strides,
                    [&](int64_t n, const std::array<int64_t, 3>& base,
                        const std::array<int64_t, 3>& step) {
                      Out* o = out + base[0];
                      const In* pa = a + base[1];
                      const In* pb = b + base[2];
                      for (int64_t i = 0; i < n; ++i) {
                        o[i * step[0]] = fn(pa[i * step[1]], pb[i * step[2]]);
                      }
                    });
  return absl::OkStatus();
}

// Pow(X of type T, Y of type U) -> T: computed in double, converted to T.
absl::Status MixedPow(const KernelArgs& args) {
  return DispatchNumeric(args, args.input_types[0]->dtype, [&](auto base_tag) -> absl::Status {
    using T = typename decltype(base_tag)::type;
    return DispatchNumeric(args, args.input_types[1]->dtype, [&](auto exp_tag) -> absl::Status {
      using U = typename decltype(exp_tag)::type;
      const Dims& out_dims = args.output_types[0]->dims;
      MG_ASSIGN_OR_RETURN(Dims sa, OperandStrides(args, 0, out_dims));
      MG_ASSIGN_OR_RETURN(Dims sb, OperandStrides(args, 1, out_dims));
      const T* a = reinterpret_cast<const T*>(args.inputs[0]);
      const U* b = reinterpret_cast<const U*>(args.inputs[1]);
      T* out = reinterpret_cast<T*>(args.outputs[0]);
      const std::array<Dims, 3> strides{Strides(out_dims), std::move(sa), std::move(sb)};
      ForEachStrided<3>(out_dims, strides,
                        [&](int64_t n, const std::array<int64_t, 3>& base,
                            const std::array<int64_t, 3>& step) {
                          for (int64_t i = 0; i < n; ++i) {
                            const double v = std::pow(static_cast<double>(Load(a[base[1] + i * step[1]])),
                                                      static_cast<double>(Load(b[base[2] + i * step[2]])));
                            out[base[0] + i * step[0]] = Store<T>(static_cast<Compute<T>>(v));
                          }
                        });
      return absl::OkStatus();
    });
  });
}

Kernel ArithKernel(Arith op) {
  return [op](const KernelArgs& args) -> absl::Status {
    MG_RETURN_IF_ERROR(CheckArity(args, 2, 2, 1, 1));
    const DataType dtype = args.input_types[0]->dtype;
    if (op != Arith::kPow && args.input_types[1]->dtype != dtype) {
      return KernelError(args, "A and B must have one element type");
    }
    if (args.output_types[0]->dtype != dtype) {
      return KernelError(args, "the output must have the inputs' element type");
    }
    MG_RETURN_IF_ERROR(CheckAllAliases(args));
    if (op == Arith::kPow && args.input_types[1]->dtype != dtype) {
      // ONNX Pow's exponent may have another type: each pair goes through double.
      return MixedPow(args);
    }
    return DispatchNumeric(args, dtype, [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      using C = Compute<T>;
      if constexpr (std::is_integral_v<C>) {
        if (op == Arith::kDiv) {
          // Integer division by zero has no answer; refuse it rather than trap.
          const T* b = reinterpret_cast<const T*>(args.inputs[1]);
          const int64_t n = NumElements(args.input_types[1]->dims);
          for (int64_t i = 0; i < n; ++i) {
            if (b[i] == 0) return KernelError(args, "integer division by zero");
          }
        }
      }
      return BinaryLoop<T, T>(args, [op](const T& a, const T& b) {
        return Store<T>(ApplyArith<C>(op, Load(a), Load(b)));
      });
    });
  };
}

// Mod(A, B) -> C (ONNX, numpy broadcasting): fmod=0 (the default) takes the divisor's sign as
// Python's % does, fmod=1 the dividend's as C's fmod does. Integers either way; floating-point
// types only with fmod=1 (ONNX leaves fmod=0 undefined for them). Integer division by zero is an
// error, not a trap.
absl::Status Mod(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 2, 2, 1, 1));
  const DataType dtype = args.input_types[0]->dtype;
  if (args.input_types[1]->dtype != dtype || args.output_types[0]->dtype != dtype) {
    return KernelError(args, "A, B and the output must have one element type");
  }
  MG_ASSIGN_OR_RETURN(const int64_t fmod, IntAttr(args, "fmod", 0));
  if (fmod != 0 && fmod != 1) return KernelError(args, "fmod must be 0 or 1");
  MG_RETURN_IF_ERROR(CheckAllAliases(args));
  return DispatchNumeric(args, dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    if constexpr (std::is_integral_v<C>) {
      const T* b = reinterpret_cast<const T*>(args.inputs[1]);
      const int64_t n = NumElements(args.input_types[1]->dims);
      for (int64_t i = 0; i < n; ++i) {
        if (b[i] == 0) return KernelError(args, "integer division by zero");
      }
      return BinaryLoop<T, T>(args, [=](const T& a, const T& d) -> T {
        // a % -1 is 0; computing it would overflow for the type's minimum.
        if constexpr (std::is_signed_v<T>) {
          if (d == T(-1)) return T(0);
        }
        T r = static_cast<T>(a % d);
        if constexpr (std::is_signed_v<T>) {
          if (fmod == 0 && r != 0 && ((r < 0) != (d < 0))) r = static_cast<T>(r + d);
        }
        return r;
      });
    } else {
      if (fmod == 0) {
        return KernelError(args, "a floating-point Mod needs fmod=1 (ONNX defines no other)");
      }
      return BinaryLoop<T, T>(args, [](const T& a, const T& d) {
        return Store<T>(std::fmod(Load(a), Load(d)));
      });
    }
  });
}

// PRelu(X, slope) -> Y = X where X >= 0, else slope * X, the slope broadcast to X (nn.PReLU
// exports one slope per channel, shaped [C, 1, 1]).
absl::Status PRelu(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 2, 2, 1, 1));
  const DataType dtype = args.input_types[0]->dtype;
  if (args.input_types[1]->dtype != dtype || args.output_types[0]->dtype != dtype) {
    return KernelError(args, "X, slope and Y must have one element type");
  }
  // Opsets before 7 give one slope per channel as [C] (PyTorch's own reading): as [C, 1, ...].
  const graph::TensorType& x = *args.input_types[0];
  const graph::TensorType& slope = *args.input_types[1];
  graph::TensorType per_channel = slope;
  KernelArgs channel_args = args;
  if (!BroadcastsTo(slope.dims, x.dims) && slope.dims.size() == 1 && x.dims.size() >= 2 &&
      slope.dims[0] == x.dims[1]) {
    per_channel.dims.assign(x.dims.size() - 1, 1);
    per_channel.dims[0] = slope.dims[0];
    channel_args.input_types[1] = &per_channel;
  }
  MG_RETURN_IF_ERROR(CheckAllAliases(channel_args));
  return DispatchNumeric(channel_args, dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    return BinaryLoop<T, T>(channel_args, [](const T& x, const T& slope) {
      const auto v = Load(x);
      return v >= 0 ? x : Store<T>(Load(slope) * v);
    });
  });
}

enum class Compare { kEqual, kLess, kGreater, kLessOrEqual, kGreaterOrEqual };

Kernel CompareKernel(Compare op) {
  return [op](const KernelArgs& args) -> absl::Status {
    MG_RETURN_IF_ERROR(CheckArity(args, 2, 2, 1, 1));
    const DataType dtype = args.input_types[0]->dtype;
    if (args.input_types[1]->dtype != dtype || args.output_types[0]->dtype != DataType::kBool) {
      return KernelError(args, "A and B must have one element type and the output be bool");
    }
    MG_RETURN_IF_ERROR(CheckAllAliases(args));
    return DispatchAny(args, dtype, [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      return BinaryLoop<T, bool>(args, [op](const T& a_raw, const T& b_raw) {
        const auto a = Load(a_raw);
        const auto b = Load(b_raw);
        switch (op) {
          case Compare::kEqual: return a == b;
          case Compare::kLess: return a < b;
          case Compare::kGreater: return a > b;
          case Compare::kLessOrEqual: return a <= b;
          case Compare::kGreaterOrEqual: return a >= b;
        }
        return false;
      });
    });
  };
}

enum class Logic { kAnd, kOr, kXor };

Kernel LogicKernel(Logic op) {
  return [op](const KernelArgs& args) -> absl::Status {
    MG_RETURN_IF_ERROR(CheckArity(args, 2, 2, 1, 1));
    for (const TensorType* t : {args.input_types[0], args.input_types[1], args.output_types[0]}) {
      if (t->dtype != DataType::kBool) return KernelError(args, "inputs and output must be bool");
    }
    MG_RETURN_IF_ERROR(CheckAllAliases(args));
    return BinaryLoop<bool, bool>(args, [op](bool a, bool b) {
      switch (op) {
        case Logic::kAnd: return a && b;
        case Logic::kOr: return a || b;
        case Logic::kXor: return a != b;
      }
      return false;
    });
  };
}

absl::Status Not(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 1));
  if (args.input_types[0]->dtype != DataType::kBool || *args.output_types[0] != *args.input_types[0]) {
    return KernelError(args, "input and output must be bool of one shape");
  }
  MG_RETURN_IF_ERROR(CheckElementwiseAlias(args, 0));
  const bool* in = reinterpret_cast<const bool*>(args.inputs[0]);
  bool* out = reinterpret_cast<bool*>(args.outputs[0]);
  const int64_t n = NumElements(args.input_types[0]->dims);
  for (int64_t i = 0; i < n; ++i) out[i] = !in[i];
  return absl::OkStatus();
}

// ---- n-ary -----------------------------------------------------------------------------------

enum class Nary { kSum, kMax, kMin, kMean };

// acc = in0 (broadcast), then acc = acc (op) in_k for k = 1, ... in a compute-type buffer; the
// output is written only at the end, so it may be any input exactly (in place).
Kernel NaryKernel(Nary op) {
  return [op](const KernelArgs& args) -> absl::Status {
    MG_RETURN_IF_ERROR(CheckArity(args, 1, -1, 1, 1));
    const DataType dtype = args.output_types[0]->dtype;
    for (const TensorType* t : args.input_types) {
      if (t->dtype != dtype) return KernelError(args, "every input must have the output's type");
    }
    MG_RETURN_IF_ERROR(CheckAllAliases(args));
    return DispatchNumeric(args, dtype, [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      using C = Compute<T>;
      const Dims& out_dims = args.output_types[0]->dims;
      T* out = reinterpret_cast<T*>(args.outputs[0]);
      const int n_in = static_cast<int>(args.inputs.size());
      // Half types accumulate in a float32 buffer so that the sum is rounded once.
      const int64_t count = NumElements(out_dims);
      std::vector<C> acc(static_cast<size_t>(count));
      for (int in = 0; in < n_in; ++in) {
        MG_ASSIGN_OR_RETURN(Dims s, OperandStrides(args, in, out_dims));
        const T* x = reinterpret_cast<const T*>(args.inputs[in]);
        const std::array<Dims, 2> strides{Strides(out_dims), std::move(s)};
        ForEachStrided<2>(out_dims, strides,
                          [&](int64_t n, const std::array<int64_t, 2>& base,
                              const std::array<int64_t, 2>& step) {
                            C* o = acc.data() + base[0];
                            const T* p = x + base[1];
                            for (int64_t i = 0; i < n; ++i) {
                              const C v = Load(p[i * step[1]]);
                              C& a = o[i * step[0]];
                              if (in == 0) {
                                a = v;
                              } else if (op == Nary::kMax) {
                                a = (v > a || std::isnan(static_cast<double>(v))) ? v : a;
                              } else if (op == Nary::kMin) {
                                a = (v < a || std::isnan(static_cast<double>(v))) ? v : a;
                              } else {
                                a = a + v;
                              }
                            }
                          });
      }
      for (int64_t i = 0; i < count; ++i) {
        C v = acc[i];
        if (op == Nary::kMean) v = v / static_cast<C>(n_in);
        out[i] = Store<T>(v);
      }
      return absl::OkStatus();
    });
  };
}

// ---- Where, Cast -----------------------------------------------------------------------------

absl::Status Where(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 3, 3, 1, 1));
  const DataType dtype = args.output_types[0]->dtype;
  if (args.input_types[0]->dtype != DataType::kBool || args.input_types[1]->dtype != dtype ||
      args.input_types[2]->dtype != dtype) {
    return KernelError(args, "condition must be bool and X, Y of the output's element type");
  }
  MG_RETURN_IF_ERROR(CheckAllAliases(args));
  const Dims& out_dims = args.output_types[0]->dims;
  std::array<Dims, 4> strides;
  strides[0] = Strides(out_dims);
  for (int in = 0; in < 3; ++in) {
    if (!BroadcastsTo(args.input_types[in]->dims, out_dims)) {
      return KernelError(args, absl::StrCat("input ", in, " does not broadcast to the output"));
    }
    strides[in + 1] = BroadcastStrides(args.input_types[in]->dims, out_dims);
  }
  return DispatchAny(args, dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const bool* c = reinterpret_cast<const bool*>(args.inputs[0]);
    const T* x = reinterpret_cast<const T*>(args.inputs[1]);
    const T* y = reinterpret_cast<const T*>(args.inputs[2]);
    T* out = reinterpret_cast<T*>(args.outputs[0]);
    ForEachStrided<4>(out_dims, strides,
                      [&](int64_t n, const std::array<int64_t, 4>& base,
                          const std::array<int64_t, 4>& step) {
                        for (int64_t i = 0; i < n; ++i) {
                          out[base[0] + i * step[0]] = c[base[1] + i * step[1]]
                                                           ? x[base[2] + i * step[2]]
                                                           : y[base[3] + i * step[3]];
                        }
                      });
    return absl::OkStatus();
  });
}

// One element from type From to type To: through double (exact for every type here except
// int64 magnitudes above 2^53, which go through their own integer path). Float to integer
// truncates toward zero; NaN gives 0 and out-of-range values saturate (C++ leaves those
// undefined; ONNX leaves them unspecified). Anything to bool is "!= 0".
template <typename To, typename From>
To ConvertElement(const From& from) {
  if constexpr (std::is_integral_v<From> && std::is_integral_v<To>) {
    if constexpr (std::is_same_v<To, bool>) {
      return from != 0;
    } else {
      return static_cast<To>(from);  // two's complement wrap, as numpy's astype
    }
  } else {
    const double v = static_cast<double>(Load(from));
    if constexpr (std::is_same_v<To, bool>) {
      return v != 0;
    } else if constexpr (std::is_integral_v<To>) {
      if (std::isnan(v)) return To(0);
      if (v <= static_cast<double>(std::numeric_limits<To>::min())) {
        return std::numeric_limits<To>::min();
      }
      if (v >= static_cast<double>(std::numeric_limits<To>::max())) {
        return std::numeric_limits<To>::max();
      }
      return static_cast<To>(v);
    } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
      // Via float32: double -> float32 -> half rounds twice, but every source type here is
      // exact in float32 except float64 and large integers (a documented double rounding).
      return To::FromFloat(static_cast<float>(v));
    } else {
      return static_cast<To>(v);
    }
  }
}

absl::Status Cast(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 1));
  const TensorType& x = *args.input_types[0];
  const TensorType& y = *args.output_types[0];
  if (x.dims != y.dims) return KernelError(args, "the output must have the input's dims");
  MG_RETURN_IF_ERROR(CheckElementwiseAlias(args, 0));
  const int64_t n = NumElements(x.dims);
  if (x.dtype == y.dtype) {
    if (args.inputs[0] != args.outputs[0]) std::memcpy(args.outputs[0], args.inputs[0], ByteSizeOf(x));
    return absl::OkStatus();
  }
  return DispatchAny(args, x.dtype, [&](auto from_tag) -> absl::Status {
    using From = typename decltype(from_tag)::type;
    return DispatchAny(args, y.dtype, [&](auto to_tag) -> absl::Status {
      using To = typename decltype(to_tag)::type;
      const From* in = reinterpret_cast<const From*>(args.inputs[0]);
      To* out = reinterpret_cast<To*>(args.outputs[0]);
      for (int64_t i = 0; i < n; ++i) out[i] = ConvertElement<To, From>(in[i]);
      return absl::OkStatus();
    });
  });
}

// CastLike(X, like): Cast to like's element type (the output type says which).
absl::Status CastLike(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 2, 2, 1, 1));
  KernelArgs cast = args;
  cast.inputs.resize(1);
  cast.input_types.resize(1);
  return Cast(cast);
}

}  // namespace

void AddCpuElementwiseKernels(KernelMap& kernels) {
  kernels["Relu"] = UnaryKernel<false>([](auto x) { return x > 0 ? x : decltype(x)(0); });
  kernels["Neg"] = UnaryKernel<false>([](auto x) { return -x; });
  kernels["Abs"] = UnaryKernel<false>([](auto x) {
    if constexpr (std::is_unsigned_v<decltype(x)>) {
      return x;
    } else {
      return x < 0 ? -x : x;
    }
  });
  kernels["Sign"] = UnaryKernel<false>([](auto x) {
    using C = decltype(x);
    return x > 0 ? C(1) : (x < 0 ? static_cast<C>(-1) : C(0));
  });
  kernels["Round"] = UnaryKernel<true>([](auto x) { return std::nearbyint(x); });  // ties to even
  kernels["Tan"] = UnaryKernel<true>([](auto x) { return std::tan(x); });
  kernels["Asin"] = UnaryKernel<true>([](auto x) { return std::asin(x); });
  kernels["Acos"] = UnaryKernel<true>([](auto x) { return std::acos(x); });
  kernels["Atan"] = UnaryKernel<true>([](auto x) { return std::atan(x); });
  kernels["Sinh"] = UnaryKernel<true>([](auto x) { return std::sinh(x); });
  kernels["Cosh"] = UnaryKernel<true>([](auto x) { return std::cosh(x); });
  kernels["Asinh"] = UnaryKernel<true>([](auto x) { return std::asinh(x); });
  kernels["Acosh"] = UnaryKernel<true>([](auto x) { return std::acosh(x); });
  kernels["Atanh"] = UnaryKernel<true>([](auto x) { return std::atanh(x); });
  kernels["PRelu"] = PRelu;
  kernels["ThresholdedRelu"] = AlphaKernel(1.0, [](double alpha) {
    return [alpha](auto x) { return x > static_cast<decltype(x)>(alpha) ? x : decltype(x)(0); };
  });
  kernels["HardSigmoid"] = HardSigmoid;
  // HardSwish(x) = x * HardSigmoid(x) with ONNX's alpha 1/6 and beta 0.5 (MobileNetV3).
  kernels["HardSwish"] = UnaryKernel<true>([](auto x) {
    using C = decltype(x);
    const C y = x / C(6) + C(0.5);
    return x * (y < C(0) ? C(0) : (y > C(1) ? C(1) : y));
  });
  kernels["Selu"] = Selu;
  kernels["Clip"] = Clip;
  kernels["CastLike"] = CastLike;
  kernels["IsNaN"] = IsNaN;
  kernels["Sigmoid"] = UnaryKernel<true>([](auto x) {
    // Both branches keep exp's argument <= 0, so neither overflows.
    using C = decltype(x);
    if (x >= 0) return C(1) / (C(1) + std::exp(-x));
    const C e = std::exp(x);
    return e / (C(1) + e);
  });
  kernels["Tanh"] = UnaryKernel<true>([](auto x) { return std::tanh(x); });
  kernels["Exp"] = UnaryKernel<true>([](auto x) { return std::exp(x); });
  kernels["Log"] = UnaryKernel<true>([](auto x) { return std::log(x); });
  kernels["Sqrt"] = UnaryKernel<true>([](auto x) { return std::sqrt(x); });
  kernels["Erf"] = UnaryKernel<true>([](auto x) { return std::erf(x); });
  kernels["Reciprocal"] = UnaryKernel<true>([](auto x) { return decltype(x)(1) / x; });
  kernels["Floor"] = UnaryKernel<true>([](auto x) { return std::floor(x); });
  kernels["Ceil"] = UnaryKernel<true>([](auto x) { return std::ceil(x); });
  kernels["Sin"] = UnaryKernel<true>([](auto x) { return std::sin(x); });
  kernels["Cos"] = UnaryKernel<true>([](auto x) { return std::cos(x); });
  kernels["Softsign"] = UnaryKernel<true>([](auto x) { return x / (decltype(x)(1) + std::abs(x)); });
  kernels["Softplus"] = UnaryKernel<true>([](auto x) {
    // log(1 + e^x) = max(x, 0) + log1p(e^-|x|), without overflow for large x.
    using C = decltype(x);
    return (x > 0 ? x : C(0)) + std::log1p(std::exp(-std::abs(x)));
  });
  kernels["Gelu"] = Gelu;
  kernels["LeakyRelu"] = AlphaKernel(0.01, [](double alpha) {
    return [alpha](auto x) { return x >= 0 ? x : static_cast<decltype(x)>(alpha) * x; };
  });
  kernels["Elu"] = AlphaKernel(1.0, [](double alpha) {
    return [alpha](auto x) {
      using C = decltype(x);
      return x >= 0 ? x : static_cast<C>(alpha) * (std::exp(x) - C(1));
    };
  });
  // Celu(x) = max(0, x) + min(0, alpha (exp(x / alpha) - 1)); opset 12, alpha 1 by default.
  kernels["Celu"] = AlphaKernel(1.0, [](double alpha) {
    return [alpha](auto x) {
      using C = decltype(x);
      const C a = static_cast<C>(alpha);
      return x >= 0 ? x : a * (std::exp(x / a) - C(1));
    };
  });
  kernels["Add"] = ArithKernel(Arith::kAdd);
  kernels["Sub"] = ArithKernel(Arith::kSub);
  kernels["Mul"] = ArithKernel(Arith::kMul);
  kernels["Div"] = ArithKernel(Arith::kDiv);
  kernels["Pow"] = ArithKernel(Arith::kPow);
  kernels["Mod"] = Mod;
  kernels["Equal"] = CompareKernel(Compare::kEqual);
  kernels["Less"] = CompareKernel(Compare::kLess);
  kernels["Greater"] = CompareKernel(Compare::kGreater);
  kernels["LessOrEqual"] = CompareKernel(Compare::kLessOrEqual);
  kernels["GreaterOrEqual"] = CompareKernel(Compare::kGreaterOrEqual);
  kernels["And"] = LogicKernel(Logic::kAnd);
  kernels["Or"] = LogicKernel(Logic::kOr);
  kernels["Xor"] = LogicKernel(Logic::kXor);
  kernels["Not"] = Not;
  kernels["Sum"] = NaryKernel(Nary::kSum);
  kernels["Max"] = NaryKernel(Nary::kMax);
  kernels["Min"] = NaryKernel(Nary::kMin);
  kernels["Mean"] = NaryKernel(Nary::kMean);
  kernels["Where"] = Where;
  kernels["Cast"] = Cast;
}

}  // namespace memonger::alloc
