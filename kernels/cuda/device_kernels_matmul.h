// Device kernels, matrix products: MatMul / BatchMatMul (numpy broadcasting of batch dims; 1-D
// operands; Caffe2's trans_a, trans_b, axis_a, axis_b), MatMulGradient, Caffe2's FC and
// FCTransposed and their gradients, over the backend's strided-batched GEMM (cuBLAS's cublasGemmStridedBatchedEx with float32 compute on the GPU).
//
// Row-major to column-major: a row-major matrix is the transpose of the column-major matrix in
// the same bytes, so C = op(X) op(Y) (row-major) is computed as C^T = op(Y)^T op(X)^T, i.e. one
// column-major GEMM with the operands swapped, m and n swapped, and each operand's own
// transposition flag (BatchedRowGemm below).
//
// Batch dims: the output's batch dims are merged where every operand's strides allow; the
// innermost merged dim becomes one strided batch, the others a loop on the host. An operand
// that broadcast over a batch dim has stride 0 there.
//
// MatMulGradient's dA = dC op(B)^T (or its transpose) and dB = op(A)^T dC. An operand that did
// not broadcast gets its gradient written directly (each batch once). One that broadcast must
// be summed over the batches it was reused in: a float32 accumulator (backend scratch, outside
// the arena, as the CPU kernel's) is zeroed, every batch adds into it (beta = 1), one GEMM at a
// time, and the sum is rounded once into the output, as the CPU kernel does.
#ifndef MEMONGER_KERNELS_CUDA_DEVICE_KERNELS_MATMUL_H_
#define MEMONGER_KERNELS_CUDA_DEVICE_KERNELS_MATMUL_H_

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cuda/device_kernel_util.h"
#include "kernels/cuda/device_kernels_rows.h"

namespace memonger::alloc::device {

// Rounds a float32 buffer into an output (the accumulator of a broadcast operand's gradient).
struct RoundBody {
  const float* from{};
  Out to{};
  MG_HD void operator()(int64_t i) const { to.Set(i, from[i]); }
};

namespace matmul_internal {
using kernel_internal::CheckArity;
using kernel_internal::KernelError;
using kernel_internal::NumElements;
using kernel_internal::Product;

// A row-major matrix operand: base pointer, element type, leading dim (its stored columns),
// whether op() transposes it, and elements per matrix (for batch offsets).
struct RowOperand {
  const void* data = nullptr;
  FloatType type = FloatType::kFloat32;
  int64_t ld = 1;
  bool trans = false;
  int64_t matrix = 0;
  Dims batch_strides;  // in matrices, over the output's batch dims (0: broadcast)
};

inline const void* Advance(const void* p, FloatType type, int64_t elements) {
  return static_cast<const std::byte*>(p) + elements * FloatTypeSize(type);
}

// For every index b of `batch`: C_b[m, n] = op(X_b) op(Y_b) + beta C_b (row-major, ld n).
template <class Backend>
absl::Status BatchedRowGemm(const Backend& be, int64_t m, int64_t n, int64_t k,
                            const RowOperand& x, const RowOperand& y, const RowOperand& c,
                            const Dims& batch, float beta) {
  // Merge the batch dims where the three operands' strides allow.
  Dims dims, sx, sy, sc;
  for (size_t d = 0; d < batch.size(); ++d) {
    if (batch[d] == 1) continue;
    if (!dims.empty() && sx.back() == x.batch_strides[d] * batch[d] &&
        sy.back() == y.batch_strides[d] * batch[d] && sc.back() == c.batch_strides[d] * batch[d]) {
      dims.back() *= batch[d];
      sx.back() = x.batch_strides[d];
      sy.back() = y.batch_strides[d];
      sc.back() = c.batch_strides[d];
      continue;
    }
    dims.push_back(batch[d]);
    sx.push_back(x.batch_strides[d]);
    sy.push_back(y.batch_strides[d]);
    sc.push_back(c.batch_strides[d]);
  }
  // The innermost dim goes into one strided call unless C repeats along it (a sum: one GEMM
  // after another).
  int64_t inner = 1, inner_x = 0, inner_y = 0, inner_c = 0;
  if (!dims.empty() && sc.back() != 0) {
    inner = dims.back();
    inner_x = sx.back();
    inner_y = sy.back();
    inner_c = sc.back();
    dims.pop_back();
    sx.pop_back();
    sy.pop_back();
    sc.pop_back();
  }
  const int64_t outer = NumElements(dims);
  Dims index(dims.size(), 0);
  for (int64_t o = 0; o < outer; ++o) {
    int64_t ox = 0, oy = 0, oc = 0;
    for (size_t d = 0; d < dims.size(); ++d) {
      ox += index[d] * sx[d];
      oy += index[d] * sy[d];
      oc += index[d] * sc[d];
    }
    GemmBatch g;
    g.trans_a = y.trans;
    g.trans_b = x.trans;
    g.m = n;
    g.n = m;
    g.k = k;
    g.a = Advance(y.data, y.type, oy * y.matrix);
    g.a_type = y.type;
    g.lda = y.ld;
    g.stride_a = inner_y * y.matrix;
    g.b = Advance(x.data, x.type, ox * x.matrix);
    g.b_type = x.type;
    g.ldb = x.ld;
    g.stride_b = inner_x * x.matrix;
    g.beta = beta;
    g.c = const_cast<void*>(Advance(c.data, c.type, oc * c.matrix));
    g.c_type = c.type;
    g.ldc = n;
    g.stride_c = inner_c * c.matrix;
    g.batch = inner;
    MG_RETURN_IF_ERROR(be.Gemm(g));
    for (size_t d = dims.size(); d-- > 0;) {
      if (++index[d] < dims[d]) break;
      index[d] = 0;
    }
  }
  return absl::OkStatus();
}

// The geometry (kernel_util.h) with the output's batch strides, in matrices.
struct Geometry : kernel_internal::MatMulGeometry {
  Dims stride_c;
};

inline absl::StatusOr<Geometry> ResolveGeometry(const KernelArgs& args, const graph::TensorType& ta,
                                                const graph::TensorType& tb) {
  Geometry g;
  MG_ASSIGN_OR_RETURN(static_cast<kernel_internal::MatMulGeometry&>(g),
                      kernel_internal::ResolveMatMulGeometry(args, ta, tb));
  g.stride_c = kernel_internal::Strides(g.batch);
  return g;
}

// One float element type for every operand: cuBLAS multiplies two operands of one type (the
// CPU kernels also take mixed types; on the device such nets are Unimplemented).
inline absl::Status CheckGemmTypes(const KernelArgs& args) {
  const graph::TensorType& first = *args.output_types[0];
  MG_RETURN_IF_ERROR(FloatTypeOf(args, first).status());
  for (const auto* types : {&args.input_types, &args.output_types}) {
    for (const graph::TensorType* t : *types) {
      if (t->dtype != first.dtype) {
        return kernel_internal::KernelUnimplemented(
            args, absl::StrCat("operands of different element types (",
                               graph::DataTypeName(t->dtype), " and ",
                               graph::DataTypeName(first.dtype), ") run on the CPU kernels only"));
      }
    }
  }
  return kernel_internal::CheckNoOverlapAll(args);
}
}  // namespace matmul_internal

template <class Backend>
absl::Status DeviceMatMul(const Backend& be, const KernelArgs& args) {
  using namespace matmul_internal;  // NOLINT
  MG_RETURN_IF_ERROR(CheckArity(args, 2, 2, 1, 1));
  MG_RETURN_IF_ERROR(CheckGemmTypes(args));
  const graph::TensorType& ta = *args.input_types[0];
  const graph::TensorType& tb = *args.input_types[1];
  const graph::TensorType& ty = *args.output_types[0];
  if (ta.dtype != ty.dtype || tb.dtype != ty.dtype) {
    return KernelError(args, "every input must have the output's element type");
  }
  MG_ASSIGN_OR_RETURN(const Geometry g, ResolveGeometry(args, ta, tb));
  if (NumElements(ty.dims) != NumElements(g.batch) * g.m * g.n) {
    return KernelError(args, absl::StrCat("the output ", graph::TensorTypeToString(ty),
                                          " does not hold the product's batches of ", g.m, "x", g.n));
  }
  if (g.m * g.n == 0 || NumElements(g.batch) == 0) return absl::OkStatus();
  MG_ASSIGN_OR_RETURN(const FloatType type, FloatTypeOf(args, ty));
  const size_t ra = g.a.size(), rb = g.b.size();
  const RowOperand x{args.inputs[0], type, g.a[ra - 1], g.trans_a, g.a[ra - 2] * g.a[ra - 1], g.stride_a};
  const RowOperand y{args.inputs[1], type, g.b[rb - 1], g.trans_b, g.b[rb - 2] * g.b[rb - 1], g.stride_b};
  const RowOperand c{args.outputs[0], type, g.n, false, g.m * g.n, g.stride_c};
  if (g.k == 0) {
    // An empty sum: C = 0. GEMM libraries differ on k = 0; zero the output explicitly.
    return be.Zero2D(args.outputs[0], 0, kernel_internal::ByteSizeOf(ty), 1);
  }
  return BatchedRowGemm(be, g.m, g.n, g.k, x, y, c, g.batch, 0.0f);
}

// MatMulGradient(dY, A, B) -> dA, dB.
template <class Backend>
absl::Status DeviceMatMulGradient(const Backend& be, const KernelArgs& args) {
  using namespace matmul_internal;  // NOLINT
  MG_RETURN_IF_ERROR(CheckArity(args, 3, 3, 2, 2));
  MG_RETURN_IF_ERROR(CheckGemmTypes(args));
  MG_RETURN_IF_ERROR(CheckOutputsApart(args));
  const graph::TensorType& tdy = *args.input_types[0];
  const graph::TensorType& ta = *args.input_types[1];
  const graph::TensorType& tb = *args.input_types[2];
  if (*args.output_types[0] != ta || *args.output_types[1] != tb) {
    return KernelError(args, "dA and dB must have the types of A and B");
  }
  MG_ASSIGN_OR_RETURN(const Geometry g, ResolveGeometry(args, ta, tb));
  const int64_t batches = NumElements(g.batch);
  if (NumElements(tdy.dims) != batches * g.m * g.n) {
    return KernelError(args, absl::StrCat("dY ", graph::TensorTypeToString(tdy), " does not hold ",
                                          batches, " batches of ", g.m, "x", g.n));
  }
  MG_ASSIGN_OR_RETURN(const FloatType type_dy, FloatTypeOf(args, tdy));
  MG_ASSIGN_OR_RETURN(const FloatType type_a, FloatTypeOf(args, ta));
  MG_ASSIGN_OR_RETURN(const FloatType type_b, FloatTypeOf(args, tb));
  const size_t ra = g.a.size(), rb = g.b.size();
  const int64_t rows_a = g.a[ra - 2], cols_a = g.a[ra - 1];
  const int64_t rows_b = g.b[rb - 2], cols_b = g.b[rb - 1];
  const RowOperand dc{args.inputs[0], type_dy, g.n, false, g.m * g.n, g.stride_c};
  RowOperand dc_t = dc;
  dc_t.trans = true;
  const RowOperand a{args.inputs[1], type_a, cols_a, false, rows_a * cols_a, g.stride_a};
  const RowOperand b{args.inputs[2], type_b, cols_b, false, rows_b * cols_b, g.stride_b};

  // One operand's gradient: target [rows, cols] per batch = op(X) op(Y) over the batches.
  auto gradient = [&](int out, const RowOperand& x, const RowOperand& y, int64_t rows,
                      int64_t cols, int64_t inner, const Dims& strides) -> absl::Status {
    const graph::TensorType& t = *args.output_types[out];
    const int64_t count = NumElements(t.dims);
    if (count == 0) return absl::OkStatus();
    MG_ASSIGN_OR_RETURN(const Out target, OutputAt(args, out));
    // The operand broadcast over a batch dim (or the batch is empty): sum into an accumulator.
    const bool sums = count != batches * rows * cols;
    if (!sums && inner > 0) {
      const RowOperand c{target.data, target.type, cols, false, rows * cols, strides};
      return BatchedRowGemm(be, rows, cols, inner, x, y, c, g.batch, 0.0f);
    }
    MG_ASSIGN_OR_RETURN(std::shared_ptr<void> acc, be.Scratch(count * int64_t{sizeof(float)}));
    MG_RETURN_IF_ERROR(be.Zero2D(acc.get(), 0, count * int64_t{sizeof(float)}, 1));
    if (inner > 0 && batches > 0) {
      const RowOperand c{acc.get(), FloatType::kFloat32, cols, false, rows * cols, strides};
      MG_RETURN_IF_ERROR(BatchedRowGemm(be, rows, cols, inner, x, y, c, g.batch, 1.0f));
    }
    return be.Launch(count, RoundBody{static_cast<const float*>(acc.get()), target});
  };
  // dA: [M, K] = dC op(B)^T, or stored [K, M] = op(B) dC^T when trans_a.
  RowOperand b_for_da = b;
  b_for_da.trans = g.trans_a ? g.trans_b : !g.trans_b;
  if (!g.trans_a) {
    MG_RETURN_IF_ERROR(gradient(0, dc, b_for_da, g.m, g.k, g.n, g.stride_a));
  } else {
    MG_RETURN_IF_ERROR(gradient(0, b_for_da, dc_t, g.k, g.m, g.n, g.stride_a));
  }
  // dB: [K, N] = op(A)^T dC, or stored [N, K] = dC^T op(A) when trans_b.
  RowOperand a_for_db = a;
  a_for_db.trans = g.trans_b ? g.trans_a : !g.trans_a;
  if (!g.trans_b) {
    return gradient(1, a_for_db, dc, g.k, g.n, g.m, g.stride_b);
  }
  return gradient(1, dc_t, a_for_db, g.n, g.k, g.m, g.stride_b);
}

// Y[i] = b[i % n]: FC's bias rows, which the GEMM then adds to with beta = 1 (one rounding).
struct BiasRowsBody {
  In bias;
  int64_t n = 1;
  Out y;
  MG_HD void operator()(int64_t i) const { y.Set(i, bias[i % n]); }
};

// Caffe2 FC(X, W, b) / FCTransposed: Y[M, N] = X[M, K] op(W) + b, W [N, K] (op = transpose) or
// [K, N]; X and W flattened at `axis` / `axis_w` (kernel_util.h's ResolveFcDims).
template <class Backend>
absl::Status DeviceFc(const Backend& be, const KernelArgs& args, bool transposed) {
  using namespace matmul_internal;  // NOLINT
  MG_RETURN_IF_ERROR(CheckArity(args, 3, 3, 1, 1));
  MG_RETURN_IF_ERROR(CheckGemmTypes(args));
  const graph::TensorType& tx = *args.input_types[0];
  const graph::TensorType& tw = *args.input_types[1];
  MG_ASSIGN_OR_RETURN(const kernel_internal::FcDims dims,
                      kernel_internal::ResolveFcDims(args, tx, tw, transposed));
  const int64_t m = dims.m, k = dims.k, n = dims.n;
  if (NumElements(args.input_types[2]->dims) != n) {
    return KernelError(args, absl::StrCat("b must hold N=", n));
  }
  if (NumElements(args.output_types[0]->dims) != m * n) {
    return KernelError(args, "the output must hold M x N elements");
  }
  for (const graph::TensorType* t : {&tx, &tw, args.input_types[2]}) {
    if (t->dtype != args.output_types[0]->dtype) {
      return KernelError(args, "every input must have the output's element type");
    }
  }
  if (m * n == 0) return absl::OkStatus();
  BiasRowsBody rows;
  MG_ASSIGN_OR_RETURN(rows.bias, InputAt(args, 2));
  MG_ASSIGN_OR_RETURN(rows.y, OutputAt(args, 0));
  rows.n = n;
  MG_RETURN_IF_ERROR(be.Launch(m * n, rows));
  if (k == 0) return absl::OkStatus();
  const RowOperand x{args.inputs[0], rows.y.type, k, false, m * k, {}};
  const RowOperand w{args.inputs[1], rows.y.type, transposed ? n : k, !transposed, n * k, {}};
  const RowOperand c{rows.y.data, rows.y.type, n, false, m * n, {}};
  return BatchedRowGemm(be, m, n, k, x, w, c, Dims{}, 1.0f);
}

// FCGradient(X, W, dY) -> dW, db, [dX] (FCTransposedGradient: W stored [K, N]).
template <class Backend>
absl::Status DeviceFcGradient(const Backend& be, const KernelArgs& args, bool transposed) {
  using namespace matmul_internal;  // NOLINT
  MG_RETURN_IF_ERROR(CheckArity(args, 3, 3, 2, 3));
  MG_RETURN_IF_ERROR(CheckGemmTypes(args));
  MG_RETURN_IF_ERROR(CheckOutputsApart(args));
  const graph::TensorType& tx = *args.input_types[0];
  const graph::TensorType& tw = *args.input_types[1];
  const graph::TensorType& tdy = *args.input_types[2];
  MG_ASSIGN_OR_RETURN(const kernel_internal::FcDims dims,
                      kernel_internal::ResolveFcDims(args, tx, tw, transposed));
  const int64_t m = dims.m, k = dims.k, n = dims.n;
  if (NumElements(tdy.dims) != m * n) {
    return KernelError(args, "X, W and dY do not agree");
  }
  if (*args.output_types[0] != tw || NumElements(args.output_types[1]->dims) != n ||
      (args.outputs.size() == 3 && *args.output_types[2] != tx)) {
    return KernelError(args, "dW must have W's type, db hold N elements, dX have X's type");
  }
  MG_ASSIGN_OR_RETURN(const FloatType type_x, FloatTypeOf(args, tx));
  MG_ASSIGN_OR_RETURN(const FloatType type_w, FloatTypeOf(args, tw));
  MG_ASSIGN_OR_RETURN(const FloatType type_dy, FloatTypeOf(args, tdy));
  MG_ASSIGN_OR_RETURN(const Out dw, OutputAt(args, 0));
  const RowOperand dy{args.inputs[2], type_dy, n, false, m * n, {}};
  RowOperand dy_t = dy;
  dy_t.trans = true;
  if (m > 0 && k * n > 0) {
    if (!transposed) {  // dW [N, K] = dY^T X
      const RowOperand x{args.inputs[0], type_x, k, false, m * k, {}};
      MG_RETURN_IF_ERROR(BatchedRowGemm(be, n, k, m, dy_t, x,
                                        RowOperand{dw.data, dw.type, k, false, n * k, {}}, Dims{}, 0.0f));
    } else {  // dW [K, N] = X^T dY
      const RowOperand x_t{args.inputs[0], type_x, k, true, m * k, {}};
      MG_RETURN_IF_ERROR(BatchedRowGemm(be, k, n, m, x_t, dy,
                                        RowOperand{dw.data, dw.type, n, false, n * k, {}}, Dims{}, 0.0f));
    }
  } else if (k * n > 0) {
    MG_RETURN_IF_ERROR(be.Zero2D(dw.data, 0, kernel_internal::ByteSizeOf(tw), 1));
  }
  // db [N]: the column sums of dY, rows in order.
  ReduceSumBody db;
  db.kept = ContiguousMap(n);
  MG_ASSIGN_OR_RETURN(db.reduced, MakeIndexMap(args, Dims{m}, Dims{n}));
  db.count = m;
  db.x = In{args.inputs[2], type_dy};
  MG_ASSIGN_OR_RETURN(db.y, OutputAt(args, 1));
  MG_RETURN_IF_ERROR(be.Launch(n, db));
  if (args.outputs.size() == 3 && m * k > 0) {
    MG_ASSIGN_OR_RETURN(const Out dx, OutputAt(args, 2));
    if (n == 0) return be.Zero2D(dx.data, 0, kernel_internal::ByteSizeOf(tx), 1);
    // dX [M, K] = dY W (FCTransposed: dY W^T with W [K, N]).
    const RowOperand w{args.inputs[1], type_w, transposed ? n : k, transposed, n * k, {}};
    return BatchedRowGemm(be, m, k, n, dy, w, RowOperand{dx.data, dx.type, k, false, m * k, {}},
                          Dims{}, 0.0f);
  }
  return absl::OkStatus();
}

template <class Backend>
void AddDeviceMatMulKernels(absl::flat_hash_map<std::string, Kernel>& kernels,
                            std::shared_ptr<const Backend> be) {
  kernels["MatMul"] = [be](const KernelArgs& a) { return DeviceMatMul(*be, a); };
  kernels["BatchMatMul"] = [be](const KernelArgs& a) { return DeviceMatMul(*be, a); };
  kernels["MatMulGradient"] = [be](const KernelArgs& a) { return DeviceMatMulGradient(*be, a); };
  for (const bool transposed : {false, true}) {
    kernels[transposed ? "FCTransposed" : "FC"] = [be, transposed](const KernelArgs& a) {
      return DeviceFc(*be, a, transposed);
    };
    kernels[transposed ? "FCTransposedGradient" : "FCGradient"] = [be, transposed](
                                                                        const KernelArgs& a) {
      return DeviceFcGradient(*be, a, transposed);
    };
  }
}

}  // namespace memonger::alloc::device

#endif  // MEMONGER_KERNELS_CUDA_DEVICE_KERNELS_MATMUL_H_
