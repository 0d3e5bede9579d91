// SplitMix64 (Steele, Lea, Flood 2014): a tiny seeded generator whose sequence is fixed by its
// arithmetic, so every platform and standard library draws the same numbers. Used wherever a
// fixed seed must reproduce a result exactly (local search, the random workload).
//
//   util::SplitMix64 rng(/*seed=*/1);
//   uint64_t word = rng.Next();
//   uint64_t die = rng.Below(6);          // in [0, 6)
//   bool heads = rng.Percent(50);         // true with probability 50 / 100
//
// Only integer arithmetic: no std::*_distribution (their algorithms differ between standard
// libraries) and no floating-point transcendental (libm results may differ in the last bit).
#ifndef MEMONGER_UTIL_SPLITMIX64_H_
#define MEMONGER_UTIL_SPLITMIX64_H_

#include <cstdint>

namespace memonger::util {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  // Uniform enough in [0, n) for n far below 2^64 (modulo bias < n / 2^64). REQUIRES: n > 0.
  uint64_t Below(uint64_t n) { return Next() % n; }

  // True with probability percent / 100 (0: never, 100 and above: always).
  bool Percent(int64_t percent) { return static_cast<int64_t>(Below(100)) < percent; }

 private:
  uint64_t state_;
};

}  // namespace memonger::util

#endif  // MEMONGER_UTIL_SPLITMIX64_H_
