// Training nets run for real in the planned arena: the generated training workloads (attention
// with both kernels in fp16, bf16 and fp32; memonger's MLP; a tiny ResNet-50; random DAGs) run
// forward and backward with the CPU kernels, and every value, each captured right after the op
// that produced it (tests/training_support.h), is byte-identical whether each value has memory
// of its own (--planner none) or shares the arena (the default planner, memonger-dag in
// training mode, best-fit with views, and auto over the memory-aware order, which runs the ops
// in another order). The graph outputs and the parameter gradients are
// compared byte by byte, every other value (activations, saved statistics, workspaces,
// intermediate gradients) by a 64-bit FNV-1a hash of its bytes.
//
// Also: the efficient and the math attention kernels agree on the same inputs (forward output
// and parameter gradients, tolerances by dtype below), and the CLI's --execute host writes the
// same output files under each planner.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/gradient_builder.h"
#include "graph/shape_inference.h"
#include "gtest/gtest.h"
#include "memonger/planner.h"
#include "memonger/verify_plan.h"
#include "tests/kernel_test_support.h"
#include "tests/test_support.h"
#include "tests/training_support.h"
#include "workloads/workloads.h"

namespace memonger::testing {
namespace {

using graph::Graph;
using graph::ValueId;

absl::StatusOr<Graph> Workload(const std::string& spec) {
  absl::StatusOr<graph::WorkloadSpec> parsed = graph::ParseWorkloadSpec(spec);
  if (!parsed.ok()) return parsed.status();
  return graph::BuildWorkload(*parsed);
}

// Inputs the seeded generator would make degenerate: patch coordinates on a grid (seeded int64
// is all zeros, which makes every ALiBi distance 0), labels spread over the classes, and the
// math kernel's sqrt(scale) constant (seeded, it would be a random number).
ValueData InputsFor(const Graph& g) {
  ValueData data;
  for (const graph::Value& v : g.values()) {
    if (v.producer != graph::kNone || !v.type.has_value()) continue;
    int64_t count = 1;
    for (int64_t d : v.type->dims) count *= d;
    if (v.name == "coords") {
      std::vector<double> xy;
      for (int64_t i = 0; i < v.type->dims[0]; ++i) {
        xy.push_back(static_cast<double>(i % 5));
        xy.push_back(static_cast<double>(i / 5));
      }
      data[v.name] = xy;
    } else if (v.name == "label") {
      std::vector<double> labels;
      for (int64_t i = 0; i < count; ++i) labels.push_back(static_cast<double>((3 * i + 1) % 8));
      data[v.name] = labels;
    } else if (v.name == "sqrt_scale") {
      // q and kT are each scaled by sqrt(1 / sqrt(d)): d is the head dim (16 / 2 heads = 8).
      data[v.name] = {std::pow(8.0, -0.25)};
    }
  }
  return data;
}

struct PlannedRun {
  int64_t arena_bytes = 0;
  std::vector<uint64_t> hashes;
  std::vector<std::string> bytes;  // watched values (outputs, parameter gradients)
};

absl::StatusOr<PlannedRun> RunUnder(const Graph& g, PlanOptions options, const std::vector<ValueId>& watch,
                             uint64_t seed) {
  absl::StatusOr<Plan> plan = PlanMemory(g, options);
  if (!plan.ok()) return plan.status();
  if (absl::Status s = VerifyPlan(g, *plan); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<TrainingRunner>> runner = TrainingRunner::Create(g, *plan, watch);
  if (!runner.ok()) return runner.status();
  if (absl::Status s = (*runner)->Run(InputsFor(g), seed); !s.ok()) return s;
  PlannedRun run;
  run.arena_bytes = plan->arena_bytes;
  run.hashes = (*runner)->hashes();
  for (ValueId id : watch) run.bytes.push_back((*runner)->Bytes(id));
  return run;
}

std::vector<ValueId> OutputsAndGradients(const Graph& g) {
  std::vector<ValueId> watch(g.outputs().begin(), g.outputs().end());
  for (const auto& [param, grad] : g.param_grads()) watch.push_back(grad);
  return watch;
}

// A bidirectional LSTM whose W and R the net rearranges from parameters (torch.onnx.export's
// gate reordering): the backward pass remakes them, and LSTMGradient writes dW and dR over
// those copies, which die at it (graph/in_place.h). The plan that does so is verified, smaller
// by their bytes, and runs to the same bytes in every value watched as the plan without
// in-place reuse and as memory of its own for each value.
TEST(TrainingInPlaceTest, RecurrentGradientsTakeTheirRemadeWeightsBytes) {
  absl::StatusOr<Graph> forward = GraphFromText(R"pb(
    external_input: "x" external_input: "p" external_input: "q"
    value_info { name: "x" dtype: FLOAT has_shape: true dim { size: 5 } dim { size: 3 }
                 dim { size: 8 } }
    value_info { name: "p" role: ROLE_PARAM dtype: FLOAT has_shape: true dim { size: 2 }
                 dim { size: 64 } dim { size: 8 } }
    value_info { name: "q" role: ROLE_PARAM dtype: FLOAT has_shape: true dim { size: 2 }
                 dim { size: 64 } dim { size: 16 } }
    value_info { name: "p_lo" dtype: FLOAT has_shape: true dim { size: 2 } dim { size: 32 } dim { size: 8 } }
    value_info { name: "p_hi" dtype: FLOAT has_shape: true dim { size: 2 } dim { size: 32 } dim { size: 8 } }
    value_info { name: "q_lo" dtype: FLOAT has_shape: true dim { size: 2 } dim { size: 32 } dim { size: 16 } }
    value_info { name: "q_hi" dtype: FLOAT has_shape: true dim { size: 2 } dim { size: 32 } dim { size: 16 } }
    value_info { name: "w" dtype: FLOAT has_shape: true dim { size: 2 } dim { size: 64 } dim { size: 8 } }
    value_info { name: "r" dtype: FLOAT has_shape: true dim { size: 2 } dim { size: 64 } dim { size: 16 } }
    value_info { name: "y" dtype: FLOAT has_shape: true dim { size: 5 } dim { size: 2 } dim { size: 3 } dim { size: 16 } }
    op { type: "Slice" input: "p" output: "p_lo" arg { name: "starts" ints: 0 }
         arg { name: "ends" ints: 32 } arg { name: "axes" ints: 1 } }
    op { type: "Slice" input: "p" output: "p_hi" arg { name: "starts" ints: 32 }
         arg { name: "ends" ints: 64 } arg { name: "axes" ints: 1 } }
    op { type: "Concat" input: "p_hi" input: "p_lo" output: "w" arg { name: "axis" i: 1 } }
    op { type: "Slice" input: "q" output: "q_lo" arg { name: "starts" ints: 0 }
         arg { name: "ends" ints: 32 } arg { name: "axes" ints: 1 } }
    op { type: "Slice" input: "q" output: "q_hi" arg { name: "starts" ints: 32 }
         arg { name: "ends" ints: 64 } arg { name: "axes" ints: 1 } }
    op { type: "Concat" input: "q_hi" input: "q_lo" output: "r" arg { name: "axis" i: 1 } }
    op { type: "LSTM" input: "x" input: "w" input: "r" output: "y"
         arg { name: "hidden_size" i: 16 } arg { name: "direction" s: "bidirectional" } }
    op { type: "AveragedLoss" input: "y" output: "loss" }
  )pb");
  ASSERT_TRUE(forward.ok()) << forward.status();
  const absl::Status typed = graph::InferShapes(*forward, graph::ShapeBindings{});
  ASSERT_TRUE(typed.ok()) << typed;
  absl::StatusOr<Graph> g = graph::AddGradientOps(*forward, {"loss"});
  ASSERT_TRUE(g.ok()) << g.status();
  const graph::Op* grad = nullptr;
  for (const graph::Op& op : g->ops()) {
    if (op.type == "LSTMGradient") grad = &op;
  }
  ASSERT_NE(grad, nullptr);
  const std::vector<ValueId> watch = OutputsAndGradients(*g);
  ASSERT_EQ(g->param_grads().size(), 2u);  // p_grad, q_grad

  PlanOptions in_place;
  ASSERT_TRUE(in_place.liveness.in_place);
  absl::StatusOr<Plan> plan = PlanMemory(*g, in_place);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(VerifyPlan(*g, *plan).ok()) << VerifyPlan(*g, *plan);
  // dW and dR (node positions 1 and 2; X needs no gradient) lie on the remade W and R.
  const std::vector<int64_t> out_slots = *grad->attributes().GetInts("onnx_output_slots");
  const std::vector<int64_t> in_slots = *grad->attributes().GetInts("onnx_input_slots");
  ASSERT_EQ(out_slots, (std::vector<int64_t>{1, 2}));
  ASSERT_EQ(std::vector<int64_t>(in_slots.begin(), in_slots.begin() + 3),
            (std::vector<int64_t>{0, 1, 2}));
  for (int k : {0, 1}) {
    const ValueId out = grad->outputs[k], in = grad->inputs[k + 1];
    EXPECT_EQ(plan->buffer_of_value[out], plan->buffer_of_value[in])
        << g->value(out).name << " over " << g->value(in).name;
    EXPECT_EQ(plan->offset_of_value[out], plan->offset_of_value[in]);
  }

  PlanOptions apart;
  apart.liveness.in_place = false;
  PlanOptions own;
  own.planner = PlannerKind::kNone;
  own.liveness.in_place = false;
  absl::StatusOr<PlannedRun> with = RunUnder(*g, in_place, watch, 7);
  absl::StatusOr<PlannedRun> without = RunUnder(*g, apart, watch, 7);
  absl::StatusOr<PlannedRun> alone = RunUnder(*g, own, watch, 7);
  ASSERT_TRUE(with.ok()) << with.status();
  ASSERT_TRUE(without.ok()) << without.status();
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_LT(with->arena_bytes, without->arena_bytes);
  EXPECT_EQ(with->bytes, without->bytes);
  EXPECT_EQ(with->bytes, alone->bytes);
  EXPECT_EQ(with->hashes, alone->hashes);

  // Verify mode: nothing reads the remade weights after their gradients overwrite them.
  absl::StatusOr<alloc::Arena> arena = alloc::Arena::Create(alloc::Device::kHost, plan->arena_bytes);
  ASSERT_TRUE(arena.ok()) << arena.status();
  absl::StatusOr<alloc::Executor> executor = alloc::Executor::Create(*g, *plan, *arena);
  ASSERT_TRUE(executor.ok()) << executor.status();
  EXPECT_TRUE(executor->RunVerify().ok()) << executor->RunVerify();
}

class TrainingBitIdentityTest : public ::testing::TestWithParam<const char*> {};

TEST_P(TrainingBitIdentityTest, EveryValueIsByteIdenticalUnderEveryPlan) {
  const std::string spec = GetParam();
  absl::StatusOr<Graph> g = Workload(spec);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_FALSE(g->param_grads().empty());
  const std::vector<ValueId> watch = OutputsAndGradients(*g);

  struct Variant {
    const char* name;
    PlannerKind planner;
    bool views;
    OrderKind order = OrderKind::kGiven;
  };
  // The last one runs the ops in another order (memory_order.h): every value must still come
  // out the same.
  const Variant variants[] = {{"none", PlannerKind::kNone, false},
                              {"auto (default)", PlannerKind::kAuto, false},
                              {"memonger-dag", PlannerKind::kMemongerDag, false},
                              {"best-fit+views", PlannerKind::kBestFit, true},
                              {"auto, memory-aware order", PlannerKind::kAuto, false,
                               OrderKind::kMemoryAware}};
  PlannedRun reference;
  for (const Variant& variant : variants) {
    SCOPED_TRACE(variant.name);
    PlanOptions options;
    options.planner = variant.planner;
    options.liveness.views = variant.views;
    options.order = variant.order;
    options.memonger.mode = Mode::kTraining;
    options.time_limit_seconds = 0.3;
    absl::StatusOr<PlannedRun> run = RunUnder(*g, options, watch, /*seed=*/3);
    ASSERT_TRUE(run.ok()) << run.status();
    if (variant.planner == PlannerKind::kNone) {
      reference = *std::move(run);
      // The run computed something: a finite loss and a nonzero gradient for every parameter.
      for (size_t i = 0; i < watch.size(); ++i) {
        const graph::Value& v = g->value(watch[i]);
        TestTensor t = MakeTensor(v.type->dtype, v.type->dims, {});
        std::copy(reference.bytes[i].begin(), reference.bytes[i].end(),
                  reinterpret_cast<char*>(t.bytes()));
        bool finite = true, nonzero = false;
        for (double x : ToDoubles(t)) {
          finite = finite && std::isfinite(x);
          nonzero = nonzero || x != 0;
        }
        EXPECT_TRUE(finite) << v.DisplayName() << " has a non-finite element";
        // ResNet-50 at batch 1 and image 32 ends with 1x1 maps: its last batch norms see one
        // element per channel, x - mean = 0, so the convolutions before them rightly get zero
        // gradients. Every other net's gradients are nonzero.
        EXPECT_TRUE(nonzero || spec.rfind("resnet50", 0) == 0) << v.DisplayName() << " is all zero";
      }
      continue;
    }
    EXPECT_LT(run->arena_bytes, reference.arena_bytes) << "no sharing: the comparison proves nothing";
    for (size_t i = 0; i < watch.size(); ++i) {
      EXPECT_TRUE(run->bytes[i] == reference.bytes[i])
          << "'" << g->value(watch[i]).DisplayName() << "' differs from the unshared run";
    }
    int differing = 0;
    for (ValueId id = 0; id < g->num_values(); ++id) {
      if (run->hashes[id] != reference.hashes[id] && ++differing <= 5) {
        ADD_FAILURE() << "'" << g->value(id).DisplayName() << "' differs from the unshared run";
      }
    }
    EXPECT_EQ(differing, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Workloads, TrainingBitIdentityTest,
    ::testing::Values(
        "attention:n=15,heads=2,dim=16,mlp=32,depth=2,dtype=fp16,kernel=math,mode=training",
        "attention:n=15,heads=2,dim=16,mlp=32,depth=2,dtype=bf16,kernel=math,mode=training",
        "attention:n=15,heads=2,dim=16,mlp=32,depth=2,dtype=fp32,kernel=math,mode=training",
        "attention:n=15,heads=2,dim=16,mlp=32,depth=2,dtype=fp16,kernel=efficient,mode=training",
        "attention:n=15,heads=2,dim=16,mlp=32,depth=2,dtype=bf16,kernel=efficient,mode=training",
        "attention:n=15,heads=2,dim=16,mlp=32,depth=2,dtype=fp32,kernel=efficient,mode=training",
        // L = 15: the efficient kernel's bias gets a PadLastDim copy; batch 2 broadcasts it.
        "attention:n=14,heads=2,dim=16,mlp=32,depth=2,batch=2,dtype=fp16,kernel=efficient,"
        "bias_dtype=fp16,mode=training",
        // Rows padded to 16 read in place by AddAttentionBias; a repeated (Expand) bias.
        "attention:n=14,heads=2,dim=16,mlp=32,depth=2,batch=2,dtype=bf16,kernel=math,"
        "bias_pad=4,broadcast=repeat,mode=training",
        "mlp:mode=training", "resnet50:batch=1,image=32,mode=training",
        // Random DAGs of every rule at once, in place and with views (workloads/workload_random.h).
        "random:ops=120,batch=2,width=8,seed=5,dtype=fp32,mode=training",
        "random:ops=120,batch=2,width=8,seed=6,dtype=fp16,branches=6,inplace=80,mode=training",
        "random:ops=120,batch=2,width=8,seed=7,dtype=bf16,skip=40,mode=training",
        // Randomly wired nets: many valid orders (workloads/workload_randwire.h).
        "randwire:nodes=12,stages=2,batch=2,width=8,seed=3,mode=training",
        "randwire:nodes=16,stages=1,batch=2,width=8,seed=4,dtype=fp16,mode=training"),
    [](const ::testing::TestParamInfo<const char*>& info) {
      std::string name;
      for (const char* p = info.param; *p != '\0'; ++p) {
        const char ch = *p;
        if (std::isalnum(static_cast<unsigned char>(ch))) name += ch;
        else if (ch == ',' || ch == ':') name += '_';
      }
      return name;
    });

// The two attention kernels on the same inputs (same weights: the nets share their names):
// forward output y and every parameter gradient, within tolerances that reflect where the
// math kernel rounds (S and P are stored in the activations' dtype, the efficient kernel keeps
// them in float32), relative to the largest magnitude of each tensor (max |a - b| / max |b|):
// fp32 1e-5 (measured 4.7e-7), fp16 1e-2 (measured 1.0e-3), bf16 5e-2 (measured 1.3e-2: 8
// mantissa bits).
struct KernelPair {
  const char* dtype;
  double tolerance;
};

void PrintTo(const KernelPair& c, std::ostream* os) { *os << c.dtype; }

class EfficientVsMathTest : public ::testing::TestWithParam<KernelPair> {};

TEST_P(EfficientVsMathTest, OutputsAndGradientsAgree) {
  const KernelPair& c = GetParam();
  std::vector<std::vector<double>> values[2];
  std::vector<std::string> names;
  for (int k = 0; k < 2; ++k) {
    const std::string spec = absl::StrCat("attention:n=15,heads=2,dim=16,mlp=32,depth=2,dtype=",
                                          c.dtype, ",kernel=", k == 0 ? "math" : "efficient",
                                          ",mode=training");
    absl::StatusOr<Graph> g = Workload(spec);
    ASSERT_TRUE(g.ok()) << g.status();
    std::vector<ValueId> watch = {*g->FindValue("y")};
    for (const auto& [param, grad] : g->param_grads()) watch.push_back(grad);
    PlanOptions options;
    options.memonger.mode = Mode::kTraining;
    options.time_limit_seconds = 0.2;
    absl::StatusOr<PlannedRun> run = RunUnder(*g, options, watch, /*seed=*/5);
    ASSERT_TRUE(run.ok()) << run.status();
    std::vector<std::string> these;
    for (size_t i = 0; i < watch.size(); ++i) {
      const graph::Value& v = g->value(watch[i]);
      these.push_back(i == 0 ? std::string("y") : g->value(g->param_grads()[i - 1].first).name);
      TestTensor t = MakeTensor(v.type->dtype, v.type->dims, {});
      std::copy(run->bytes[i].begin(), run->bytes[i].end(), reinterpret_cast<char*>(t.bytes()));
      values[k].push_back(ToDoubles(t));
    }
    if (k == 0) {
      names = these;
    } else {
      ASSERT_EQ(these, names) << "the two nets have different parameters";
    }
  }
  double worst = 0;
  std::string worst_name;
  for (size_t i = 0; i < names.size(); ++i) {
    double diff = 0, scale = 0;
    for (size_t j = 0; j < values[0][i].size(); ++j) {
      diff = std::max(diff, std::abs(values[1][i][j] - values[0][i][j]));
      scale = std::max(scale, std::abs(values[0][i][j]));
    }
    const double rel = scale > 0 ? diff / scale : diff;
    if (rel > worst) {
      worst = rel;
      worst_name = names[i];
    }
    EXPECT_LE(rel, c.tolerance) << names[i];
  }
  std::printf("[efficient vs math] %s: worst max|a-b|/max|b| %.2e ('%s')\n", c.dtype, worst,
              worst_name.c_str());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, EfficientVsMathTest,
                         ::testing::Values(KernelPair{"fp32", 1e-5}, KernelPair{"bf16", 5e-2},
                                           KernelPair{"fp16", 1e-2}),
                         [](const ::testing::TestParamInfo<KernelPair>& info) {
                           return std::string(info.param.dtype);
                         });

// The CLI path: optimize-net --execute host --outputs-out under --planner none, the default
// planner and memonger-dag --mode training writes the same bytes for every graph output.
TEST(TrainingCliTest, ExecuteHostOutputsAreIdenticalAcrossPlanners) {
  const std::string spec =
      "attention:n=15,heads=2,dim=16,mlp=32,depth=2,dtype=fp16,kernel=efficient,mode=training";
  std::vector<std::string> contents;
  for (const char* planner : {"none", "auto", "memonger-dag --mode training"}) {
    SCOPED_TRACE(planner);
    const std::string dir = TempDir() + "/" + std::to_string(contents.size());
    const CommandResult r = RunOptimizeNet(absl::StrCat("--workload ", spec, " --planner ", planner,
                                                        " --execute host --outputs-out ", dir));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("executed        host kernels"), std::string::npos) << r.out;
    std::string all;
    for (const char* file : {"y.npy", "loss.npy"}) {
      std::ifstream in(dir + "/" + file, std::ios::binary);
      ASSERT_TRUE(in.good()) << file;
      std::ostringstream text;
      text << in.rdbuf();
      all += text.str();
    }
    contents.push_back(all);
  }
  EXPECT_EQ(contents[1], contents[0]);
  EXPECT_EQ(contents[2], contents[0]);
}

}  // namespace
}  // namespace memonger::testing
