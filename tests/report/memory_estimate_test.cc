#include "report/memory_estimate.h"

#include <map>
#include <string>

#include "gmock/gmock.h"
#include "graph/net_def.h"
#include "gtest/gtest.h"
#include "memonger/planner.h"
#include "report/net_free.h"
#include "tests/random_graphs.h"
#include "tests/test_support.h"

namespace memonger {
namespace {

proto::NetDef Net(const std::string& text) {
  absl::StatusOr<proto::NetDef> net =
      graph::ParseNetDef(text, graph::NetFileFormat::kText, "<test>");
  EXPECT_TRUE(net.ok()) << net.status();
  return net.value_or(proto::NetDef());
}

// estimate_memory_usage: outputs allocated at their first write, Free releases, per op type.
TEST(EstimateMemoryUsageTest, AllocationsFreesAndOpTypes) {
  const proto::NetDef net = Net(R"pb(
    op { type: "FC" input: "data" output: "x" }
    op { type: "Relu" input: "x" output: "y" }
    op { type: "Relu" input: "y" output: "y" }
    op { type: "FC" input: "y" output: "z" }
    external_input: "data"
  )pb");
  const std::map<std::string, int64_t> bytes = {{"data", 8}, {"x", 100}, {"y", 40}, {"z", 10}};
  const MemoryEstimate plain = EstimateMemoryUsage(net, bytes);
  EXPECT_EQ(plain.total_bytes, 150);  // y's in-place rewrite allocates nothing
  EXPECT_EQ(plain.high_water_bytes, 150);
  EXPECT_EQ(plain.bytes_by_op_type.at("FC"), 110);
  EXPECT_EQ(plain.bytes_by_op_type.at("Relu"), 40);
  // With Free ops x is released after its last reader: the peak is x + y.
  const MemoryEstimate freed = EstimateMemoryUsage(InsertFrees(net, {}), bytes);
  EXPECT_EQ(freed.total_bytes, 150);
  EXPECT_EQ(freed.high_water_bytes, 140);
}

// compute_statistics: every blob's bytes against the sum of each buffer's largest member.
TEST(ComputeStatisticsTest, BaselineAndOptimized) {
  absl::StatusOr<graph::Graph> g = testing::GraphFromText(R"pb(
    external_input: "x"
    op { type: "Relu" input: "x" output: "a" }
    op { type: "Relu" input: "a" output: "b" }
    op { type: "Relu" input: "b" output: "c" }
    op { type: "Relu" input: "c" output: "d" }
    external_output: "d"
  )pb");
  ASSERT_TRUE(g.ok()) << g.status();
  testing::AssignByteTypes(*g, {{"a", 100}, {"b", 30}, {"c", 70}}, 10);
  PlanOptions options;
  options.planner = PlannerKind::kMemongerGreedy;
  absl::StatusOr<Plan> plan = PlanMemory(*g, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const MemongerStatistics stats = ComputeStatistics(*g, *plan);
  EXPECT_EQ(stats.baseline_bytes, 10 + 100 + 30 + 70 + 10);
  // Greedy chains a with c (100) and leaves b (30), x and d (10 each) alone.
  EXPECT_EQ(stats.optimized_bytes, 100 + 30 + 10 + 10);
}

}  // namespace
}  // namespace memonger
