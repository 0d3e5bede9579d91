// Arena: alignment of the base, zero-byte arenas, sizes that cannot fit, bad arguments, move
// semantics, and the CUDA arena (skipped without a device or a CUDA build).
#include "allocator/arena.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace memonger::alloc {
namespace {

bool IsAligned(const void* p, int64_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(alignment) == 0;
}

struct AlignmentCase {
  std::string name;
  int64_t bytes;
  int64_t alignment;         // asked
  int64_t base_alignment;    // expected: max(256, asked)
};

class ArenaAlignmentTest : public ::testing::TestWithParam<AlignmentCase> {};

TEST_P(ArenaAlignmentTest, BaseIsAlignedAndUsable) {
  const AlignmentCase& c = GetParam();
  absl::StatusOr<Arena> arena = Arena::Create(Device::kHost, c.bytes, c.alignment);
  ASSERT_TRUE(arena.ok()) << arena.status();
  EXPECT_EQ(arena->device(), Device::kHost);
  EXPECT_EQ(arena->size(), c.bytes);
  EXPECT_EQ(arena->alignment(), c.base_alignment);
  ASSERT_NE(arena->base(), nullptr);
  EXPECT_TRUE(IsAligned(arena->base(), c.base_alignment)) << static_cast<void*>(arena->base());
  std::memset(arena->base(), 0xab, static_cast<size_t>(c.bytes));  // every byte is ours
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ArenaAlignmentTest,
    ::testing::Values(
        AlignmentCase{"default", /*bytes=*/1000, /*alignment=*/256, /*base_alignment=*/256},
        AlignmentCase{"small_asked_still_256", /*bytes=*/1000, /*alignment=*/8,
                      /*base_alignment=*/256},
        AlignmentCase{"one_byte_alignment", /*bytes=*/3, /*alignment=*/1,
                      /*base_alignment=*/256},
        AlignmentCase{"page", /*bytes=*/10000, /*alignment=*/4096, /*base_alignment=*/4096},
        AlignmentCase{"two_mib", /*bytes=*/1 << 20, /*alignment=*/1 << 21,
                      /*base_alignment=*/1 << 21},
        AlignmentCase{"size_not_multiple", /*bytes=*/257, /*alignment=*/512,
                      /*base_alignment=*/512}),
    [](const ::testing::TestParamInfo<AlignmentCase>& info) { return info.param.name; });

TEST(ArenaTest, ZeroBytesIsAllowed) {
  absl::StatusOr<Arena> arena = Arena::Create(Device::kHost, 0);
  ASSERT_TRUE(arena.ok()) << arena.status();
  EXPECT_EQ(arena->size(), 0);
  EXPECT_NE(arena->base(), nullptr);
  EXPECT_TRUE(IsAligned(arena->base(), kMinArenaAlignment));
}

TEST(ArenaTest, AbsurdSizeIsResourceExhaustedWithNumbers) {
  const int64_t bytes = int64_t{1} << 62;
  absl::StatusOr<Arena> arena = Arena::Create(Device::kHost, bytes);
  ASSERT_FALSE(arena.ok());
  EXPECT_EQ(arena.status().code(), absl::StatusCode::kResourceExhausted) << arena.status();
  const std::string message(arena.status().message());
  EXPECT_TRUE(absl::StrContains(message, absl::StrCat("needed ", bytes, " bytes"))) << message;
  // The host's available bytes as the message says them, read again here: other processes
  // move MemAvailable between the two reads, so the two agree to within a tenth, not exactly.
  const size_t at = message.find("available ");
  ASSERT_NE(at, std::string::npos) << message;
  int64_t said = 0;
  ASSERT_TRUE(absl::SimpleAtoi(
      message.substr(at + 10, message.find(' ', at + 10) - (at + 10)), &said))
      << message;
  const int64_t now = AvailableHostBytes();
  EXPECT_GT(said, 0) << message;
  EXPECT_LE(std::abs(said - now), now / 10) << message << " (now " << now << ")";
}

TEST(ArenaTest, LargestSizeDoesNotOverflow) {
  absl::StatusOr<Arena> arena =
      Arena::Create(Device::kHost, std::numeric_limits<int64_t>::max(), 1 << 20);
  EXPECT_EQ(arena.status().code(), absl::StatusCode::kResourceExhausted) << arena.status();
}

TEST(ArenaTest, AvailableHostBytesIsPositive) { EXPECT_GT(AvailableHostBytes(), 0); }

TEST(ArenaTest, BadArgumentsAreInvalidArgument) {
  EXPECT_EQ(Arena::Create(Device::kHost, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Arena::Create(Device::kHost, 16, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Arena::Create(Device::kHost, 16, 384).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Arena::Create(Device::kCuda, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ArenaTest, MoveKeepsThePointer) {
  absl::StatusOr<Arena> created = Arena::Create(Device::kHost, 4096);
  ASSERT_TRUE(created.ok()) << created.status();
  std::byte* const base = created->base();
  base[4095] = std::byte{42};

  Arena moved(std::move(*created));
  EXPECT_EQ(moved.base(), base);
  EXPECT_EQ(moved.size(), 4096);
  EXPECT_EQ(moved.base()[4095], std::byte{42});
  EXPECT_EQ(created->base(), nullptr);  // NOLINT(bugprone-use-after-move): documented state
  EXPECT_EQ(created->size(), 0);

  absl::StatusOr<Arena> other = Arena::Create(Device::kHost, 16);
  ASSERT_TRUE(other.ok());
  *other = std::move(moved);  // frees other's block, takes moved's
  EXPECT_EQ(other->base(), base);
  EXPECT_EQ(other->size(), 4096);
  EXPECT_EQ(moved.base(), nullptr);  // NOLINT(bugprone-use-after-move)
}

TEST(ArenaTest, DeviceNames) {
  EXPECT_EQ(DeviceName(Device::kHost), "host");
  EXPECT_EQ(DeviceName(Device::kCuda), "cuda");
}

// Without a device (or a CUDA build) the CUDA arena is FailedPrecondition with the reason.
TEST(ArenaCudaTest, CreateOrSkip) {
  absl::StatusOr<Arena> arena = Arena::Create(Device::kCuda, 1 << 20, 4096);
  if (!arena.ok() && arena.status().code() == absl::StatusCode::kFailedPrecondition) {
    if (!BuiltWithCuda()) {
      EXPECT_TRUE(absl::StrContains(arena.status().message(), "built without CUDA"))
          << arena.status();
      GTEST_SKIP() << "no CUDA build: " << arena.status().message();
    }
    GTEST_SKIP() << "no CUDA device: " << arena.status().message();
  }
  ASSERT_TRUE(arena.ok()) << arena.status();
  EXPECT_EQ(arena->device(), Device::kCuda);
  EXPECT_TRUE(IsAligned(arena->base(), 4096));
  Arena moved(std::move(*arena));
  EXPECT_NE(moved.base(), nullptr);

  absl::StatusOr<Arena> huge = Arena::Create(Device::kCuda, int64_t{1} << 62);
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted) << huge.status();
  EXPECT_TRUE(absl::StrContains(huge.status().message(), "available")) << huge.status();
}

}  // namespace
}  // namespace memonger::alloc
