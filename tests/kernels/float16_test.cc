// float16 / bfloat16 conversions: exhaustive round trips over every 16-bit pattern, named edge
// cases (ties, overflow, subnormals, signed zeros, NaN), and random float32 values against a
// reference that picks the nearest representable value by search.
#include "kernels/float16.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <ostream>
#include <vector>

#include "gtest/gtest.h"

namespace memonger::alloc {
namespace {

bool IsNanHalf(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }
bool IsNanBf16(uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0; }

TEST(Float16Test, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    const float f = HalfBitsToFloat(h);
    if (IsNanHalf(h)) {
      EXPECT_TRUE(std::isnan(f)) << bits;
      EXPECT_TRUE(IsNanHalf(FloatToHalfBits(f))) << bits;
      continue;
    }
    EXPECT_EQ(FloatToHalfBits(f), h) << "bits " << bits << " value " << f;
  }
}

TEST(Float16Test, EveryBFloat16RoundTripsThroughFloat) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const uint16_t b = static_cast<uint16_t>(bits);
    const float f = BFloat16BitsToFloat(b);
    if (IsNanBf16(b)) {
      EXPECT_TRUE(std::isnan(f)) << bits;
      EXPECT_TRUE(IsNanBf16(FloatToBFloat16Bits(f))) << bits;
      continue;
    }
    EXPECT_EQ(FloatToBFloat16Bits(f), b) << "bits " << bits;
  }
}

struct EdgeCase {
  const char* name;
  float value;
  uint16_t half;
  uint16_t bf16;
};
// Printed by name (gtest would otherwise dump the bytes, padding included).
void PrintTo(const EdgeCase& c, std::ostream* os) { *os << c.name; }

class Float16EdgeTest : public ::testing::TestWithParam<EdgeCase> {};

TEST_P(Float16EdgeTest, RoundsAsIeeeSays) {
  const EdgeCase& c = GetParam();
  EXPECT_EQ(FloatToHalfBits(c.value), c.half) << c.name;
  EXPECT_EQ(FloatToBFloat16Bits(c.value), c.bf16) << c.name;
}

const float kInf = std::numeric_limits<float>::infinity();

INSTANTIATE_TEST_SUITE_P(
    Cases, Float16EdgeTest,
    ::testing::Values(
        EdgeCase{"zero", 0.0f, 0x0000, 0x0000},
        EdgeCase{"negative_zero", -0.0f, 0x8000, 0x8000},
        EdgeCase{"one", 1.0f, 0x3c00, 0x3f80},
        EdgeCase{"minus_two", -2.0f, 0xc000, 0xc000},
        EdgeCase{"largest_half", 65504.0f, 0x7bff, 0x4780},
        EdgeCase{"just_below_half_overflow", 65519.99f, 0x7bff, 0x4780},
        EdgeCase{"half_overflow_tie_goes_to_inf", 65520.0f, 0x7c00, 0x4780},
        EdgeCase{"infinity", kInf, 0x7c00, 0x7f80},
        EdgeCase{"minus_infinity", -kInf, 0xfc00, 0xff80},
        EdgeCase{"smallest_subnormal", 5.9604644775390625e-8f, 0x0001, 0x3380},
        EdgeCase{"half_of_smallest_subnormal_ties_to_zero", 2.98023223876953125e-8f, 0x0000, 0x3300},
        EdgeCase{"one_and_a_half_subnormals_rounds_up", 8.94069671630859375e-8f, 0x0002, 0x33c0},
        EdgeCase{"two_and_a_half_subnormals_ties_to_even", 1.490116119384765625e-7f, 0x0002, 0x3420},
        EdgeCase{"largest_subnormal", 6.0975551605224609375e-5f, 0x03ff, 0x3880},
        EdgeCase{"smallest_normal", 6.103515625e-5f, 0x0400, 0x3880},
        EdgeCase{"one_plus_half_ulp_ties_to_even", 1.00048828125f, 0x3c00, 0x3f80},
        EdgeCase{"one_plus_one_and_a_half_ulp_ties_to_even", 1.00146484375f, 0x3c02, 0x3f80},
        EdgeCase{"bf16_tie_to_even_down", 1.00390625f, 0x3c04, 0x3f80},
        EdgeCase{"bf16_tie_to_even_up", 1.01171875f, 0x3c0c, 0x3f82},
        EdgeCase{"float_max", std::numeric_limits<float>::max(), 0x7c00, 0x7f80},
        EdgeCase{"float_subnormal", 1e-40f, 0x0000, 0x0001}),
    [](const ::testing::TestParamInfo<EdgeCase>& info) { return info.param.name; });

TEST(Float16Test, NanStaysNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(IsNanHalf(FloatToHalfBits(nan)));
  EXPECT_TRUE(IsNanHalf(FloatToHalfBits(-nan)));
  EXPECT_TRUE(IsNanBf16(FloatToBFloat16Bits(nan)));
  // A signalling NaN whose payload sits only in the low bits must not become an infinity.
  uint32_t bits = 0x7f800001u;
  float snan;
  std::memcpy(&snan, &bits, 4);
  EXPECT_TRUE(IsNanHalf(FloatToHalfBits(snan)));
  EXPECT_TRUE(IsNanBf16(FloatToBFloat16Bits(snan)));
}

// The nearest of a sorted list of representable values, ties to the even pattern.
template <typename ToFloat>
uint16_t Nearest(float f, const std::vector<uint16_t>& sorted, ToFloat to_float) {
  auto it = std::lower_bound(sorted.begin(), sorted.end(), f, [&](uint16_t b, float v) {
    return to_float(b) < v;
  });
  if (it == sorted.begin()) return *it;
  if (it == sorted.end()) return sorted.back();
  const uint16_t hi = *it;
  const uint16_t lo = *(it - 1);
  const double dhi = static_cast<double>(to_float(hi)) - f;
  const double dlo = f - static_cast<double>(to_float(lo));
  if (dlo < dhi) return lo;
  if (dhi < dlo) return hi;
  return (lo & 1) == 0 ? lo : hi;
}

TEST(Float16Test, RandomFloatsRoundToNearestEven) {
  // Non-negative finite patterns in increasing order of value (positive patterns sort as
  // integers), plus infinity as the value beyond the largest finite one.
  std::vector<uint16_t> halves, bf16s;
  for (uint32_t b = 0; b <= 0x7c00; ++b) halves.push_back(static_cast<uint16_t>(b));
  for (uint32_t b = 0; b <= 0x7f80; ++b) bf16s.push_back(static_cast<uint16_t>(b));
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits(0, 0x477fffffu);  // [0, 65536)
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = bits(rng);
    float f;
    std::memcpy(&f, &u, 4);
    ASSERT_EQ(FloatToHalfBits(f), Nearest(f, halves, HalfBitsToFloat)) << f;
    ASSERT_EQ(FloatToHalfBits(-f), 0x8000 | Nearest(f, halves, HalfBitsToFloat)) << -f;
    ASSERT_EQ(FloatToBFloat16Bits(f), Nearest(f, bf16s, BFloat16BitsToFloat)) << f;
  }
}

TEST(Float16Test, StorageTypes) {
  EXPECT_EQ(Half::FromFloat(0.1f).ToFloat(), 0.0999755859375f);
  EXPECT_EQ(BFloat16::FromFloat(3.14159f).ToFloat(), 3.140625f);
}

}  // namespace
}  // namespace memonger::alloc
