#include "graph/records.h"

#include "gmock/gmock.h"
#include "graph/model_loader.h"
#include "graph/shape_inference.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"
#include "util/splitmix64.h"

namespace memonger::graph {
namespace {

using ::testing::ElementsAre;
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
  EXPECT_THAT(g->consumers(*g->FindValue("b")), ElementsAre(2));
  EXPECT_TRUE(g->consumers(*g->FindValue("c")).empty());
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

// The graph GraphFromRecords assembles directly, as GraphBuilder builds it from step ops naming
// the records: each step op writes the records starting there and reads those ending there.
Graph BuiltByTheBuilder(const std::vector<UsageRecord>& records) {
  std::vector<int64_t> times;
  for (const UsageRecord& r : records) {
    times.push_back(r.first_step);
    times.push_back(r.last_step);
  }
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  auto step = [&](int64_t t) {
    return std::lower_bound(times.begin(), times.end(), t) - times.begin();
  };
  std::vector<OpSpec> ops(times.size());
  for (size_t k = 0; k < ops.size(); ++k) {
    ops[k].type = kRecordStepOpType;
    ops[k].name = absl::StrCat("step_", times[k]);
    ops[k].attrs.push_back(Attribute{kRecordStepTimeAttr, times[k]});
  }
  GraphBuilder builder("r");
  for (const UsageRecord& r : records) {
    ops[step(r.first_step)].outputs.push_back(r.name);
    if (r.last_step > r.first_step) ops[step(r.last_step)].inputs.push_back(r.name);
    builder.Declare(r.name, Declaration{DataType::kUInt8, DeclaredDims{{r.bytes, ""}}},
                    r.alignment);
  }
  for (OpSpec& op : ops) builder.AddOp(std::move(op));
  absl::StatusOr<Graph> g = std::move(builder).Build();
  EXPECT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(InferShapes(*g, {}).ok());
  return *std::move(g);
}

TEST(RecordsTest, AssembledGraphIsTheOneTheBuilderMakes) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    SCOPED_TRACE(seed);
    util::SplitMix64 rng(seed);
    std::vector<UsageRecord> records(1 + rng.Below(200));
    for (size_t i = 0; i < records.size(); ++i) {
      UsageRecord& r = records[i];
      r.name = absl::StrCat("t", rng.Below(1000000), "_", i);  // file order is not name order
      r.bytes = static_cast<int64_t>(rng.Below(4096));
      r.first_step = static_cast<int64_t>(rng.Below(60)) * 7;  // shared boundaries, gaps
      r.last_step = r.first_step + (rng.Percent(20) ? 0 : static_cast<int64_t>(rng.Below(90)));
      if (rng.Percent(10)) r.alignment = int64_t{1} << rng.Below(10);
    }
    absl::StatusOr<Graph> assembled = GraphFromRecords(records, "r");
    ASSERT_TRUE(assembled.ok()) << assembled.status();
    ASSERT_TRUE(InferShapes(*assembled, {}).ok());
    const Graph built = BuiltByTheBuilder(records);
    ASSERT_EQ(assembled->num_values(), built.num_values());
    ASSERT_EQ(assembled->num_ops(), built.num_ops());
    for (ValueId id = 0; id < built.num_values(); ++id) {
      SCOPED_TRACE(built.value(id).name);
      const Value& a = assembled->value(id);
      const Value& b = built.value(id);
      EXPECT_EQ(a.name, b.name);
      EXPECT_EQ(a.version, b.version);
      EXPECT_EQ(a.role, b.role);
      EXPECT_EQ(a.producer, b.producer);
      EXPECT_EQ(assembled->consumers(id), built.consumers(id));
      EXPECT_EQ(a.inplace_of, b.inplace_of);
      EXPECT_EQ(a.type, b.type);
      EXPECT_EQ(a.alignment, b.alignment);
      EXPECT_EQ(a.declared.dtype, b.declared.dtype);
      ASSERT_TRUE(a.declared.dims.has_value() && b.declared.dims.has_value());
      ASSERT_EQ(a.declared.dims->size(), 1u);
      EXPECT_EQ(a.declared.dims->front().size, b.declared.dims->front().size);
      EXPECT_EQ(assembled->FindValue(b.name), std::optional<ValueId>(id));
    }
    for (OpId op = 0; op < built.num_ops(); ++op) {
      const Op& a = assembled->op(op);
      const Op& b = built.op(op);
      EXPECT_EQ(a.name, b.name);
      EXPECT_EQ(a.type, b.type);
      EXPECT_EQ(a.inputs, b.inputs) << a.name;
      EXPECT_EQ(a.outputs, b.outputs) << a.name;
      EXPECT_EQ(a.attributes().GetInt(kRecordStepTimeAttr),
                b.attributes().GetInt(kRecordStepTimeAttr));
    }
    EXPECT_EQ(assembled->TopologicalOrder(), built.TopologicalOrder());
    EXPECT_TRUE(assembled->inputs().empty());
    EXPECT_TRUE(assembled->outputs().empty());
  }
}

TEST(RecordsTest, GraphFromRecordsChecksWhatItIsHanded) {
  // Records made by code, not parsed: the assembler checks them itself.
  auto record = [](std::string name, int64_t bytes, int64_t first, int64_t last) {
    UsageRecord r;
    r.name = std::move(name);
    r.bytes = bytes;
    r.first_step = first;
    r.last_step = last;
    return r;
  };
  const std::vector<std::pair<std::vector<UsageRecord>, std::string>> cases = {
      {{record("a", 4, 0, 1), record("b", 4, 1, 2), record("a", 8, 2, 3)},
       "records 0 and 2 ('a'): the name is used twice"},
      {{record("a", -1, 0, 1)}, "negative size"},
      {{record("a", 1, 3, 1)}, "before it starts"},
      {{record("", 1, 0, 1)}, "empty name"},
      {{}, "no records"},
  };
  for (const auto& [records, expected] : cases) {
    SCOPED_TRACE(expected);
    absl::StatusOr<Graph> g = GraphFromRecords(records, "made");
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(g.status().message()), HasSubstr(expected));
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
