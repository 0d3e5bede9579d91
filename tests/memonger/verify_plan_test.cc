#include "memonger/verify_plan.h"

#include <deque>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memonger/liveness.h"
#include "memonger/plan.h"
#include "memonger/planner.h"
#include "memonger/sharing/sharing.h"
#include "tests/random_graphs.h"
#include "tests/test_support.h"

namespace memonger {
namespace {

using graph::Graph;
using graph::OpId;
using graph::ValueId;
using ::memonger::testing::AssignByteTypes;
using ::memonger::testing::GraphFromText;
using ::testing::AllOf;
using ::testing::HasSubstr;

Graph Typed(const std::string& pbtxt, const std::map<std::string, int64_t>& bytes = {},
            int64_t default_bytes = 1000) {
  absl::StatusOr<Graph> g = GraphFromText(pbtxt);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return Graph();
  AssignByteTypes(*g, bytes, default_bytes);
  return *std::move(g);
}

Liveness Live(const Graph& g, const LivenessOptions& options = {}) {
  absl::StatusOr<Liveness> l = ComputeLiveness(g, *MakeSchedule(g, OrderKind::kGiven), options);
  EXPECT_TRUE(l.ok()) << l.status();
  return *std::move(l);
}

// A sharing plan: the named blobs (latest versions' classes) share one buffer per group; every
// other class has its own.
Plan SharingPlan(const Graph& g, const std::vector<std::vector<std::string>>& shared,
                 ExecutionModel execution = ExecutionModel::kSerial, int64_t alignment = 256,
                 const LivenessOptions& options = {}) {
  const Liveness l = Live(g, options);
  Plan plan;
  plan.execution = execution;
  InitPlan(g, l, alignment, plan);
  SharingGroups groups;
  std::vector<bool> grouped(g.num_values(), false);
  for (const auto& names : shared) {
    groups.emplace_back();
    for (const std::string& name : names) {
      const ValueId root = l.alias_root[*g.FindValue(name)];
      groups.back().push_back(root);
      grouped[root] = true;
    }
  }
  for (ValueId v = 0; v < g.num_values(); ++v) {
    if (l.planned[v] && l.alias_root[v] == v && !grouped[v]) groups.push_back({v});
  }
  BuildSharingPlan(g, l, groups, plan);
  return plan;
}

// x [0,3] (a graph input: kept; [0,0] when inputs are recycled), a [0,1], b [1,2], c [2,3],
// d [3,3].
constexpr char kChain[] = R"pb(
  external_input: "x"
  op { type: "Relu" input: "x" output: "a" }
  op { type: "Relu" input: "a" output: "b" }
  op { type: "Relu" input: "b" output: "c" }
  op { type: "Relu" input: "c" output: "d" }
  external_output: "d"
)pb";

// Two branches joined by Sum: a [0,1], b [2,3] in the given order, unordered in parallel.
constexpr char kBranches[] = R"pb(
  external_input: "x"
  op { type: "Relu" input: "x" output: "a" }
  op { name: "a_reader" type: "Relu" input: "a" output: "a2" }
  op { name: "b_writer" type: "Relu" input: "x" output: "b" }
  op { type: "Relu" input: "b" output: "b2" }
  op { type: "Sum" input: "a2" input: "b2" output: "s" }
)pb";

TEST(VerifyPlanTest, ValidPlansPass) {
  const Graph g = Typed(kChain);
  PlanOptions options;
  options.planner = PlannerKind::kNone;
  absl::StatusOr<Plan> none = PlanMemory(g, options);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(VerifyPlan(g, *none).ok()) << VerifyPlan(g, *none);

  const Plan shared = SharingPlan(g, {{"a", "c"}, {"b", "d"}});
  EXPECT_EQ(shared.buffers.size(), 3u);
  EXPECT_TRUE(VerifyPlan(g, shared).ok()) << VerifyPlan(g, shared);
  const Plan parallel = SharingPlan(g, {{"a", "c"}, {"b", "d"}}, ExecutionModel::kParallel);
  EXPECT_TRUE(VerifyPlan(g, parallel).ok()) << VerifyPlan(g, parallel);
}

// A graph input is the caller's: a plan that writes over it after its last reader is refused,
// unless the plan says inputs are recycled (--recycle-inputs).
TEST(VerifyPlanTest, GraphInputsAreKeptUnlessThePlanRecyclesThem) {
  const Graph g = Typed(kChain);
  const absl::Status kept = VerifyPlan(g, SharingPlan(g, {{"x", "b"}}));
  ASSERT_FALSE(kept.ok());
  EXPECT_THAT(std::string(kept.message()), AllOf(HasSubstr("'x' (lifetime [0,3]"),
                                                 HasSubstr("'b'"), HasSubstr("overlap")));
  LivenessOptions recycle;
  recycle.recycle_inputs = true;
  const Plan recycled =
      SharingPlan(g, {{"a", "c"}, {"x", "b", "d"}}, ExecutionModel::kSerial, 256, recycle);
  EXPECT_TRUE(recycled.liveness.recycle_inputs);
  EXPECT_EQ(recycled.buffers.size(), 2u);
  EXPECT_TRUE(VerifyPlan(g, recycled).ok()) << VerifyPlan(g, recycled);
  const Plan parallel =
      SharingPlan(g, {{"a", "c"}, {"x", "b", "d"}}, ExecutionModel::kParallel, 256, recycle);
  EXPECT_TRUE(VerifyPlan(g, parallel).ok()) << VerifyPlan(g, parallel);
}

TEST(VerifyPlanTest, ValueMovedOntoALiveNeighbour) {
  const Graph g = Typed(kChain);
  const Plan plan = SharingPlan(g, {{"a", "b"}});
  const absl::Status s = VerifyPlan(g, plan);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("'a' (lifetime [0,1], bytes [0, 1000))"),
                                 HasSubstr("'b' (lifetime [1,2], bytes [0, 1000))"),
                                 HasSubstr("while both are live")));
}

TEST(VerifyPlanTest, PartialOverlapFoundByTheSweep) {
  const Graph g = Typed(kChain);
  Plan plan = SharingPlan(g, {});
  // Slide c's buffer (own memory) so it overlaps the tail of b's.
  const ValueId b = *g.FindValue("b");
  const ValueId c = *g.FindValue("c");
  plan.buffers[plan.buffer_of_value[c]].offset = plan.offset_of_value[b] + 768;
  FinishPlan(plan);
  const absl::Status s = VerifyPlan(g, plan);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("'b'"), HasSubstr("'c'"), HasSubstr("[1,2]"),
                                 HasSubstr("[2,3]")));
}

TEST(VerifyPlanTest, MisalignedOffset) {
  const Graph g = Typed(kChain);
  Plan plan = SharingPlan(g, {});
  plan.buffers[2].offset += 8;
  FinishPlan(plan);
  const absl::Status s = VerifyPlan(g, plan);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("not aligned to the plan's 256 bytes"));
}

TEST(VerifyPlanTest, ValueAlignmentIsRespected) {
  const Graph g = Typed(R"pb(
    external_input: "x"
    op { type: "Relu" input: "x" output: "a" }
    op { type: "Relu" input: "a" output: "b" }
    value_info { name: "b" alignment: 4096 }
  )pb");
  Plan plan = SharingPlan(g, {});
  const ValueId b = *g.FindValue("b");
  EXPECT_EQ(plan.offset_of_value[b] % 4096, 0);
  ASSERT_TRUE(VerifyPlan(g, plan).ok()) << VerifyPlan(g, plan);
  plan.buffers[plan.buffer_of_value[b]].offset += 256;
  FinishPlan(plan);
  const absl::Status s = VerifyPlan(g, plan);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("'b'"), HasSubstr("4096")));
}

TEST(VerifyPlanTest, BrokenInPlacePair) {
  const Graph g = Typed(R"pb(
    external_input: "x"
    op { type: "Relu" input: "x" output: "a" }
    op { type: "Relu" input: "a" output: "a" }
    op { type: "Relu" input: "a" output: "b" }
  )pb");
  Plan plan = SharingPlan(g, {});
  ASSERT_TRUE(VerifyPlan(g, plan).ok()) << VerifyPlan(g, plan);
  const std::vector<ValueId> a = g.FindVersions("a");
  PlanBuffer separate = plan.buffers[plan.buffer_of_value[a[1]]];
  separate.offset = plan.arena_bytes;
  plan.buffers.push_back(separate);
  plan.buffer_of_value[a[1]] = static_cast<int32_t>(plan.buffers.size() - 1);
  FinishPlan(plan);
  const absl::Status s = VerifyPlan(g, plan);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("'a'"), HasSubstr("'a@1'"), HasSubstr("in place")));
}

LivenessOptions InPlace() {
  LivenessOptions options;
  options.in_place = true;
  return options;
}

// An output on the exact bytes of the input dying at its op is the in-place reuse the plan
// declares; reuse is allowed, not forced, and a partial overlap is still the worst bug.
TEST(VerifyPlanTest, InPlaceHandoffsAreAcceptedWhereTheTableAllowsThem) {
  const Graph g = Typed(kChain);
  Plan plan = SharingPlan(g, {}, ExecutionModel::kSerial, 256, InPlace());
  const ValueId a = *g.FindValue("a");
  const ValueId b = *g.FindValue("b");
  ASSERT_EQ(plan.buffer_of_value[a], plan.buffer_of_value[b]);  // liveness joined a..d
  ASSERT_TRUE(plan.liveness.in_place);
  EXPECT_TRUE(VerifyPlan(g, plan).ok()) << VerifyPlan(g, plan);

  PlanBuffer own = plan.buffers[plan.buffer_of_value[b]];
  own.offset = plan.arena_bytes;
  plan.buffers.push_back(own);
  plan.buffer_of_value[b] = static_cast<int32_t>(plan.buffers.size() - 1);
  FinishPlan(plan);
  EXPECT_TRUE(VerifyPlan(g, plan).ok()) << VerifyPlan(g, plan);  // b apart: allowed

  plan.buffers.back().offset = plan.offset_of_value[a] + 256;  // b over a's tail
  FinishPlan(plan);
  const absl::Status partial = VerifyPlan(g, plan);
  ASSERT_FALSE(partial.ok());
  EXPECT_THAT(std::string(partial.message()),
              AllOf(HasSubstr("'a'"), HasSubstr("'b'"), HasSubstr("while both are live")));

  // The same bytes without the plan saying it reuses inputs: refused.
  const Plan undeclared = SharingPlan(g, {{"a", "b"}});
  EXPECT_FALSE(undeclared.liveness.in_place);
  EXPECT_FALSE(VerifyPlan(g, undeclared).ok());
}

// Each rule of the handoff, broken by a plan that shares the two values' buffer anyway.
TEST(VerifyPlanTest, InPlaceHandoffsAreRefusedWhereTheyWouldLoseData) {
  auto refused = [](const Graph& g, const Plan& plan, const std::string& first,
                    const std::string& second) {
    const absl::Status s = VerifyPlan(g, plan);
    ASSERT_FALSE(s.ok()) << first << " and " << second << " share bytes";
    EXPECT_THAT(std::string(s.message()),
                AllOf(HasSubstr("'" + first + "'"), HasSubstr("'" + second + "'")));
  };
  // An op outside the table (Conv reads its input after writing its output).
  const Graph conv = Typed(R"pb(
    external_input: "x"
    op { type: "Relu" input: "x" output: "a" }
    op { type: "Conv" input: "a" output: "b" }
    op { type: "Relu" input: "b" output: "c" }
    external_output: "c"
  )pb");
  refused(conv, SharingPlan(conv, {{"a", "b"}}, ExecutionModel::kSerial, 256, InPlace()), "a",
          "b");
  // An input read again later.
  const Graph later = Typed(R"pb(
    external_input: "x"
    op { type: "Relu" input: "x" output: "a" }
    op { type: "Relu" input: "a" output: "b" }
    op { type: "Relu" input: "b" output: "c" }
    op { type: "Sum" input: "a" input: "c" output: "s" }
  )pb");
  refused(later, SharingPlan(later, {{"a", "b"}}, ExecutionModel::kSerial, 256, InPlace()), "a",
          "b");
  // The caller's graph input.
  const Graph chain = Typed(kChain);
  refused(chain, SharingPlan(chain, {{"x", "a"}}, ExecutionModel::kSerial, 256, InPlace()), "x",
          "a");
  // A graph output, written over at the last step.
  const Graph output = Typed(R"pb(
    external_input: "x"
    op { type: "Relu" input: "x" output: "y" }
    op { type: "Relu" input: "y" output: "z" }
    external_output: "y"
  )pb");
  refused(output, SharingPlan(output, {{"y", "z"}}, ExecutionModel::kSerial, 256, InPlace()),
          "y", "z");
  // Not the same bytes: a smaller output inside the input.
  const Graph smaller = Typed(kChain, {{"b", 500}});
  refused(smaller, SharingPlan(smaller, {{"a", "b"}}, ExecutionModel::kSerial, 256, InPlace()),
          "a", "b");
  // A parallel executor may still run an input's other readers.
  const Plan parallel = SharingPlan(chain, {}, ExecutionModel::kParallel, 256, InPlace());
  EXPECT_FALSE(VerifyPlan(chain, parallel).ok());
}

TEST(VerifyPlanTest, BufferAcrossDevices) {
  const Graph g = Typed(R"pb(
    external_input: "x"
    op { type: "Relu" input: "x" output: "a" }
    op { type: "Relu" input: "a" output: "m" }
    op { type: "Relu" input: "m" output: "b" device_option { device_type: 1 } }
  )pb");
  const Plan plan = SharingPlan(g, {{"a", "b"}});
  const absl::Status s = VerifyPlan(g, plan);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("'a' (cpu)"), HasSubstr("'b' (cuda:0)"),
                                 HasSubstr("different devices")));
}

TEST(VerifyPlanTest, ParallelBranchesMayNotShareInParallelMode) {
  const Graph g = Typed(kBranches);
  const Plan serial = SharingPlan(g, {{"a", "b"}}, ExecutionModel::kSerial);
  EXPECT_TRUE(VerifyPlan(g, serial).ok()) << VerifyPlan(g, serial);
  const Plan parallel = SharingPlan(g, {{"a", "b"}}, ExecutionModel::kParallel);
  const absl::Status s = VerifyPlan(g, parallel);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("'a' (lifetime [0,1], bytes [0, 1000))"),
                    HasSubstr("'b' (lifetime [2,3], bytes [0, 1000))"), HasSubstr("parallel"),
                    HasSubstr("'a_reader'"), HasSubstr("'b_writer'")));
  // After the join everything is ordered: 'a' and 's' may share in parallel too.
  const Plan joined = SharingPlan(g, {{"a", "s"}}, ExecutionModel::kParallel);
  EXPECT_TRUE(VerifyPlan(g, joined).ok()) << VerifyPlan(g, joined);
}

TEST(VerifyPlanTest, InconsistentPlans) {
  const Graph g = Typed(kChain);
  const Plan good = SharingPlan(g, {{"a", "c"}});
  ASSERT_TRUE(VerifyPlan(g, good).ok());
  const ValueId b = *g.FindValue("b");
  {
    Plan p = good;
    p.offset_of_value.pop_back();
    EXPECT_THAT(std::string(VerifyPlan(g, p).message()), HasSubstr("values"));
  }
  {
    Plan p = good;
    std::swap(p.steps[0], p.steps[1]);
    EXPECT_THAT(std::string(VerifyPlan(g, p).message()), HasSubstr("schedule is invalid"));
  }
  {
    Plan p = good;
    p.lifetime[b].last_step = 3;
    EXPECT_THAT(std::string(VerifyPlan(g, p).message()), AllOf(HasSubstr("'b'"), HasSubstr("[1,3]")));
  }
  {
    Plan p = good;
    p.buffers[p.buffer_of_value[b]].size = 512;
    EXPECT_THAT(std::string(VerifyPlan(g, p).message()), AllOf(HasSubstr("'b' has 1000 bytes")));
  }
  {
    Plan p = good;
    p.buffer_of_value[b] = -1;
    p.offset_of_value[b] = kNoOffset;
    EXPECT_THAT(std::string(VerifyPlan(g, p).message()), HasSubstr("'b' has no buffer"));
  }
  {
    Plan p = good;
    p.offset_of_value[b] += 256;
    EXPECT_THAT(std::string(VerifyPlan(g, p).message()), HasSubstr("'b' has offset"));
  }
  {
    Plan p = good;
    p.arena_bytes -= 256;
    EXPECT_THAT(std::string(VerifyPlan(g, p).message()), HasSubstr("arena"));
  }
  {
    Plan p = good;
    p.alignment = 96;
    EXPECT_THAT(std::string(VerifyPlan(g, p).message()), HasSubstr("power of two"));
  }
}

TEST(VerifyPlanTest, StaticValuesStayOutOfTheArenaUnlessPlanned) {
  const Graph g = Typed(R"pb(
    external_input: "x"
    external_input: "w"
    op { type: "FC" input: "x" input: "w" output: "a" }
    value_info { name: "w" role: ROLE_PARAM }
  )pb");
  const ValueId w = *g.FindValue("w");
  Plan plan = SharingPlan(g, {});
  EXPECT_EQ(plan.buffer_of_value[w], -1);
  ASSERT_TRUE(VerifyPlan(g, plan).ok()) << VerifyPlan(g, plan);
  PlanBuffer extra{plan.arena_bytes, 1024, {}};
  plan.buffers.push_back(extra);
  plan.buffer_of_value[w] = static_cast<int32_t>(plan.buffers.size() - 1);
  FinishPlan(plan);
  EXPECT_THAT(std::string(VerifyPlan(g, plan).message()), HasSubstr("static value 'w'"));

  PlanOptions options;
  options.planner = PlannerKind::kNone;
  options.liveness.plan_static = true;
  absl::StatusOr<Plan> planned = PlanMemory(g, options);
  ASSERT_TRUE(planned.ok()) << planned.status();
  EXPECT_GE(planned->buffer_of_value[w], 0);
  EXPECT_TRUE(VerifyPlan(g, *planned).ok()) << VerifyPlan(g, *planned);
}

// ---- The sweep against an all-pairs oracle on random graphs and random plans. ----

std::vector<std::vector<bool>> Reachability(const Graph& g) {
  const std::vector<std::vector<OpId>> succ = OpSuccessors(g);
  std::vector<std::vector<bool>> reach(g.num_ops(), std::vector<bool>(g.num_ops(), false));
  for (OpId a = 0; a < g.num_ops(); ++a) {
    std::deque<OpId> queue(succ[a].begin(), succ[a].end());
    while (!queue.empty()) {
      const OpId u = queue.front();
      queue.pop_front();
      if (reach[a][u]) continue;
      reach[a][u] = true;
      queue.insert(queue.end(), succ[u].begin(), succ[u].end());
    }
  }
  return reach;
}

// May classes a and b (roots) occupy the same bytes?
bool MayShare(const Graph& g, const Liveness& l, const std::vector<std::vector<bool>>& reach,
              ValueId a, ValueId b, bool parallel) {
  if (l.lifetime[a].Overlaps(l.lifetime[b])) return false;
  if (!parallel) return true;
  if (l.lifetime[a].first_step > l.lifetime[b].first_step) std::swap(a, b);  // a is the earlier
  const OpId writer = g.value(b).producer;
  if (writer == graph::kNone) return false;
  for (ValueId m : l.members[a]) {
    std::vector<OpId> ops(g.consumers(m).begin(), g.consumers(m).end());
    if (g.value(m).producer != graph::kNone) ops.push_back(g.value(m).producer);
    for (OpId op : ops) {
      if (!reach[op][writer]) return false;
    }
  }
  return true;
}

// REQUIRES: members of a class placed together (the random plans below are).
bool OracleAccepts(const Graph& g, const Liveness& l, const Plan& plan,
                   const std::vector<std::vector<bool>>& reach) {
  std::vector<ValueId> roots;
  for (ValueId v = 0; v < g.num_values(); ++v) {
    if (l.planned[v] && l.alias_root[v] == v && l.class_bytes[v] > 0) roots.push_back(v);
  }
  for (ValueId a : roots) {
    for (ValueId b : roots) {
      if (a == b) continue;
      const int64_t oa = plan.offset_of_value[a];
      const int64_t ob = plan.offset_of_value[b];
      if (oa + l.class_bytes[a] <= ob || ob + l.class_bytes[b] <= oa) continue;
      if (!MayShare(g, l, reach, a, b, plan.execution == ExecutionModel::kParallel)) {
        return false;
      }
    }
  }
  return true;
}

TEST(VerifyPlanPropertyTest, AgreesWithAllPairsOracle) {
  int accepted[2] = {0, 0};
  int rejected[2] = {0, 0};
  for (uint64_t seed = 0; seed < 400; ++seed) {
    SCOPED_TRACE(seed);
    testing::RandomGraphOptions options;
    options.num_ops = 4 + static_cast<int>(seed % 30);
    options.inplace_probability = 0.2;
    const Graph g = testing::RandomGraph(seed, options);
    const Liveness l = Live(g);
    const std::vector<std::vector<bool>> reach = Reachability(g);
    std::mt19937_64 rng(seed);
    Plan plan;
    plan.execution = seed % 2 == 0 ? ExecutionModel::kSerial : ExecutionModel::kParallel;
    InitPlan(g, l, /*alignment=*/64, plan);
    std::vector<ValueId> roots;
    for (ValueId v = 0; v < g.num_values(); ++v) {
      if (l.planned[v] && l.alias_root[v] == v) roots.push_back(v);
    }
    if (seed % 4 < 2) {
      // Random sharing groups, mostly chosen among compatible groups.
      SharingGroups groups;
      for (ValueId root : roots) {
        std::vector<int> fits;
        for (int k = 0; k < static_cast<int>(groups.size()); ++k) {
          bool ok = true;
          for (ValueId other : groups[k]) {
            ok = ok && MayShare(g, l, reach, root, other,
                                plan.execution == ExecutionModel::kParallel);
          }
          if (ok || rng() % 32 == 0) fits.push_back(k);
        }
        if (!fits.empty() && rng() % 3 != 0) {
          groups[fits[rng() % fits.size()]].push_back(root);
        } else {
          groups.push_back({root});
        }
      }
      BuildSharingPlan(g, l, groups, plan);
    } else {
      // One buffer per class at random aligned offsets in a small window: partial overlaps.
      for (ValueId root : roots) {
        const int64_t size = (l.class_bytes[root] + 63) / 64 * 64;
        const int32_t index = static_cast<int32_t>(plan.buffers.size());
        plan.buffers.push_back(PlanBuffer{static_cast<int64_t>(rng() % 2048) * 64, size, {}});
        for (ValueId m : l.members[root]) plan.buffer_of_value[m] = index;
      }
      FinishPlan(plan);
    }
    const bool expected = OracleAccepts(g, l, plan, reach);
    const absl::Status status = VerifyPlan(g, plan);
    ASSERT_EQ(status.ok(), expected) << status;
    const int mode = plan.execution == ExecutionModel::kParallel ? 1 : 0;
    (expected ? accepted : rejected)[mode]++;
  }
  // Both verdicts occur in both execution models.
  EXPECT_GT(accepted[0], 10);
  EXPECT_GT(rejected[0], 10);
  EXPECT_GT(accepted[1], 10);
  EXPECT_GT(rejected[1], 10);
}

}  // namespace
}  // namespace memonger
