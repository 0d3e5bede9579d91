#include "kernels/cpu/gemm_cpu.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/float16.h"
#include "kernels/kernel_util.h"

namespace memonger::alloc {
namespace {

// Register block (kMr x kNr accumulators) and cache blocks. kNr = 16 floats is two AVX
// registers per row; 6 rows use 12 of AVX's 16 registers.
constexpr int64_t kMr = 6;
constexpr int64_t kNr = 16;
constexpr int64_t kMc = 120;  // multiple of kMr
constexpr int64_t kNc = 256;  // multiple of kNr
constexpr int64_t kKc = 256;

int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Element (r, c) of op(X), as float32.
template <typename T>
inline float At(const T* data, int64_t ld, bool transposed, int64_t r, int64_t c) {
  return kernel_internal::Load(transposed ? data[c * ld + r] : data[r * ld + c]);
}

// Packs op(A)[i0 : i0 + mc, p0 : p0 + kc] into slivers of kMr rows: sliver s holds, for each
// kk, the kMr values A(i0 + s*kMr + r, p0 + kk) (rows past mc are zero).
template <typename T>
void PackA(const GemmOperand& a, int64_t i0, int64_t mc, int64_t p0, int64_t kc, float* out) {
  const T* data = reinterpret_cast<const T*>(a.data);
  for (int64_t s = 0; s < mc; s += kMr) {
    const int64_t rows = std::min(kMr, mc - s);
    for (int64_t kk = 0; kk < kc; ++kk) {
      float* dst = out + (s / kMr) * kc * kMr + kk * kMr;
      for (int64_t r = 0; r < rows; ++r) dst[r] = At(data, a.ld, a.transposed, i0 + s + r, p0 + kk);
      for (int64_t r = rows; r < kMr; ++r) dst[r] = 0.0f;
    }
  }
}

// Packs op(B)[p0 : p0 + kc, j0 : j0 + nc] into panels of kNr columns: panel q holds, for each
// kk, the kNr values B(p0 + kk, j0 + q*kNr + c) (columns past nc are zero).
template <typename T>
void PackB(const GemmOperand& b, int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* out) {
  const T* data = reinterpret_cast<const T*>(b.data);
  for (int64_t q = 0; q < nc; q += kNr) {
    const int64_t cols = std::min(kNr, nc - q);
    for (int64_t kk = 0; kk < kc; ++kk) {
      float* dst = out + (q / kNr) * kc * kNr + kk * kNr;
      if (!b.transposed) {
        const T* src = data + (p0 + kk) * b.ld + j0 + q;
        for (int64_t c = 0; c < cols; ++c) dst[c] = kernel_internal::Load(src[c]);
      } else {
        for (int64_t c = 0; c < cols; ++c) dst[c] = At(data, b.ld, true, p0 + kk, j0 + q + c);
      }
      for (int64_t c = cols; c < kNr; ++c) dst[c] = 0.0f;
    }
  }
}

using PackFn = void (*)(const GemmOperand&, int64_t, int64_t, int64_t, int64_t, float*);

PackFn PackAFor(graph::DataType dtype) {
  switch (dtype) {
    case graph::DataType::kFloat32: return PackA<float>;
    case graph::DataType::kFloat16: return PackA<Half>;
    case graph::DataType::kBFloat16: return PackA<BFloat16>;
    default: return nullptr;
  }
}
PackFn PackBFor(graph::DataType dtype) {
  switch (dtype) {
    case graph::DataType::kFloat32: return PackB<float>;
    case graph::DataType::kFloat16: return PackB<Half>;
    case graph::DataType::kBFloat16: return PackB<BFloat16>;
    default: return nullptr;
  }
}

// Eight floats as one value (GCC/Clang vector extension): one AVX register, or two SSE
// registers in the default build. Elementwise + and * on it are the scalar IEEE operations.
typedef float Vec8 __attribute__((vector_size(32)));

// Unaligned loads and stores as memcpy (no vector crosses a function boundary, whose ABI would
// differ between the two compilations).
#define MG_LOAD_VEC(v, p) std::memcpy(&(v), (p), sizeof(Vec8))
#define MG_STORE_VEC(p, v) std::memcpy((p), &(v), sizeof(Vec8))

// Adds packed A (slivers) x packed B (panels) over kc into the accumulator tile `c` (row
// stride ldc, padded to whole slivers and panels). The micro-kernel keeps a kMr x kNr block of
// sums in registers (12 vectors of 8) while it walks k. Compiled twice; the loader picks AVX2
// when the CPU has it. Multiplies and adds stay separate (no FMA contraction: ISO C++ mode), so
// both versions give the same bits.
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
void MacroKernel(int64_t mc_padded, int64_t nc_padded, int64_t kc, const float* ap,
                 const float* bp, float* c, int64_t ldc) {
  static_assert(kNr == 16, "the micro-kernel holds two vectors of 8 per row");
  for (int64_t q = 0; q < nc_padded; q += kNr) {
    const float* panel = bp + (q / kNr) * kc * kNr;
    for (int64_t s = 0; s < mc_padded; s += kMr) {
      const float* sliver = ap + (s / kMr) * kc * kMr;
      float* cblock = c + s * ldc + q;
      Vec8 acc[kMr][2];
      for (int64_t r = 0; r < kMr; ++r) {
        MG_LOAD_VEC(acc[r][0], cblock + r * ldc);
        MG_LOAD_VEC(acc[r][1], cblock + r * ldc + 8);
      }
      for (int64_t kk = 0; kk < kc; ++kk) {
        Vec8 b0, b1;
        MG_LOAD_VEC(b0, panel + kk * kNr);
        MG_LOAD_VEC(b1, panel + kk * kNr + 8);
        const float* acol = sliver + kk * kMr;
        for (int64_t r = 0; r < kMr; ++r) {
          const float av = acol[r];
          acc[r][0] += av * b0;
          acc[r][1] += av * b1;
        }
      }
      for (int64_t r = 0; r < kMr; ++r) {
        MG_STORE_VEC(cblock + r * ldc, acc[r][0]);
        MG_STORE_VEC(cblock + r * ldc + 8, acc[r][1]);
      }
    }
  }
}

#undef MG_LOAD_VEC
#undef MG_STORE_VEC

}  // namespace

namespace {

// One product's geometry and operands, shared read-only by its workers.
struct GemmJob {
  int64_t m, n, k;
  const GemmOperand& a;
  const GemmOperand& b;
  PackFn pack_a, pack_b;
  GemmEpilogue epilogue;
  // The buffers are sized by the product, not by the blocking's maxima: a small product (the
  // many [20 x 64] x [64 x 64] of a small transformer) would otherwise allocate and touch
  // half a megabyte per call.
  int64_t kc_max() const { return std::min(kKc, std::max<int64_t>(k, 1)); }
  int64_t k_blocks() const { return std::max<int64_t>((k + kKc - 1) / kKc, 1); }
  int64_t mc_cap() const { return std::min(kMc, RoundUp(m, kMr)); }
  int64_t nc_cap() const { return std::min(kNc, RoundUp(n, kNr)); }
  int64_t b_block() const { return kc_max() * nc_cap(); }  // one packed K block of a tile
};

// A worker's buffers. The packs write every element they are read at (padding zeros
// included), so they are left uninitialised; the accumulator tile is cleared per row tile.
struct GemmScratch {
  std::unique_ptr<float[]> a, b, tile;
  GemmScratch(const GemmJob& job, bool with_b)
      : a(new float[static_cast<size_t>(job.mc_cap() * job.kc_max())]),
        b(with_b ? new float[static_cast<size_t>(job.k_blocks() * job.b_block())] : nullptr),
        tile(new float[static_cast<size_t>(job.mc_cap() * job.nc_cap())]) {}
};

// Packs B's column tile at j0, all of K, into `packed_b`.
void PackColumnTile(const GemmJob& job, int64_t j0, float* packed_b) {
  const int64_t nc = std::min(kNc, job.n - j0);
  for (int64_t p0 = 0; p0 < job.k; p0 += kKc) {
    job.pack_b(job.b, p0, std::min(kKc, job.k - p0), j0, nc,
               packed_b + (p0 / kKc) * job.b_block());
  }
}

// C's tile at rows i0.., columns j0.. from the packed column tile, handed to the epilogue.
void RowTile(const GemmJob& job, int64_t j0, int64_t i0, const float* packed_b,
             float* packed_a, float* tile) {
  const int64_t nc = std::min(kNc, job.n - j0);
  const int64_t nc_padded = RoundUp(nc, kNr);
  const int64_t mc = std::min(kMc, job.m - i0);
  const int64_t mc_padded = RoundUp(mc, kMr);
  const int64_t ldc = job.nc_cap();
  // The accumulator tile starts at +0.0: the first add of each sum is exact, as in the naive
  // loop that starts from 0.
  std::fill(tile, tile + mc_padded * ldc, 0.0f);
  for (int64_t p0 = 0; p0 < job.k; p0 += kKc) {
    const int64_t kc = std::min(kKc, job.k - p0);
    job.pack_a(job.a, i0, mc, p0, kc, packed_a);
    MacroKernel(mc_padded, nc_padded, kc, packed_a, packed_b + (p0 / kKc) * job.b_block(), tile,
                ldc);
  }
  for (int64_t r = 0; r < mc; ++r) job.epilogue(i0 + r, j0, nc, tile + r * ldc);
}

// Runs body(w) for w in [0, workers): workers - 1 new threads and this one.
template <typename Body>
void OnWorkers(int workers, Body body) {
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(workers - 1));
  for (int w = 1; w < workers; ++w) pool.emplace_back(body, w);
  body(0);
  for (std::thread& t : pool) t.join();
}

// Below this many multiply-adds a product stays on one thread: starting one costs tens of
// microseconds, about what 2^22 multiply-adds take.
constexpr double kMinParallelMacs = 4.0 * 1024 * 1024;

}  // namespace

absl::Status GemmCpu(int64_t m, int64_t n, int64_t k, const GemmOperand& a,
                     const GemmOperand& b, GemmEpilogue epilogue, int threads) {
  if (m < 0 || n < 0 || k < 0) {
    return absl::InvalidArgumentError(absl::StrCat("GEMM sizes must not be negative: m=", m,
                                                   " n=", n, " k=", k));
  }
  const PackFn pack_a = PackAFor(a.dtype);
  const PackFn pack_b = PackBFor(b.dtype);
  if (pack_a == nullptr || pack_b == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GEMM operands must be float32, float16 or bfloat16, got ", graph::DataTypeName(a.dtype),
        " and ", graph::DataTypeName(b.dtype)));
  }
  if (m == 0 || n == 0) return absl::OkStatus();
  const GemmJob job{m, n, k, a, b, pack_a, pack_b, epilogue};
  const int64_t col_tiles = (n + kNc - 1) / kNc;
  const int64_t row_tiles = (m + kMc - 1) / kMc;
  int workers = 1;
  if (threads > 1 && static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) >=
                         kMinParallelMacs) {
    workers = static_cast<int>(std::min<int64_t>(threads, std::max(col_tiles, row_tiles)));
  }
  // Every tile is computed as on one thread, whichever worker takes it: the same bits.
  if (workers > 1 && col_tiles >= workers) {
    // Each worker packs and computes whole column tiles: w, w + workers, ...
    OnWorkers(workers, [&](int w) {
      GemmScratch scratch(job, /*with_b=*/true);
      for (int64_t t = w; t < col_tiles; t += workers) {
        PackColumnTile(job, t * kNc, scratch.b.get());
        for (int64_t i0 = 0; i0 < m; i0 += kMc) {
          RowTile(job, t * kNc, i0, scratch.b.get(), scratch.a.get(), scratch.tile.get());
        }
      }
    });
    return absl::OkStatus();
  }
  // One column tile at a time (B packed once for all of its row tiles), row tiles spread over
  // the workers when there are fewer column tiles than workers.
  GemmScratch scratch(job, /*with_b=*/true);
  for (int64_t j0 = 0; j0 < n; j0 += kNc) {
    PackColumnTile(job, j0, scratch.b.get());
    if (workers > 1) {
      OnWorkers(workers, [&](int w) {
        GemmScratch own(job, /*with_b=*/false);
        for (int64_t t = w; t < row_tiles; t += workers) {
          RowTile(job, j0, t * kMc, scratch.b.get(), own.a.get(), own.tile.get());
        }
      });
    } else {
      for (int64_t i0 = 0; i0 < m; i0 += kMc) {
        RowTile(job, j0, i0, scratch.b.get(), scratch.a.get(), scratch.tile.get());
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace memonger::alloc
