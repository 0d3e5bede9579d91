// Device bytes (memonger/device_bytes.h): the bytes outside the arena known before planning are
// the plan's own, for every optimizer, with params in the arena or not; the optimizer's state is
// counted from the trained params only; the arena's share of a budget.
#include "memonger/device_bytes.h"

#include <string>

#include "gmock/gmock.h"
#include "graph/gradient_builder.h"
#include "gtest/gtest.h"
#include "memonger/planner.h"
#include "workloads/workloads.h"

namespace memonger {
namespace {

using ::testing::HasSubstr;

graph::Graph Workload(const std::string& spec) {
  absl::StatusOr<graph::WorkloadSpec> parsed = graph::ParseWorkloadSpec(spec);
  EXPECT_TRUE(parsed.ok()) << spec;
  absl::StatusOr<graph::Graph> g = graph::BuildWorkload(*parsed);
  EXPECT_TRUE(g.ok()) << g.status();
  return *std::move(g);
}

TEST(DeviceBytesTest, OptimizerNames) {
  for (const char* name : {"none", "sgd", "momentum", "adam"}) {
    absl::StatusOr<Optimizer> o = ParseOptimizer(name);
    ASSERT_TRUE(o.ok()) << name;
    EXPECT_EQ(OptimizerName(*o), name);
  }
  EXPECT_EQ(OptimizerStateCopies(Optimizer::kSgd), 0);
  EXPECT_EQ(OptimizerStateCopies(Optimizer::kMomentum), 1);
  EXPECT_EQ(OptimizerStateCopies(Optimizer::kAdam), 2);
  absl::StatusOr<Optimizer> bad = ParseOptimizer("adagrad");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("sgd, momentum, adam"));
}

TEST(DeviceBytesTest, OutsideTheArenaBeforePlanningIsThePlans) {
  for (const char* spec : {"mlp:layers=3,batch=16,dim=24,mode=training",
                           "attention:n=64,heads=2,dim=32,mlp=64,depth=1",
                           "resnet50:batch=1,mode=training"}) {
    SCOPED_TRACE(spec);
    const graph::Graph g = Workload(spec);
    const bool training = graph::HasGradientOps(g);
    for (const bool plan_static : {false, true}) {
      PlanOptions options;
      options.liveness.plan_static = plan_static;
      absl::StatusOr<Plan> plan = PlanMemory(g, options);
      ASSERT_TRUE(plan.ok()) << plan.status();
      EXPECT_EQ(plan->trainable_bytes > 0, training);
      for (const Optimizer o :
           {Optimizer::kNone, Optimizer::kSgd, Optimizer::kMomentum, Optimizer::kAdam}) {
        const DeviceBytes bytes = DeviceBytesOf(*plan, o);
        EXPECT_EQ(bytes.arena, plan->arena_bytes);
        EXPECT_EQ(bytes.static_bytes, plan->static_bytes);
        EXPECT_EQ(bytes.optimizer_state, plan->trainable_bytes * OptimizerStateCopies(o));
        EXPECT_EQ(bytes.total(), bytes.arena + bytes.outside_arena());
        absl::StatusOr<int64_t> outside = OutsideArenaBytes(g, options.liveness, o);
        ASSERT_TRUE(outside.ok()) << outside.status();
        EXPECT_EQ(*outside, bytes.outside_arena());
      }
      if (plan_static) EXPECT_EQ(plan->static_bytes, 0);
    }
  }
}

// The trained params are those the net pairs with a gradient, each counted once.
TEST(DeviceBytesTest, TrainedParamsArePairedWithAGradient) {
  const graph::Graph g = Workload("mlp:layers=2,batch=4,dim=8,mode=training");
  ASSERT_FALSE(g.param_grads().empty());
  int64_t paired = 0;
  for (const auto& [param, grad] : g.param_grads()) {
    absl::StatusOr<int64_t> b = graph::ValueByteSize(g.value(param));
    ASSERT_TRUE(b.ok());
    paired += *b;
  }
  absl::StatusOr<Plan> plan = PlanMemory(g, PlanOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->trainable_bytes, paired);
  EXPECT_EQ(graph::TrainableParams(g).size(), g.param_grads().size());
}

TEST(DeviceBytesTest, ArenaShareOfABudget) {
  EXPECT_EQ(ArenaShare(-1, 100), -1);
  EXPECT_EQ(ArenaShare(1000, 100), 900);
  EXPECT_EQ(ArenaShare(50, 100), 0);
  EXPECT_THAT(DeviceBytesToText({1024, 2048, 0}), ::testing::Not(HasSubstr("optimizer")));
  EXPECT_THAT(DeviceBytesToText({1024, 2048, 4096}), HasSubstr("+ optimizer state 4.00 KiB"));
}

}  // namespace
}  // namespace memonger
