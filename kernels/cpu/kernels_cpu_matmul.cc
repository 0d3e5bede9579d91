// Matrix-product CPU kernels over GemmCpu (gemm_cpu.h): MatMul (ONNX numpy semantics with
// broadcast batch dims; Caffe2's trans_a/trans_b and axis_a/axis_b), BatchMatMul (Caffe2),
// Gemm (ONNX: transA, transB, alpha, beta, optional C broadcast to [M, N]) and FC /
// FCTransposed (Caffe2: X flattened at `axis` to [M, K], W at `axis_w` to [N, K] (FC) or [K, N]
// (FCTransposed), b [N]).
//
// Storage float32, float16 or bfloat16, products and sums in float32, rounded once to the
// output's type in the epilogue (after the bias or C is added in float32). An output that
// shares any byte with an input is refused: a product reads its inputs after it has started
// writing.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/gemm_cpu.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/kernel_util.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

using graph::DataType;
using graph::TensorType;
using namespace kernel_internal;  // NOLINT: the helpers of every kernel file

bool IsGemmType(DataType d) {
  return d == DataType::kFloat32 || d == DataType::kFloat16 || d == DataType::kBFloat16;
}

absl::Status CheckGemmTypes(const KernelArgs& args) {
  const DataType dtype = args.output_types[0]->dtype;
  for (const TensorType* t : args.input_types) {
    if (t->dtype != dtype) {
      return KernelError(args, absl::StrCat("every input must have the output's element type ",
                                            graph::DataTypeName(dtype), ", got ",
                                            graph::TensorTypeToString(*t)));
    }
  }
  if (!IsGemmType(dtype)) {
    return UnsupportedDtype(args, dtype, "float32, float16, bfloat16");
  }
  return CheckNoOverlapAll(args);
}

// Stores float32 results into an output row of element type T.
template <typename T>
void StoreRow(std::byte* base, int64_t offset, int64_t count, const float* values) {
  T* out = reinterpret_cast<T*>(base) + offset;
  for (int64_t j = 0; j < count; ++j) out[j] = Store<T>(values[j]);
}

using StoreRowFn = void (*)(std::byte*, int64_t, int64_t, const float*);
StoreRowFn StoreRowFor(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16: return StoreRow<Half>;
    case DataType::kBFloat16: return StoreRow<BFloat16>;
    default: return StoreRow<float>;
  }
}

// Element i of a float32/float16/bfloat16 tensor as float32.
float LoadAsFloat(DataType dtype, const std::byte* data, int64_t i) {
  switch (dtype) {
    case DataType::kFloat16: return reinterpret_cast<const Half*>(data)[i].ToFloat();
    case DataType::kBFloat16: return reinterpret_cast<const BFloat16*>(data)[i].ToFloat();
    default: return reinterpret_cast<const float*>(data)[i];
  }
}

absl::Status MatMul(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 2, 2, 1, 1));
  MG_RETURN_IF_ERROR(CheckGemmTypes(args));
  const TensorType& ta = *args.input_types[0];
  const TensorType& tb = *args.input_types[1];
  MG_ASSIGN_OR_RETURN(const MatMulGeometry g, ResolveMatMulGeometry(args, ta, tb));
  const int64_t m = g.m, n = g.n, k = g.k;
  const TensorType& ty = *args.output_types[0];
  const int64_t out_count = NumElements(ty.dims);
  if (m * n == 0) return absl::OkStatus();
  const int64_t batches = out_count / (m * n);
  if (batches * m * n != out_count) {
    return KernelError(args, absl::StrCat("the output ", graph::TensorTypeToString(ty),
                                          " does not hold batches of ", m, "x", n));
  }
  if (NumElements(g.batch) != batches) {
    return KernelError(args, "the output's batch dims do not match the operands'");
  }
  const size_t batch_rank = g.batch.size();
  const Dims& batch = g.batch;
  const Dims& stride_a = g.stride_a;
  const Dims& stride_b = g.stride_b;
  const int64_t matrix_a = g.rows_a() * g.cols_a();
  const int64_t matrix_b = g.rows_b() * g.cols_b();
  const int64_t elem = graph::DataTypeSize(ty.dtype);
  const StoreRowFn store = StoreRowFor(ty.dtype);
  std::byte* out = args.outputs[0];
  Dims index(batch_rank, 0);
  for (int64_t bi = 0; bi < batches; ++bi) {
    int64_t off_a = 0;
    int64_t off_b = 0;
    for (size_t d = 0; d < batch_rank; ++d) {
      off_a += index[d] * stride_a[d];
      off_b += index[d] * stride_b[d];
    }
    const GemmOperand ga{ta.dtype, args.inputs[0] + off_a * matrix_a * elem, g.cols_a(),
                         g.trans_a};
    const GemmOperand gb{tb.dtype, args.inputs[1] + off_b * matrix_b * elem, g.cols_b(),
                         g.trans_b};
    const int64_t out_base = bi * m * n;
    // The epilogue keeps no state: safe on KernelArgs::threads threads at once.
    MG_RETURN_IF_ERROR(GemmCpu(
        m, n, k, ga, gb,
        [&](int64_t row, int64_t col, int64_t count, const float* acc) {
          store(out, out_base + row * n + col, count, acc);
        },
        args.threads, GemmKernel::kAuto, GemmScratch{args.scratch, 0}));
    for (size_t d = batch_rank; d-- > 0;) {
      if (++index[d] < batch[d]) break;
      index[d] = 0;
    }
  }
  return absl::OkStatus();
}

// ONNX Gemm: Y = alpha * op(A) x op(B) + beta * C.
absl::Status Gemm(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 2, 3, 1, 1));
  MG_RETURN_IF_ERROR(CheckGemmTypes(args));
  const TensorType& ta = *args.input_types[0];
  const TensorType& tb = *args.input_types[1];
  if (ta.dims.size() != 2 || tb.dims.size() != 2) return KernelError(args, "A and B must be 2-D");
  MG_ASSIGN_OR_RETURN(const int64_t trans_a, IntAttr(args, "transA", 0));
  MG_ASSIGN_OR_RETURN(const int64_t trans_b, IntAttr(args, "transB", 0));
  MG_ASSIGN_OR_RETURN(const double alpha_d, FloatAttr(args, "alpha", 1.0));
  MG_ASSIGN_OR_RETURN(const double beta_d, FloatAttr(args, "beta", 1.0));
  const float alpha = static_cast<float>(alpha_d);
  const float beta = static_cast<float>(beta_d);
  const int64_t m = trans_a ? ta.dims[1] : ta.dims[0];
  const int64_t k = trans_a ? ta.dims[0] : ta.dims[1];
  const int64_t n = trans_b ? tb.dims[0] : tb.dims[1];
  if ((trans_b ? tb.dims[1] : tb.dims[0]) != k) return KernelError(args, "inner dimensions differ");
  if (args.output_types[0]->dims != Dims{m, n}) {
    return KernelError(args, "the output must be [M, N]");
  }
  Dims c_strides{0, 0};
  const std::byte* c = nullptr;
  if (args.inputs.size() == 3) {
    const Dims& cd = args.input_types[2]->dims;
    if (!BroadcastsTo(cd, {m, n})) return KernelError(args, "C does not broadcast to [M, N]");
    c_strides = BroadcastStrides(cd, {m, n});
    c = args.inputs[2];
  }
  const DataType dtype = args.output_types[0]->dtype;
  const StoreRowFn store = StoreRowFor(dtype);
  std::vector<float> row;
  return GemmCpu(m, n, k, GemmOperand{ta.dtype, args.inputs[0], ta.dims[1], trans_a != 0},
                 GemmOperand{tb.dtype, args.inputs[1], tb.dims[1], trans_b != 0},
                 [&](int64_t r, int64_t col, int64_t count, const float* acc) {
                   row.resize(static_cast<size_t>(count));
                   for (int64_t j = 0; j < count; ++j) {
                     float v = alpha * acc[j];
                     if (c != nullptr) {
                       v += beta * LoadAsFloat(dtype, c, r * c_strides[0] + (col + j) * c_strides[1]);
                     }
                     row[j] = v;
                   }
                   store(args.outputs[0], r * n + col, count, row.data());
                 },
                 1, GemmKernel::kAuto, GemmScratch{args.scratch, 0});
}

// Caffe2 FC(X, W, b) / FCTransposed: Y[M, N] = X[M, K] x W^T (+ b), W [N, K] or [K, N].
Kernel FcKernel(bool transposed) {
  return [transposed](const KernelArgs& args) -> absl::Status {
    MG_RETURN_IF_ERROR(CheckArity(args, 3, 3, 1, 1));
    MG_RETURN_IF_ERROR(CheckGemmTypes(args));
    const TensorType& tx = *args.input_types[0];
    const TensorType& tw = *args.input_types[1];
    const TensorType& tbias = *args.input_types[2];
    MG_ASSIGN_OR_RETURN(const FcDims dims, ResolveFcDims(args, tx, tw, transposed));
    const int64_t m = dims.m, k = dims.k, n = dims.n;
    if (NumElements(tbias.dims) != n) return KernelError(args, absl::StrCat("b must hold N=", n));
    if (NumElements(args.output_types[0]->dims) != m * n) {
      return KernelError(args, "the output must hold M x N elements");
    }
    const DataType dtype = args.output_types[0]->dtype;
    const StoreRowFn store = StoreRowFor(dtype);
    // W [N, K] is op(B) = W^T: stored [N, K] transposed. FCTransposed's W [K, N] is B itself.
    const GemmOperand gw{tw.dtype, args.inputs[1], transposed ? n : k, !transposed};
    std::vector<float> bias(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) bias[j] = LoadAsFloat(dtype, args.inputs[2], j);
    std::vector<float> row;
    return GemmCpu(m, n, k, GemmOperand{tx.dtype, args.inputs[0], k, false}, gw,
                   [&](int64_t r, int64_t col, int64_t count, const float* acc) {
                     row.resize(count);
                     for (int64_t j = 0; j < count; ++j) row[j] = acc[j] + bias[col + j];
                     store(args.outputs[0], r * n + col, count, row.data());
                   },
                   1, GemmKernel::kAuto, GemmScratch{args.scratch, 0});
  };
}

}  // namespace

void AddCpuMatMulKernels(KernelMap& kernels) {
  kernels["MatMul"] = MatMul;
  kernels["BatchMatMul"] = MatMul;
  kernels["Gemm"] = Gemm;
  kernels["FC"] = FcKernel(/*transposed=*/false);
  kernels["FCTransposed"] = FcKernel(/*transposed=*/true);
}

}  // namespace memonger::alloc
