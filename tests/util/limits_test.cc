#include <string>

#include "gtest/gtest.h"
#include "util/limits.h"

namespace memonger::util {
namespace {

TEST(EscapeAsTextTest, KeepsUtf8AndEscapesTheRest) {
  EXPECT_EQ(EscapeAsText("plain name_1"), "plain name_1");
  EXPECT_EQ(EscapeAsText("\xc3\xa9t\xc3\xa9 \xe6\xb3\xa8\xe6\x84\x8f \xf0\x9f\x98\x80"),
            "\xc3\xa9t\xc3\xa9 \xe6\xb3\xa8\xe6\x84\x8f \xf0\x9f\x98\x80");  // é, 注意, an emoji
  EXPECT_EQ(EscapeAsText("a\nb\tc\x01"), "a\\nb\\tc\\x01");
  EXPECT_EQ(EscapeAsText("new_shap\xb1"), "new_shap\\xb1");         // a stray continuation byte
  EXPECT_EQ(EscapeAsText("\xc3"), "\\xc3");                         // cut short
  EXPECT_EQ(EscapeAsText("\xc0\xaf"), "\\xc0\\xaf");                // overlong '/'
  EXPECT_EQ(EscapeAsText("\xed\xa0\x80"), "\\xed\\xa0\\x80");       // a surrogate
  EXPECT_EQ(EscapeAsText("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
}

TEST(QuoteTest, CutsLongTextAtACharacterBoundary) {
  std::string text(kMaxQuotedChars - 1, 'a');
  text += "\xc3\xa9";  // é across the cut
  text += "tail";
  const std::string quoted = Quote(text);
  EXPECT_EQ(quoted.substr(0, kMaxQuotedChars - 1), std::string(kMaxQuotedChars - 1, 'a'));
  EXPECT_EQ(quoted.substr(kMaxQuotedChars - 1, 4), "... ");  // é not split into bytes
  EXPECT_EQ(Quote("short\xb1"), "short\\xb1");
}

}  // namespace
}  // namespace memonger::util
