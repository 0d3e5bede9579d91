// Backward CPU kernels of the dense and pointwise ops (the gradient ops graph/gradient_builder.h
// emits for them; shapes and input order in graph/schemas_gradient.cc):
//   ReluGradient(Y, dY) -> dX                dX = dY where Y > 0, else 0
//   SigmoidGradient(Y, dY) -> dX             dX = dY * Y * (1 - Y)
//   TanhGradient(Y, dY) -> dX                dX = dY * (1 - Y^2)
//   GeluGradient(dY, X) -> dX                dX = dY * gelu'(X) (erf form, or `approximate`
//                                            = "tanh": the derivative of the tanh form)
//   SoftmaxGradient(Y, dY) -> dX             dX = Y * (dY - sum(dY * Y)) along `axis`
//   FCGradient(X, W, dY) -> dW, db, [dX]     dW = dY^T X, db = sum_rows dY, dX = dY W
//   FCTransposedGradient                     the same with W stored [K, N]
//   MatMulGradient(dY, A, B) -> dA, dB       ONNX/numpy MatMul with broadcast batch dims
//                                            (summed away for the operand that broadcast),
//                                            Caffe2's trans_a/trans_b and axis_a/axis_b
//   LayerNormalizationGradient(dY, X, Scale, Mean, InvStdDev) -> dX, dScale, [dB]
//
// Storage float32, float16 or bfloat16 (the pointwise ones also float64); every product and
// sum in float32 (float64 for float64 data), rounded once into the output. Products go through
// GemmCpu, whose sums run over k in ascending order, and every other reduction runs in a fixed
// order, so results do not depend on where the plan put the values.
//
// Aliasing: the pointwise gradients may write dX over dY exactly (same address); every other
// overlap of an output with an input is refused (FailedPrecondition).
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/gemm_cpu.h"
#include "kernels/cpu/kernel_float_io.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/kernel_util.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

using graph::DataType;
using graph::TensorType;
using namespace kernel_internal;  // NOLINT: the helpers of every kernel file

// dX may be dY itself (input `dy`), element by element; no other overlap.
absl::Status CheckPointwiseAlias(const KernelArgs& args, int dy) {
  for (int in = 0; in < static_cast<int>(args.inputs.size()); ++in) {
    if (in == dy && args.inputs[in] == args.outputs[0] &&
        ByteSizeOf(*args.input_types[in]) == ByteSizeOf(*args.output_types[0])) {
      continue;
    }
    MG_RETURN_IF_ERROR(CheckNoOverlap(args, in, 0));
  }
  return absl::OkStatus();
}

// The two inputs and the output have one type.
absl::Status CheckSameTypes(const KernelArgs& args) {
  const TensorType& t = *args.input_types[0];
  if (*args.input_types[1] != t || *args.output_types[0] != t) {
    return KernelError(args, absl::StrCat("inputs and output must have one type; got ",
                                          graph::TensorTypeToString(t), ", ",
                                          graph::TensorTypeToString(*args.input_types[1]), " -> ",
                                          graph::TensorTypeToString(*args.output_types[0])));
  }
  return absl::OkStatus();
}

// ---- pointwise -------------------------------------------------------------------------------

// <Op>Gradient(Y, dY) -> dX of a pointwise op whose derivative is a function of its output:
// dX[i] = grad(Y[i], dY[i]), `grad` taking and returning the compute type.
template <typename Grad>
Kernel OutputPointwiseGradient(Grad grad) {
  return [grad](const KernelArgs& args) -> absl::Status {
    MG_RETURN_IF_ERROR(CheckArity(args, 2, 2, 1, 1));
    MG_RETURN_IF_ERROR(CheckSameTypes(args));
    MG_RETURN_IF_ERROR(CheckPointwiseAlias(args, /*dy=*/1));
    return DispatchFloat(args, args.input_types[0]->dtype, [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      const T* y = reinterpret_cast<const T*>(args.inputs[0]);
      const T* dy = reinterpret_cast<const T*>(args.inputs[1]);
      T* dx = reinterpret_cast<T*>(args.outputs[0]);
      const int64_t n = NumElements(args.input_types[0]->dims);
      for (int64_t i = 0; i < n; ++i) dx[i] = Store<T>(grad(Load(y[i]), Load(dy[i])));
      return absl::OkStatus();
    });
  };
}

template <typename C>
C GeluErfDerivative(C x) {
  // d/dx [x Phi(x)] = Phi(x) + x phi(x).
  const C phi = std::exp(C(-0.5) * x * x) * C(0.39894228040143267794);  // 1 / sqrt(2 pi)
  return C(0.5) * (C(1) + std::erf(x * C(0.70710678118654752440))) + x * phi;
}
template <typename C>
C GeluTanhDerivative(C x) {
  const C c = C(0.79788456080286535588);  // sqrt(2 / pi)
  const C t = std::tanh(c * (x + C(0.044715) * x * x * x));
  return C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * c * (C(1) + C(3 * 0.044715) * x * x);
}

absl::Status GeluGradient(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 2, 2, 1, 1));
  MG_RETURN_IF_ERROR(CheckSameTypes(args));
  MG_RETURN_IF_ERROR(CheckPointwiseAlias(args, /*dy=*/0));
  MG_ASSIGN_OR_RETURN(std::optional<std::string> approximate, StringAttr(args, "approximate"));
  const bool tanh_form = approximate.has_value() && *approximate == "tanh";
  if (approximate.has_value() && !tanh_form && *approximate != "none") {
    return KernelError(args, absl::StrCat("approximate '", *approximate,
                                          "' must be 'none' or 'tanh'"));
  }
  return DispatchFloat(args, args.input_types[0]->dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* dy = reinterpret_cast<const T*>(args.inputs[0]);
    const T* x = reinterpret_cast<const T*>(args.inputs[1]);
    T* dx = reinterpret_cast<T*>(args.outputs[0]);
    const int64_t n = NumElements(args.input_types[0]->dims);
    for (int64_t i = 0; i < n; ++i) {
      const auto v = Load(x[i]);
      dx[i] = Store<T>(Load(dy[i]) * (tanh_form ? GeluTanhDerivative(v) : GeluErfDerivative(v)));
    }
    return absl::OkStatus();
  });
}

// SoftmaxGradient(Y, dY): the forward op's axis (default -1; see kernels_cpu_nn.cc).
absl::Status SoftmaxGradient(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 2, 2, 1, 1));
  MG_RETURN_IF_ERROR(CheckSameTypes(args));
  // Each row is read completely before it is written: dX may be dY exactly.
  MG_RETURN_IF_ERROR(CheckPointwiseAlias(args, /*dy=*/1));
  const TensorType& y = *args.input_types[0];
  if (y.dims.empty()) return KernelError(args, "Y must have rank >= 1");
  MG_ASSIGN_OR_RETURN(const int64_t axis_attr, IntAttr(args, "axis", -1));
  MG_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(args, axis_attr, Rank(y), "axis"));
  const int64_t outer = Product(y.dims, 0, axis);
  const int64_t n = y.dims[axis];
  const int64_t inner = Product(y.dims, axis + 1, y.dims.size());
  return DispatchFloat(args, y.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    const T* py = reinterpret_cast<const T*>(args.inputs[0]);
    const T* pdy = reinterpret_cast<const T*>(args.inputs[1]);
    T* pdx = reinterpret_cast<T*>(args.outputs[0]);
    std::vector<C> yr(static_cast<size_t>(n)), dyr(static_cast<size_t>(n));
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t base = o * n * inner + i;
        C dot = 0;
        for (int64_t j = 0; j < n; ++j) {
          yr[j] = Load(py[base + j * inner]);
          dyr[j] = Load(pdy[base + j * inner]);
          dot += yr[j] * dyr[j];
        }
        for (int64_t j = 0; j < n; ++j) pdx[base + j * inner] = Store<T>(yr[j] * (dyr[j] - dot));
      }
    }
    return absl::OkStatus();
  });
}

// ---- products --------------------------------------------------------------------------------

bool IsGemmType(DataType d) {
  return d == DataType::kFloat32 || d == DataType::kFloat16 || d == DataType::kBFloat16;
}

absl::Status CheckGemmInputs(const KernelArgs& args) {
  for (const TensorType* t : args.input_types) {
    if (!IsGemmType(t->dtype)) return UnsupportedDtype(args, t->dtype, "float32, float16, bfloat16");
  }
  for (const TensorType* t : args.output_types) {
    if (!IsGemmType(t->dtype)) return UnsupportedDtype(args, t->dtype, "float32, float16, bfloat16");
  }
  return CheckNoOverlapAll(args);
}

// FCGradient(X, W, dY) -> dW, db, [dX]; `transposed`: FCTransposedGradient (W is [K, N]).
Kernel FcGradientKernel(bool transposed) {
  return [transposed](const KernelArgs& args) -> absl::Status {
    MG_RETURN_IF_ERROR(CheckArity(args, 3, 3, 2, 3));
    MG_RETURN_IF_ERROR(CheckGemmInputs(args));
    const TensorType& tx = *args.input_types[0];
    const TensorType& tw = *args.input_types[1];
    const TensorType& tdy = *args.input_types[2];
    MG_ASSIGN_OR_RETURN(const FcDims dims, ResolveFcDims(args, tx, tw, transposed));
    const int64_t m = dims.m, k = dims.k, n = dims.n;
    if (NumElements(tdy.dims) != m * n) {
      return KernelError(args, absl::StrCat("X ", graph::TensorTypeToString(tx), ", W ",
                                            graph::TensorTypeToString(tw), " and dY ",
                                            graph::TensorTypeToString(tdy), " do not agree"));
    }
    if (*args.output_types[0] != tw || NumElements(args.output_types[1]->dims) != n ||
        (args.outputs.size() == 3 && *args.output_types[2] != tx)) {
      return KernelError(args, "dW must have W's type, db hold N elements, dX have X's type");
    }
    const GemmOperand dy{tdy.dtype, args.inputs[2], n, false};
    const GemmOperand dy_t{tdy.dtype, args.inputs[2], n, true};
    MG_ASSIGN_OR_RETURN(FloatStorer store_dw, StorerFor(args, *args.output_types[0]));
    std::vector<float> row;
    if (!transposed) {
      // dW [N, K] = dY^T [N, M] x X [M, K].
      MG_RETURN_IF_ERROR(GemmCpu(n, k, m, dy_t, GemmOperand{tx.dtype, args.inputs[0], k, false},
                                 [&](int64_t r, int64_t c, int64_t count, const float* acc) {
                                   store_dw.run(args.outputs[0], r * k + c, count, acc);
                                 }));
    } else {
      // dW [K, N] = X^T [K, M] x dY [M, N].
      MG_RETURN_IF_ERROR(GemmCpu(k, n, m, GemmOperand{tx.dtype, args.inputs[0], k, true}, dy,
                                 [&](int64_t r, int64_t c, int64_t count, const float* acc) {
                                   store_dw.run(args.outputs[0], r * n + c, count, acc);
                                 }));
    }
    // db [N]: the column sums of dY, rows in order.
    MG_ASSIGN_OR_RETURN(FloatLoader load_dy, LoaderFor(args, tdy));
    std::vector<float> db(static_cast<size_t>(n), 0.0f);
    for (int64_t r = 0; r < m; ++r) {
      row = load_dy.Run(args.inputs[2], r * n, n);
      for (int64_t j = 0; j < n; ++j) db[j] += row[j];
    }
    MG_RETURN_IF_ERROR(StoreOutput(args, 1, db));
    if (args.outputs.size() == 3) {
      // dX [M, K] = dY [M, N] x W [N, K] (FCTransposed: x W^T with W [K, N]).
      MG_ASSIGN_OR_RETURN(FloatStorer store_dx, StorerFor(args, *args.output_types[2]));
      const GemmOperand w{tw.dtype, args.inputs[1], transposed ? n : k, transposed};
      MG_RETURN_IF_ERROR(GemmCpu(m, k, n, dy, w,
                                 [&](int64_t r, int64_t c, int64_t count, const float* acc) {
                                   store_dx.run(args.outputs[2], r * k + c, count, acc);
                                 }));
    }
    return absl::OkStatus();
  };
}

// MatMulGradient(dY, A, B) -> dA, dB. Geometry as the forward kernel (kernels_cpu_matmul.cc):
// operands flattened at axis_a/axis_b when given, a 1-D A a row and a 1-D B a column, batch
// dims broadcast. Per output batch, in order, the contributions
//   dop(A) = dC op(B)^T,  dop(B) = op(A)^T dC
// are added into float32 accumulators of the operands' sizes (an operand that broadcast over
// a batch dim receives the sum over it), which are rounded once at the end.
absl::Status MatMulGradient(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 3, 3, 2, 2));
  MG_RETURN_IF_ERROR(CheckGemmInputs(args));
  const TensorType& tdy = *args.input_types[0];
  const TensorType& ta = *args.input_types[1];
  const TensorType& tb = *args.input_types[2];
  if (*args.output_types[0] != ta || *args.output_types[1] != tb) {
    return KernelError(args, "dA and dB must have the types of A and B");
  }
  MG_ASSIGN_OR_RETURN(const MatMulGeometry g, ResolveMatMulGeometry(args, ta, tb));
  const bool trans_a = g.trans_a, trans_b = g.trans_b;
  const int64_t rows_a = g.rows_a(), cols_a = g.cols_a();
  const int64_t rows_b = g.rows_b(), cols_b = g.cols_b();
  const int64_t m = g.m, k = g.k, n = g.n;
  const Dims& batch = g.batch;
  const size_t batch_rank = batch.size();
  const int64_t batches = NumElements(batch);
  if (NumElements(tdy.dims) != batches * m * n) {
    return KernelError(args, absl::StrCat("dY ", graph::TensorTypeToString(tdy),
                                          " does not hold ", batches, " batches of ", m, "x", n));
  }
  const Dims& stride_a = g.stride_a;
  const Dims& stride_b = g.stride_b;
  const int64_t matrix_a = rows_a * cols_a, matrix_b = rows_b * cols_b;
  const int64_t elem_a = graph::DataTypeSize(ta.dtype), elem_b = graph::DataTypeSize(tb.dtype);
  const int64_t elem_dy = graph::DataTypeSize(tdy.dtype);
  std::vector<float> da_acc(static_cast<size_t>(NumElements(ta.dims)), 0.0f);
  std::vector<float> db_acc(static_cast<size_t>(NumElements(tb.dims)), 0.0f);
  Dims index(batch_rank, 0);
  for (int64_t bi = 0; bi < batches; ++bi) {
    int64_t off_a = 0, off_b = 0;
    for (size_t d = 0; d < batch_rank; ++d) {
      off_a += index[d] * stride_a[d];
      off_b += index[d] * stride_b[d];
    }
    const std::byte* pa = args.inputs[1] + off_a * matrix_a * elem_a;
    const std::byte* pb = args.inputs[2] + off_b * matrix_b * elem_b;
    const std::byte* pdy = args.inputs[0] + bi * m * n * elem_dy;
    float* da = da_acc.data() + off_a * matrix_a;
    float* db = db_acc.data() + off_b * matrix_b;
    auto add_to = [](float* acc, int64_t ld) {
      return [acc, ld](int64_t r, int64_t c, int64_t count, const float* v) {
        float* dst = acc + r * ld + c;
        for (int64_t j = 0; j < count; ++j) dst[j] += v[j];
      };
    };
    const GemmOperand dc{tdy.dtype, pdy, n, false};
    const GemmOperand dc_t{tdy.dtype, pdy, n, true};
    if (!trans_a) {  // dA [M, K] = dC [M, N] x op(B)^T [N, K]
      MG_RETURN_IF_ERROR(GemmCpu(m, k, n, dc, GemmOperand{tb.dtype, pb, cols_b, !trans_b},
                                 add_to(da, cols_a)));
    } else {  // dA [K, M] = op(B) [K, N] x dC^T [N, M]
      MG_RETURN_IF_ERROR(GemmCpu(k, m, n, GemmOperand{tb.dtype, pb, cols_b, trans_b}, dc_t,
                                 add_to(da, cols_a)));
    }
    if (!trans_b) {  // dB [K, N] = op(A)^T [K, M] x dC [M, N]
      MG_RETURN_IF_ERROR(GemmCpu(k, n, m, GemmOperand{ta.dtype, pa, cols_a, !trans_a}, dc,
                                 add_to(db, cols_b)));
    } else {  // dB [N, K] = dC^T [N, M] x op(A) [M, K]
      MG_RETURN_IF_ERROR(GemmCpu(n, k, m, dc_t, GemmOperand{ta.dtype, pa, cols_a, trans_a},
                                 add_to(db, cols_b)));
    }
    for (size_t d = batch_rank; d-- > 0;) {
      if (++index[d] < batch[d]) break;
      index[d] = 0;
    }
  }
  MG_RETURN_IF_ERROR(StoreOutput(args, 0, da_acc));
  return StoreOutput(args, 1, db_acc);
}

// ---- LayerNormalizationGradient --------------------------------------------------------------

// dY, X, Scale, Mean, InvStdDev -> dX, dScale, [dB]. Per row, with xhat = (x - mean) * inv and
// g = dY * scale (both over the normalised elements):
//   dX = inv * (g - mean(g) - xhat * mean(g * xhat)),
// and over all rows dScale = sum dY * xhat, dB = sum dY, reduced onto Scale's dims where Scale
// broadcast. Mean and InvStdDev are the forward op's saved statistics (any float type).
absl::Status LayerNormalizationGradient(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 5, 5, 2, 3));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  const TensorType& tdy = *args.input_types[0];
  const TensorType& tx = *args.input_types[1];
  const TensorType& ts = *args.input_types[2];
  if (tdy != tx || *args.output_types[0] != tx) {
    return KernelError(args, "dY and dX must have X's type");
  }
  if (tx.dims.empty()) return KernelError(args, "X must have rank >= 1");
  MG_ASSIGN_OR_RETURN(const int64_t axis_attr, IntAttr(args, "axis", -1));
  MG_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(args, axis_attr, Rank(tx), "axis"));
  const int64_t rows = Product(tx.dims, 0, axis);
  const int64_t n = Product(tx.dims, axis, tx.dims.size());
  const Dims normalized(tx.dims.begin() + axis, tx.dims.end());
  if (!BroadcastsTo(ts.dims, normalized)) {
    return KernelError(args, absl::StrCat("Scale ", graph::TensorTypeToString(ts),
                                          " does not broadcast to ",
                                          graph::DimsToString(normalized)));
  }
  for (int in : {3, 4}) {
    if (NumElements(args.input_types[in]->dims) != rows) {
      return KernelError(args, "Mean and InvStdDev must hold one value per row");
    }
  }
  for (int out = 1; out < static_cast<int>(args.outputs.size()); ++out) {
    if (*args.output_types[out] != ts) return KernelError(args, "dScale and dB must have Scale's type");
  }
  // scale_index[j]: the element of Scale that normalised element j reads.
  std::vector<int64_t> scale_index(static_cast<size_t>(n));
  {
    const Dims strides = BroadcastStrides(ts.dims, normalized);
    const Dims own = Strides(normalized);
    for (int64_t j = 0; j < n; ++j) {
      int64_t offset = 0, rest = j;
      for (size_t d = 0; d < own.size(); ++d) {
        offset += (rest / own[d]) * strides[d];
        rest %= own[d];
      }
      scale_index[j] = offset;
    }
  }
  MG_ASSIGN_OR_RETURN(const std::vector<float> scale_values, LoadInput(args, 2));
  MG_ASSIGN_OR_RETURN(const std::vector<float> mean, LoadInput(args, 3));
  MG_ASSIGN_OR_RETURN(const std::vector<float> inv, LoadInput(args, 4));
  MG_ASSIGN_OR_RETURN(FloatLoader load, LoaderFor(args, tx));
  MG_ASSIGN_OR_RETURN(FloatStorer store, StorerFor(args, tx));
  std::vector<float> dscale_full(static_cast<size_t>(n), 0.0f), dbias_full(static_cast<size_t>(n), 0.0f);
  std::vector<float> xhat(static_cast<size_t>(n)), g(static_cast<size_t>(n)), dx(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<float> xr = load.Run(args.inputs[1], r * n, n);
    const std::vector<float> dyr = load.Run(args.inputs[0], r * n, n);
    float sum_g = 0, sum_gx = 0;
    for (int64_t j = 0; j < n; ++j) {
      xhat[j] = (xr[j] - mean[r]) * inv[r];
      g[j] = dyr[j] * scale_values[scale_index[j]];
      sum_g += g[j];
      sum_gx += g[j] * xhat[j];
      dscale_full[j] += dyr[j] * xhat[j];
      dbias_full[j] += dyr[j];
    }
    const float mean_g = sum_g / static_cast<float>(n);
    const float mean_gx = sum_gx / static_cast<float>(n);
    for (int64_t j = 0; j < n; ++j) dx[j] = inv[r] * (g[j] - mean_g - xhat[j] * mean_gx);
    store.run(args.outputs[0], r * n, n, dx.data());
  }
  std::vector<float> dscale(static_cast<size_t>(NumElements(ts.dims)), 0.0f);
  std::vector<float> dbias(dscale.size(), 0.0f);
  for (int64_t j = 0; j < n; ++j) {
    dscale[scale_index[j]] += dscale_full[j];
    dbias[scale_index[j]] += dbias_full[j];
  }
  MG_RETURN_IF_ERROR(StoreOutput(args, 1, dscale));
  if (args.outputs.size() == 3) MG_RETURN_IF_ERROR(StoreOutput(args, 2, dbias));
  return absl::OkStatus();
}

}  // namespace

void AddCpuBackwardKernels(KernelMap& kernels) {
  kernels["ReluGradient"] = OutputPointwiseGradient([](auto y, auto dy) {
    using C = decltype(y);
    return y > C(0) ? dy : C(0);
  });
  // sigmoid' = y (1 - y), tanh' = 1 - y^2, both from the output Y.
  kernels["SigmoidGradient"] = OutputPointwiseGradient([](auto y, auto dy) {
    using C = decltype(y);
    return dy * y * (C(1) - y);
  });
  kernels["TanhGradient"] = OutputPointwiseGradient([](auto y, auto dy) {
    using C = decltype(y);
    return dy * (C(1) - y * y);
  });
  kernels["GeluGradient"] = GeluGradient;
  kernels["SoftmaxGradient"] = SoftmaxGradient;
  kernels["FCGradient"] = FcGradientKernel(/*transposed=*/false);
  kernels["FCTransposedGradient"] = FcGradientKernel(/*transposed=*/true);
  kernels["MatMulGradient"] = MatMulGradient;
  kernels["LayerNormalizationGradient"] = LayerNormalizationGradient;
}

}  // namespace memonger::alloc
