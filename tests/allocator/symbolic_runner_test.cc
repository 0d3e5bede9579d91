// One arena for every length: a symbolic plan bound at several lengths runs the attention
// workload in the runner's single arena, with the outputs of a run where every value has memory
// of its own, bit for bit; verify mode finds no clobber. On a GPU the same runs in one CUDA
// arena (skipped where none is present).
#include "allocator/symbolic_runner.h"

#include <string>
#include <vector>

#include "allocator/executor.h"
#include "allocator/host_run.h"
#include "graph/symbolic_shapes.h"
#include "gtest/gtest.h"
#include "kernels/cuda/kernels_device.h"
#include "memonger/planner.h"
#include "memonger/symbolic/symbolic_planner.h"
#include "util/status_macros.h"
#include "workloads/workload_attention.h"

namespace memonger::alloc {
namespace {

using graph::SymbolBindings;

absl::StatusOr<graph::Graph> AttentionAt(bool efficient, int64_t n) {
  graph::AttentionWorkload w;
  w.dim = 64;
  w.heads = 2;
  w.mlp = 128;
  w.depth = 2;
  w.efficient = efficient;
  w.training = true;
  w.symbolic = true;
  w.n = n;
  return graph::BuildAttentionGraph(w);
}

absl::StatusOr<SymbolicPlan> PlanLengths(bool efficient, const graph::SymbolBox& box) {
  auto at = [&](const SymbolBindings& b) { return AttentionAt(efficient, b.at("n")); };
  graph::ShapeBindings fixed;
  fixed.dims["batch"] = 1;
  PlanOptions options;
  options.planner = PlannerKind::kBestFit;
  MG_ASSIGN_OR_RETURN(RangePlan range, PlanRange(at, fixed, box, options, /*upper_bound_fallback=*/false));
  return std::move(range.plan);
}

// The outputs of `g` run with every value in memory of its own (planner none).
absl::StatusOr<std::vector<std::string>> UnsharedOutputs(const graph::Graph& g,
                                                         const NetRunTarget& target) {
  PlanOptions none;
  none.planner = PlannerKind::kNone;
  MG_ASSIGN_OR_RETURN(Plan plan, PlanMemory(g, none));
  MG_ASSIGN_OR_RETURN(HostRunReport report, RunNet(g, plan, HostRunOptions{}, target));
  std::vector<std::string> out;
  for (const HostRunOutput& o : report.outputs) out.push_back(o.bytes);
  return out;
}

class SymbolicRunnerTest : public ::testing::TestWithParam<bool> {};

TEST_P(SymbolicRunnerTest, OneHostArenaForEveryLength) {
  const bool efficient = GetParam();
  graph::SymbolBox box;
  ASSERT_TRUE(graph::ParseDimRange("n=8..200", box).ok());
  absl::StatusOr<SymbolicPlan> plan = PlanLengths(efficient, box);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const int64_t high = *plan->MaxArena();
  absl::StatusOr<SymbolicRunner> runner = SymbolicRunner::Create(*plan, Device::kHost);
  ASSERT_TRUE(runner.ok()) << runner.status();
  EXPECT_EQ(runner->arena().size(), high);
  const std::byte* base = runner->arena().base();
  for (int64_t n : {8, 57, 200}) {
    SCOPED_TRACE(n);
    absl::StatusOr<graph::Graph> g = AttentionAt(efficient, n);
    ASSERT_TRUE(g.ok()) << g.status();
    absl::StatusOr<HostRunReport> report = runner->Run(*g, {{"n", n}}, HostRunOptions{}, NetRunTarget{});
    ASSERT_TRUE(report.ok()) << report.status();
    absl::StatusOr<std::vector<std::string>> want = UnsharedOutputs(*g, NetRunTarget{});
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_EQ(report->outputs.size(), want->size());
    for (size_t k = 0; k < want->size(); ++k) {
      EXPECT_TRUE(report->outputs[k].bytes == (*want)[k]) << report->outputs[k].name;
    }
    // Verify mode on the same arena: no value is overwritten while live.
    absl::StatusOr<Plan> bound = runner->Bind(*g, {{"n", n}});
    ASSERT_TRUE(bound.ok()) << bound.status();
    absl::StatusOr<Executor> executor = Executor::Create(*g, *bound, runner->arena());
    ASSERT_TRUE(executor.ok()) << executor.status();
    EXPECT_TRUE(executor->RunVerify().ok());
    EXPECT_EQ(runner->arena().base(), base);  // the same allocation every time
  }
  // Outside the box, and a net that is not the one planned, are refused.
  absl::StatusOr<graph::Graph> longer = AttentionAt(efficient, 300);
  ASSERT_TRUE(longer.ok());
  EXPECT_FALSE(runner->Bind(*longer, {{"n", 300}}).ok());
  absl::StatusOr<graph::Graph> other = AttentionAt(efficient, 150);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(runner->Bind(*other, {{"n", 20}}).ok());
}

TEST_P(SymbolicRunnerTest, OneCudaArenaForEveryLength) {
  const bool efficient = GetParam();
  absl::StatusOr<Arena> probe = Arena::Create(Device::kCuda, 1 << 20);
  if (!probe.ok()) GTEST_SKIP() << "no CUDA device or build: " << probe.status().message();
  absl::StatusOr<CudaKernels> kernels = MakeCudaKernels(CudaKernelOptions{});
  ASSERT_TRUE(kernels.ok()) << kernels.status();
  NetRunTarget target;
  target.device = Device::kCuda;
  target.kernels = &kernels->table;
  target.finish = kernels->synchronize;
  graph::SymbolBox box;
  ASSERT_TRUE(graph::ParseDimRange("n=8..200", box).ok());
  absl::StatusOr<SymbolicPlan> plan = PlanLengths(efficient, box);
  ASSERT_TRUE(plan.ok()) << plan.status();
  absl::StatusOr<SymbolicRunner> runner = SymbolicRunner::Create(*plan, Device::kCuda);
  ASSERT_TRUE(runner.ok()) << runner.status();
  for (int64_t n : {8, 131, 200}) {
    SCOPED_TRACE(n);
    absl::StatusOr<graph::Graph> g = AttentionAt(efficient, n);
    ASSERT_TRUE(g.ok()) << g.status();
    absl::StatusOr<HostRunReport> report = runner->Run(*g, {{"n", n}}, HostRunOptions{}, target);
    ASSERT_TRUE(report.ok()) << report.status();
    absl::StatusOr<std::vector<std::string>> want = UnsharedOutputs(*g, target);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_EQ(report->outputs.size(), want->size());
    for (size_t k = 0; k < want->size(); ++k) {
      EXPECT_TRUE(report->outputs[k].bytes == (*want)[k]) << report->outputs[k].name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, SymbolicRunnerTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "efficient" : "math";
                         });

}  // namespace
}  // namespace memonger::alloc
