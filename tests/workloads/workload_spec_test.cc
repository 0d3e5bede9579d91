#include "workloads/workload_spec.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memonger::graph {
namespace {

using ::testing::HasSubstr;

TEST(WorkloadSpecTest, ParsesKindAndParametersInOrder) {
  absl::StatusOr<WorkloadSpec> spec = ParseWorkloadSpec(" attention: n=5000 ,kernel=math, ");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->kind, "attention");
  ASSERT_EQ(spec->params.size(), 2u);
  EXPECT_EQ(spec->params[0], std::make_pair(std::string("n"), std::string("5000")));
  EXPECT_EQ(spec->params[1], std::make_pair(std::string("kernel"), std::string("math")));
  EXPECT_EQ(WorkloadSpecToString(*spec), "attention:n=5000,kernel=math");
  absl::StatusOr<WorkloadSpec> bare = ParseWorkloadSpec("mlp");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->kind, "mlp");
  EXPECT_TRUE(bare->params.empty());
}

TEST(WorkloadSpecTest, WithParamReplacesOrAppends) {
  WorkloadSpec spec = *ParseWorkloadSpec("attention:n=5,kernel=math");
  EXPECT_EQ(WorkloadSpecToString(WithParam(spec, "kernel", "efficient")),
            "attention:n=5,kernel=efficient");
  EXPECT_EQ(WorkloadSpecToString(WithParam(spec, "depth", "2")),
            "attention:n=5,kernel=math,depth=2");
}

struct BadSpec {
  std::string name;
  std::string text;
  std::string error;
};
void PrintTo(const BadSpec& c, std::ostream* os) { *os << c.name; }

class BadWorkloadSpecTest : public ::testing::TestWithParam<BadSpec> {};

TEST_P(BadWorkloadSpecTest, IsInvalidArgument) {
  absl::StatusOr<WorkloadSpec> spec = ParseWorkloadSpec(GetParam().text);
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr(GetParam().error));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadWorkloadSpecTest,
    ::testing::Values(BadSpec{"empty", "", "no workload kind"},
                      BadSpec{"no_kind", ":n=5", "no workload kind"},
                      BadSpec{"no_equals", "attention:n5000", "has no '='"},
                      BadSpec{"no_value", "attention:n=", "needs a key and a value"},
                      BadSpec{"no_key", "attention:=5", "needs a key and a value"},
                      BadSpec{"twice", "attention:n=5,n=6", "key 'n' is given twice"}),
    [](const ::testing::TestParamInfo<BadSpec>& info) { return info.param.name; });

TEST(WorkloadKeysTest, EachKindListsItsKeys) {
  EXPECT_THAT(WorkloadKeys("random"), ::testing::Contains("ops"));
  EXPECT_THAT(WorkloadKeys("attention"), ::testing::Contains("n"));
  EXPECT_TRUE(WorkloadKeys("nosuch").empty());

  const WorkloadSpec attention = *ParseWorkloadSpec("attention:n=64");
  EXPECT_TRUE(CheckWorkloadKey(attention, "batch").ok());
  const absl::Status unknown = CheckWorkloadKey(attention, "zz");
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown.message()),
              HasSubstr("attention workload: no key 'zz' (known: n, cls, batch, dim,"));
  // A key holding a newline is quoted: the message stays one line.
  EXPECT_THAT(std::string(CheckWorkloadKey(attention, "a\nb").message()),
              ::testing::Not(HasSubstr("\n")));
  // A key that takes a word cannot be searched over.
  const absl::Status choice = CheckWorkloadKey(attention, "mode");
  EXPECT_EQ(choice.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(choice.message()),
              HasSubstr("attention workload: 'mode' is a choice, not a size (sizes: n, cls, batch,"));
  EXPECT_TRUE(IsWorkloadSizeKey("random", "ops"));
  EXPECT_FALSE(IsWorkloadSizeKey("random", "dtype"));
  EXPECT_FALSE(IsWorkloadSizeKey("random", "nosuch"));
  EXPECT_FALSE(IsWorkloadSizeKey("nosuch", "ops"));
  // An unknown kind is reported where it is built, with the known kinds.
  EXPECT_TRUE(CheckWorkloadKey(*ParseWorkloadSpec("nosuch:x=1"), "x").ok());
}

TEST(WorkloadParamsTest, TypedReadsAndUnknownKeys) {
  const WorkloadSpec spec = *ParseWorkloadSpec("demo:n=12,kernel=fast,x=1");
  WorkloadParams params(spec, {"n", "kernel", "depth"});
  EXPECT_EQ(*params.Int("n", 1, 1), 12);
  EXPECT_EQ(*params.Int("depth", 6, 1), 6);  // absent: the default
  EXPECT_THAT(std::string(params.Int("n", 1, 20).status().message()),
              HasSubstr("n=12 is out of range (20 to any)"));
  EXPECT_THAT(std::string(params.Choice("kernel", "math", {"math", "efficient"}).status().message()),
              HasSubstr("kernel=fast is not one of math, efficient"));
  EXPECT_THAT(std::string(params.Finish().message()),
              HasSubstr("unknown key 'x' (known: n, kernel, depth)"));
  const WorkloadSpec words = *ParseWorkloadSpec("demo:n=many");
  WorkloadParams word_params(words, {"n"});
  EXPECT_THAT(std::string(word_params.Int("n", 1, 1).status().message()),
              HasSubstr("n=many is not an integer"));
}

}  // namespace
}  // namespace memonger::graph
