// Graphable sections (allocator/graphable.h): the runs of steps a CUDA graph can capture with the
// device kernels, and why each step between them cannot be captured.
#include "allocator/graphable.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cuda/kernels_device.h"
#include "memonger/planner.h"
#include "report/plan_report.h"
#include "workloads/workloads.h"

namespace memonger::alloc {
namespace {

using ::testing::HasSubstr;

struct Planned {
  graph::Graph graph;
  Plan plan;
};

Planned PlanWorkload(const std::string& spec) {
  absl::StatusOr<graph::WorkloadSpec> parsed = graph::ParseWorkloadSpec(spec);
  EXPECT_TRUE(parsed.ok());
  absl::StatusOr<graph::Graph> g = graph::BuildWorkload(*parsed);
  EXPECT_TRUE(g.ok()) << g.status();
  absl::StatusOr<Plan> plan = PlanMemory(*g, PlanOptions{});
  EXPECT_TRUE(plan.ok()) << plan.status();
  return {*std::move(g), *std::move(plan)};
}

// Sections and boundaries partition the steps, in order.
void ExpectPartition(const Plan& plan, const GraphableSections& g) {
  std::vector<int> covered(plan.steps.size(), 0);
  for (const auto& [first, last] : g.sections) {
    ASSERT_LE(first, last);
    for (int s = first; s <= last; ++s) ++covered[s];
  }
  for (const GraphableSections::Boundary& b : g.boundaries) {
    ++covered[b.step];
    EXPECT_FALSE(b.reason.empty());
  }
  for (int c : covered) EXPECT_EQ(c, 1);
}

TEST(GraphableTest, AttentionRunsAsOneSection) {
  for (const char* spec : {"attention:n=64,depth=2", "attention:n=64,depth=2,mode=training",
                           "attention:n=64,depth=2,kernel=efficient,mode=training"}) {
    SCOPED_TRACE(spec);
    Planned p = PlanWorkload(spec);
    const GraphableSections g = FindGraphableSections(p.graph, p.plan, MakeDeviceKernelTableOnHost());
    ExpectPartition(p.plan, g);
    ASSERT_EQ(g.sections.size(), 1u);
    EXPECT_EQ(g.sections[0].first, 0);
    EXPECT_EQ(g.sections[0].second, static_cast<int>(p.plan.steps.size()) - 1);
    EXPECT_TRUE(g.boundaries.empty());
  }
}

// The label check reads device data on the host: the loss and its gradient end sections.
TEST(GraphableTest, HostRoundTripsAndMissingKernelsAreBoundaries) {
  Planned mlp = PlanWorkload("mlp:layers=3,mode=training");
  const GraphableSections g = FindGraphableSections(mlp.graph, mlp.plan, MakeDeviceKernelTableOnHost());
  ExpectPartition(mlp.plan, g);
  ASSERT_EQ(g.boundaries.size(), 2u);
  for (const GraphableSections::Boundary& b : g.boundaries) {
    EXPECT_THAT(mlp.graph.op(mlp.plan.steps[b.step].op).type, HasSubstr("LabelCrossEntropy"));
    EXPECT_THAT(b.reason, HasSubstr("on the host"));
  }
  EXPECT_EQ(g.sections.size(), 3u);

  Planned resnet = PlanWorkload("resnet50:batch=1,image=32");
  const GraphableSections r =
      FindGraphableSections(resnet.graph, resnet.plan, MakeDeviceKernelTableOnHost());
  ExpectPartition(resnet.plan, r);
  ASSERT_FALSE(r.boundaries.empty());
  EXPECT_THAT(r.boundaries[0].reason, HasSubstr("no kernel for op type 'Conv'"));

  mlp.plan.graphable = g;
  EXPECT_THAT(PlanToJson(mlp.graph, mlp.plan), HasSubstr("\"graphable\""));
  EXPECT_THAT(PlanToText(mlp.graph, mlp.plan), HasSubstr("cuda graphs      3 section(s)"));
}

}  // namespace
}  // namespace memonger::alloc
