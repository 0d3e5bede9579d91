// KernelScratch: one buffer per worker and use, growing to the largest request and kept
// (the same memory) for smaller ones; ScratchFloats falls back to memory of its own without one.
#include "kernels/kernel_scratch.h"

#include "gtest/gtest.h"

namespace memonger::alloc {
namespace {

TEST(KernelScratchTest, BuffersGrowAndAreKeptPerWorkerAndUse) {
  KernelScratch scratch(2);
  EXPECT_EQ(scratch.workers(), 2);
  float* first = scratch.Floats(0, ScratchUse::kGemmA, 100);
  ASSERT_NE(first, nullptr);
  first[99] = 7.0f;
  // A smaller request is the same memory, contents kept.
  EXPECT_EQ(scratch.Floats(0, ScratchUse::kGemmA, 10), first);
  EXPECT_EQ(first[99], 7.0f);
  // Other uses and workers have buffers of their own.
  float* other_use = scratch.Floats(0, ScratchUse::kGemmB, 100);
  float* other_worker = scratch.Floats(1, ScratchUse::kGemmA, 100);
  EXPECT_NE(other_use, first);
  EXPECT_NE(other_worker, first);
  EXPECT_NE(other_use, other_worker);
  // A larger request gets room for all of it.
  float* grown = scratch.Floats(0, ScratchUse::kGemmA, 1 << 20);
  grown[(1 << 20) - 1] = 1.0f;
  EXPECT_EQ(scratch.Floats(0, ScratchUse::kGemmA, 100), grown);
  // Zero floats still gives a pointer.
  EXPECT_NE(scratch.Floats(1, ScratchUse::kConvColumns, 0), nullptr);
}

TEST(KernelScratchTest, ScratchFloatsUsesTheWorkersBufferOrItsOwn) {
  KernelScratch scratch(2);
  const ScratchFloats pooled(&scratch, 1, ScratchUse::kGemmTile, 64);
  EXPECT_EQ(pooled.data(), scratch.Floats(1, ScratchUse::kGemmTile, 64));
  // No scratch, or a worker it has no room for: memory of its own, usable.
  const ScratchFloats none(nullptr, 0, ScratchUse::kGemmTile, 64);
  const ScratchFloats beyond(&scratch, 2, ScratchUse::kGemmTile, 64);
  ASSERT_NE(none.data(), nullptr);
  ASSERT_NE(beyond.data(), nullptr);
  EXPECT_NE(beyond.data(), pooled.data());
  none.data()[63] = 1.0f;
  beyond.data()[63] = 1.0f;
}

}  // namespace
}  // namespace memonger::alloc
