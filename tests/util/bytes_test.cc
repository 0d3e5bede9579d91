#include "util/bytes.h"

#include <cstdint>
#include <limits>

#include "gtest/gtest.h"

namespace memonger::util {
namespace {

TEST(ParseBytesTest, ExactWholeBytesRoundedDown) {
  EXPECT_EQ(*ParseBytes("1048576"), 1048576);
  EXPECT_EQ(*ParseBytes("512MiB"), int64_t{512} << 20);
  EXPECT_EQ(*ParseBytes("80 GiB"), int64_t{80} << 30);
  EXPECT_EQ(*ParseBytes("1.5GiB"), int64_t{3} << 29);
  EXPECT_EQ(*ParseBytes("0.3GB"), 300000000);  // a double gave 299999999.99999994
  EXPECT_EQ(*ParseBytes("1023.6"), 1023);      // a limit: the 0.6 byte does not count
  EXPECT_EQ(*ParseBytes("0.5"), 0);
  EXPECT_EQ(*ParseBytes("1e3"), 1000);
  // Exponents exactly too (a double product was a byte or more off from 1e12 on).
  EXPECT_EQ(*ParseBytes("1e12"), int64_t{1000000000000});
  EXPECT_EQ(*ParseBytes("1e3GB"), int64_t{1000000000000});
  EXPECT_EQ(*ParseBytes("5e17"), int64_t{500000000000000000});
  EXPECT_EQ(*ParseBytes("1.5e3TiB"), int64_t{1500} << 40);
  EXPECT_EQ(*ParseBytes("2.5E+2"), 250);
  EXPECT_EQ(*ParseBytes("1.23456e2"), 123);
  EXPECT_EQ(*ParseBytes("2TiB"), int64_t{2} << 40);
  EXPECT_EQ(*ParseBytes("9223372036854775807"), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(*ParseBytes("9223372036854774784"), int64_t{9223372036854774784});
}

TEST(ParseBytesTest, RefusesWhatIsNoByteCount) {
  for (const char* text : {"9223372036854775808", "8388608TiB", "1e30", "-1", "abc", "1.2.3",
                           "12 parsecs", ""}) {
    EXPECT_FALSE(ParseBytes(text).ok()) << text;
  }
}

}  // namespace
}  // namespace memonger::util
