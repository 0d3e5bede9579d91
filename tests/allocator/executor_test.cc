// Executor (and the verify kernels it runs): verify mode passes on good plans of random DAGs and
// of ONNX test models, for every planner; it catches a corrupted plan and names the clobbered
// value and the op that wrote over it; Run() dispatches through a kernel table; the CUDA path
// runs when there is a device and is skipped with the reason when there is not.
#include "allocator/executor.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "allocator/arena.h"
#include "gmock/gmock.h"
#include "graph/model_loader.h"
#include "graph/shape_inference.h"
#include "gtest/gtest.h"
#include "kernels/verify_kernels.h"
#include "memonger/planner.h"
#include "memonger/verify_plan.h"
#include "tests/random_graphs.h"
#include "tests/test_support.h"
#include "workloads/workloads.h"

namespace memonger::alloc {
namespace {

namespace fs = std::filesystem;
using graph::Graph;
using graph::kNone;
using graph::ValueId;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr PlannerKind kAllPlanners[] = {
    PlannerKind::kNone,         PlannerKind::kMemongerDag,  PlannerKind::kMemongerGreedy,
    PlannerKind::kMemongerDp,   PlannerKind::kMemongerFast, PlannerKind::kExactSharing,
    PlannerKind::kGreedyBySize, PlannerKind::kBestFit,      PlannerKind::kExact,
    PlannerKind::kAuto};

// Plans `g` and runs the executor in verify mode in a fresh arena on `device`.
absl::Status PlanAndVerifyRun(const Graph& g, const PlanOptions& options,
                              Device device = Device::kHost) {
  absl::StatusOr<Plan> plan = PlanMemory(g, options);
  if (!plan.ok()) return plan.status();
  const absl::Status verified = VerifyPlan(g, *plan);
  if (!verified.ok()) return verified;
  absl::StatusOr<Arena> arena = Arena::Create(device, plan->arena_bytes);
  if (!arena.ok()) return arena.status();
  absl::StatusOr<Executor> executor = Executor::Create(g, *plan, *arena);
  if (!executor.ok()) return executor.status();
  return executor->RunVerify();
}

Graph Typed(const std::string& pbtxt, const std::map<std::string, int64_t>& bytes = {},
            int64_t default_bytes = 1000) {
  absl::StatusOr<Graph> g = testing::GraphFromText(pbtxt);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return Graph();
  testing::AssignByteTypes(*g, bytes, default_bytes);
  return *std::move(g);
}

Plan NaivePlan(const Graph& g, int64_t alignment = 256) {
  PlanOptions options;
  options.planner = PlannerKind::kNone;
  options.alignment = alignment;
  absl::StatusOr<Plan> plan = PlanMemory(g, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *std::move(plan) : Plan();
}

// ---------------------------------------------------------------------------------------------
// Verify kernels.

TEST(ExecutorVerifyKernelsTest, EveryByteIsCheckedIncludingTheTail) {
  for (int64_t bytes : {1, 7, 8, 13, 64, 100}) {
    for (int64_t shift : {0, 1, 3}) {  // unaligned pointers too
      SCOPED_TRACE(absl::StrCat("bytes ", bytes, " shift ", shift));
      std::vector<std::byte> storage(static_cast<size_t>(bytes + 8));
      std::byte* p = storage.data() + shift;
      FillPatternHost(p, bytes, /*key=*/5);
      EXPECT_EQ(FindPatternMismatchHost(p, bytes, 5), -1);
      if (bytes >= 8) {
        EXPECT_NE(FindPatternMismatchHost(p, bytes, /*key=*/6), -1);
      }
      for (int64_t b = 0; b < bytes; ++b) {
        p[b] ^= std::byte{0x01};
        EXPECT_EQ(FindPatternMismatchHost(p, bytes, 5), b);
        p[b] ^= std::byte{0x01};
      }
    }
  }
}

TEST(ExecutorVerifyKernelsTest, PatternsDifferByValueAndPosition) {
  std::vector<std::byte> a(64), b(64);
  FillPatternHost(a.data(), 64, 1);
  FillPatternHost(b.data(), 64, 2);
  EXPECT_NE(std::memcmp(a.data(), b.data(), 64), 0);
  // A copy shifted by one word is caught: the pattern depends on the position.
  EXPECT_NE(FindPatternMismatchHost(a.data() + 8, 56, 1), -1);
}

TEST(ExecutorVerifyKernelsTest, DispatchByDevice) {
  std::vector<std::byte> a(20);
  ASSERT_TRUE(FillPattern(Device::kHost, a.data(), 20, 9).ok());
  absl::StatusOr<int64_t> bad = FindPatternMismatch(Device::kHost, a.data(), 20, 9);
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(*bad, -1);
  if (!BuiltWithCuda()) {
    EXPECT_EQ(FillPattern(Device::kCuda, a.data(), 20, 9).code(),
              absl::StatusCode::kFailedPrecondition);
  }
}

// ---------------------------------------------------------------------------------------------
// Verify mode on good plans.

// Every planner, on fixed-seed random nets with in-place ops, views, joins, dead values,
// params (in the arena or not), several alignments (1: unaligned pointers) and orders.
class ExecutorRandomGraphTest : public ::testing::TestWithParam<PlannerKind> {};

TEST_P(ExecutorRandomGraphTest, VerifyRunPassesOnGoodPlans) {
  const PlannerKind planner = GetParam();
  int runs = 0;
  for (uint64_t seed = 0; seed < 80; ++seed) {
    SCOPED_TRACE(seed);
    testing::RandomGraphOptions graph_options;
    graph_options.num_ops =
        3 + static_cast<int>(seed % (planner == PlannerKind::kMemongerDp ? 15 : 35));
    graph_options.num_inputs = 1 + static_cast<int>(seed % 3);
    graph_options.num_params = static_cast<int>(seed % 3);
    graph_options.inplace_probability = seed % 4 == 0 ? 0.4 : 0.15;
    graph_options.view_probability = seed % 5 == 0 ? 0.2 : 0.0;
    graph_options.num_devices = seed % 6 == 0 ? 3 : 1;
    graph_options.max_bytes = seed % 2 == 0 ? 1 << 12 : 1 << 16;
    const Graph g = testing::RandomGraph(seed, graph_options);

    PlanOptions options;
    options.planner = planner;
    options.order = seed % 3 == 0   ? OrderKind::kGiven
                    : seed % 3 == 1 ? OrderKind::kTopological
                                    : OrderKind::kLongestPath;
    const int64_t alignments[] = {1, 64, 256};
    options.alignment = alignments[(seed / 3) % 3];
    options.liveness.views = seed % 5 == 0;
    options.liveness.plan_static = seed % 7 == 0;
    // Searching planners return their best plan at the limit; any plan must run clean.
    options.time_limit_seconds =
        planner == PlannerKind::kExact || planner == PlannerKind::kAuto ? 0.2 : 2;
    // Parallel plans run serially here; planners that refuse parallel (InvalidArgument) keep
    // serial.
    if (seed % 4 == 1) {
      PlanOptions parallel = options;
      parallel.execution = ExecutionModel::kParallel;
      if (PlanMemory(g, parallel).status().code() != absl::StatusCode::kInvalidArgument) {
        options = parallel;
      }
    }
    const absl::Status status = PlanAndVerifyRun(g, options);
    if (planner == PlannerKind::kMemongerDp &&
        status.code() == absl::StatusCode::kDeadlineExceeded) {
      continue;  // memonger's DP is exponential; its budget guards it
    }
    ASSERT_TRUE(status.ok()) << status;
    ++runs;
  }
  EXPECT_GT(runs, 60);
}

INSTANTIATE_TEST_SUITE_P(AllPlanners, ExecutorRandomGraphTest, ::testing::ValuesIn(kAllPlanners),
                         [](const ::testing::TestParamInfo<PlannerKind>& info) {
                           std::string name(PlannerName(info.param));
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// In place and views by hand: x -> a; a overwritten in place twice; v a view of the result.
constexpr char kInPlaceAndViews[] = R"pb(
  external_input: "x"
  op { name: "make_a" type: "Rand" input: "x" output: "a" }
  op { name: "bump1" type: "RandInPlace" input: "a" output: "a" }
  op { name: "bump2" type: "RandInPlace" input: "a" output: "a" }
  op { name: "as_view" type: "Identity" input: "a" output: "v" view: true }
  op { name: "read_both" type: "Rand" input: "v" input: "a" output: "y" }
  external_output: "y"
)pb";

// The generated training nets (in-place bias adds and ReLUs, summed residual gradients, saved
// statistics) run in verify mode under every planner that serves the serial model.
TEST(ExecutorTest, WorkloadTrainingNetsPassVerifyMode) {
  for (const char* spec :
       {"mlp:layers=3,mode=training", "resnet50:batch=2,image=32,mode=training",
        "attention:n=31,heads=2,dim=16,mlp=32,depth=2,mode=training",
        "attention:n=30,heads=2,dim=16,mlp=32,depth=2,batch=2,mode=training,kernel=efficient,"
        "bias_dtype=fp16,broadcast=repeat"}) {
    absl::StatusOr<Graph> g = graph::BuildWorkload(*graph::ParseWorkloadSpec(spec));
    ASSERT_TRUE(g.ok()) << spec << ": " << g.status();
    for (PlannerKind planner : kAllPlanners) {
      SCOPED_TRACE(absl::StrCat(spec, " ", PlannerName(planner)));
      PlanOptions options;
      options.planner = planner;
      options.memonger.mode = Mode::kTraining;
      options.alignment = 64;
      options.time_limit_seconds = 0.5;
      const absl::Status s = PlanAndVerifyRun(*g, options);
      if (planner == PlannerKind::kMemongerDp && s.code() == absl::StatusCode::kDeadlineExceeded) {
        continue;  // memonger's exponential DP may not finish on these sizes
      }
      EXPECT_TRUE(s.ok()) << s;
    }
  }
}

TEST(ExecutorTest, InPlaceAndViewsPass) {
  const Graph g = Typed(kInPlaceAndViews, {{"x", 13}, {"y", 5}}, 1000);
  for (bool views : {false, true}) {
    SCOPED_TRACE(views);
    PlanOptions options;
    options.planner = PlannerKind::kExactSharing;
    options.liveness.views = views;
    EXPECT_TRUE(PlanAndVerifyRun(g, options).ok()) << PlanAndVerifyRun(g, options);
  }
}

// ---------------------------------------------------------------------------------------------
// Verify mode catches bad plans.

// x [0,0], a [0,1], b [1,2], c [2,3], d [3,3].
constexpr char kChain[] = R"pb(
  external_input: "x"
  op { name: "op_a" type: "Rand" input: "x" output: "a" }
  op { name: "op_b" type: "Rand" input: "a" output: "b" }
  op { name: "op_c" type: "Rand" input: "b" output: "c" }
  op { name: "op_d" type: "Rand" input: "c" output: "d" }
  external_output: "d"
)pb";

TEST(ExecutorTest, OutputOverItsOwnInputIsCaught) {
  const Graph g = Typed(kChain);
  Plan plan = NaivePlan(g);
  plan.offset_of_value[*g.FindValue("b")] = plan.offset_of_value[*g.FindValue("a")];
  absl::StatusOr<Arena> arena = Arena::Create(Device::kHost, plan.arena_bytes);
  ASSERT_TRUE(arena.ok());
  absl::StatusOr<Executor> executor = Executor::Create(g, plan, *arena);
  ASSERT_TRUE(executor.ok()) << executor.status();
  const absl::Status s = executor->RunVerify();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("value 'a' was clobbered"), HasSubstr("which reads it"),
                    HasSubstr("Rand op 'op_b' (step 1) wrote 'b' over arena bytes")));
}

// y is a graph output written at step 1 and read by nobody; z, written at step 3 over it, is
// found only by the check at the end of the run.
constexpr char kLateClobber[] = R"pb(
  external_input: "x"
  op { name: "op_a" type: "Rand" input: "x" output: "a" }
  op { name: "op_y" type: "Rand" input: "a" output: "y" }
  op { name: "op_b" type: "Rand" input: "a" output: "b" }
  op { name: "op_z" type: "Rand" input: "b" output: "z" }
  external_output: "y"
  external_output: "z"
)pb";

TEST(ExecutorTest, GraphOutputClobberedLateIsCaughtAtTheEnd) {
  const Graph g = Typed(kLateClobber, {{"z", 100}});
  Plan plan = NaivePlan(g);
  plan.offset_of_value[*g.FindValue("z")] = plan.offset_of_value[*g.FindValue("y")];
  absl::StatusOr<Arena> arena = Arena::Create(Device::kHost, plan.arena_bytes);
  ASSERT_TRUE(arena.ok());
  absl::StatusOr<Executor> executor = Executor::Create(g, plan, *arena);
  ASSERT_TRUE(executor.ok()) << executor.status();
  const absl::Status s = executor->RunVerify();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("value 'y' was clobbered"), HasSubstr("the run ends"),
                    HasSubstr("Rand op 'op_z' (step 3) wrote 'z'")));
}

// In-place reuse of dying inputs (docs/in_place.md): the default plan writes each Relu over the
// input dying there and passes; an output on the bytes of an input that is read again later,
// or of the caller's graph input, is caught even though the op may compute in place.
constexpr char kReluChain[] = R"pb(
  external_input: "x"
  op { name: "op_a" type: "Relu" input: "x" output: "a" }
  op { name: "op_b" type: "Relu" input: "a" output: "b" }
  op { name: "op_c" type: "Relu" input: "b" output: "c" }
  op { name: "op_d" type: "Sum" input: "a" input: "c" output: "d" }
  external_output: "d"
)pb";

TEST(ExecutorTest, InPlaceReusePassesAndWhatItMustNotOverwriteIsCaught) {
  const Graph g = Typed(kReluChain);
  PlanOptions options;
  absl::StatusOr<Plan> plan = PlanMemory(g, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const ValueId x = *g.FindValue("x"), a = *g.FindValue("a"), b = *g.FindValue("b");
  const ValueId c = *g.FindValue("c");
  EXPECT_EQ(plan->offset_of_value[b], plan->offset_of_value[c]);  // c over b, dying at op_c
  EXPECT_TRUE(PlanAndVerifyRun(g, options).ok()) << PlanAndVerifyRun(g, options);

  auto run_verify = [&](const Plan& p) {
    absl::StatusOr<Arena> arena = Arena::Create(Device::kHost, p.arena_bytes);
    EXPECT_TRUE(arena.ok());
    absl::StatusOr<Executor> executor = Executor::Create(g, p, *arena);
    EXPECT_TRUE(executor.ok()) << executor.status();
    return executor.ok() ? executor->RunVerify() : executor.status();
  };
  Plan later = NaivePlan(g);
  later.offset_of_value[b] = later.offset_of_value[a];  // a is read again by op_d
  const absl::Status read_later = run_verify(later);
  EXPECT_EQ(read_later.code(), absl::StatusCode::kDataLoss) << read_later;
  EXPECT_THAT(std::string(read_later.message()),
              AllOf(HasSubstr("value 'a' was clobbered"), HasSubstr("'op_d'"),
                    HasSubstr("Relu op 'op_b' (step 1) wrote 'b'")));
  Plan input = NaivePlan(g);
  input.offset_of_value[a] = input.offset_of_value[x];  // the caller's input
  const absl::Status over_input = run_verify(input);
  EXPECT_EQ(over_input.code(), absl::StatusCode::kDataLoss) << over_input;
  EXPECT_THAT(std::string(over_input.message()),
              AllOf(HasSubstr("value 'x' was clobbered"), HasSubstr("graph input")));
}

// A value whose only overlap with another is its last byte.
TEST(ExecutorTest, OneByteOverlapIsCaught) {
  const Graph g = Typed(kChain, {{"a", 257}});
  Plan plan = NaivePlan(g, /*alignment=*/1);
  // b starts on a's last byte.
  plan.offset_of_value[*g.FindValue("b")] = plan.offset_of_value[*g.FindValue("a")] + 256;
  absl::StatusOr<Arena> arena = Arena::Create(Device::kHost, plan.arena_bytes + 1024);
  ASSERT_TRUE(arena.ok());
  absl::StatusOr<Executor> executor = Executor::Create(g, plan, *arena);
  ASSERT_TRUE(executor.ok()) << executor.status();
  const absl::Status s = executor->RunVerify();
  EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("value 'a' was clobbered"),
                                              HasSubstr("byte 256 "), HasSubstr("'op_b'")));
}

// A valid plan of a random net, with one value moved onto the bytes of another that is live
// when it is written (VerifyPlan skipped): the run names the clobbered value and the writer.
TEST(ExecutorTest, CorruptedPlansAreCaught) {
  int corrupted = 0;
  for (uint64_t seed = 0; seed < 60; ++seed) {
    SCOPED_TRACE(seed);
    testing::RandomGraphOptions graph_options;
    graph_options.num_ops = 10 + static_cast<int>(seed % 20);
    const Graph g = testing::RandomGraph(seed, graph_options);
    PlanOptions options;
    options.planner = seed % 2 == 0 ? PlannerKind::kNone : PlannerKind::kExactSharing;
    absl::StatusOr<Plan> good = PlanMemory(g, options);
    ASSERT_TRUE(good.ok()) << good.status();

    // Values alone in their alias class, in the arena, with at least 16 bytes.
    std::vector<bool> aliased(g.num_values(), false);
    for (ValueId v = 0; v < g.num_values(); ++v) {
      if (g.value(v).inplace_of != kNone) aliased[v] = aliased[g.value(v).inplace_of] = true;
    }
    auto bytes = [&](ValueId v) { return g.value(v).type->dims[0]; };
    auto eligible = [&](ValueId v) {
      return !aliased[v] && good->offset_of_value[v] != kNoOffset && bytes(v) >= 16;
    };
    std::vector<int> step_of_op(g.num_ops());
    for (int s = 0; s < static_cast<int>(good->steps.size()); ++s) {
      step_of_op[good->steps[s].op] = s;
    }
    // Victim b (written at step wb, -1 for inputs) read again after a is written at step wa:
    // wb < wa <= last reader of b; a no larger than b, so that only b's bytes change.
    ValueId victim = kNone, mover = kNone;
    for (ValueId b = 0; b < g.num_values() && victim == kNone; ++b) {
      if (!eligible(b)) continue;
      const int wb = g.value(b).producer == kNone ? -1 : step_of_op[g.value(b).producer];
      for (ValueId a = 0; a < g.num_values(); ++a) {
        if (a == b || !eligible(a) || g.value(a).producer == kNone || bytes(a) > bytes(b)) {
          continue;
        }
        const int wa = step_of_op[g.value(a).producer];
        int last_read = -1;
        for (graph::OpId reader : g.consumers(b)) {
          last_read = std::max(last_read, step_of_op[reader]);
        }
        if (wb < wa && wa <= last_read) {
          victim = b;
          mover = a;
          break;
        }
      }
    }
    if (victim == kNone) continue;
    Plan bad = *good;
    bad.offset_of_value[mover] = bad.offset_of_value[victim];
    absl::StatusOr<Arena> arena = Arena::Create(Device::kHost, bad.arena_bytes);
    ASSERT_TRUE(arena.ok()) << arena.status();
    absl::StatusOr<Executor> executor = Executor::Create(g, bad, *arena);
    ASSERT_TRUE(executor.ok()) << executor.status();
    const absl::Status s = executor->RunVerify();
    ASSERT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    const graph::Op& writer = g.op(g.value(mover).producer);
    EXPECT_THAT(std::string(s.message()),
                AllOf(HasSubstr(absl::StrCat("value '", g.value(victim).DisplayName(),
                                             "' was clobbered")),
                      HasSubstr(writer.Label()),
                      HasSubstr(absl::StrCat("wrote '", g.value(mover).DisplayName(), "'"))));
    ++corrupted;
  }
  EXPECT_GT(corrupted, 30);
}

// ---------------------------------------------------------------------------------------------
// Create's checks.

TEST(ExecutorTest, CreateRejectsMismatchedPlansAndSmallArenas) {
  const Graph chain = Typed(kChain);
  const Graph other = Typed(kLateClobber);
  const Plan plan = NaivePlan(chain);
  absl::StatusOr<Arena> arena = Arena::Create(Device::kHost, plan.arena_bytes);
  ASSERT_TRUE(arena.ok());

  // Same numbers of values and ops, other lifetimes.
  const absl::Status other_net = Executor::Create(other, plan, *arena).status();
  EXPECT_EQ(other_net.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(other_net.message()), HasSubstr("another net"));
  // Other numbers.
  EXPECT_EQ(Executor::Create(Typed(kInPlaceAndViews), plan, *arena).status().code(),
            absl::StatusCode::kInvalidArgument);

  absl::StatusOr<Arena> small = Arena::Create(Device::kHost, plan.arena_bytes - 1);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(Executor::Create(chain, plan, *small).status().code(),
            absl::StatusCode::kResourceExhausted);

  Plan outside = plan;
  outside.offset_of_value[*chain.FindValue("d")] = plan.arena_bytes;
  const absl::Status s = Executor::Create(chain, outside, *arena).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("'d'"));

  absl::StatusOr<Graph> untyped = testing::GraphFromText(kChain);
  ASSERT_TRUE(untyped.ok());
  EXPECT_EQ(Executor::Create(*untyped, plan, *arena).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ExecutorTest, CreateRejectsASplitAliasClass) {
  const Graph g = Typed(kInPlaceAndViews);
  Plan plan = NaivePlan(g);
  const std::vector<ValueId> versions = g.FindVersions("a");
  ASSERT_EQ(versions.size(), 3u);
  plan.offset_of_value[versions[1]] = plan.offset_of_value[*g.FindValue("y")];
  absl::StatusOr<Arena> arena = Arena::Create(Device::kHost, plan.arena_bytes);
  ASSERT_TRUE(arena.ok());
  const absl::Status s = Executor::Create(g, plan, *arena).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("must share the bytes of 'a'"));
}

TEST(ExecutorTest, StaticValuesGetMemoryOfTheirOwn) {
  const Graph g = Typed(R"pb(
    external_input: "x"
    external_input: "w"
    value_info { name: "w" role: ROLE_PARAM }
    op { name: "fc" type: "Rand" input: "x" input: "w" output: "y" }
    external_output: "y"
  )pb",
                        {{"w", 333}});
  ASSERT_TRUE(graph::IsStatic(g.value(*g.FindValue("w")).role));
  const Plan plan = NaivePlan(g);
  absl::StatusOr<Arena> arena = Arena::Create(Device::kHost, plan.arena_bytes);
  ASSERT_TRUE(arena.ok());
  absl::StatusOr<Executor> executor = Executor::Create(g, plan, *arena);
  ASSERT_TRUE(executor.ok()) << executor.status();
  const ValueId w = *g.FindValue("w");
  EXPECT_FALSE(executor->InArena(w));
  EXPECT_TRUE(executor->InArena(*g.FindValue("y")));
  EXPECT_GE(executor->static_bytes(), 333);
  EXPECT_EQ(executor->ValueAddress(*g.FindValue("y")),
            arena->base() + plan.offset_of_value[*g.FindValue("y")]);
  EXPECT_TRUE(executor->RunVerify().ok());
}

// ---------------------------------------------------------------------------------------------
// Run() with a kernel table.

TEST(ExecutorTest, RunWithoutAKernelIsUnimplementedNamingTheType) {
  const Graph g = Typed(kChain);
  const Plan plan = NaivePlan(g);
  absl::StatusOr<Arena> arena = Arena::Create(Device::kHost, plan.arena_bytes);
  ASSERT_TRUE(arena.ok());
  absl::StatusOr<Executor> executor = Executor::Create(g, plan, *arena);
  ASSERT_TRUE(executor.ok());
  const absl::Status s = executor->Run(KernelTable());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("'Rand'"), HasSubstr("op_a")));
}

TEST(ExecutorTest, RunCallsKernelsInScheduleOrderWithPlannedAddresses) {
  const Graph g = Typed(kInPlaceAndViews);
  PlanOptions options;
  options.liveness.views = true;
  absl::StatusOr<Plan> plan = PlanMemory(g, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  absl::StatusOr<Arena> arena = Arena::Create(Device::kHost, plan->arena_bytes);
  ASSERT_TRUE(arena.ok());
  absl::StatusOr<Executor> executor = Executor::Create(g, *plan, *arena);
  ASSERT_TRUE(executor.ok());

  std::vector<std::string> calls;
  Kernel record = [&](const KernelArgs& args) -> absl::Status {
    calls.push_back(args.op->name);
    EXPECT_EQ(args.device, Device::kHost);
    for (size_t i = 0; i < args.outputs.size(); ++i) {
      EXPECT_EQ(args.outputs[i], executor->ValueAddress(args.op->outputs[i]));
      EXPECT_EQ(*args.output_types[i], *g.value(args.op->outputs[i]).type);
    }
    for (size_t i = 0; i < args.inputs.size(); ++i) {
      EXPECT_EQ(args.inputs[i], executor->ValueAddress(args.op->inputs[i]));
    }
    return absl::OkStatus();
  };
  const KernelTable kernels({{"Rand", record}, {"RandInPlace", record}, {"Identity", record}});
  ASSERT_TRUE(executor->Run(kernels).ok());
  EXPECT_EQ(calls, (std::vector<std::string>{"make_a", "bump1", "bump2", "as_view", "read_both"}));

  // A kernel's error comes back with the op's label.
  const KernelTable failing({{"Rand", record}});
  const absl::Status s = executor->Run(failing);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);  // RandInPlace has no kernel
  EXPECT_EQ(calls.size(), 5u) << "a kernel ran before the refusal";
  // Every missing type at once, each with its count and first op, before any kernel runs.
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("no kernel for op types 'RandInPlace' (2 ops, first "),
                    HasSubstr("bump1"), HasSubstr("'Identity' (1 op: "), HasSubstr("as_view")));
  const KernelTable all_failing({{"Rand", [](const KernelArgs&) {
                                    return absl::InternalError("boom");
                                  }},
                                 {"RandInPlace", record},
                                 {"Identity", record}});
  const absl::Status f = executor->Run(all_failing);
  EXPECT_EQ(f.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(f.message()), AllOf(HasSubstr("make_a"), HasSubstr("boom")));
}

// ---------------------------------------------------------------------------------------------
// ONNX test models (Debian's libonnx-testdata): those that load and type, planned and run.

TEST(ExecutorOnnxTest, VerifyRunPassesOnOnnxTestModels) {
  const fs::path root = "/usr/share/libonnx-testdata/data";
  if (!fs::is_directory(root / "pytorch-converted")) {
    GTEST_SKIP() << "no ONNX test models at " << root << " (Debian package libonnx-testdata)";
  }
  std::vector<fs::path> models;
  for (const char* suite : {"pytorch-converted", "node"}) {
    if (!fs::is_directory(root / suite)) continue;
    std::vector<fs::path> in_suite;
    for (const fs::directory_entry& e : fs::directory_iterator(root / suite)) {
      if (fs::exists(e.path() / "model.onnx")) in_suite.push_back(e.path() / "model.onnx");
    }
    std::sort(in_suite.begin(), in_suite.end());
    // All of pytorch-converted; every 4th of the (many, tiny) node tests.
    const size_t stride = std::string(suite) == "node" ? 4 : 1;
    for (size_t i = 0; i < in_suite.size(); i += stride) models.push_back(in_suite[i]);
  }
  int ran = 0;
  int refused = 0;
  for (const fs::path& model : models) {
    SCOPED_TRACE(model.string());
    absl::StatusOr<Graph> g = graph::LoadModel(model.string(), {});
    if (!g.ok() || !graph::InferShapes(*g, {}).ok()) {
      ++refused;  // control flow, sequences, unsupported element types...: not ours to test
      continue;
    }
    for (PlannerKind planner :
         {PlannerKind::kBestFit, PlannerKind::kExactSharing, PlannerKind::kMemongerDag}) {
      PlanOptions options;
      options.planner = planner;
      options.time_limit_seconds = 2;
      options.liveness.views = ran % 2 == 0;
      const absl::Status status = PlanAndVerifyRun(*g, options);
      ASSERT_TRUE(status.ok()) << PlannerName(planner) << ": " << status;
    }
    ++ran;
  }
  std::printf("ONNX test models: %d planned and verify-run, %d refused by the loader\n", ran,
              refused);
  EXPECT_GT(ran, 200);
}

// ---------------------------------------------------------------------------------------------
// CUDA: the same verify run in device memory.

TEST(ExecutorCudaTest, VerifyRunOnTheDevice) {
  absl::StatusOr<Arena> probe = Arena::Create(Device::kCuda, 1 << 20);
  if (!probe.ok() && probe.status().code() == absl::StatusCode::kFailedPrecondition) {
    GTEST_SKIP() << (BuiltWithCuda() ? "no CUDA device: " : "no CUDA build: ")
                 << probe.status().message();
  }
  ASSERT_TRUE(probe.ok()) << probe.status();
  for (uint64_t seed = 0; seed < 10; ++seed) {
    SCOPED_TRACE(seed);
    testing::RandomGraphOptions graph_options;
    graph_options.num_ops = 25;
    const Graph g = testing::RandomGraph(seed, graph_options);
    PlanOptions options;
    options.alignment = seed % 2 == 0 ? 1 : 256;  // unaligned device pointers too
    EXPECT_TRUE(PlanAndVerifyRun(g, options, Device::kCuda).ok());
  }
  // And a clobber is caught on the device as on the host.
  const Graph g = Typed(kChain);
  Plan plan = NaivePlan(g);
  plan.offset_of_value[*g.FindValue("b")] = plan.offset_of_value[*g.FindValue("a")];
  absl::StatusOr<Arena> arena = Arena::Create(Device::kCuda, plan.arena_bytes);
  ASSERT_TRUE(arena.ok()) << arena.status();
  absl::StatusOr<Executor> executor = Executor::Create(g, plan, *arena);
  ASSERT_TRUE(executor.ok()) << executor.status();
  EXPECT_EQ(executor->RunVerify().code(), absl::StatusCode::kDataLoss);
}

// The memonger baselines plan one blob per name. Nets that write a name again (not in place),
// under reordering schedules and with recycled inputs: every plan verifies and runs (a review
// found versions joined while both live, and the executor comparing the per-name lifetimes
// with per-version ones).
TEST(ExecutorTest, MemongerBaselinesOnRewrittenNames) {
  const char* const kNets[] = {
      // An input rewritten while it is kept for the whole run.
      R"pb(external_input: "x"
           op { type: "Relu" input: "x" output: "a" }
           op { type: "Relu" input: "a" output: "x" }
           op { type: "Relu" input: "x" output: "y" }
           external_output: "y")pb",
      // A name written twice; the second writer does not wait for the first version's reader.
      R"pb(external_input: "x"
           op { type: "Relu" input: "x" output: "s" }
           op { type: "Relu" input: "s" output: "a" }
           op { type: "Relu" input: "x" output: "s" }
           op { type: "Sum" input: "s" input: "a" output: "y" }
           external_output: "y")pb",
      // An input overwritten in place while another value is recycled.
      R"pb(external_input: "x"
           op { type: "Relu" input: "x" output: "a" }
           op { type: "Relu" input: "a" output: "b" }
           op { type: "Relu" input: "x" output: "x" }
           op { type: "Sum" input: "x" input: "b" output: "y" }
           external_output: "y")pb",
  };
  int runs = 0;
  for (const char* text : kNets) {
    const Graph g = Typed(text);
    for (PlannerKind planner : {PlannerKind::kMemongerDag, PlannerKind::kMemongerGreedy,
                                PlannerKind::kMemongerDp, PlannerKind::kMemongerFast}) {
      for (OrderKind order : {OrderKind::kGiven, OrderKind::kLongestPath,
                              OrderKind::kMemoryAware}) {
        for (bool recycle : {false, true}) {
          SCOPED_TRACE(absl::StrCat(text, "\n", PlannerName(planner), " ", OrderName(order),
                                    recycle ? " recycle" : ""));
          PlanOptions options;
          options.planner = planner;
          options.order = order;
          options.liveness.recycle_inputs = recycle;
          const absl::Status s = PlanAndVerifyRun(g, options);
          EXPECT_TRUE(s.ok()) << s;
          ++runs;
        }
      }
    }
  }
  EXPECT_EQ(runs, 3 * 4 * 3 * 2);
}

}  // namespace
}  // namespace memonger::alloc
