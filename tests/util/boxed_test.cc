#include "util/boxed.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace memonger::util {
namespace {

TEST(BoxedTest, BehavesAsAnOptional) {
  Boxed<std::vector<int>> empty;
  EXPECT_FALSE(empty.has_value());
  EXPECT_FALSE(empty);

  Boxed<std::vector<int>> box = std::vector<int>{1, 2, 3};
  ASSERT_TRUE(box.has_value());
  EXPECT_EQ(box->size(), 3u);
  EXPECT_EQ((*box)[2], 3);
  box->push_back(4);
  EXPECT_EQ(box->size(), 4u);

  box = std::nullopt;
  EXPECT_FALSE(box.has_value());
  box = std::vector<int>{7};
  box.reset();
  EXPECT_FALSE(box.has_value());
}

TEST(BoxedTest, CopiesAreDeepAndCompareByValue) {
  Boxed<std::vector<int>> a = std::vector<int>{1, 2};
  Boxed<std::vector<int>> b = a;
  EXPECT_EQ(a, b);
  b->push_back(3);  // a copy owns its value: the original is untouched
  EXPECT_EQ(a->size(), 2u);
  EXPECT_NE(a, b);
  b = a;
  EXPECT_EQ(a, b);
  Boxed<std::vector<int>> none;
  EXPECT_NE(a, none);
  EXPECT_EQ(none, Boxed<std::vector<int>>());
  b = none;
  EXPECT_FALSE(b.has_value());

  Boxed<std::vector<int>> moved = std::move(a);
  EXPECT_EQ(moved->size(), 2u);
}

TEST(BoxedTest, IsOnePointer) {
  EXPECT_EQ(sizeof(Boxed<std::vector<int>>), sizeof(void*));
  EXPECT_EQ(sizeof(RareString), sizeof(void*));
  EXPECT_EQ(sizeof(RareVector<int>), sizeof(void*));
}

TEST(RareStringTest, ReadsAsAString) {
  RareString empty;
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty.str(), "");
  EXPECT_EQ(empty, "");

  RareString engine = std::string("CUDNN");
  EXPECT_FALSE(engine.empty());
  EXPECT_EQ(engine, "CUDNN");
  EXPECT_NE(engine, "CUDA");
  const std::string& text = engine;
  EXPECT_EQ(text, "CUDNN");

  engine = std::string();  // assigning "" empties it
  EXPECT_TRUE(engine.empty());
}

TEST(RareStringTest, CopiesAreDeep) {
  RareString a = std::string("ai.onnx");
  RareString b = a;
  EXPECT_EQ(a, b);
  b = std::string("local");
  EXPECT_EQ(a, "ai.onnx");
  EXPECT_NE(a, b);
  b = a;
  EXPECT_EQ(b, "ai.onnx");
  RareString c(std::move(a));
  EXPECT_EQ(c, "ai.onnx");
}

TEST(RareVectorTest, ReadsAsAVector) {
  RareVector<int> empty;
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_EQ(empty.begin(), empty.end());

  RareVector<int> list;
  list.push_back(4);
  list.push_back(5);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0], 4);
  list[1] = 6;
  int sum = 0;
  for (int x : list) sum += x;
  EXPECT_EQ(sum, 10);
  EXPECT_EQ(list, (RareVector<int>{4, 6}));

  list.clear();
  EXPECT_TRUE(list.empty());
}

TEST(RareVectorTest, CopiesAreDeepAndCompareByValue) {
  RareVector<int> a = {1, 2};
  RareVector<int> b = a;
  EXPECT_EQ(a, b);
  b.push_back(3);
  EXPECT_EQ(a.size(), 2u);
  EXPECT_NE(a, b);
  b = a;
  EXPECT_EQ(a, b);
  EXPECT_NE(a, RareVector<int>());
  EXPECT_EQ(RareVector<int>(), RareVector<int>{});
  RareVector<int> moved = std::move(a);
  EXPECT_EQ(moved, (RareVector<int>{1, 2}));
}

}  // namespace
}  // namespace memonger::util
