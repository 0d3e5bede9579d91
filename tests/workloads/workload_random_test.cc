#include "workloads/workload_random.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "allocator/arena.h"
#include "allocator/executor.h"
#include "allocator/host_run.h"
#include "gmock/gmock.h"
#include "graph/model_loader.h"
#include "graph/net_def.h"
#include "graph/shape_inference.h"
#include "graph/tensor_type.h"
#include "gtest/gtest.h"
#include "memonger/planner.h"
#include "memonger/verify_plan.h"
#include "tests/test_support.h"
#include "workloads/workloads.h"

namespace memonger::graph {
namespace {

using ::testing::HasSubstr;

// Small tensors so that many nets build, plan and run quickly.
constexpr char kSmall[] = "batch=2,width=8";

absl::StatusOr<Graph> Build(const std::string& spec) {
  absl::StatusOr<WorkloadSpec> parsed = ParseWorkloadSpec(spec);
  if (!parsed.ok()) return parsed.status();
  return BuildWorkload(*parsed);
}

Graph MustBuild(const std::string& spec) {
  absl::StatusOr<Graph> g = Build(spec);
  EXPECT_TRUE(g.ok()) << spec << ": " << g.status();
  return g.ok() ? *std::move(g) : Graph();
}

std::string NetText(const Graph& g) { return GraphToNetDef(g).DebugString(); }

int ForwardOps(const Graph& g) {
  return static_cast<int>(std::count_if(g.ops().begin(), g.ops().end(),
                                        [](const Op& op) { return !op.is_gradient_op; }));
}

std::map<std::string, int> OpCounts(const Graph& g) {
  std::map<std::string, int> counts;
  for (const Op& op : g.ops()) ++counts[op.type];
  return counts;
}

bool IsOutput(const Graph& g, ValueId v) {
  return std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end();
}

// Ops from a value's producer to its last reader (0 for graph inputs and unread values).
int Span(const Graph& g, ValueId id) {
  const absl::Span<const OpId> readers = g.consumers(id);
  if (g.value(id).producer == kNone || readers.empty()) return 0;
  return readers.back() - g.value(id).producer;
}

// The most activations written and still to be read at one op: how wide the DAG runs.
int MaxLiveActivations(const Graph& g) {
  std::vector<int> delta(g.num_ops() + 1, 0);
  for (ValueId id = 0; id < g.num_values(); ++id) {
    const Value& v = g.value(id);
    const absl::Span<const OpId> readers = g.consumers(id);
    if (v.role != Role::kActivation || v.producer == kNone || readers.empty()) continue;
    ++delta[v.producer];
    --delta[readers.back()];
  }
  int live = 0, most = 0;
  for (int d : delta) most = std::max(most, live += d);
  return most;
}

// ---- spec parsing --------------------------------------------------------------------------

// The largest specs are accepted (parsed only: building 2^22 ops takes gigabytes).
TEST(RandomWorkloadTest, TheMaximaAreAccepted) {
  absl::StatusOr<RandomWorkload> w =
      ParseRandomWorkload(*ParseWorkloadSpec("random:ops=4194304"));
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->ops, kMaxRandomOps);
  w = ParseRandomWorkload(*ParseWorkloadSpec("random:ops=1048576,mode=training"));
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->ops, kMaxRandomTrainingOps);
  EXPECT_TRUE(w->training);
}

TEST(RandomWorkloadTest, DefaultsAndKeys) {
  absl::StatusOr<WorkloadSpec> spec = ParseWorkloadSpec("random");
  ASSERT_TRUE(spec.ok());
  absl::StatusOr<RandomWorkload> w = ParseRandomWorkload(*spec);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->ops, 1000);
  EXPECT_EQ(w->seed, 1u);
  EXPECT_EQ(w->batch, 32);
  EXPECT_EQ(w->width, 256);
  EXPECT_EQ(w->branches, 4);
  EXPECT_EQ(w->skip, 10);
  EXPECT_EQ(w->reach, 1000);
  EXPECT_EQ(w->inplace, 30);
  EXPECT_EQ(w->dead, 5);
  EXPECT_EQ(w->dtype, DataType::kFloat32);
  EXPECT_FALSE(w->training);

  spec = ParseWorkloadSpec(
      "random:ops=77,seed=9,batch=3,width=12,branches=2,skip=0,reach=5,inplace=100,dead=0,"
      "dtype=bf16,mode=training");
  ASSERT_TRUE(spec.ok());
  w = ParseRandomWorkload(*spec);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->ops, 77);
  EXPECT_EQ(w->seed, 9u);
  EXPECT_EQ(w->batch, 3);
  EXPECT_EQ(w->width, 12);
  EXPECT_EQ(w->branches, 2);
  EXPECT_EQ(w->skip, 0);
  EXPECT_EQ(w->reach, 5);
  EXPECT_EQ(w->inplace, 100);
  EXPECT_EQ(w->dead, 0);
  EXPECT_EQ(w->dtype, DataType::kBFloat16);
  EXPECT_TRUE(w->training);
}

struct BadSpecCase {
  const char* label;
  const char* spec;
  const char* message;
};

class BadRandomSpecTest : public ::testing::TestWithParam<BadSpecCase> {};

TEST_P(BadRandomSpecTest, IsAClearInvalidArgument) {
  const BadSpecCase& c = GetParam();
  absl::StatusOr<Graph> g = Build(c.spec);
  ASSERT_FALSE(g.ok()) << c.spec;
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(g.status().message()), HasSubstr(c.message));
}

INSTANTIATE_TEST_SUITE_P(
    Specs, BadRandomSpecTest,
    ::testing::Values(
        BadSpecCase{"unknown_key", "random:ops=10,depth=3",
                    "random workload: unknown key 'depth' (known: ops, seed, batch, width, "
                    "branches, skip, reach, inplace, dead, dtype, mode)"},
        BadSpecCase{"zero_ops", "random:ops=0", "random workload: ops=0 is out of range (3 to"},
        BadSpecCase{"negative_ops", "random:ops=-5", "ops=-5 is out of range"},
        BadSpecCase{"too_few_ops", "random:ops=2", "ops=2 is out of range (3 to 4194304)"},
        BadSpecCase{"too_many_ops", "random:ops=4194305", "ops=4194305 is out of range (3 to 4194304)"},
        BadSpecCase{"too_many_training_ops", "random:ops=1048577,mode=training",
                    "ops=1048577 is out of range for mode=training (3 to 1048576"},
        BadSpecCase{"ops_not_a_number", "random:ops=1e5", "ops=1e5 is not an integer"},
        BadSpecCase{"negative_seed", "random:seed=-1", "seed=-1 is out of range (0 to any)"},
        BadSpecCase{"zero_batch", "random:batch=0", "batch=0 is out of range"},
        BadSpecCase{"width_not_multiple_of_4", "random:width=10",
                    "random workload: width=10 is not a multiple of 4"},
        BadSpecCase{"zero_width", "random:width=0", "width=0 is out of range (4 to 65536)"},
        BadSpecCase{"zero_branches", "random:branches=0", "branches=0 is out of range"},
        BadSpecCase{"skip_over_100", "random:skip=101", "skip=101 is out of range (0 to 100)"},
        BadSpecCase{"negative_inplace", "random:inplace=-1", "inplace=-1 is out of range"},
        BadSpecCase{"negative_dead", "random:dead=-3", "dead=-3 is out of range"},
        BadSpecCase{"zero_reach", "random:reach=0", "reach=0 is out of range"},
        BadSpecCase{"unknown_dtype", "random:dtype=fp8", "dtype=fp8 is not one of fp32, fp16, bf16"},
        BadSpecCase{"unknown_mode", "random:mode=eval",
                    "mode=eval is not one of inference, training"},
        BadSpecCase{"key_twice", "random:ops=5,ops=6", "key 'ops' is given twice"}),
    [](const ::testing::TestParamInfo<BadSpecCase>& info) { return info.param.label; });

// ---- what is generated ---------------------------------------------------------------------

TEST(RandomWorkloadTest, SameSpecSameNetOtherSeedOtherNet) {
  const std::string base = absl::StrCat("random:ops=400,", kSmall);
  const std::string first = NetText(MustBuild(base + ",seed=3"));
  EXPECT_EQ(NetText(MustBuild(base + ",seed=3")), first);
  EXPECT_NE(NetText(MustBuild(base + ",seed=4")), first);
  // Training is the same forward net plus its backward pass, itself deterministic.
  const std::string training = NetText(MustBuild(base + ",seed=3,mode=training"));
  EXPECT_EQ(NetText(MustBuild(base + ",seed=3,mode=training")), training);
}

constexpr char kPinnedSeed1[] =
    "LayerNormalization ln0; FC fc1; Relu relu2; Split split3; MatMul matmul4; Add bias5; "
    "Split split6; Relu relu7; Tanh tanh8; Relu relu9; Concat output; "
    "AveragedLoss loss; ";

// A fixed seed pins the generator's sequence: a change to the generator that changes every
// net shows here (and in the numbers of docs/workloads.md), not only as "still deterministic".
TEST(RandomWorkloadTest, PinnedNetForSeed1) {
  const Graph g = MustBuild("random:ops=12,batch=2,width=8,seed=1");
  std::vector<std::string> ops;
  for (const Op& op : g.ops()) ops.push_back(absl::StrCat(op.type, " ", op.name));
  EXPECT_EQ(ops.size(), 12u);
  EXPECT_EQ(ops.back(), "AveragedLoss loss");
  EXPECT_EQ(ops[ops.size() - 2], "Concat output");
  // Printed so that a deliberate change can update the expectation below.
  std::string listing;
  for (const std::string& s : ops) absl::StrAppend(&listing, s, "; ");
  EXPECT_EQ(listing, kPinnedSeed1) << listing;
}

struct CountCase {
  const char* label;
  int ops;
  const char* extra;
};

class RandomOpCountTest : public ::testing::TestWithParam<CountCase> {};

// Exactly `ops` forward ops, the loss head last, every value typed; training adds backward ops
// only.
TEST_P(RandomOpCountTest, ExactlyTheForwardOpsAsked) {
  const CountCase& c = GetParam();
  for (const char* mode : {"inference", "training"}) {
    SCOPED_TRACE(mode);
    const Graph g = MustBuild(
        absl::StrCat("random:ops=", c.ops, ",", kSmall, ",mode=", mode, c.extra));
    ASSERT_GT(g.num_ops(), 0);
    EXPECT_EQ(ForwardOps(g), c.ops);
    EXPECT_TRUE(g.AllTypesKnown());
    ASSERT_EQ(g.losses().size(), 1u);
    EXPECT_EQ(g.value(g.losses()[0]).name, "loss");
    EXPECT_EQ(g.op(ForwardOps(g) - 1).type, "AveragedLoss");
    EXPECT_EQ(g.op(ForwardOps(g) - 2).type, "Concat");
    if (std::string(mode) == "inference") {
      EXPECT_EQ(g.num_ops(), c.ops);
    } else {
      EXPECT_GT(g.num_ops(), c.ops);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, RandomOpCountTest,
    ::testing::Values(CountCase{"minimum", 3, ""}, CountCase{"four", 4, ""},
                      CountCase{"ten", 10, ""}, CountCase{"hundred", 100, ""},
                      CountCase{"odd", 1237, ""},
                      CountCase{"wide_paths", 500, ",branches=32,skip=40"},
                      CountCase{"chain", 300, ",branches=1,skip=0,dead=0"},
                      CountCase{"all_in_place", 300, ",inplace=100"},
                      CountCase{"fp16", 300, ",dtype=fp16"}),
    [](const ::testing::TestParamInfo<CountCase>& info) { return info.param.label; });

TEST(RandomWorkloadTest, EveryValueIsTypedWithVariedSizes) {
  const Graph g = MustBuild("random:ops=2000,batch=4,width=32,seed=5");
  ASSERT_TRUE(g.AllTypesKnown());
  EXPECT_EQ(TensorTypeToString(*g.value(*g.FindValue("data")).type), "float32[4,32]");
  std::set<int64_t> sizes;
  for (const Value& v : g.values()) {
    SCOPED_TRACE(v.DisplayName());
    ASSERT_TRUE(v.type.has_value());
    EXPECT_EQ(v.type->dtype, DataType::kFloat32);
    absl::StatusOr<int64_t> bytes = ByteSize(*v.type, v.name);
    ASSERT_TRUE(bytes.ok());
    if (v.role == Role::kActivation) sizes.insert(*bytes);
  }
  // Widths of 1..16 units of 8, mixer scores, row statistics, grouped views: many sizes.
  EXPECT_GE(sizes.size(), 12u);
  EXPECT_GE(*sizes.rbegin() / *sizes.begin(), 64);
  const Graph half = MustBuild("random:ops=200,batch=4,width=32,dtype=fp16");
  for (const Value& v : half.values()) {
    // LayerNormalization keeps its statistics in float32 (ONNX's stash_type).
    const bool statistic = v.name.find("_mean") != std::string::npos ||
                           v.name.find("_inv_std_dev") != std::string::npos;
    EXPECT_EQ(v.type->dtype, statistic ? DataType::kFloat32 : DataType::kFloat16)
        << v.DisplayName();
  }
}

// Branches, joins, fan-out, skip connections (long-lived values), in-place ops, views and dead
// values all appear, and every op type of the menu is used.
TEST(RandomWorkloadTest, HasTheStructureOfRealNets) {
  const Graph g = MustBuild("random:ops=3000,batch=4,width=32,seed=2");
  const std::map<std::string, int> counts = OpCounts(g);
  for (const char* type : {"FC", "MatMul", "Add", "Sum", "Concat", "Split", "Relu", "Sigmoid",
                           "Tanh", "Gelu", "LayerNormalization", "Softmax", "Mul", "Reshape",
                           "Transpose", "AveragedLoss"}) {
    EXPECT_GT(counts.count(type) ? counts.at(type) : 0, 0) << type;
  }
  int in_place = 0, views = 0, dead = 0, fan_out = 0, long_lived = 0, joins = 0;
  for (ValueId id = 0; id < g.num_values(); ++id) {
    const Value& v = g.value(id);
    in_place += v.inplace_of != kNone;
    dead += v.producer != kNone && g.consumers(id).empty() && !IsOutput(g, id);
    fan_out += v.role == Role::kActivation && g.consumers(id).size() >= 3;
    long_lived += Span(g, id) >= 200;
  }
  for (const Op& op : g.ops()) {
    views += op.view;
    int activations = 0;
    for (ValueId in : op.inputs) activations += g.value(in).role != Role::kParam &&
                                                g.value(in).role != Role::kConstant;
    joins += activations >= 2;
  }
  EXPECT_GT(in_place, 100);
  EXPECT_GT(views, 50);
  EXPECT_GT(dead, 50);
  EXPECT_GT(fan_out, 20);
  EXPECT_GT(long_lived, 5);
  EXPECT_GT(joins, 200);
}

// inplace, batch and dtype do not change the random draws: the same ops, so that a what-if
// (--compare inplace=0,100) measures only what it varies.
TEST(RandomWorkloadTest, InPlaceBatchAndDtypeKeepTheOps) {
  auto ops_of = [](const Graph& g) {
    std::vector<std::string> ops;
    for (const Op& op : g.ops()) {
      ops.push_back(absl::StrCat(op.type, " ", op.name, " ", op.inputs.size(), " ",
                                 op.outputs.size()));
    }
    return ops;
  };
  auto in_place_ops = [](const Graph& g) {
    int n = 0;
    for (const Op& op : g.ops()) {
      for (ValueId out : op.outputs) n += g.value(out).inplace_of != kNone;
    }
    return n;
  };
  const std::string base = "random:ops=3000,width=16,seed=8";
  const Graph reference = MustBuild(base + ",batch=2,inplace=0");
  EXPECT_EQ(in_place_ops(reference), 0);
  for (const char* variant : {",batch=2,inplace=100", ",batch=2,inplace=30", ",batch=5,inplace=0",
                              ",batch=2,inplace=0,dtype=bf16"}) {
    SCOPED_TRACE(variant);
    const Graph g = MustBuild(base + variant);
    EXPECT_EQ(ops_of(g), ops_of(reference));
    EXPECT_EQ(g.num_values(), reference.num_values());
  }
  EXPECT_GT(in_place_ops(MustBuild(base + ",batch=2,inplace=100")), 300);
}

TEST(RandomWorkloadTest, KnobsChangeTheNet) {
  const std::string base = "random:ops=2000,batch=2,width=16,seed=7";
  auto count_in_place = [](const Graph& g) {
    return std::count_if(g.values().begin(), g.values().end(),
                         [](const Value& v) { return v.inplace_of != kNone; });
  };
  EXPECT_EQ(count_in_place(MustBuild(base + ",inplace=0")), 0);
  EXPECT_GT(count_in_place(MustBuild(base + ",inplace=100")),
            2 * count_in_place(MustBuild(base)));

  auto count_dead_ops = [](const Graph& g) {
    return std::count_if(g.ops().begin(), g.ops().end(),
                         [](const Op& op) { return op.name.rfind("dead", 0) == 0; });
  };
  EXPECT_EQ(count_dead_ops(MustBuild(base + ",dead=0")), 0);
  EXPECT_GT(count_dead_ops(MustBuild(base + ",dead=30")), 3 * count_dead_ops(MustBuild(base)));

  // One path without skips: a chain (besides the loss head, no op joins two path values).
  const Graph chain = MustBuild(base + ",branches=1,skip=0,dead=0");
  for (const Op& op : chain.ops()) {
    if (op.name == "output") continue;
    EXPECT_TRUE(op.type != "Split" && op.type != "Concat" && op.type != "Sum") << op.Label();
  }
  EXPECT_LT(MaxLiveActivations(chain), MaxLiveActivations(MustBuild(base + ",branches=16")));

  auto longest = [](const Graph& g) {
    int most = 0;
    for (ValueId id = 0; id < g.num_values(); ++id) most = std::max(most, Span(g, id));
    return most;
  };
  EXPECT_LT(longest(MustBuild(base + ",reach=4,branches=1")),
            longest(MustBuild(base + ",reach=1000,branches=1")));
}

// ---- round trips, plans, runs ----------------------------------------------------------------

// The net as the writer writes it loads back (text and binary) to the same graph: same ops,
// values, versions, roles, in-place links, views and inferred types.
TEST(RandomWorkloadTest, RoundTripsThroughTheNetWriterAndLoader) {
  for (const char* mode : {"inference", "training"}) {
    SCOPED_TRACE(mode);
    const Graph g = MustBuild(absl::StrCat("random:ops=500,batch=3,width=12,seed=11,mode=", mode));
    for (const char* ext : {".pbtxt", ".pb"}) {
      SCOPED_TRACE(ext);
      const std::string path = memonger::testing::TempDir() + "/random_" + mode + ext;
      ASSERT_TRUE(WriteNetDef(GraphToNetDef(g), path,
                              std::string(ext) == ".pb" ? NetFileFormat::kBinary
                                                        : NetFileFormat::kText)
                      .ok());
      LoadOptions options;
      absl::StatusOr<Graph> loaded = LoadModel(path, options);
      ASSERT_TRUE(loaded.ok()) << loaded.status();
      ASSERT_TRUE(InferShapes(*loaded, options.bindings).ok());
      EXPECT_EQ(NetText(*loaded), NetText(g));
      ASSERT_EQ(loaded->num_values(), g.num_values());
      ASSERT_EQ(loaded->num_ops(), g.num_ops());
      for (ValueId v = 0; v < g.num_values(); ++v) {
        const Value& a = g.value(v);
        const Value& b = loaded->value(v);
        ASSERT_EQ(a.DisplayName(), b.DisplayName());
        EXPECT_EQ(a.role, b.role) << a.DisplayName();
        EXPECT_EQ(a.inplace_of, b.inplace_of) << a.DisplayName();
        EXPECT_EQ(TensorTypeToString(*a.type), TensorTypeToString(*b.type)) << a.DisplayName();
      }
      for (OpId o = 0; o < g.num_ops(); ++o) {
        EXPECT_EQ(g.op(o).view, loaded->op(o).view) << g.op(o).Label();
        EXPECT_EQ(g.op(o).is_gradient_op, loaded->op(o).is_gradient_op) << g.op(o).Label();
      }
      EXPECT_EQ(loaded->losses(), g.losses());
      EXPECT_EQ(loaded->param_grads(), g.param_grads());
    }
  }
}

struct PlannerCase {
  PlannerKind planner;
  ExecutionModel execution;
};

class RandomWorkloadPlannerTest : public ::testing::TestWithParam<PlannerCase> {};

// Every planner's plan of random nets (inference and training, several seeds and sizes)
// passes the verifier and lies between the lower bound and the naive sum, aligned.
TEST_P(RandomWorkloadPlannerTest, PlansVerify) {
  const PlannerCase c = GetParam();
  // memonger's DP is exponential in the overlapping values: small nets only.
  const bool dp = c.planner == PlannerKind::kMemongerDp;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    for (const char* mode : {"inference", "training"}) {
      SCOPED_TRACE(absl::StrCat("seed ", seed, ", ", mode));
      const int ops = dp ? 4 + static_cast<int>(seed) : 40 + 60 * static_cast<int>(seed);
      const Graph g = MustBuild(absl::StrCat("random:ops=", ops, ",batch=2,width=8,seed=", seed,
                                             ",branches=", 1 + seed % 4, ",mode=", mode));
      PlanOptions options;
      options.planner = c.planner;
      options.execution = c.execution;
      options.memonger.mode = std::string(mode) == "training" ? Mode::kTraining : Mode::kInference;
      options.liveness.views = seed % 2 == 0;
      options.alignment = seed % 3 == 0 ? 64 : 256;
      options.time_limit_seconds = 0.2;
      absl::StatusOr<Plan> plan = PlanMemory(g, options);
      if (dp && !plan.ok() && plan.status().code() == absl::StatusCode::kDeadlineExceeded) {
        continue;  // its budget guards the exponential search
      }
      ASSERT_TRUE(plan.ok()) << plan.status();
      const absl::Status verified = VerifyPlan(g, *plan);
      ASSERT_TRUE(verified.ok()) << verified;
      EXPECT_LE(plan->lower_bound_bytes, plan->arena_bytes);
      EXPECT_LE(plan->arena_bytes, plan->naive_bytes);
      EXPECT_EQ(plan->arena_bytes % options.alignment, 0);
      for (ValueId v = 0; v < g.num_values(); ++v) {
        if (plan->buffer_of_value[v] >= 0) {
          EXPECT_EQ(plan->offset_of_value[v] % options.alignment, 0);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllPlanners, RandomWorkloadPlannerTest,
    ::testing::Values(PlannerCase{PlannerKind::kNone, ExecutionModel::kSerial},
                      PlannerCase{PlannerKind::kMemongerDag, ExecutionModel::kSerial},
                      PlannerCase{PlannerKind::kMemongerDag, ExecutionModel::kParallel},
                      PlannerCase{PlannerKind::kMemongerGreedy, ExecutionModel::kSerial},
                      PlannerCase{PlannerKind::kMemongerDp, ExecutionModel::kSerial},
                      PlannerCase{PlannerKind::kExactSharing, ExecutionModel::kSerial},
                      PlannerCase{PlannerKind::kGreedyBySize, ExecutionModel::kSerial},
                      PlannerCase{PlannerKind::kBestFit, ExecutionModel::kSerial},
                      PlannerCase{PlannerKind::kExact, ExecutionModel::kSerial},
                      PlannerCase{PlannerKind::kAuto, ExecutionModel::kSerial},
                      PlannerCase{PlannerKind::kAuto, ExecutionModel::kParallel}),
    [](const ::testing::TestParamInfo<PlannerCase>& info) {
      std::string name = absl::StrCat(PlannerName(info.param.planner), "_",
                                      ExecutionName(info.param.execution));
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

// A small training net runs in the planned arena: verify mode finds no clobbered value, and
// the CPU kernels give byte-identical outputs (the loss, every parameter gradient) whether
// values share memory (auto) or not (none).
TEST(RandomWorkloadTest, TrainingNetRunsIdenticallyUnderEveryPlan) {
  for (const char* dtype : {"fp32", "fp16"}) {
    SCOPED_TRACE(dtype);
    const Graph g = MustBuild(absl::StrCat("random:ops=150,batch=2,width=8,seed=13,dtype=",
                                           dtype, ",mode=training"));
    ASSERT_FALSE(g.param_grads().empty());
    std::vector<std::vector<alloc::HostRunOutput>> runs;
    for (PlannerKind planner : {PlannerKind::kNone, PlannerKind::kAuto}) {
      SCOPED_TRACE(PlannerName(planner));
      PlanOptions options;
      options.planner = planner;
      options.memonger.mode = Mode::kTraining;
      options.time_limit_seconds = 0.2;
      absl::StatusOr<Plan> plan = PlanMemory(g, options);
      ASSERT_TRUE(plan.ok()) << plan.status();
      ASSERT_TRUE(VerifyPlan(g, *plan).ok());
      absl::StatusOr<alloc::Arena> arena =
          alloc::Arena::Create(alloc::Device::kHost, plan->arena_bytes);
      ASSERT_TRUE(arena.ok()) << arena.status();
      absl::StatusOr<alloc::Executor> executor = alloc::Executor::Create(g, *plan, *arena);
      ASSERT_TRUE(executor.ok()) << executor.status();
      const absl::Status verify = executor->RunVerify();
      EXPECT_TRUE(verify.ok()) << verify;
      absl::StatusOr<alloc::HostRunReport> report = alloc::RunOnHost(g, *plan, {});
      ASSERT_TRUE(report.ok()) << report.status();
      runs.push_back(report->outputs);
    }
    ASSERT_EQ(runs.size(), 2u);
    ASSERT_EQ(runs[0].size(), runs[1].size());
    EXPECT_GT(runs[0].size(), 2u);  // output, loss and the parameter gradients
    for (size_t i = 0; i < runs[0].size(); ++i) {
      EXPECT_EQ(runs[0][i].name, runs[1][i].name);
      EXPECT_TRUE(runs[0][i].bytes == runs[1][i].bytes) << runs[0][i].name << " differs";
    }
  }
}

}  // namespace
}  // namespace memonger::graph
