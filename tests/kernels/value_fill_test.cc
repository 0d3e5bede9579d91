// Seeded values: reproducible per (name, seed), different across names and seeds, uniform in
// [-1, 1) for floats (mean near 0), zero for integers.
#include "kernels/value_fill.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/float16.h"

namespace memonger::alloc {
namespace {

using graph::DataType;

std::vector<float> Fill(const std::string& name, uint64_t seed, int n = 4096) {
  std::vector<float> v(n);
  FillSeeded({DataType::kFloat32, {n}}, name, seed, reinterpret_cast<std::byte*>(v.data()));
  return v;
}

TEST(ValueFillTest, ReproducibleAndDistinct) {
  EXPECT_EQ(Fill("w", 0), Fill("w", 0));
  EXPECT_NE(Fill("w", 0), Fill("w", 1));
  EXPECT_NE(Fill("w", 0), Fill("v", 0));
  double sum = 0;
  for (float x : Fill("w", 3)) {
    ASSERT_GE(x, -1.0f);
    ASSERT_LT(x, 1.0f);
    sum += x;
  }
  EXPECT_LT(std::abs(sum / 4096), 0.05);
}

TEST(ValueFillTest, HalfTypesRoundTheSameValuesAndIntegersAreZero) {
  const std::vector<float> f = Fill("x", 0, 16);
  std::vector<uint16_t> h(16);
  FillSeeded({DataType::kFloat16, {16}}, "x", 0, reinterpret_cast<std::byte*>(h.data()));
  for (int i = 0; i < 16; ++i) EXPECT_EQ(h[i], FloatToHalfBits(f[i]));
  std::vector<int64_t> ints(8, 77);
  FillSeeded({DataType::kInt64, {8}}, "i", 0, reinterpret_cast<std::byte*>(ints.data()));
  EXPECT_EQ(ints, std::vector<int64_t>(8, 0));
}

}  // namespace
}  // namespace memonger::alloc
