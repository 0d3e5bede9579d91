#include "kernels/cpu/gemm_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/kernel_threads.h"
#include "kernels/float16.h"
#include "kernels/kernel_util.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

namespace memonger::alloc {
namespace {

// Cache blocks. The register block is the micro-kernel's `nr` columns (the packed panels' width)
// by its `mr` rows: 6 x 16 with AVX2 (12 of its 16 vector registers hold sums), 12 x 16 or
// 8 x 32 with AVX-512 (12 or 16 of 32).
constexpr int64_t kNr = 16;   // the narrow panels' width
constexpr int64_t kWideNr = 32;
constexpr int64_t kMc = 120;  // a multiple of every micro-kernel's mr
constexpr int64_t kNc = 256;  // multiple of every nr
constexpr int64_t kKc = 256;

int64_t CeilDiv(int64_t x, int64_t m) { return (x + m - 1) / m; }
int64_t RoundUp(int64_t x, int64_t m) { return CeilDiv(x, m) * m; }

// Element (r, c) of op(X), as float32.
template <typename T>
inline float At(const T* data, int64_t ld, bool transposed, int64_t r, int64_t c) {
  return kernel_internal::Load(transposed ? data[c * ld + r] : data[r * ld + c]);
}

// Packs op(A)[i0 : i0 + mc, p0 : p0 + kc] into slivers of mr rows: sliver s holds, for each
// kk, the mr values A(i0 + s*mr + r, p0 + kk) (rows past mc are zero).
template <typename T>
void PackA(const GemmOperand& a, int64_t mr, int64_t i0, int64_t mc, int64_t p0, int64_t kc,
           float* out) {
  const T* data = reinterpret_cast<const T*>(a.data);
  for (int64_t s = 0; s < mc; s += mr) {
    const int64_t rows = std::min(mr, mc - s);
    float* sliver = out + (s / mr) * kc * mr;
    if (a.transposed) {
      // A sliver's mr values at one kk are adjacent in storage.
      for (int64_t kk = 0; kk < kc; ++kk) {
        const T* src = data + (p0 + kk) * a.ld + i0 + s;
        float* dst = sliver + kk * mr;
        for (int64_t r = 0; r < rows; ++r) dst[r] = kernel_internal::Load(src[r]);
        for (int64_t r = rows; r < mr; ++r) dst[r] = 0.0f;
      }
    } else {
      // Each row is read in storage order, the next sliver's row asked for meanwhile: rows of
      // a block are short runs far apart (weights [M, K]), too short for the hardware's
      // prefetcher to find before they end.
      for (int64_t r = 0; r < rows; ++r) {
        const T* src = data + (i0 + s + r) * a.ld + p0;
        if (s + mr + r < mc) {
          const T* next = src + mr * a.ld;
          for (int64_t kk = 0; kk < kc; kk += 64 / static_cast<int64_t>(sizeof(T))) {
            __builtin_prefetch(next + kk);
          }
        }
        for (int64_t kk = 0; kk < kc; ++kk) sliver[kk * mr + r] = kernel_internal::Load(src[kk]);
      }
      for (int64_t r = rows; r < mr; ++r) {
        for (int64_t kk = 0; kk < kc; ++kk) sliver[kk * mr + r] = 0.0f;
      }
    }
  }
}

#if defined(__GNUC__) && defined(__x86_64__)
// out[t * ld_out + i] = rows[i][t] for an 8 x 8 block of floats: eight rows of a stored B^T
// (a Linear layer's weights [N, K]) become eight rows of a panel, in ymm registers.
__attribute__((target("avx2"))) void TransposeEightFloats(const float* const rows[8],
                                                          float* out, int64_t ld_out) {
  __m256 r[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(rows[i]);
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  _mm256_storeu_ps(out + 0 * ld_out, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_storeu_ps(out + 1 * ld_out, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_storeu_ps(out + 2 * ld_out, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_storeu_ps(out + 3 * ld_out, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_storeu_ps(out + 4 * ld_out, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_storeu_ps(out + 5 * ld_out, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_storeu_ps(out + 6 * ld_out, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_storeu_ps(out + 7 * ld_out, _mm256_permute2f128_ps(u3, u7, 0x31));
}
bool HasAvx2() { return __builtin_cpu_supports("avx2"); }
#define MG_GEMM_TRANSPOSE_FLOATS 1
#endif

// Packs op(B)[p0 : p0 + kc, j0 : j0 + nc] into panels of nr columns: panel q holds, for each
// kk, the nr values B(p0 + kk, j0 + q*nr + c) (columns past nc are zero).
template <typename T>
void PackB(const GemmOperand& b, int64_t nr, int64_t p0, int64_t kc, int64_t j0, int64_t nc,
           float* out) {
  const T* data = reinterpret_cast<const T*>(b.data);
#ifdef MG_GEMM_TRANSPOSE_FLOATS
  // A stored B^T of float32 (Linear weights): 8 x 8 blocks transposed in registers, where the
  // scalar loop below reads a column of storage, one cache line per element.
  if constexpr (std::is_same_v<T, float>) {
    static const bool avx2 = HasAvx2();
    if (b.transposed && avx2) {
      for (int64_t q = 0; q < nc; q += nr) {
        const int64_t cols = std::min(nr, nc - q);
        float* panel = out + (q / nr) * kc * nr;
        const int64_t whole_cols = cols / 8 * 8, whole_k = kc / 8 * 8;
        for (int64_t c0 = 0; c0 < whole_cols; c0 += 8) {
          const float* rows[8];
          for (int i = 0; i < 8; ++i) rows[i] = data + (j0 + q + c0 + i) * b.ld + p0;
          for (int64_t k0 = 0; k0 < whole_k; k0 += 8) {
            TransposeEightFloats(rows, panel + k0 * nr + c0, nr);
            for (int i = 0; i < 8; ++i) rows[i] += 8;
          }
        }
        for (int64_t kk = 0; kk < kc; ++kk) {
          float* dst = panel + kk * nr;
          // The block's edges: k past whole blocks for its columns, then the columns past them.
          const int64_t first = kk < whole_k ? whole_cols : 0;
          for (int64_t c = first; c < cols; ++c) dst[c] = data[(j0 + q + c) * b.ld + p0 + kk];
          for (int64_t c = cols; c < nr; ++c) dst[c] = 0.0f;
        }
      }
      return;
    }
  }
#endif
  for (int64_t q = 0; q < nc; q += nr) {
    const int64_t cols = std::min(nr, nc - q);
    for (int64_t kk = 0; kk < kc; ++kk) {
      float* dst = out + (q / nr) * kc * nr + kk * nr;
      if (!b.transposed) {
        const T* src = data + (p0 + kk) * b.ld + j0 + q;
        for (int64_t c = 0; c < cols; ++c) dst[c] = kernel_internal::Load(src[c]);
      } else {
        for (int64_t c = 0; c < cols; ++c) dst[c] = At(data, b.ld, true, p0 + kk, j0 + q + c);
      }
      for (int64_t c = cols; c < nr; ++c) dst[c] = 0.0f;
    }
  }
}

using PackAFn = void (*)(const GemmOperand&, int64_t, int64_t, int64_t, int64_t, int64_t, float*);
using PackFn = void (*)(const GemmOperand&, int64_t, int64_t, int64_t, int64_t, int64_t, float*);

PackAFn PackAFor(graph::DataType dtype) {
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

// Pair packing for the bfloat16 micro-kernel: each 32-bit word holds two bfloat16 values of
// consecutive k, k = 2p in the high half and 2p + 1 in the low half, the order in which
// VDPBF16PS adds them. A block of odd kc pads its last word's low half: with -0.0 in A and +0.0
// in B, a product of -0.0 that leaves any sum as it was (+0.0 + -0.0 is +0.0).
constexpr uint32_t kNegativeZeroBits = 0x8000;

inline uint32_t Bits(const GemmOperand& x, int64_t r, int64_t c) {
  const int64_t at = x.transposed ? c * x.ld + r : r * x.ld + c;
  if (x.dtype == graph::DataType::kBFloat16) {
    return reinterpret_cast<const BFloat16*>(x.data)[at].bits;
  }
  uint32_t word;  // a float32 holding a bfloat16 value: its top half
  std::memcpy(&word, x.data + at * 4, 4);
  return word >> 16;
}

bool MultipliesAsBf16(const GemmOperand& x) {
  return x.dtype == graph::DataType::kBFloat16 ||
         (x.dtype == graph::DataType::kFloat32 && x.bf16_values);
}

#if defined(__GNUC__) && defined(__x86_64__)
// Eight rows' words [p, p + 8) (bfloat16 rows as stored: `src[r]` points at row r's pair p),
// halves swapped, written transposed: out[q * 8 + r] = word p + q of row r. An 8 x 8
// transpose in ymm registers: pair packing of a whole sliver runs at the speed of its loads.
__attribute__((target("avx2"))) void TransposeEightPairs(const std::byte* const src[8],
                                                         uint32_t* out) {
  __m256i r[8];
  for (int i = 0; i < 8; ++i) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src[i]));
    r[i] = _mm256_or_si256(_mm256_slli_epi32(v, 16), _mm256_srli_epi32(v, 16));
  }
  const __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
  const __m256i t4 = _mm256_unpacklo_epi32(r[4], r[5]), t5 = _mm256_unpackhi_epi32(r[4], r[5]);
  const __m256i t6 = _mm256_unpacklo_epi32(r[6], r[7]), t7 = _mm256_unpackhi_epi32(r[6], r[7]);
  const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
  const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
  const __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
  const __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
  __m256i* dst = reinterpret_cast<__m256i*>(out);
  _mm256_storeu_si256(dst + 0, _mm256_permute2x128_si256(u0, u4, 0x20));
  _mm256_storeu_si256(dst + 1, _mm256_permute2x128_si256(u1, u5, 0x20));
  _mm256_storeu_si256(dst + 2, _mm256_permute2x128_si256(u2, u6, 0x20));
  _mm256_storeu_si256(dst + 3, _mm256_permute2x128_si256(u3, u7, 0x20));
  _mm256_storeu_si256(dst + 4, _mm256_permute2x128_si256(u0, u4, 0x31));
  _mm256_storeu_si256(dst + 5, _mm256_permute2x128_si256(u1, u5, 0x31));
  _mm256_storeu_si256(dst + 6, _mm256_permute2x128_si256(u2, u6, 0x31));
  _mm256_storeu_si256(dst + 7, _mm256_permute2x128_si256(u3, u7, 0x31));
}
#define MG_GEMM_TRANSPOSE_PAIRS 1
#endif

// As PackA, sliver s holding for each pair p the mr words (A(row, 2p), A(row, 2p + 1)).
// REQUIRES (bfloat16 rows with mr = 8): a CPU with AVX2 (the pair kernel's CPUs have AVX-512).
void PackAPairs(const GemmOperand& a, int64_t mr, int64_t i0, int64_t mc, int64_t p0, int64_t kc,
                float* out) {
  uint32_t* words = reinterpret_cast<uint32_t*>(out);
  const int64_t pairs = CeilDiv(kc, 2);
  const int64_t whole = kc / 2;
  // bfloat16 rows as stored (weights [M, K]): a pair is one 32-bit load, its halves swapped.
  const bool rows_of_bf16 = a.dtype == graph::DataType::kBFloat16 && !a.transposed;
  for (int64_t s = 0; s < mc; s += mr) {
    const int64_t rows = std::min(mr, mc - s);
    uint32_t* sliver = words + (s / mr) * pairs * mr;
    int64_t done = 0;  // pairs of every row already packed
#ifdef MG_GEMM_TRANSPOSE_PAIRS
    if (rows_of_bf16 && mr == 8 && rows == 8) {
      const std::byte* src[8];
      for (int r = 0; r < 8; ++r) src[r] = a.data + ((i0 + s + r) * a.ld + p0) * 2;
      for (; done + 8 <= whole; done += 8) {
        TransposeEightPairs(src, sliver + done * 8);
        for (int r = 0; r < 8; ++r) src[r] += 32;
      }
    }
#endif
    for (int64_t r = 0; r < mr; ++r) {
      if (r >= rows) {
        for (int64_t p = 0; p < pairs; ++p) sliver[p * mr + r] = 0;
        continue;
      }
      const int64_t row = i0 + s + r;
      if (rows_of_bf16) {
        const std::byte* src = a.data + (row * a.ld + p0) * 2;
        for (int64_t p = done; p < whole; ++p) {
          uint32_t w;
          std::memcpy(&w, src + p * 4, 4);
          sliver[p * mr + r] = w << 16 | w >> 16;
        }
      } else {
        for (int64_t p = 0; p < whole; ++p) {
          sliver[p * mr + r] = Bits(a, row, p0 + 2 * p) << 16 | Bits(a, row, p0 + 2 * p + 1);
        }
      }
      if (whole < pairs) {
        sliver[whole * mr + r] = Bits(a, row, p0 + kc - 1) << 16 | kNegativeZeroBits;
      }
    }
  }
}

// As PackB, panel q holding for each pair p the nr words (B(2p, col), B(2p + 1, col)).
void PackBPairs(const GemmOperand& b, int64_t nr, int64_t p0, int64_t kc, int64_t j0, int64_t nc,
                float* out) {
  uint32_t* words = reinterpret_cast<uint32_t*>(out);
  const int64_t pairs = CeilDiv(kc, 2);
  // float32 rows holding bfloat16 values (a column matrix [K, N]): the pair's halves are the
  // two rows' top halves, column by column.
  const bool rows_of_f32 = b.dtype == graph::DataType::kFloat32 && !b.transposed;
  for (int64_t q = 0; q < nc; q += nr) {
    const int64_t cols = std::min(nr, nc - q);
    for (int64_t p = 0; p < pairs; ++p) {
      uint32_t* dst = words + (q / nr) * pairs * nr + p * nr;
      const bool both = 2 * p + 1 < kc;
      if (rows_of_f32) {
        const std::byte* first = b.data + ((p0 + 2 * p) * b.ld + j0 + q) * 4;
        const std::byte* second = first + b.ld * 4;
        for (int64_t c = 0; c < cols; ++c) {
          uint32_t hi, lo = 0;
          std::memcpy(&hi, first + c * 4, 4);
          if (both) std::memcpy(&lo, second + c * 4, 4);
          dst[c] = (hi & 0xFFFF0000u) | lo >> 16;
        }
      } else {
        for (int64_t c = 0; c < cols; ++c) {
          const int64_t col = j0 + q + c;
          const uint32_t low = both ? Bits(b, p0 + 2 * p + 1, col) : 0;
          dst[c] = Bits(b, p0 + 2 * p, col) << 16 | low;
        }
      }
      for (int64_t c = cols; c < nr; ++c) dst[c] = 0;
    }
  }
}

// The macro-kernels: packed A (slivers of mr rows) x packed B (panels of nr columns) over kc,
// added into the accumulator tile `c` (row stride ldc, padded to whole slivers and panels).
// Each keeps an mr x nr block of sums in registers while it walks k in ascending order, and
// each sum is a chain of fused multiply-adds, acc = fma(a, b, acc): one rounding per step, so
// the three versions (AVX-512, AVX2 + FMA, and portable std::fma) give the same bits.
using MacroFn = void (*)(int64_t mc_padded, int64_t nc_padded, int64_t kc, const float* ap,
                         const float* bp, float* c, int64_t ldc);

void MacroKernelPortable(int64_t mc_padded, int64_t nc_padded, int64_t kc, const float* ap,
                         const float* bp, float* c, int64_t ldc) {
  constexpr int64_t kMr = 6;
  for (int64_t q = 0; q < nc_padded; q += kNr) {
    const float* panel = bp + (q / kNr) * kc * kNr;
    for (int64_t s = 0; s < mc_padded; s += kMr) {
      const float* sliver = ap + (s / kMr) * kc * kMr;
      float acc[kMr][kNr];
      for (int64_t r = 0; r < kMr; ++r) std::memcpy(acc[r], c + (s + r) * ldc + q, sizeof(acc[r]));
      for (int64_t kk = 0; kk < kc; ++kk) {
        const float* brow = panel + kk * kNr;
        for (int64_t r = 0; r < kMr; ++r) {
          const float av = sliver[kk * kMr + r];
          for (int64_t j = 0; j < kNr; ++j) acc[r][j] = std::fma(av, brow[j], acc[r][j]);
        }
      }
      for (int64_t r = 0; r < kMr; ++r) std::memcpy(c + (s + r) * ldc + q, acc[r], sizeof(acc[r]));
    }
  }
}

#if defined(__GNUC__) && defined(__x86_64__)
#define MG_GEMM_X86 1

// 6 rows x 16 columns: 12 sums of 8 in ymm registers.
__attribute__((target("avx2,fma"))) void MacroKernelAvx2(int64_t mc_padded, int64_t nc_padded,
                                                         int64_t kc, const float* ap,
                                                         const float* bp, float* c, int64_t ldc) {
  constexpr int64_t kMr = 6;
  for (int64_t q = 0; q < nc_padded; q += kNr) {
    const float* panel = bp + (q / kNr) * kc * kNr;
    for (int64_t s = 0; s < mc_padded; s += kMr) {
      const float* sliver = ap + (s / kMr) * kc * kMr;
      float* cblock = c + s * ldc + q;
      __m256 acc[kMr][2];
      for (int64_t r = 0; r < kMr; ++r) {
        acc[r][0] = _mm256_loadu_ps(cblock + r * ldc);
        acc[r][1] = _mm256_loadu_ps(cblock + r * ldc + 8);
      }
      for (int64_t kk = 0; kk < kc; ++kk) {
        const __m256 b0 = _mm256_loadu_ps(panel + kk * kNr);
        const __m256 b1 = _mm256_loadu_ps(panel + kk * kNr + 8);
        const float* acol = sliver + kk * kMr;
        for (int64_t r = 0; r < kMr; ++r) {
          const __m256 av = _mm256_broadcast_ss(acol + r);
          acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
          acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
        }
      }
      for (int64_t r = 0; r < kMr; ++r) {
        _mm256_storeu_ps(cblock + r * ldc, acc[r][0]);
        _mm256_storeu_ps(cblock + r * ldc + 8, acc[r][1]);
      }
    }
  }
}

// 12 rows x 16 columns: 12 sums of 16 in zmm registers.
__attribute__((target("avx512f"))) void MacroKernelAvx512(int64_t mc_padded, int64_t nc_padded,
                                                          int64_t kc, const float* ap,
                                                          const float* bp, float* c,
                                                          int64_t ldc) {
  constexpr int64_t kMr = 12;
  for (int64_t q = 0; q < nc_padded; q += kNr) {
    const float* panel = bp + (q / kNr) * kc * kNr;
    for (int64_t s = 0; s < mc_padded; s += kMr) {
      const float* sliver = ap + (s / kMr) * kc * kMr;
      float* cblock = c + s * ldc + q;
      __m512 acc[kMr];
      for (int64_t r = 0; r < kMr; ++r) acc[r] = _mm512_loadu_ps(cblock + r * ldc);
      for (int64_t kk = 0; kk < kc; ++kk) {
        const __m512 b = _mm512_loadu_ps(panel + kk * kNr);
        const float* acol = sliver + kk * kMr;
        for (int64_t r = 0; r < kMr; ++r) {
          acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(acol[r]), b, acc[r]);
        }
      }
      for (int64_t r = 0; r < kMr; ++r) _mm512_storeu_ps(cblock + r * ldc, acc[r]);
    }
  }
}

// 8 rows x 32 columns: 16 sums of 16 in zmm registers. Per k it loads two B vectors and eight A
// values for sixteen multiply-adds (the 12 x 16 block loads thirteen for twelve), so the adds,
// not the loads, set its pace; and 8 rows divide the power-of-two map counts of CNNs.
__attribute__((target("avx512f"))) void MacroKernelAvx512Wide(int64_t mc_padded,
                                                              int64_t nc_padded, int64_t kc,
                                                              const float* ap, const float* bp,
                                                              float* c, int64_t ldc) {
  constexpr int64_t kMr = 8;
  for (int64_t q = 0; q < nc_padded; q += kWideNr) {
    const float* panel = bp + (q / kWideNr) * kc * kWideNr;
    for (int64_t s = 0; s < mc_padded; s += kMr) {
      const float* sliver = ap + (s / kMr) * kc * kMr;
      float* cblock = c + s * ldc + q;
      __m512 acc[kMr][2];
      for (int64_t r = 0; r < kMr; ++r) {
        acc[r][0] = _mm512_loadu_ps(cblock + r * ldc);
        acc[r][1] = _mm512_loadu_ps(cblock + r * ldc + 16);
      }
      for (int64_t kk = 0; kk < kc; ++kk) {
        const __m512 b0 = _mm512_loadu_ps(panel + kk * kWideNr);
        const __m512 b1 = _mm512_loadu_ps(panel + kk * kWideNr + 16);
        const float* acol = sliver + kk * kMr;
        for (int64_t r = 0; r < kMr; ++r) {
          const __m512 av = _mm512_set1_ps(acol[r]);
          acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
          acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
        }
      }
      for (int64_t r = 0; r < kMr; ++r) {
        _mm512_storeu_ps(cblock + r * ldc, acc[r][0]);
        _mm512_storeu_ps(cblock + r * ldc + 16, acc[r][1]);
      }
    }
  }
}

// 8 rows x 32 columns of bfloat16 pairs: per pair of k, two B vectors of 16 words and eight A
// words give sixteen VDPBF16PS, each two multiply-adds per lane (k = 2p, then 2p + 1). A product
// of two bfloat16 values is exact in float32, so each add rounds once, as fma does; but the
// instruction treats subnormal inputs and results as zero.
__attribute__((target("avx512f,avx512bf16"))) void MacroKernelAvx512Bf16(
    int64_t mc_padded, int64_t nc_padded, int64_t kc, const float* ap, const float* bp, float* c,
    int64_t ldc) {
  constexpr int64_t kMr = 8;
  const int64_t pairs = CeilDiv(kc, 2);
  const uint32_t* a_words = reinterpret_cast<const uint32_t*>(ap);
  const uint32_t* b_words = reinterpret_cast<const uint32_t*>(bp);
  for (int64_t q = 0; q < nc_padded; q += kWideNr) {
    const uint32_t* panel = b_words + (q / kWideNr) * pairs * kWideNr;
    for (int64_t s = 0; s < mc_padded; s += kMr) {
      const uint32_t* sliver = a_words + (s / kMr) * pairs * kMr;
      float* cblock = c + s * ldc + q;
      __m512 acc[kMr][2];
      for (int64_t r = 0; r < kMr; ++r) {
        acc[r][0] = _mm512_loadu_ps(cblock + r * ldc);
        acc[r][1] = _mm512_loadu_ps(cblock + r * ldc + 16);
      }
      for (int64_t p = 0; p < pairs; ++p) {
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512(panel + p * kWideNr);
        const __m512bh b1 = (__m512bh)_mm512_loadu_si512(panel + p * kWideNr + 16);
        const uint32_t* acol = sliver + p * kMr;
        for (int64_t r = 0; r < kMr; ++r) {
          const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(acol[r]));
          acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
          acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
        }
      }
      for (int64_t r = 0; r < kMr; ++r) {
        _mm512_storeu_ps(cblock + r * ldc, acc[r][0]);
        _mm512_storeu_ps(cblock + r * ldc + 16, acc[r][1]);
      }
    }
  }
}
#endif

// A micro-kernel, its sliver height and its panel width.
struct MicroKernel {
  int64_t mr;
  int64_t nr;
  MacroFn macro;
  bool bf16_pairs = false;  // packs bfloat16 pairs (PackAPairs, PackBPairs), not float32
};

constexpr MicroKernel kPortableKernel{6, kNr, MacroKernelPortable};
#ifdef MG_GEMM_X86
constexpr MicroKernel kAvx2Kernel{6, kNr, MacroKernelAvx2};
constexpr MicroKernel kAvx512Kernel{12, kNr, MacroKernelAvx512};
constexpr MicroKernel kAvx512WideKernel{8, kWideNr, MacroKernelAvx512Wide};
constexpr MicroKernel kAvx512Bf16Kernel{8, kWideNr, MacroKernelAvx512Bf16, true};
bool HasAvx512() { return __builtin_cpu_supports("avx512f"); }
bool HasAvx512Bf16() { return HasAvx512() && __builtin_cpu_supports("avx512bf16"); }
bool HasAvx2Fma() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
#endif

// The padded elements a micro-kernel computes for an m x n product (m rounded as one row tile),
// times its cost per element relative to the 8 x 32 block. That weight is an estimate from the
// loads, not a measurement: per k the 12 x 16 block issues 13 loads for 12 multiply-adds, so
// the loads (two a cycle) set its pace, where 8 x 32 issues 10 for 16 and the adds do.
double PaddedWork(const MicroKernel& micro, int64_t m, int64_t n, double per_element) {
  const int64_t full_tiles = n / kNc;
  const int64_t padded_n = full_tiles * kNc + RoundUp(n - full_tiles * kNc, micro.nr);
  return per_element * static_cast<double>(RoundUp(m, micro.mr)) * static_cast<double>(padded_n);
}

// kAuto: bfloat16 pairs where both operands are bfloat16 and the CPU has AVX512_BF16 (twice the
// multiply-adds per instruction); else, with AVX-512, whichever of its two blocks wastes less on
// padding (every float32 block gives the same bits, so the choice changes only time).
std::optional<MicroKernel> FindMicroKernel(GemmKernel kernel, int64_t m, int64_t n,
                                           bool bf16_operands) {
  switch (kernel) {
    case GemmKernel::kAuto:
#ifdef MG_GEMM_X86
      if (bf16_operands && HasAvx512Bf16()) return kAvx512Bf16Kernel;
      if (HasAvx512()) {
        return PaddedWork(kAvx512WideKernel, m, n, 1.0) <= PaddedWork(kAvx512Kernel, m, n, 1.1)
                   ? kAvx512WideKernel
                   : kAvx512Kernel;
      }
      if (HasAvx2Fma()) return kAvx2Kernel;
#endif
      return kPortableKernel;
    case GemmKernel::kPortable:
      return kPortableKernel;
    case GemmKernel::kAvx2Fma:
#ifdef MG_GEMM_X86
      if (HasAvx2Fma()) return kAvx2Kernel;
#endif
      return std::nullopt;
    case GemmKernel::kAvx512:
#ifdef MG_GEMM_X86
      if (HasAvx512()) return kAvx512Kernel;
#endif
      return std::nullopt;
    case GemmKernel::kAvx512Wide:
#ifdef MG_GEMM_X86
      if (HasAvx512()) return kAvx512WideKernel;
#endif
      return std::nullopt;
    case GemmKernel::kAvx512Bf16:
#ifdef MG_GEMM_X86
      if (bf16_operands && HasAvx512Bf16()) return kAvx512Bf16Kernel;
#endif
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

bool GemmKernelSupported(GemmKernel kernel) {
  return FindMicroKernel(kernel, 1, 1, /*bf16_operands=*/true).has_value();
}

namespace {

// One product's geometry and operands, shared read-only by its workers.
struct GemmJob {
  int64_t m, n, k;
  const GemmOperand& a;
  const GemmOperand& b;
  PackAFn pack_a;
  PackFn pack_b;
  GemmEpilogue epilogue;
  MicroKernel micro;
  int64_t mc;  // row tile height: kMc, or less to give each worker as many rows
  // The buffers are sized by the product, not by the blocking's maxima: a small product (the
  // many [20 x 64] x [64 x 64] of a small transformer) would otherwise allocate and touch
  // half a megabyte per call.
  int64_t kc_max() const { return std::min(kKc, std::max<int64_t>(k, 1)); }
  int64_t k_blocks() const { return std::max<int64_t>((k + kKc - 1) / kKc, 1); }
  int64_t mc_cap() const { return std::min(mc, RoundUp(m, micro.mr)); }
  int64_t nc_cap() const { return std::min(kNc, RoundUp(n, micro.nr)); }
  int64_t b_block() const { return kc_max() * nc_cap(); }  // one packed K block of a tile
};

// A worker's buffers, from the caller's scratch where it has one. The packs write every element
// they are read at (padding zeros included), so they are left uninitialised; the accumulator
// tile is cleared per row tile.
struct WorkerBuffers {
  ScratchFloats a, b, tile;
  WorkerBuffers(const GemmJob& job, const GemmScratch& scratch, int worker, bool with_b)
      : a(scratch.pool, worker, ScratchUse::kGemmA,
          static_cast<size_t>(job.mc_cap() * job.kc_max())),
        b(scratch.pool, worker, ScratchUse::kGemmB,
          with_b ? static_cast<size_t>(job.k_blocks() * job.b_block()) : 0),
        tile(scratch.pool, worker, ScratchUse::kGemmTile,
             static_cast<size_t>(job.mc_cap() * job.nc_cap())) {}
};

// Packs B's column tile at j0, all of K, into `packed_b`.
void PackColumnTile(const GemmJob& job, int64_t j0, float* packed_b) {
  const int64_t nc = std::min(kNc, job.n - j0);
  for (int64_t p0 = 0; p0 < job.k; p0 += kKc) {
    job.pack_b(job.b, job.micro.nr, p0, std::min(kKc, job.k - p0), j0, nc,
               packed_b + (p0 / kKc) * job.b_block());
  }
}

// C's tile at rows i0.., columns j0.. from the packed column tile, handed to the epilogue.
void RowTile(const GemmJob& job, int64_t j0, int64_t i0, const float* packed_b,
             float* packed_a, float* tile) {
  const int64_t nc = std::min(kNc, job.n - j0);
  const int64_t nc_padded = RoundUp(nc, job.micro.nr);
  const int64_t mc = std::min(job.mc, job.m - i0);
  const int64_t mc_padded = RoundUp(mc, job.micro.mr);
  const int64_t ldc = job.nc_cap();
  // The accumulator tile starts at +0.0: the first add of each sum is exact, as in the naive
  // loop that starts from 0.
  std::fill(tile, tile + mc_padded * ldc, 0.0f);
  for (int64_t p0 = 0; p0 < job.k; p0 += kKc) {
    const int64_t kc = std::min(kKc, job.k - p0);
    job.pack_a(job.a, job.micro.mr, i0, mc, p0, kc, packed_a);
    job.micro.macro(mc_padded, nc_padded, kc, packed_a, packed_b + (p0 / kKc) * job.b_block(), tile,
                ldc);
  }
  for (int64_t r = 0; r < mc; ++r) job.epilogue(i0 + r, j0, nc, tile + r * ldc);
}

}  // namespace

absl::Status GemmCpu(int64_t m, int64_t n, int64_t k, const GemmOperand& a,
                     const GemmOperand& b, GemmEpilogue epilogue, int threads,
                     GemmKernel kernel, GemmScratch scratch) {
  if (m < 0 || n < 0 || k < 0) {
    return absl::InvalidArgumentError(absl::StrCat("GEMM sizes must not be negative: m=", m,
                                                   " n=", n, " k=", k));
  }
  PackAFn pack_a = PackAFor(a.dtype);
  PackFn pack_b = PackBFor(b.dtype);
  if (pack_a == nullptr || pack_b == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GEMM operands must be float32, float16 or bfloat16, got ", graph::DataTypeName(a.dtype),
        " and ", graph::DataTypeName(b.dtype)));
  }
  const bool bf16 = MultipliesAsBf16(a) && MultipliesAsBf16(b);
  if (kernel == GemmKernel::kAvx512Bf16 && !bf16) {
    return absl::InvalidArgumentError("the bfloat16 micro-kernel multiplies bfloat16 operands only");
  }
  const std::optional<MicroKernel> micro = FindMicroKernel(kernel, m, n, bf16);
  if (!micro.has_value()) {
    return absl::FailedPreconditionError("this CPU lacks the GEMM micro-kernel's instructions");
  }
  if (micro->bf16_pairs) {
    pack_a = PackAPairs;
    pack_b = PackBPairs;
  }
  if (m == 0 || n == 0) return absl::OkStatus();
  const int64_t col_tiles = CeilDiv(n, kNc);
  // Rows split in pieces of at least four slivers where there are too few column tiles.
  const int workers = kernel_internal::WorkersFor(
      threads, static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k),
      std::max(col_tiles, CeilDiv(m, 4 * micro->mr)));
  int64_t mc = kMc;
  if (workers > 1 && col_tiles < workers) {
    // A multiple of `workers` row tiles, as even as whole slivers allow (the tiling does not
    // change any sum).
    const int64_t tiles = RoundUp(CeilDiv(m, kMc), workers);
    mc = RoundUp(CeilDiv(m, tiles), micro->mr);
  }
  const GemmJob job{m, n, k, a, b, pack_a, pack_b, epilogue, *micro, mc};
  const int64_t row_tiles = CeilDiv(m, mc);
  // Every tile is computed as on one thread, whichever worker takes it: the same bits.
  if (workers > 1 && col_tiles >= workers) {
    // Each worker packs and computes whole column tiles: w, w + workers, ...
    kernel_internal::RunOnWorkers(workers, [&](int w) {
      WorkerBuffers own(job, scratch, w, /*with_b=*/true);
      for (int64_t t = w; t < col_tiles; t += workers) {
        PackColumnTile(job, t * kNc, own.b.data());
        for (int64_t i0 = 0; i0 < m; i0 += mc) {
          RowTile(job, t * kNc, i0, own.b.data(), own.a.data(), own.tile.data());
        }
      }
    });
    return absl::OkStatus();
  }
  // One column tile at a time (B packed once for all of its row tiles), row tiles spread over
  // the workers when there are fewer column tiles than workers.
  // With several workers the caller is worker 0 (its buffers hold the shared B).
  const int first = workers > 1 ? 0 : scratch.worker;
  WorkerBuffers mine(job, scratch, first, /*with_b=*/true);
  for (int64_t j0 = 0; j0 < n; j0 += kNc) {
    PackColumnTile(job, j0, mine.b.data());
    if (workers > 1) {
      kernel_internal::RunOnWorkers(workers, [&](int w) {
        if (w == 0) {
          for (int64_t t = 0; t < row_tiles; t += workers) {
            RowTile(job, j0, t * mc, mine.b.data(), mine.a.data(), mine.tile.data());
          }
          return;
        }
        WorkerBuffers own(job, scratch, w, /*with_b=*/false);
        for (int64_t t = w; t < row_tiles; t += workers) {
          RowTile(job, j0, t * mc, mine.b.data(), own.a.data(), own.tile.data());
        }
      });
    } else {
      for (int64_t i0 = 0; i0 < m; i0 += mc) {
        RowTile(job, j0, i0, mine.b.data(), mine.a.data(), mine.tile.data());
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace memonger::alloc
