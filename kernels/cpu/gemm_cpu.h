// A blocked single-precision matrix product for the CPU kernels: C = op(A) x op(B) with
// operands stored as float32, float16 or bfloat16, every product and sum in float32, and the
// result handed to the caller's epilogue (which adds a bias, scales, converts to the output's
// element type and stores).
//
//   GemmOperand a{DataType::kFloat16, a_bytes, /*ld=*/k, /*transposed=*/false};
//   GemmOperand b{DataType::kFloat16, b_bytes, /*ld=*/n, /*transposed=*/false};
//   MG_RETURN_IF_ERROR(GemmCpu(m, n, k, a, b, [&](int64_t row, int64_t col, int64_t count,
//                                                 const float* acc) { ...store acc[0..count) }));
//
// The algorithm (the GotoBLAS loop nest):
//   1. C is cut into column tiles of kNc; for each, all of op(B)'s rows in that tile are packed
//      once, in blocks of kKc rows, into panels of kNr columns (converted to float32 while
//      packing, so half types cost one conversion per packed element).
//   2. Each column tile is cut into row tiles of kMc with a float32 accumulator buffer; K is
//      walked in blocks of kKc and the A block (kMc x kKc) is packed into slivers of kMr rows.
//   3. A register-blocked micro-kernel adds one sliver x one panel into a kMr x kNr block of
//      the accumulator, k in ascending order.
//   4. When K is done, the epilogue receives the tile row by row.
// Each result is the float32 sum over k = 0, 1, ..., K-1 of A(i,k) * B(k,j), accumulated in that
// order from 0 by fused multiply-adds (acc = fma(a, b, acc), one rounding per step): the same
// bits as the naive loop `for k: acc = std::fma(a, b, acc)`, whatever the blocking, the
// pointers' alignment or the micro-kernel the CPU runs (AVX-512 or AVX2 + FMA, chosen at run
// time; a portable std::fma loop elsewhere). Results are therefore reproducible across plans and
// machines. One exception: two bfloat16 operands (or float32 ones holding bfloat16 values,
// GemmOperand::bf16_values) on a CPU with AVX512_BF16 are multiplied by
// VDPBF16PS, two k per instruction in the same ascending order, each product exact in float32 and
// each add rounded once, as above; but the instruction flushes subnormal inputs and sums to zero
// (fixed DAZ and FTZ), so the bits differ from the naive loop only where a value below 2^-126
// occurs. Packing then keeps the bfloat16 bits, two per 32-bit word.
//
// Threads: with `threads` > 1 a product of at least 2^22 multiply-adds is split over up to that
// many threads by whole tiles of C (column tiles, or, where there are fewer column tiles than
// threads, row tiles as even as whole slivers allow). Every tile is computed exactly as on one thread, so the results are the
// same bits for any thread count; the epilogue is then called from several threads at once,
// for disjoint parts of C, and must be safe for that.
//
// Buffers: from `scratch` (kernels/kernel_scratch.h) where the caller has one, else allocated
// per call (per thread). A product on one thread uses worker scratch.worker's buffers (a kernel's
// worker passes its own index); one on several threads uses workers 0..threads-1, so its caller
// must be a kernel's only running thread.
//
// Limits: memory for packing and accumulators, allocated per call (per thread) outside the
// arena and sized by the product: K x min(N, kNc) floats for B (at most 1 KiB per unit of K:
// 3 MiB for K = 3072), min(M, kMc) x min(K, kKc) for A and min(M, kMc) x min(N, kNc) for the
// accumulators (together at most about 0.3 MiB).
#ifndef MEMONGER_KERNELS_CPU_GEMM_CPU_H_
#define MEMONGER_KERNELS_CPU_GEMM_CPU_H_

#include <cstddef>
#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "graph/dtype.h"
#include "kernels/kernel_scratch.h"

namespace memonger::alloc {

// One operand as stored. The logical operand op(X) is X, or X's transpose when `transposed`.
// Element (r, c) of the *stored* matrix is at data[r * ld + c] (elements, not bytes).
struct GemmOperand {
  graph::DataType dtype = graph::DataType::kFloat32;  // float32, float16 or bfloat16
  const std::byte* data = nullptr;
  int64_t ld = 0;
  bool transposed = false;
  // float32 storage whose every value is a bfloat16 exactly (its top 16 bits are that
  // bfloat16's): a column matrix copied from bfloat16 input. It multiplies as bfloat16.
  bool bf16_values = false;
};

// Receives results for row `row`, columns [col, col + count): acc[j] is C(row, col + j).
// Every element of C is handed over exactly once.
using GemmEpilogue =
    absl::FunctionRef<void(int64_t row, int64_t col, int64_t count, const float* acc)>;

// The micro-kernels (register blocks): portable 6 x 16, AVX2 + FMA 6 x 16, AVX-512 12 x 16 and
// 8 x 32, and for two bfloat16 operands AVX512_BF16 8 x 32 (pairs of k per instruction). kAuto:
// the bfloat16 one where it applies, else the widest vectors this CPU runs, and with AVX-512
// whichever block pads the product less. Each gives the same bits (the bfloat16 one: where no
// subnormal occurs); the others are named for the tests, which run every one the CPU has.
enum class GemmKernel { kAuto, kPortable, kAvx2Fma, kAvx512, kAvx512Wide, kAvx512Bf16 };

// Where a product's buffers come from: worker `worker`'s of `pool`, or the call's own (null).
struct GemmScratch {
  KernelScratch* pool = nullptr;
  int worker = 0;
};
bool GemmKernelSupported(GemmKernel kernel);

// C[m x n] = op(A)[m x k] x op(B)[k x n]. InvalidArgument for negative sizes, an operand whose
// element type is not float32/float16/bfloat16, or kAvx512Bf16 for other than two bfloat16
// operands; FailedPrecondition for a micro-kernel the CPU lacks. k == 0 hands over zeros.
absl::Status GemmCpu(int64_t m, int64_t n, int64_t k, const GemmOperand& a,
                     const GemmOperand& b, GemmEpilogue epilogue, int threads = 1,
                     GemmKernel kernel = GemmKernel::kAuto, GemmScratch scratch = {});

}  // namespace memonger::alloc

#endif  // MEMONGER_KERNELS_CPU_GEMM_CPU_H_
