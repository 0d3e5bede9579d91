// Half-precision storage types: IEEE 754 binary16 (`Half`) and bfloat16 (`BFloat16`), and their
// conversions to and from float32. Kernels store these types and compute in float32.
//
//   alloc::Half h = alloc::Half::FromFloat(0.1f);   // nearest binary16: 0.0999755859375
//   float f = h.ToFloat();                          // exact: every binary16 is a float32
//   alloc::BFloat16 b = alloc::BFloat16::FromFloat(3.14159f);  // 3.140625
//
// Rounding from float32 is to nearest, ties to even, for both types:
//   - binary16 (1 sign, 5 exponent, 10 mantissa bits, bias 15): values of magnitude >= 65520
//     (halfway between the largest finite 65504 and 2^16) become infinity; magnitudes below
//     2^-14 become subnormals (multiples of 2^-24), and those of at most 2^-25 become zero
//     (2^-25 itself is a tie and goes to the even zero). Signed zeros keep their sign.
//   - bfloat16 (the upper 16 bits of a float32): overflow past the largest finite bfloat16
//     rounds to infinity; float32 subnormals round like any other value (no flush to zero).
// Infinities keep their sign. A NaN stays a NaN (quiet; the top mantissa bits of the payload
// are kept, the quiet bit is set so a payload never truncates to an infinity).
//
// Conversions from binary16 or bfloat16 to float32 are exact.
//
// The algorithms are the usual bit manipulations: no lookup tables (so no global state) and no
// dependence on F16C or AVX-512 instructions; the float32 -> binary16 subnormal path uses one
// float addition, which rounds to nearest-even in the default floating-point environment.
#ifndef MEMONGER_KERNELS_FLOAT16_H_
#define MEMONGER_KERNELS_FLOAT16_H_

#include <cstdint>
#include <cstring>

#include "kernels/host_device.h"

namespace memonger::alloc {

// Every function here is MG_HD: the CUDA kernels convert with the same bits as the CPU kernels.
namespace float16_internal {
MG_HD inline uint32_t FloatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}
MG_HD inline float BitsFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}
}  // namespace float16_internal

// binary16 bits -> float32 (exact). Branch-free, so that loops of conversions vectorize: the
// exponent and mantissa bits are moved to their float32 places and the value is rebiased by
// one multiplication by 2^112 (= 2^(127 - 15)), which is exact for normal and subnormal inputs
// alike (a subnormal half lands on a float32 subnormal first). Infinities and NaNs are selected
// separately. Assumes the default floating-point environment (subnormals not flushed to zero).
MG_HD inline float HalfBitsToFloat(uint16_t h) {
  using float16_internal::BitsFloat;
  using float16_internal::FloatBits;
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t shifted = static_cast<uint32_t>(h & 0x7fffu) << 13;
  const uint32_t scaled = FloatBits(BitsFloat(shifted) * 5.192296858534828e+33f);  // 2^112
  const uint32_t special = shifted | 0x7f800000u;  // inf or NaN, payload kept
  const uint32_t magnitude = (h & 0x7c00u) == 0x7c00u ? special : scaled;
  return BitsFloat(sign | magnitude);
}

// float32 -> binary16 bits, round to nearest even.
MG_HD inline uint16_t FloatToHalfBits(float f) {
  using float16_internal::BitsFloat;
  using float16_internal::FloatBits;
  uint32_t x = FloatBits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) {  // infinity or NaN
    if (x == 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u);
    return static_cast<uint16_t>(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
  }
  if (x >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 2^16: overflow
  if (x < 0x38800000u) {
    // Below 2^-14: the result is subnormal or zero. Adding 0.5 (2^-1) puts the value's bits
    // at multiples of 2^-24 into the low mantissa bits of the sum, and the float addition
    // rounds the discarded bits to nearest even, which is the binary16 rounding we want.
    const float sum = BitsFloat(x) + 0.5f;
    return static_cast<uint16_t>(sign | (FloatBits(sum) - 0x3f000000u));
  }
  // Normal: rebias, then round the 13 dropped mantissa bits to nearest even. A carry out of
  // the mantissa correctly bumps the exponent (up to infinity for [65520, 65536)).
  const uint32_t odd = (x >> 13) & 1u;
  x += 0xc8000000u + 0xfffu + odd;  // (15 - 127) << 23 wraps to 0xc8000000
  return static_cast<uint16_t>(sign | (x >> 13));
}

// bfloat16 bits -> float32 (exact).
MG_HD inline float BFloat16BitsToFloat(uint16_t b) {
  return float16_internal::BitsFloat(static_cast<uint32_t>(b) << 16);
}

// float32 -> bfloat16 bits, round to nearest even.
MG_HD inline uint16_t FloatToBFloat16Bits(float f) {
  const uint32_t x = float16_internal::FloatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((x >> 16) | 0x0040u);  // NaN: keep it a (quiet) NaN
  }
  const uint32_t odd = (x >> 16) & 1u;
  return static_cast<uint16_t>((x + 0x7fffu + odd) >> 16);
}

// Storage types: distinct C++ types so that kernels can be templated on the element type.
struct Half {
  uint16_t bits = 0;
  MG_HD static Half FromFloat(float f) { return Half{FloatToHalfBits(f)}; }
  MG_HD float ToFloat() const { return HalfBitsToFloat(bits); }
};
struct BFloat16 {
  uint16_t bits = 0;
  MG_HD static BFloat16 FromFloat(float f) { return BFloat16{FloatToBFloat16Bits(f)}; }
  MG_HD float ToFloat() const { return BFloat16BitsToFloat(bits); }
};
static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2, "storage types must be 2 bytes");

}  // namespace memonger::alloc

#endif  // MEMONGER_KERNELS_FLOAT16_H_
