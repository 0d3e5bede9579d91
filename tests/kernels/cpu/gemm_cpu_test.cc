// GemmCpu: bit-identical to the naive float32 loop (acc = fma(a, b, acc) over k from 0) with
// every micro-kernel the CPU runs (bfloat16 pairs: away from subnormals, which they flush), for
// every blocking edge (sizes around the register and cache blocks), transposes and storage
// types; each element handed to the epilogue exactly once; bad arguments are errors.
#include "kernels/cpu/gemm_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/kernel_test_support.h"

namespace memonger::alloc {
namespace {

using graph::DataType;
using testing::MakeTensor;
using testing::RandomValues;
using testing::TestTensor;
using testing::ToDoubles;

struct GemmCase {
  const char* name;
  int64_t m, n, k;
  bool trans_a, trans_b;
  DataType dtype;
};
// Printed by name (gtest would otherwise dump the bytes, padding included).
void PrintTo(const GemmCase& c, std::ostream* os) { *os << c.name; }

class GemmCpuTest : public ::testing::TestWithParam<GemmCase> {};

TEST_P(GemmCpuTest, MatchesTheNaiveLoopBitForBit) {
  const GemmCase& c = GetParam();
  // Stored shapes: A [m, k] or [k, m]; B [k, n] or [n, k].
  const std::vector<int64_t> a_dims = c.trans_a ? std::vector<int64_t>{c.k, c.m}
                                                : std::vector<int64_t>{c.m, c.k};
  const std::vector<int64_t> b_dims = c.trans_b ? std::vector<int64_t>{c.n, c.k}
                                                : std::vector<int64_t>{c.k, c.n};
  TestTensor a = MakeTensor(c.dtype, a_dims, RandomValues(c.m * c.k, 1));
  TestTensor b = MakeTensor(c.dtype, b_dims, RandomValues(c.k * c.n, 2));
  const std::vector<double> av = ToDoubles(a);
  const std::vector<double> bv = ToDoubles(b);
  const GemmOperand ga{c.dtype, a.bytes(), a_dims[1], c.trans_a};
  const GemmOperand gb{c.dtype, b.bytes(), b_dims[1], c.trans_b};
  // The naive loop's bits.
  std::vector<float> naive(static_cast<size_t>(c.m * c.n));
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      float acc = 0.0f;
      for (int64_t p = 0; p < c.k; ++p) {
        const float x = static_cast<float>(c.trans_a ? av[p * c.m + i] : av[i * c.k + p]);
        const float y = static_cast<float>(c.trans_b ? bv[j * c.k + p] : bv[p * c.n + j]);
        acc = std::fma(x, y, acc);
      }
      naive[i * c.n + j] = acc;
    }
  }
  // Every micro-kernel this CPU runs gives them.
  int kernels_run = 0;
  for (GemmKernel kernel : {GemmKernel::kAuto, GemmKernel::kPortable, GemmKernel::kAvx2Fma,
                            GemmKernel::kAvx512, GemmKernel::kAvx512Wide, GemmKernel::kAvx512Bf16}) {
    if (!GemmKernelSupported(kernel)) continue;
    // The bfloat16 pairs multiply two bfloat16 operands only (RandomValues has no subnormals).
    if (kernel == GemmKernel::kAvx512Bf16 && c.dtype != DataType::kBFloat16) continue;
    ++kernels_run;
    SCOPED_TRACE(absl::StrCat("micro-kernel ", static_cast<int>(kernel)));
    std::vector<float> result(static_cast<size_t>(c.m * c.n), -1.0f);
    std::vector<int> visits(static_cast<size_t>(c.m * c.n), 0);
    ASSERT_TRUE(GemmCpu(c.m, c.n, c.k, ga, gb,
                        [&](int64_t row, int64_t col, int64_t count, const float* acc) {
                          for (int64_t j = 0; j < count; ++j) {
                            result[row * c.n + col + j] = acc[j];
                            ++visits[row * c.n + col + j];
                          }
                        },
                        /*threads=*/1, kernel)
                    .ok());
    for (int64_t i = 0; i < c.m * c.n; ++i) {
      ASSERT_EQ(visits[i], 1) << i / c.n << "," << i % c.n;
      ASSERT_EQ(std::memcmp(&naive[i], &result[i], 4), 0)
          << "C(" << i / c.n << "," << i % c.n << ") = " << result[i] << ", naive " << naive[i];
    }
  }
  EXPECT_GE(kernels_run, 2);  // kAuto and the portable loop at least
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GemmCpuTest,
    ::testing::Values(GemmCase{"one_by_one", 1, 1, 1, false, false, DataType::kFloat32},
                      GemmCase{"k_zero", 3, 5, 0, false, false, DataType::kFloat32},
                      GemmCase{"ragged_small", 5, 17, 3, false, false, DataType::kFloat32},
                      GemmCase{"past_every_block", 130, 261, 300, false, false, DataType::kFloat32},
                      // Around the 8 x 32 block: a row and a column past whole blocks.
                      GemmCase{"wide_block_edges", 17, 65, 257, false, false, DataType::kFloat32},
                      GemmCase{"wide_blocks_exact", 64, 288, 40, false, false, DataType::kFloat32},
                      GemmCase{"transposed_a", 37, 40, 29, true, false, DataType::kFloat32},
                      GemmCase{"transposed_b", 37, 40, 29, false, true, DataType::kFloat32},
                      GemmCase{"both_transposed", 9, 33, 65, true, true, DataType::kFloat32},
                      GemmCase{"float16", 66, 70, 260, false, false, DataType::kFloat16},
                      GemmCase{"bfloat16_transposed_b", 20, 18, 70, false, true, DataType::kBFloat16},
                      // Pairs of k: an odd K, and one past a cache block; both transposes.
                      GemmCase{"bfloat16_odd_k", 9, 33, 7, false, false, DataType::kBFloat16},
                      GemmCase{"bfloat16_past_every_block", 130, 261, 301, false, false,
                               DataType::kBFloat16},
                      GemmCase{"bfloat16_transposed_a", 37, 40, 29, true, false,
                               DataType::kBFloat16},
                      GemmCase{"bfloat16_k_one", 3, 5, 1, true, true, DataType::kBFloat16}),
    [](const ::testing::TestParamInfo<GemmCase>& info) { return info.param.name; });

// Split over threads (by column tiles, and by row tiles where there is one column tile), every
// element is handed over once and is the same bits as on one thread.
TEST(GemmCpuThreadsTest, AnyThreadCountGivesTheSameBits) {
  struct Shape {
    int64_t m, n, k;
  };
  for (const Shape& sh : {Shape{130, 1100, 40}, Shape{700, 200, 40}, Shape{61, 300, 250},
                          Shape{100, 180, 300}}) {
    SCOPED_TRACE(absl::StrCat(sh.m, "x", sh.n, "x", sh.k));
    TestTensor a = MakeTensor(DataType::kFloat32, {sh.m, sh.k}, RandomValues(sh.m * sh.k, 3));
    TestTensor b = MakeTensor(DataType::kFloat16, {sh.k, sh.n}, RandomValues(sh.k * sh.n, 4));
    const GemmOperand ga{DataType::kFloat32, a.bytes(), sh.k, false};
    const GemmOperand gb{DataType::kFloat16, b.bytes(), sh.n, false};
    std::vector<float> one;
    for (int threads : {1, 2, 3, 8}) {
      std::vector<float> result(static_cast<size_t>(sh.m * sh.n), -1.0f);
      std::vector<int> visits(result.size(), 0);
      ASSERT_TRUE(GemmCpu(sh.m, sh.n, sh.k, ga, gb,
                          [&](int64_t row, int64_t col, int64_t count, const float* acc) {
                            for (int64_t j = 0; j < count; ++j) {
                              result[row * sh.n + col + j] = acc[j];
                              ++visits[row * sh.n + col + j];
                            }
                          },
                          threads)
                      .ok());
      ASSERT_EQ(visits, std::vector<int>(result.size(), 1)) << threads;
      if (threads == 1) {
        one = result;
      } else {
        ASSERT_EQ(std::memcmp(one.data(), result.data(), one.size() * sizeof(float)), 0)
            << threads << " threads";
      }
    }
  }
}

// Through a KernelScratch kept across products of several shapes (buffers left holding NaNs and
// an earlier product's packs), on one thread as a kernel's worker 3 and on several threads: the
// same bits as with buffers of the call's own.
TEST(GemmCpuScratchTest, KeptBuffersGiveTheSameBits) {
  struct Shape {
    int64_t m, n, k;
  };
  KernelScratch scratch(4);
  auto poison = [&] {
    for (int w = 0; w < scratch.workers(); ++w) {
      for (ScratchUse use : {ScratchUse::kGemmA, ScratchUse::kGemmB, ScratchUse::kGemmTile}) {
        float* p = scratch.Floats(w, use, 1 << 16);
        std::fill(p, p + (1 << 16), std::nanf(""));
      }
    }
  };
  for (const Shape& sh : {Shape{130, 1100, 40}, Shape{20, 30, 300}, Shape{700, 200, 40},
                          Shape{61, 300, 250}}) {
    SCOPED_TRACE(absl::StrCat(sh.m, "x", sh.n, "x", sh.k));
    TestTensor a = MakeTensor(DataType::kFloat32, {sh.m, sh.k}, RandomValues(sh.m * sh.k, 5));
    TestTensor b = MakeTensor(DataType::kFloat32, {sh.k, sh.n}, RandomValues(sh.k * sh.n, 6));
    const GemmOperand ga{DataType::kFloat32, a.bytes(), sh.k, false};
    const GemmOperand gb{DataType::kFloat32, b.bytes(), sh.n, false};
    auto run = [&](int threads, GemmScratch with) {
      std::vector<float> result(static_cast<size_t>(sh.m * sh.n), -1.0f);
      EXPECT_TRUE(GemmCpu(sh.m, sh.n, sh.k, ga, gb,
                          [&](int64_t row, int64_t col, int64_t count, const float* acc) {
                            std::copy(acc, acc + count, result.begin() + row * sh.n + col);
                          },
                          threads, GemmKernel::kAuto, with)
                      .ok());
      return result;
    };
    const std::vector<float> own = run(1, {});
    poison();
    const std::vector<float> as_worker = run(1, GemmScratch{&scratch, 3});
    poison();
    const std::vector<float> threaded = run(4, GemmScratch{&scratch, 0});
    const std::vector<float> again = run(2, GemmScratch{&scratch, 0});  // packs of the last
    for (const std::vector<float>* other : {&as_worker, &threaded, &again}) {
      ASSERT_EQ(std::memcmp(own.data(), other->data(), own.size() * sizeof(float)), 0);
    }
  }
}

TEST(GemmCpuErrorsTest, BadArgumentsAreErrors) {
  float x = 1;
  const GemmOperand f{DataType::kFloat32, reinterpret_cast<const std::byte*>(&x), 1, false};
  const GemmOperand i64{DataType::kInt64, reinterpret_cast<const std::byte*>(&x), 1, false};
  auto ignore = [](int64_t, int64_t, int64_t, const float*) {};
  EXPECT_EQ(GemmCpu(-1, 1, 1, f, f, ignore).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GemmCpu(1, 1, 1, i64, f, ignore).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GemmCpu(1, 1, 1, f, f, ignore, 1, GemmKernel::kAvx512Bf16).code(),
            absl::StatusCode::kInvalidArgument);
}

// A float32 operand holding bfloat16 values (a column matrix copied from bfloat16 input,
// GemmOperand::bf16_values) beside a bfloat16 one: every micro-kernel gives the naive loop's bits,
// the bfloat16 pairs included (the float32's top halves are the values).
TEST(GemmCpuBf16Test, Float32HoldingBfloat16ValuesMultipliesAsBfloat16) {
  for (bool transposed : {false, true}) {
    const int64_t m = 19, n = 45, k = 37;
    TestTensor a = MakeTensor(DataType::kBFloat16, {m, k}, RandomValues(m * k, 3));
    TestTensor rounded = MakeTensor(DataType::kBFloat16, {k, n}, RandomValues(k * n, 4));
    const std::vector<double> bv = ToDoubles(rounded);  // bfloat16 values, exactly
    std::vector<double> stored(bv.size());
    for (int64_t p = 0; p < k; ++p) {
      for (int64_t j = 0; j < n; ++j) {
        stored[transposed ? j * k + p : p * n + j] = bv[p * n + j];
      }
    }
    TestTensor b = MakeTensor(DataType::kFloat32,
                              transposed ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n},
                              stored);
    const std::vector<double> av = ToDoubles(a);
    GemmOperand gb{DataType::kFloat32, b.bytes(), transposed ? k : n, transposed};
    gb.bf16_values = true;
    const GemmOperand ga{DataType::kBFloat16, a.bytes(), k, false};
    for (GemmKernel kernel : {GemmKernel::kAuto, GemmKernel::kPortable, GemmKernel::kAvx512Bf16}) {
      if (!GemmKernelSupported(kernel)) continue;
      SCOPED_TRACE(absl::StrCat("micro-kernel ", static_cast<int>(kernel), transposed ? " B^T" : ""));
      std::vector<float> result(static_cast<size_t>(m * n), -1.0f);
      ASSERT_TRUE(GemmCpu(m, n, k, ga, gb,
                          [&](int64_t row, int64_t col, int64_t count, const float* acc) {
                            std::memcpy(&result[row * n + col], acc, count * sizeof(float));
                          },
                          1, kernel)
                      .ok());
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          float acc = 0.0f;
          for (int64_t p = 0; p < k; ++p) {
            acc = std::fma(static_cast<float>(av[i * k + p]), static_cast<float>(bv[p * n + j]),
                           acc);
          }
          ASSERT_EQ(std::memcmp(&acc, &result[i * n + j], 4), 0) << i << "," << j;
        }
      }
    }
  }
}

// The one documented difference of the bfloat16 pairs: VDPBF16PS flushes a subnormal sum to
// zero, where the naive loop keeps it.
TEST(GemmCpuBf16Test, SubnormalSumsAreFlushedWhereTheCpuPairsBfloat16) {
  if (!GemmKernelSupported(GemmKernel::kAvx512Bf16)) {
    GTEST_SKIP() << "this CPU has no AVX512_BF16";
  }
  // 2^-70 x 2^-70 = 2^-140, below float32's smallest normal (2^-126).
  TestTensor a = MakeTensor(DataType::kBFloat16, {1, 1}, {std::ldexp(1.0, -70)});
  TestTensor b = MakeTensor(DataType::kBFloat16, {1, 1}, {std::ldexp(1.0, -70)});
  const GemmOperand ga{DataType::kBFloat16, a.bytes(), 1, false};
  const GemmOperand gb{DataType::kBFloat16, b.bytes(), 1, false};
  float paired = -1, portable = -1;
  ASSERT_TRUE(GemmCpu(1, 1, 1, ga, gb, [&](int64_t, int64_t, int64_t, const float* acc) {
                paired = acc[0];
              }, 1, GemmKernel::kAvx512Bf16).ok());
  ASSERT_TRUE(GemmCpu(1, 1, 1, ga, gb, [&](int64_t, int64_t, int64_t, const float* acc) {
                portable = acc[0];
              }, 1, GemmKernel::kPortable).ok());
  EXPECT_EQ(paired, 0.0f);
  EXPECT_EQ(portable, std::ldexp(1.0f, -140));
}

}  // namespace
}  // namespace memonger::alloc
