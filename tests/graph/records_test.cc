#include "graph/records.h"

#include "gmock/gmock.h"
#include "graph/model_loader.h"
#include "graph/shape_inference.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace memonger::graph {
namespace {

using ::testing::HasSubstr;

TEST(RecordsTest, JsonRecordsBecomeAGraph) {
  auto records = ParseRecordsJson(R"({"schema": "memonger.records/v1", "records": [
      {"name": "a", "bytes": 7, "first_step": 0, "last_step": 1},
      {"name": "b", "bytes": 5, "first_step": 1, "last_step": 3, "alignment": 64},
      {"name": "c", "bytes": 0, "first_step": 3, "last_step": 3}]})",
                                  "r.json");
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 3u);
  EXPECT_EQ((*records)[1].alignment, 64);
  auto g = GraphFromRecords(*records, "r");
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(InferShapes(*g, {}).ok());
  EXPECT_EQ(g->num_ops(), 3);  // distinct boundaries 0, 1, 3
  const Value& b = g->value(*g->FindValue("b"));
  EXPECT_EQ(b.type->dims, std::vector<int64_t>{5});
  EXPECT_EQ(b.alignment, 64);
  EXPECT_EQ(b.producer, 1);
  EXPECT_EQ(b.consumers, std::vector<OpId>{2});
  EXPECT_TRUE(g->value(*g->FindValue("c")).consumers.empty());
}

TEST(RecordsTest, MiniMallocCsvUpperIsExclusive) {
  auto records = ParseMiniMallocCsv("id,lower,upper,size\n0,0,2,32\n1,1,5,28\n", "t.csv");
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_EQ((*records)[0].first_step, 0);
  EXPECT_EQ((*records)[0].last_step, 1);
  EXPECT_EQ((*records)[1].last_step, 4);
}

TEST(RecordsTest, CorpusTracesLoad) {
  for (const char* trace : {"paper_toy.csv", "mm_A.csv", "resnet50.csv"}) {
    SCOPED_TRACE(trace);
    auto g = LoadModel(memonger::testing::SourcePath(std::string("../shared/corpus/traces/") + trace),
                       {});
    if (!g.ok() && g.status().code() == absl::StatusCode::kNotFound) GTEST_SKIP() << g.status();
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_TRUE(InferShapes(*g, {}).ok());
    EXPECT_LE(g->num_ops(), 2 * g->num_values());
  }
}

struct BadRecordsCase {
  std::string label;
  bool csv;
  std::string text;
  std::string expected;
};
void PrintTo(const BadRecordsCase& c, std::ostream* os) { *os << c.label; }

class BadRecordsTest : public ::testing::TestWithParam<BadRecordsCase> {};

TEST_P(BadRecordsTest, IsAnErrorNamingTheProblem) {
  const BadRecordsCase& c = GetParam();
  auto r = c.csv ? ParseMiniMallocCsv(c.text, "in.csv") : ParseRecordsJson(c.text, "in.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.expected));
}

constexpr char kHead[] = R"({"schema": "memonger.records/v1", "records": [)";

INSTANTIATE_TEST_SUITE_P(
    Cases, BadRecordsTest,
    ::testing::Values(
        BadRecordsCase{"not_json", false, "{oops", "not valid JSON"},
        BadRecordsCase{"wrong_schema", false, R"({"schema": "x", "records": []})", "schema"},
        BadRecordsCase{"no_records", false, std::string(kHead) + "]}", "no records"},
        BadRecordsCase{"missing_bytes", false,
                       std::string(kHead) + R"({"name": "a", "first_step": 0, "last_step": 1}]})",
                       "missing \"bytes\""},
        BadRecordsCase{"negative_bytes", false,
                       std::string(kHead) +
                           R"({"name": "a", "bytes": -4, "first_step": 0, "last_step": 1}]})",
                       "negative size -4"},
        BadRecordsCase{"ends_before_start", false,
                       std::string(kHead) +
                           R"({"name": "a", "bytes": 4, "first_step": 5, "last_step": 1}]})",
                       "ends (step 1) before it starts (step 5)"},
        BadRecordsCase{"string_number", false,
                       std::string(kHead) +
                           R"({"name": "a", "bytes": "4", "first_step": 0, "last_step": 1}]})",
                       "must be an integer"},
        BadRecordsCase{"huge_number", false,
                       std::string(kHead) +
                           R"({"name": "a", "bytes": 18446744073709551615, "first_step": 0, "last_step": 1}]})",
                       "does not fit"},
        BadRecordsCase{"float_number", false,
                       std::string(kHead) +
                           R"({"name": "a", "bytes": 1.5, "first_step": 0, "last_step": 1}]})",
                       "must be an integer"},
        BadRecordsCase{"duplicate_name", false,
                       std::string(kHead) +
                           R"({"name": "a", "bytes": 1, "first_step": 0, "last_step": 1},
                              {"name": "a", "bytes": 1, "first_step": 0, "last_step": 1}]})",
                       "used twice"},
        BadRecordsCase{"csv_missing_column", true, "id,lower,size\n0,0,3\n", "'upper'"},
        BadRecordsCase{"csv_upper_not_above_lower", true, "id,lower,upper,size\n0,3,3,8\n",
                       "upper 3 <= lower 3"},
        BadRecordsCase{"csv_negative_size", true, "id,lower,upper,size\n0,0,3,-8\n",
                       "negative size"},
        BadRecordsCase{"csv_not_a_number", true, "id,lower,upper,size\n0,0,x,8\n",
                       "upper 'x'"},
        BadRecordsCase{"csv_huge_number", true,
                       "id,lower,upper,size\n0,0,3,99999999999999999999999\n", "size"},
        BadRecordsCase{"csv_ragged_row", true, "id,lower,upper,size\n0,0,3\n", "3 cells"},
        BadRecordsCase{"csv_bad_alignment", true,
                       "id,lower,upper,size,alignment\n0,0,3,8,48\n", "power of two"}),
    [](const ::testing::TestParamInfo<BadRecordsCase>& info) { return info.param.label; });

}  // namespace
}  // namespace memonger::graph
