#include "memonger/sharing/memonger_dag.h"

#include <algorithm>
#include <map>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "graph/shape_inference.h"
#include "gtest/gtest.h"
#include "memonger/plan.h"
#include "memonger/planner.h"
#include "memonger/schedule.h"
#include "memonger/sharing/sharing.h"
#include "memonger/verify_plan.h"
#include "tests/random_graphs.h"
#include "tests/test_support.h"

namespace memonger {
namespace {

using graph::kNone;
using graph::ValueId;
using ::testing::AllOf;
using ::testing::HasSubstr;

// ---------------------------------------------------------------------------------------------
// Caffe2 memonger_test.py nets, written as Caffe2 writes them: FC(in, out_w, out_b) -> out, and
// the gradient ops Caffe2's AddGradientOperators emits (ConstantFill reading the loss and writing
// `loss_autogen_grad`, *Gradient ops, `X_grad` plus `_X_grad_autosplit_k` and a Sum in place
// when a blob has several readers). No dtypes, no value_info, no is_gradient_op, no declared
// losses or parameter gradients: the shapes of the external inputs (data [B, din], label [B],
// out_w [dout, din], out_b [dout]) are given to shape inference as --input-shape would, and the
// label's int32 comes from LabelCrossEntropy's schema.
class CaffeNet {
 public:
  explicit CaffeNet(std::string scope = "") : scope_(std::move(scope)) {}

  std::string N(const std::string& name) const { return scope_ + name; }

  void Input(const std::string& name, std::vector<int64_t> dims) {
    external_.push_back(N(name));
    bindings_.inputs[N(name)] = std::move(dims);
  }
  void Fc(const std::string& in, const std::string& out, int64_t din, int64_t dout,
          int device = 0) {
    const std::string w = out + "_w";
    const std::string b = out + "_b";
    external_.push_back(N(w));
    external_.push_back(N(b));
    bindings_.inputs[N(w)] = {dout, din};
    bindings_.inputs[N(b)] = {dout};
    Op("FC", {in, w, b}, {out}, device);
  }
  void Op(const std::string& type, std::vector<std::string> in, std::vector<std::string> out,
          int device = 0) {
    for (auto& s : in) s = N(s);
    for (auto& s : out) s = N(s);
    forward_.push_back({type, in, out, device});
    ops_.push_back({type, in, out, device});
  }
  void Loss(const std::string& name) { losses_.push_back(N(name)); }
  void Output(const std::string& name) { outputs_.push_back(N(name)); }

  // The backward pass from the declared losses.
  void AddGradients() {
    std::map<std::string, std::vector<std::string>> contribs;  // name -> gradient pieces
    for (const std::string& loss : losses_) {
      const int device = ProducerDevice(loss);
      ops_.push_back({"ConstantFill", {loss}, {loss + "_autogen_grad"}, device});
      contribs[loss] = {loss + "_autogen_grad"};
    }
    for (auto it = forward_.rbegin(); it != forward_.rend(); ++it) {
      const Fwd& f = *it;
      // The gradient of each output: sum the pieces when several readers contributed.
      std::vector<std::string> dy;
      bool any = false;
      for (const std::string& y : f.out) {
        std::vector<std::string>& pieces = contribs[y];
        if (pieces.size() > 1) {
          ops_.push_back({"Sum", pieces, {y + "_grad"}, f.device});
        }
        any = any || !pieces.empty();
        dy.push_back(pieces.empty() ? "" : pieces.size() == 1 ? pieces.front() : y + "_grad");
        pieces.clear();
      }
      if (!any) continue;
      auto grad_of = [&](const std::string& x) {
        std::vector<std::string>& pieces = contribs[x];
        const std::string name =
            pieces.empty() ? x + "_grad"
                           : absl::StrCat("_", x, "_grad_autosplit_", pieces.size() - 1);
        pieces.push_back(x + "_grad");
        if (pieces.size() > 1) pieces.back() = name;
        return name;
      };
      const std::string& x = f.in[0];
      if (f.type == "FC") {
        ops_.push_back({"FCGradient",
                        {x, f.in[1], dy[0]},
                        {f.in[1] + "_grad", f.in[2] + "_grad", grad_of(x)},
                        f.device});
      } else if (f.type == "Relu" || f.type == "Softmax") {
        ops_.push_back({f.type + "Gradient", {f.out[0], dy[0]}, {grad_of(x)}, f.device});
      } else if (f.type == "LabelCrossEntropy") {
        ops_.push_back(
            {"LabelCrossEntropyGradient", {x, f.in[1], dy[0]}, {grad_of(x)}, f.device});
      } else if (f.type == "AveragedLoss") {
        ops_.push_back({"AveragedLossGradient", {x, dy[0]}, {grad_of(x)}, f.device});
      } else if (f.type == "CopyGPUToCPU") {
        ops_.push_back({"CopyCPUToGPU", {dy[0]}, {grad_of(x)}, f.device});
      } else {
        ADD_FAILURE() << "no gradient for " << f.type;
      }
    }
  }

  std::string Text() const {
    std::string s = "name: \"" + scope_ + "net\"\n";
    for (const std::string& e : external_) absl::StrAppend(&s, "external_input: \"", e, "\"\n");
    for (const Opd& op : ops_) {
      absl::StrAppend(&s, "op { type: \"", op.type, "\"");
      for (const auto& i : op.in) absl::StrAppend(&s, " input: \"", i, "\"");
      for (const auto& o : op.out) absl::StrAppend(&s, " output: \"", o, "\"");
      if (op.type == "ConstantFill") absl::StrAppend(&s, " arg { name: \"value\" f: 1.0 }");
      if (op.device != 0) absl::StrAppend(&s, " device_option { device_type: 1 }");
      absl::StrAppend(&s, " }\n");
    }
    for (const auto& o : outputs_) absl::StrAppend(&s, "external_output: \"", o, "\"\n");
    return s;
  }
  // What a Caffe2 user feeds: the external inputs' shapes (--input-shape).
  const graph::ShapeBindings& bindings() const { return bindings_; }

 private:
  struct Fwd {
    std::string type;
    std::vector<std::string> in, out;
    int device;
  };
  struct Opd {
    std::string type;
    std::vector<std::string> in, out;
    int device;
  };
  int ProducerDevice(const std::string& name) const {
    for (const Fwd& f : forward_) {
      if (std::find(f.out.begin(), f.out.end(), name) != f.out.end()) return f.device;
    }
    return 0;
  }

  std::string scope_;
  std::vector<std::string> external_;
  std::vector<std::string> losses_;
  std::vector<std::string> outputs_;
  std::vector<Fwd> forward_;
  std::vector<Opd> ops_;
  graph::ShapeBindings bindings_;
};

graph::Graph Build(const CaffeNet& net) {
  absl::StatusOr<graph::Graph> g = testing::GraphFromText(net.Text());
  EXPECT_TRUE(g.ok()) << g.status() << "\n" << net.Text();
  if (!g.ok()) return graph::Graph();
  const absl::Status shapes = graph::InferShapes(*g, net.bindings());
  EXPECT_TRUE(shapes.ok()) << shapes << "\n" << net.Text();
  return *std::move(g);
}

// Base net N1 of memonger_test.py: data -> fc1 -> fc2 -> fc3, Relu fc3 in place, Softmax,
// LabelCrossEntropy, AveragedLoss, and its gradients.
CaffeNet N1(int64_t batch = 4, int64_t in_dim = 4, int64_t hidden = 6, int64_t out_dim = 5) {
  CaffeNet net;
  net.Input("data", {batch, in_dim});
  net.Input("label", {batch});
  net.Fc("data", "fc1", in_dim, hidden);
  net.Fc("fc1", "fc2", hidden, hidden);
  net.Fc("fc2", "fc3", hidden, out_dim);
  net.Op("Relu", {"fc3"}, {"fc3"});
  net.Op("Softmax", {"fc3"}, {"pred"});
  net.Op("LabelCrossEntropy", {"pred", "label"}, {"xent"});
  net.Op("AveragedLoss", {"xent"}, {"loss"});
  net.Loss("loss");
  net.AddGradients();
  return net;
}

// Test 4 (gradient_optim): five chained FCs in the scope name_x/.
CaffeNet GradientOptim(int64_t dim) {
  CaffeNet net("name_x/");
  net.Input("data", {4, dim});
  net.Input("label", {4});
  net.Fc("data", "fc1", dim, dim);
  net.Fc("fc1", "fc2", dim, dim);
  net.Fc("fc2", "fc3", dim, dim);
  net.Fc("fc3", "fc4", dim, dim);
  net.Fc("fc4", "fc5", dim, dim);
  net.Op("Relu", {"fc5"}, {"fc5"});
  net.Op("Softmax", {"fc5"}, {"pred"});
  net.Op("LabelCrossEntropy", {"pred", "label"}, {"xent"});
  net.Op("AveragedLoss", {"xent"}, {"loss"});
  net.Loss("loss");
  net.AddGradients();
  return net;
}

// Test 6 (gradient_optim_tree): two heads on fc5.
CaffeNet GradientOptimTree() {
  CaffeNet net("name_x/");
  net.Input("data", {4, 4});
  net.Input("label", {4});
  net.Fc("data", "fc1", 4, 4);
  net.Fc("fc1", "fc2", 4, 4);
  net.Fc("fc2", "fc3", 4, 4);
  net.Fc("fc3", "fc4", 4, 4);
  net.Fc("fc4", "fc5", 4, 4);
  net.Op("Relu", {"fc5"}, {"fc5"});
  net.Op("Softmax", {"fc5"}, {"pred1"});
  net.Op("LabelCrossEntropy", {"pred1", "label"}, {"xent1"});
  net.Op("AveragedLoss", {"xent1"}, {"loss1"});
  net.Fc("fc5", "fc6", 4, 4);
  net.Op("Relu", {"fc6"}, {"fc6"});
  net.Op("Softmax", {"fc6"}, {"pred2"});
  net.Op("LabelCrossEntropy", {"pred2", "label"}, {"xent2"});
  net.Op("AveragedLoss", {"xent2"}, {"loss2"});
  net.Loss("loss1");
  net.Loss("loss2");
  net.AddGradients();
  return net;
}

// Tests 7 and 8 (forward_optim_tree_daggy / _harder): two parallel 3-FC branches joined by
// Sum, and a second head on fc5. `harder`: the loss-1 head reads Relu(fc5sum) instead of a
// second writer of fc5sum.
CaffeNet ForwardDaggy(bool harder) {
  CaffeNet net("name_x/");
  net.Input("data", {4, 4});
  net.Input("label", {4});
  net.Fc("data", "fc1", 4, 4);
  net.Fc("fc1", "fc2", 4, 4);
  net.Fc("fc2", "fc3", 4, 4);
  net.Fc("fc3", "fc4", 4, 4);
  net.Fc("fc4", "fc5", 4, 4);
  net.Fc("fc2", "fc3b", 4, 4);
  net.Fc("fc3b", "fc4b", 4, 4);
  net.Fc("fc4b", "fc5b", 4, 4);
  net.Op("Sum", {"fc5", "fc5b"}, {"fc5sum"});
  if (harder) {
    net.Op("Relu", {"fc5sum"}, {"relu1"});
    net.Op("Softmax", {"relu1"}, {"pred1"});
  } else {
    net.Op("Relu", {"fc5"}, {"fc5sum"});  // a second writer of fc5sum (a new value here)
    net.Op("Softmax", {"fc5sum"}, {"pred1"});
  }
  net.Op("LabelCrossEntropy", {"pred1", "label"}, {"xent1"});
  net.Op("AveragedLoss", {"xent1"}, {"loss1"});
  net.Fc("fc5", "fc6", 4, 4);
  net.Op("Relu", {"fc6"}, {"fc6"});
  net.Op("Softmax", {"fc6"}, {"pred2"});
  net.Op("LabelCrossEntropy", {"pred2", "label"}, {"xent2"});
  net.Op("AveragedLoss", {"xent2"}, {"loss2"});
  return net;
}

// Test 5 (mix_cpu_gpu): fc1..fc4 on the GPU, a copy to the CPU, fc5..fc7 and the loss on the
// CPU.
CaffeNet MixCpuGpu() {
  CaffeNet net;
  net.Input("data", {4, 2});
  net.Input("label", {4});
  net.Fc("data", "fc1", 2, 2, /*device=*/1);
  net.Fc("fc1", "fc2", 2, 2, 1);
  net.Fc("fc2", "fc3", 2, 2, 1);
  net.Fc("fc3", "fc4", 2, 2, 1);
  net.Op("CopyGPUToCPU", {"fc4"}, {"fc4_cpu"}, 1);
  net.Fc("fc4_cpu", "fc5_cpu", 2, 2);
  net.Fc("fc5_cpu", "fc6_cpu", 2, 2);
  net.Fc("fc6_cpu", "fc7_cpu", 2, 2);
  net.Op("Relu", {"fc7_cpu"}, {"fc7_cpu"});
  net.Op("Softmax", {"fc7_cpu"}, {"pred"});
  net.Op("LabelCrossEntropy", {"pred", "label"}, {"xent"});
  net.Op("AveragedLoss", {"xent"}, {"loss"});
  net.Loss("loss");
  net.AddGradients();
  return net;
}

// ---------------------------------------------------------------------------------------------
// Helpers.

int NumPlannedClasses(const graph::Graph& g, const Liveness& live) {
  int n = 0;
  for (ValueId v = 0; v < g.num_values(); ++v) n += live.planned[v] && live.alias_root[v] == v;
  return n;
}

struct DagResult {
  Liveness liveness;
  SharingGroups groups;
  Plan plan;
};

// The plan through the public entry point (PlanMemory), checked by VerifyPlan, plus the groups
// from PlanMemongerDag for the same schedule.
DagResult PlanDag(const graph::Graph& g, PlanOptions options) {
  options.planner = PlannerKind::kMemongerDag;
  DagResult r;
  absl::StatusOr<Plan> plan = PlanMemory(g, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return r;
  r.plan = *std::move(plan);
  const absl::Status verified = VerifyPlan(g, r.plan);
  EXPECT_TRUE(verified.ok()) << verified;
  absl::StatusOr<Schedule> schedule = MakeSchedule(g, options.order);
  EXPECT_TRUE(schedule.ok()) << schedule.status();
  LivenessOptions lo;
  lo.plan_static = options.liveness.plan_static;
  lo.views = options.liveness.views;
  lo.blob_per_name = true;  // as PlanMemory does for the memonger baselines
  lo.names_need_order = options.execution == ExecutionModel::kParallel;
  absl::StatusOr<Liveness> live = ComputeLiveness(g, *schedule, lo);
  EXPECT_TRUE(live.ok()) << live.status();
  r.liveness = *std::move(live);
  absl::StatusOr<SharingGroups> groups =
      PlanMemongerDag(g, r.liveness, options.memonger, options.execution);
  EXPECT_TRUE(groups.ok()) << groups.status();
  if (groups.ok()) r.groups = *std::move(groups);
  EXPECT_EQ(static_cast<int>(r.plan.buffers.size()), static_cast<int>(r.groups.size()));
  return r;
}

ValueId Latest(const graph::Graph& g, const std::string& name) {
  auto id = g.FindValue(name);
  EXPECT_TRUE(id.has_value()) << name;
  return id.value_or(0);
}

// The number of alias classes in the buffer holding `name` (1: not shared).
int Sharers(const graph::Graph& g, const DagResult& r, const std::string& name) {
  const ValueId root = r.liveness.alias_root[Latest(g, name)];
  for (const auto& group : r.groups) {
    if (std::find(group.begin(), group.end(), root) != group.end()) {
      return static_cast<int>(group.size());
    }
  }
  ADD_FAILURE() << name << " is in no group";
  return 0;
}

bool Share(const graph::Graph& g, const DagResult& r, const std::string& a,
           const std::string& b) {
  const int32_t ba = r.plan.buffer_of_value[Latest(g, a)];
  return ba >= 0 && ba == r.plan.buffer_of_value[Latest(g, b)];
}

std::string Describe(const graph::Graph& g, const SharingGroups& groups) {
  std::vector<std::string> parts;
  for (const auto& group : groups) {
    if (group.size() < 2) continue;
    std::vector<std::string> names;
    for (ValueId v : group) names.push_back(g.value(v).DisplayName());
    parts.push_back("{" + absl::StrJoin(names, ", ") + "}");
  }
  return absl::StrJoin(parts, " ");
}

// Groups of two or more classes.
int SharedBuffers(const SharingGroups& groups) {
  return static_cast<int>(std::count_if(groups.begin(), groups.end(),
                                        [](const auto& grp) { return grp.size() > 1; }));
}

PlanOptions Training(ExecutionModel execution = ExecutionModel::kSerial) {
  PlanOptions o;
  o.memonger.mode = Mode::kTraining;
  o.execution = execution;
  return o;
}

// ---------------------------------------------------------------------------------------------
// Scenarios.

TEST(MemongerDagTest, N1TrainingSharesGradients) {
  const graph::Graph g = Build(N1());
  for (ExecutionModel execution : {ExecutionModel::kSerial, ExecutionModel::kParallel}) {
    SCOPED_TRACE(ExecutionName(execution));
    const DagResult r = PlanDag(g, Training(execution));
    SCOPED_TRACE(Describe(g, r.groups));
    EXPECT_LT(r.groups.size(), static_cast<size_t>(NumPlannedClasses(g, r.liveness)));
    // The loss gradient is freed by AveragedLossGradient and reused by the next gradient
    // output (LabelCrossEntropyGradient's pred_grad): memonger's first free buffer, even
    // though it is smaller (the buffer grows).
    EXPECT_TRUE(Share(g, r, "loss_autogen_grad", "pred_grad"));
    // Parameter gradients and forward activations (share_activations off) never share.
    for (const char* name : {"fc1_w_grad", "fc1_b_grad", "fc3_w_grad", "fc1", "fc2", "pred"}) {
      EXPECT_EQ(Sharers(g, r, name), 1) << name;
    }
    // fc3's gradient chain (ReluGradient in place) is one class.
    EXPECT_EQ(r.liveness.alias_root[Latest(g, "fc3_grad")],
              r.liveness.alias_root[g.FindVersions("fc3_grad").front()]);
  }
}

TEST(MemongerDagTest, N1ExactGroups) {
  // The complete answer, derived by hand from memonger's rules. The gradient ops form a
  // chain; each frees its gradient input after serving its output, so the next output takes
  // it (the pool never holds more than one usable buffer here):
  //   ConstantFill -> loss_autogen_grad (L)  pool {}
  //   AveragedLossGradient -> xent_grad      pool {}         frees L
  //   LCEGradient -> pred_grad               takes L         frees xent_grad
  //   SoftmaxGradient -> fc3_grad            takes xent_grad frees pred_grad (L's)
  //   ReluGradient in place                  (fc3_grad's class)
  //   FCGradient -> fc2_grad                 takes L         frees fc3_grad (xent_grad's)
  //   FCGradient -> fc1_grad                 takes xent_grad frees fc2_grad
  //   FCGradient -> data_grad                takes L
  // L (4 bytes) is taken for pred_grad (80 bytes): the size-aware rule takes the only usable
  // buffer even when it is smaller, and the buffer grows.
  const graph::Graph g = Build(N1());
  const DagResult r = PlanDag(g, Training());
  SCOPED_TRACE(Describe(g, r.groups));
  EXPECT_TRUE(Share(g, r, "loss_autogen_grad", "pred_grad"));
  EXPECT_TRUE(Share(g, r, "xent_grad", "fc3_grad"));
  EXPECT_TRUE(Share(g, r, "pred_grad", "fc2_grad"));
  EXPECT_TRUE(Share(g, r, "fc3_grad", "fc1_grad"));
  EXPECT_TRUE(Share(g, r, "fc2_grad", "data_grad"));
  EXPECT_EQ(SharedBuffers(r.groups), 2);
  EXPECT_EQ(Sharers(g, r, "loss_autogen_grad"), 4);
  EXPECT_EQ(Sharers(g, r, "xent_grad"), 3);
  // The buffer is as large as its largest member (fc2_grad: float[4, 6]).
  const int32_t buffer = r.plan.buffer_of_value[Latest(g, "loss_autogen_grad")];
  EXPECT_EQ(r.plan.buffers[buffer].size, 256);  // 96 bytes, aligned to 256
}

TEST(MemongerDagTest, GradientOptimActivationsAndDontShare) {
  for (int64_t dim = 1; dim <= 4; ++dim) {
    SCOPED_TRACE(dim);
    const graph::Graph g = Build(GradientOptim(dim));
    PlanOptions off = Training();
    const DagResult a = PlanDag(g, off);
    const int classes = NumPlannedClasses(g, a.liveness);
    EXPECT_LT(static_cast<int>(a.groups.size()), classes) << Describe(g, a.groups);

    PlanOptions on = Training();
    on.memonger.share_activations = true;
    on.memonger.dont_share = {"name_x/fc1_w_grad"};
    const DagResult b = PlanDag(g, on);
    EXPECT_LE(b.groups.size(), a.groups.size()) << Describe(g, b.groups);
    EXPECT_LE(SumOfBufferSizes(b.plan), SumOfBufferSizes(a.plan));
    EXPECT_EQ(Sharers(g, b, "name_x/fc1_w_grad"), 1);
    // Activations are reused by gradients (under the activation's buffer).
    EXPECT_GT(SharedBuffers(b.groups), 0);
    bool activation_shared = false;
    for (const char* name : {"name_x/fc1", "name_x/fc2", "name_x/fc3", "name_x/fc4",
                             "name_x/pred", "name_x/xent"}) {
      activation_shared = activation_shared || Sharers(g, b, name) > 1;
    }
    EXPECT_TRUE(activation_shared) << Describe(g, b.groups);

    // A shareable gradient named in dont_share stays alone (memonger could still map it onto
    // a free buffer; we never share it), and every version of the name is covered.
    PlanOptions keep = on;
    keep.memonger.dont_share = {"name_x/fc3_grad"};
    const DagResult c = PlanDag(g, keep);
    for (ValueId v : g.FindVersions("name_x/fc3_grad")) {
      const ValueId root = c.liveness.alias_root[v];
      for (const auto& group : c.groups) {
        if (std::find(group.begin(), group.end(), root) != group.end()) {
          EXPECT_EQ(group.size(), 1u) << Describe(g, c.groups);
        }
      }
    }
    // ... while without it, fc3_grad shares.
    EXPECT_GT(Sharers(g, b, "name_x/fc3_grad"), 1) << Describe(g, b.groups);
    // Caffe2's activation heuristic leaves out the last two FC outputs (fc4, fc5): "fc5 kept".
    EXPECT_EQ(Sharers(g, b, "name_x/fc4"), 1) << Describe(g, b.groups);
    EXPECT_EQ(Sharers(g, b, "name_x/fc5"), 1) << Describe(g, b.groups);
  }
}

TEST(MemongerDagTest, GradientOptimTreeTwoLosses) {
  const graph::Graph g = Build(GradientOptimTree());
  for (ExecutionModel execution : {ExecutionModel::kSerial, ExecutionModel::kParallel}) {
    SCOPED_TRACE(ExecutionName(execution));
    PlanOptions o = Training(execution);
    o.memonger.share_activations = true;
    o.memonger.dont_share = {"name_x/fc6", "name_x/fc5", "name_x/fc1_w_grad"};
    const DagResult r = PlanDag(g, o);
    SCOPED_TRACE(Describe(g, r.groups));
    EXPECT_LT(static_cast<int>(r.groups.size()), NumPlannedClasses(g, r.liveness));
    for (const char* name : {"name_x/fc5", "name_x/fc6", "name_x/fc1_w_grad"}) {
      EXPECT_EQ(Sharers(g, r, name), 1) << name;
    }
    // The gradient of fc5 from both heads is summed (an autosplit piece and a Sum in place).
    EXPECT_FALSE(g.FindVersions("_name_x/fc5_grad_autosplit_0").empty());
  }
  // The declared losses given explicitly are the same heads.
  PlanOptions o = Training();
  const DagResult declared = PlanDag(g, o);
  o.memonger.losses = {"name_x/loss1", "name_x/loss2"};
  const DagResult a = PlanDag(g, o);
  EXPECT_EQ(a.groups, declared.groups);
  o.memonger.losses = {"name_x/loss1"};
  const DagResult one = PlanDag(g, o);
  // From loss1 alone, the ops that wait for loss2's gradient are never reached: less sharing.
  EXPECT_GE(one.groups.size(), a.groups.size());
}

TEST(MemongerDagTest, ForwardDaggyBranchesNeverShare) {
  for (bool harder : {false, true}) {
    SCOPED_TRACE(harder ? "harder" : "daggy");
    const graph::Graph g = Build(ForwardDaggy(harder));
    PlanOptions o;
    o.execution = ExecutionModel::kParallel;
    o.memonger.heads = {"name_x/data"};
    const DagResult r = PlanDag(g, o);
    SCOPED_TRACE(Describe(g, r.groups));
    EXPECT_LT(static_cast<int>(r.groups.size()), NumPlannedClasses(g, r.liveness));
    EXPECT_GT(SharedBuffers(r.groups), 0);
    const std::vector<std::string> a = {"name_x/fc3", "name_x/fc4", "name_x/fc5"};
    const std::vector<std::string> b = {"name_x/fc3b", "name_x/fc4b", "name_x/fc5b"};
    for (const auto& x : a) {
      for (const auto& y : b) EXPECT_FALSE(Share(g, r, x, y)) << x << " " << y;
    }
    // Heads [data] and [data, fc1_w] give the same result (fc1_w feeds only the root op).
    o.memonger.heads = {"name_x/data", "name_x/fc1_w"};
    const DagResult r2 = PlanDag(g, o);
    EXPECT_EQ(r2.groups, r.groups);
    // Heads [fc5_w, data] (test 9, dag_traversal): fc5_w feeds an op that is not a root (it
    // waits for fc4), so no traversal starts there; the same result, no failure.
    o.memonger.heads = {"name_x/fc5_w", "name_x/data"};
    const DagResult r4 = PlanDag(g, o);
    EXPECT_EQ(r4.groups, r.groups);
    // The default heads (the non-static inputs: data, label) too.
    o.memonger.heads.clear();
    const DagResult r3 = PlanDag(g, o);
    EXPECT_EQ(r3.groups, r.groups);
  }
}

TEST(MemongerDagTest, ForwardDaggySerialAndParallelAgree) {
  // Tokens make the DFS result independent of the execution model; the model only changes
  // the final check (and the untracked-reader condition, which inference never needs).
  const graph::Graph g = Build(ForwardDaggy(true));
  PlanOptions o;
  const DagResult serial = PlanDag(g, o);
  o.execution = ExecutionModel::kParallel;
  const DagResult parallel = PlanDag(g, o);
  EXPECT_EQ(serial.groups, parallel.groups);
}

TEST(MemongerDagTest, CpuAndGpuNeverShare) {
  const graph::Graph g = Build(MixCpuGpu());
  PlanOptions o = Training();
  o.memonger.share_activations = true;
  o.memonger.losses = {"loss"};
  const DagResult r = PlanDag(g, o);
  SCOPED_TRACE(Describe(g, r.groups));
  EXPECT_GT(SharedBuffers(r.groups), 0);
  EXPECT_LT(static_cast<int>(r.groups.size()), NumPlannedClasses(g, r.liveness));
  bool gpu_shared = false;
  bool cpu_shared = false;
  for (const auto& group : r.groups) {
    for (ValueId v : group) {
      EXPECT_EQ(r.liveness.device[v], r.liveness.device[group.front()])
          << g.value(v).DisplayName() << " with " << g.value(group.front()).DisplayName();
    }
    if (group.size() > 1) {
      (r.liveness.device[group.front()].type == 1 ? gpu_shared : cpu_shared) = true;
    }
  }
  EXPECT_TRUE(gpu_shared);
  EXPECT_TRUE(cpu_shared);
}

TEST(MemongerDagTest, UnknownLossOrHead) {
  const graph::Graph g = Build(N1());
  PlanOptions o = Training();
  o.memonger.losses = {"x"};
  absl::StatusOr<Plan> plan = [&] {
    PlanOptions p = o;
    p.planner = PlannerKind::kMemongerDag;
    return PlanMemory(g, p);
  }();
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(), HasSubstr("loss 'x' is not in the net"));

  absl::StatusOr<Schedule> schedule = MakeSchedule(g, OrderKind::kGiven);
  ASSERT_TRUE(schedule.ok());
  absl::StatusOr<Liveness> live = ComputeLiveness(g, *schedule);
  ASSERT_TRUE(live.ok());
  PlanOptions inference;
  inference.memonger.heads = {"nope"};
  absl::StatusOr<SharingGroups> groups =
      PlanMemongerDag(g, *live, inference.memonger, inference.execution);
  ASSERT_FALSE(groups.ok());
  EXPECT_EQ(groups.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(groups.status().message(), HasSubstr("head 'nope'"));
}

TEST(MemongerDagTest, TrainingWithoutLossIsAnError) {
  const graph::Graph g = Build(ForwardDaggy(false));  // no declared loss
  absl::StatusOr<Schedule> schedule = MakeSchedule(g, OrderKind::kGiven);
  ASSERT_TRUE(schedule.ok());
  absl::StatusOr<Liveness> live = ComputeLiveness(g, *schedule);
  ASSERT_TRUE(live.ok());
  absl::StatusOr<SharingGroups> groups =
      PlanMemongerDag(g, *live, Training().memonger, ExecutionModel::kSerial);
  ASSERT_FALSE(groups.ok());
  EXPECT_EQ(groups.status().code(), absl::StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// Small hand-made nets for single rules (types from AssignByteTypes; op types without schemas).

graph::Graph ByteGraph(const std::string& text, const std::map<std::string, int64_t>& bytes,
                       int64_t default_bytes = 64) {
  absl::StatusOr<graph::Graph> g = testing::GraphFromText(text);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return graph::Graph();
  testing::AssignByteTypes(*g, bytes, default_bytes);
  return *std::move(g);
}

TEST(MemongerDagTest, AnOpNeverReusesItsOwnInput) {
  // a -> b -> c: b's producer frees a only after serving b, so c (not b) takes a's buffer.
  const graph::Graph g = ByteGraph(R"pb(
    external_input: "x"
    op { type: "R" input: "x" output: "a" }
    op { type: "R" input: "a" output: "b" }
    op { type: "R" input: "b" output: "c" }
    op { type: "R" input: "c" output: "y" }
    external_output: "y"
  )pb", {});
  const DagResult r = PlanDag(g, PlanOptions{});
  EXPECT_FALSE(Share(g, r, "a", "b"));
  EXPECT_TRUE(Share(g, r, "a", "c"));
  EXPECT_EQ(Sharers(g, r, "y"), 1);  // graph outputs never share
  EXPECT_EQ(Sharers(g, r, "x"), 1);  // graph inputs never share
}

// Two buffers freed by one op (`j`), then `o_grad` (500 bytes) asks for one (names as Caffe2's
// gradient builder writes them: gradients are found by their `_grad` suffix). With equal share
// counts the heap orders them by name, so the heap array is [first name, second name].
std::string TwoFreeBuffers(const std::string& first, const std::string& second) {
  return absl::StrCat(R"pb(
    external_input: "x"
    op { type: "AGradient" input: "x" output: ")pb", first, R"pb(" output: ")pb", second,
                      R"pb(" }
    op { type: "JGradient" input: ")pb", first, R"pb(" input: ")pb", second,
                      R"pb(" output: "m_grad" }
    op { type: "OGradient" input: "m_grad" output: "o_grad" }
    op { type: "PGradient" input: "o_grad" output: "y" }
    external_output: "y"
    loss: "x"
  )pb");
}

TEST(MemongerDagTest, InferenceIsSizeBlindTrainingIsSizeAware) {
  // Heap array [a_small (10), b_fit (600)]. Inference (optimize_inference_for_dag passed no
  // shapes) pops the heap top, a_small, and lets it grow; training's size-aware scan moves on
  // from a_small (too small) to b_fit.
  const graph::Graph g = ByteGraph(TwoFreeBuffers("a_small_grad", "b_fit_grad"),
                                   {{"a_small_grad", 10},
                                    {"b_fit_grad", 600},
                                    {"m_grad", 1},
                                    {"o_grad", 500}});
  PlanOptions inference;
  inference.memonger.heads = {"x"};
  const DagResult ri = PlanDag(g, inference);
  EXPECT_TRUE(Share(g, ri, "a_small_grad", "o_grad")) << Describe(g, ri.groups);
  const DagResult rt = PlanDag(g, Training());
  EXPECT_TRUE(Share(g, rt, "b_fit_grad", "o_grad")) << Describe(g, rt.groups);
}

TEST(MemongerDagTest, SizeAwareRuleTakesTheFirstFitNotTheSmallest) {
  // Both fit `o` (500 bytes). The scan takes the first fitting buffer in heap-array order and
  // replaces it only by one of equal size: the larger one when its name sorts first.
  const graph::Graph big_first = ByteGraph(TwoFreeBuffers("a_big_grad", "b_fit_grad"),
                                           {{"a_big_grad", 1000},
                                            {"b_fit_grad", 600},
                                            {"m_grad", 1},
                                            {"o_grad", 500}});
  const DagResult r1 = PlanDag(big_first, Training());
  EXPECT_TRUE(Share(big_first, r1, "a_big_grad", "o_grad")) << Describe(big_first, r1.groups);
  EXPECT_FALSE(Share(big_first, r1, "b_fit_grad", "o_grad"));
  const graph::Graph fit_first = ByteGraph(TwoFreeBuffers("a_fit_grad", "b_big_grad"),
                                           {{"a_fit_grad", 600},
                                            {"b_big_grad", 1000},
                                            {"m_grad", 1},
                                            {"o_grad", 500}});
  const DagResult r2 = PlanDag(fit_first, Training());
  EXPECT_TRUE(Share(fit_first, r2, "a_fit_grad", "o_grad")) << Describe(fit_first, r2.groups);
}

TEST(MemongerDagTest, SizeAwareRuleTakesTheLargestWhenNoneFits) {
  // Heap array [a_mid (100), b_small (10)]; `o` needs 500: a_mid is kept (b_small is smaller)
  // and grows to 500 bytes.
  const graph::Graph g = ByteGraph(TwoFreeBuffers("a_mid_grad", "b_small_grad"),
                                   {{"a_mid_grad", 100},
                                    {"b_small_grad", 10},
                                    {"m_grad", 1},
                                    {"o_grad", 500}});
  const DagResult r = PlanDag(g, Training());
  EXPECT_TRUE(Share(g, r, "a_mid_grad", "o_grad")) << Describe(g, r.groups);
  EXPECT_GE(r.plan.buffers[r.plan.buffer_of_value[Latest(g, "o_grad")]].size, 500);
}

TEST(MemongerDagTest, SizeAwareQuirkGrowsASmallBuffer) {
  // One free buffer, smaller than the output: the size-aware rule takes it anyway (best = -1
  // is below any requirement), and the buffer grows to the output's size.
  const graph::Graph g = ByteGraph(R"pb(
    external_input: "x"
    op { type: "AGradient" input: "x" output: "s_grad" }
    op { type: "BGradient" input: "s_grad" output: "m_grad" }
    op { type: "CGradient" input: "m_grad" output: "big_grad" }
    op { type: "DGradient" input: "big_grad" output: "y" }
    external_output: "y"
    loss: "x"
  )pb", {{"s_grad", 8}, {"m_grad", 8}, {"big_grad", 4096}});
  const DagResult r = PlanDag(g, Training());
  EXPECT_TRUE(Share(g, r, "s_grad", "big_grad")) << Describe(g, r.groups);
  const int32_t buffer = r.plan.buffer_of_value[Latest(g, "big_grad")];
  EXPECT_GE(r.plan.buffers[buffer].size, 4096);
}

TEST(MemongerDagTest, ParallelBranchesWaitForTheJoin) {
  // x forks into two chains p1->p2 and q1->q2, joined by j, then z. p1 is freed inside the
  // first branch; q2 (second branch) must not take it (it lacks the first branch's token),
  // but z (after the join) may.
  const graph::Graph g = ByteGraph(R"pb(
    external_input: "x"
    op { type: "R" input: "x" output: "f" }
    op { type: "R" input: "f" output: "p1" }
    op { type: "R" input: "p1" output: "p2" }
    op { type: "R" input: "p2" output: "p3" }
    op { type: "R" input: "f" output: "q1" }
    op { type: "R" input: "q1" output: "q2" }
    op { type: "R" input: "q2" output: "q3" }
    op { type: "J" input: "p3" input: "q3" output: "j" }
    op { type: "R" input: "j" output: "z" }
    op { type: "R" input: "z" output: "y" }
    external_output: "y"
  )pb", {});
  for (ExecutionModel execution : {ExecutionModel::kSerial, ExecutionModel::kParallel}) {
    PlanOptions o;
    o.execution = execution;
    const DagResult r = PlanDag(g, o);
    SCOPED_TRACE(Describe(g, r.groups));
    for (const char* p : {"p1", "p2", "p3"}) {
      for (const char* q : {"q1", "q2", "q3"}) EXPECT_FALSE(Share(g, r, p, q)) << p << q;
    }
    EXPECT_TRUE(Share(g, r, "p1", "p3"));  // within one branch
    EXPECT_GT(Sharers(g, r, "z"), 1);      // after the join
  }
}

TEST(MemongerDagTest, MostSharedFreeBufferFirst) {
  // Two free buffers for `w`: `a`'s (already shared by a and c) and `b`'s (alone). memonger
  // prefers the most shared one (size-blind inference: the heap top).
  const graph::Graph g = ByteGraph(R"pb(
    external_input: "x"
    op { type: "R" input: "x" output: "a" }
    op { type: "R" input: "a" output: "k" }
    op { type: "R" input: "k" output: "c" }
    op { type: "R" input: "x" output: "b" }
    op { type: "J" input: "c" input: "b" output: "m" }
    op { type: "R" input: "m" output: "w" }
    op { type: "R" input: "w" output: "y" }
    external_output: "y"
  )pb", {});
  const DagResult r = PlanDag(g, PlanOptions{});
  SCOPED_TRACE(Describe(g, r.groups));
  EXPECT_TRUE(Share(g, r, "a", "c"));
  EXPECT_TRUE(Share(g, r, "a", "w"));
  EXPECT_FALSE(Share(g, r, "b", "w"));
}

TEST(MemongerDagTest, InPlaceWriteOfAHead) {
  // Test 11 (enforce_inplace_op_valid_and_as_head): IndexFreeze writes the head A in place.
  // A's class holds a graph input, so it never shares; its readers start traversals of their
  // own, and B..E share.
  const graph::Graph g = ByteGraph(R"pb(
    external_input: "A"
    op { type: "IndexFreeze" input: "A" output: "A" }
    op { type: "Sum" input: "A" input: "A" output: "B" }
    op { type: "Relu" input: "B" output: "C" }
    op { type: "Relu" input: "C" output: "D" }
    op { type: "Sum" input: "D" input: "D" output: "E" }
  )pb", {});
  for (ExecutionModel execution : {ExecutionModel::kSerial, ExecutionModel::kParallel}) {
    PlanOptions o;
    o.execution = execution;
    o.memonger.heads = {"A"};
    const DagResult r = PlanDag(g, o);
    SCOPED_TRACE(Describe(g, r.groups));
    EXPECT_EQ(Sharers(g, r, "A"), 1);
    EXPECT_TRUE(Share(g, r, "B", "D"));
    EXPECT_TRUE(Share(g, r, "C", "E"));
  }
}

TEST(MemongerDagTest, InPlaceWriterDoesNotReleaseEarlierReaders) {
  // r reads v (before w overwrites it in place) and d. memonger's per-name consumer lists let
  // w count r down too: r was visited right after w, before d's producer, with w's tokens,
  // and took the buffer of e that w had just freed, although r runs before w (it reads the
  // old v) while e is still live: e [pe, w] and rv [r, s] overlap. Here w counts down only
  // the readers of the version it writes; r waits for d and shares nothing with e.
  const graph::Graph g = ByteGraph(R"pb(
    external_input: "x"
    op { name: "p" type: "R" input: "x" output: "v" }
    op { name: "pe" type: "R" input: "v" output: "e" }
    op { name: "q0" type: "R" input: "x" output: "t" }
    op { name: "q" type: "R" input: "t" output: "d" }
    op { name: "r" type: "R" input: "v" input: "d" output: "rv" }
    op { name: "w" type: "R" input: "v" input: "e" output: "v" }
    op { name: "s" type: "R" input: "v" input: "rv" output: "y" }
    external_output: "y"
  )pb", {});
  for (ExecutionModel execution : {ExecutionModel::kSerial, ExecutionModel::kParallel}) {
    PlanOptions o;
    o.execution = execution;
    const DagResult r = PlanDag(g, o);  // verifies
    SCOPED_TRACE(Describe(g, r.groups));
    EXPECT_FALSE(Share(g, r, "e", "rv"));
  }
}

// One blob per name: `a` is written again (op 3) after its last reader. memonger released
// its buffer after the readers and gave it to `s`, which op 3 then overwrote before op 4 read
// it; here a blob is free only once its later writers ran too, so nothing is shared serially.
TEST(MemongerDagTest, RewriteAfterTheLastReadKeepsTheBuffer) {
  const graph::Graph g = ByteGraph(R"pb(
    external_input: "data"
    op { type: "Relu" input: "data" output: "a" }
    op { type: "Relu" input: "a" output: "b" }
    op { type: "Relu" input: "b" output: "s" }
    op { type: "Relu" input: "data" output: "a" }
    op { type: "Relu" input: "s" output: "t" }
    external_output: "t"
  )pb", {});
  for (ExecutionModel execution : {ExecutionModel::kSerial, ExecutionModel::kParallel}) {
    SCOPED_TRACE(ExecutionName(execution));
    PlanOptions o;
    o.execution = execution;
    const DagResult r = PlanDag(g, o);  // verified inside
    const std::vector<ValueId> a = g.FindVersions("a");
    ASSERT_EQ(a.size(), 2u);
    EXPECT_NE(r.plan.buffer_of_value[a[1]], r.plan.buffer_of_value[Latest(g, "s")]);
  }
}

// A reader of the third write of a name waits for three writes (memonger's in-degree), and a
// name is assigned a buffer at the first of its writes the traversal visits.
TEST(MemongerDagTest, RewritesCountAsWritesOfOneBlob) {
  const graph::Graph g = ByteGraph(R"pb(
    external_input: "data"
    op { type: "Relu" input: "data" output: "a" }
    op { type: "Relu" input: "data" output: "a" }
    op { type: "Relu" input: "data" output: "a" }
    op { type: "Relu" input: "a" output: "r" }
    op { type: "Relu" input: "r" output: "out" }
    op { type: "Relu" input: "out" output: "y" }
    external_output: "y"
  )pb", {});
  const DagResult r = PlanDag(g, PlanOptions{});
  SCOPED_TRACE(Describe(g, r.groups));
  // Each write of `a` is a root (it reads the head); op 3 is visited in the third write's
  // traversal, after all three. It frees a, and r (written there) cannot take it (an op never
  // reuses its own inputs); out's writer (op 4) frees r and takes a's buffer.
  EXPECT_FALSE(Share(g, r, "a", "r"));
  EXPECT_TRUE(Share(g, r, "a", "out"));
  EXPECT_EQ(SharedBuffers(r.groups), 1);
}

// memonger_test.py 10 and 11 (enforce_inplace_op_invalid / _valid_and_as_head): IndexFreeze
// must write in place. A net that names its output otherwise is refused before planning, by
// every planner and by the verifier; written in place over a head, it plans and shares.
TEST(MemongerDagTest, EnforcedInPlaceOps) {
  const graph::Graph invalid = ByteGraph(R"pb(
    external_input: "A"
    op { type: "IndexFreeze" input: "A" output: "B" }
    op { type: "Sum" input: "B" input: "B" output: "C" }
    op { type: "Relu" input: "C" output: "D" }
    op { type: "Sum" input: "D" input: "D" output: "E" }
    external_output: "E"
  )pb", {});
  for (PlannerKind planner : {PlannerKind::kMemongerDag, PlannerKind::kMemongerGreedy,
                              PlannerKind::kMemongerFast, PlannerKind::kAuto}) {
    PlanOptions o;
    o.planner = planner;
    o.memonger.heads = {"A"};
    absl::StatusOr<Plan> plan = PlanMemory(invalid, o);
    ASSERT_FALSE(plan.ok()) << PlannerName(planner);
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(plan.status().message()),
                AllOf(HasSubstr("IndexFreeze"), HasSubstr("in place"), HasSubstr("'B'")));
  }
  const graph::Graph valid = ByteGraph(R"pb(
    external_input: "A"
    op { type: "IndexFreeze" input: "A" output: "A" }
    op { type: "Sum" input: "A" input: "A" output: "B" }
    op { type: "Relu" input: "B" output: "C" }
    op { type: "Relu" input: "C" output: "D" }
    op { type: "Sum" input: "D" input: "D" output: "E" }
    external_output: "E"
  )pb", {});
  PlanOptions o;
  o.memonger.heads = {"A"};
  const DagResult r = PlanDag(valid, o);
  EXPECT_GT(SharedBuffers(r.groups), 0) << Describe(valid, r.groups);  // the count drops
  EXPECT_TRUE(Share(valid, r, "B", "D"));
}

TEST(MemongerDagTest, UnreachableOpsStayUnoptimized) {
  // `u` reads only a param: no head reaches it, its outputs keep their own memory.
  const graph::Graph g = ByteGraph(R"pb(
    external_input: "x"
    external_input: "w"
    value_info { name: "w" role: ROLE_PARAM }
    op { type: "R" input: "x" output: "a" }
    op { type: "R" input: "a" output: "b" }
    op { type: "R" input: "b" output: "c" }
    op { name: "u" type: "R" input: "w" output: "u1" }
    op { type: "R" input: "u1" output: "u2" }
    op { type: "J" input: "c" input: "u2" output: "y" }
    external_output: "y"
  )pb", {});
  const DagResult r = PlanDag(g, PlanOptions{});
  EXPECT_EQ(Sharers(g, r, "u1"), 1);
  EXPECT_EQ(Sharers(g, r, "u2"), 1);
  EXPECT_TRUE(Share(g, r, "a", "c"));
}

TEST(MemongerDagTest, DeepChainDoesNotOverflowTheStack) {
  std::string text = "external_input: \"v0\"\n";
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    absl::StrAppend(&text, "op { type: \"R\" input: \"v", i, "\" output: \"v", i + 1, "\" }\n");
  }
  absl::StrAppend(&text, "external_output: \"v", n, "\"\n");
  const graph::Graph g = ByteGraph(text, {});
  const DagResult r = PlanDag(g, PlanOptions{});
  // A chain needs two buffers in turn (an op never reuses its own input) plus input/output.
  EXPECT_EQ(r.groups.size(), 4u);
}

// ---------------------------------------------------------------------------------------------
// Properties over random graphs: the plan verifies and the safety check never fires.

struct RandomCase {
  const char* name;
  testing::RandomGraphOptions options;
};

void PrintTo(const RandomCase& c, std::ostream* os) { *os << c.name; }

class MemongerDagRandomTest : public ::testing::TestWithParam<RandomCase> {};

TEST_P(MemongerDagRandomTest, InferenceVerifies) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE(seed);
    const graph::Graph g = testing::RandomGraph(seed, GetParam().options);
    for (ExecutionModel execution : {ExecutionModel::kSerial, ExecutionModel::kParallel}) {
      for (OrderKind order : {OrderKind::kGiven, OrderKind::kLongestPath}) {
        for (bool views : {false, true}) {
          SCOPED_TRACE(absl::StrCat(ExecutionName(execution), " ", OrderName(order),
                                    views ? " views" : ""));
          PlanOptions o;
          o.execution = execution;
          o.order = order;
          o.liveness.views = views;
          o.alignment = 64;
          const DagResult r = PlanDag(g, o);
          EXPECT_GE(r.plan.arena_bytes, r.plan.lower_bound_bytes);
          EXPECT_LE(r.plan.arena_bytes, r.plan.naive_bytes);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MemongerDagRandomTest,
    ::testing::Values(RandomCase{"small", {.num_ops = 12}},
                      RandomCase{"medium", {.num_ops = 60}},
                      RandomCase{"inplace", {.num_ops = 60, .inplace_probability = 0.4}},
                      RandomCase{"wide", {.num_ops = 80, .num_inputs = 5, .max_op_inputs = 4,
                                          .max_op_outputs = 4, .multi_output_probability = 0.5}},
                      RandomCase{"devices", {.num_ops = 60, .num_devices = 3}},
                      RandomCase{"views", {.num_ops = 60, .view_probability = 0.2}}),
    [](const ::testing::TestParamInfo<RandomCase>& info) { return info.param.name; });

// Random training nets: a random forward DAG ending in a loss, then gradient ops (marked
// is_gradient_op) that read the loss, earlier gradients and forward activations, some of them
// in place, and write gradients, some declared parameter gradients.
graph::Graph RandomTrainingGraph(uint64_t seed, int forward_ops, int backward_ops) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  graph::GraphBuilder b(absl::StrCat("train_", seed));
  b.AddExternalInput("data");
  b.AddExternalInput("w");
  b.DeclareRole("w", graph::Role::kParam);
  std::vector<std::string> acts = {"data"};
  for (int i = 0; i < forward_ops; ++i) {
    graph::OpSpec op;
    op.type = "F";
    const int k = 1 + uniform(2);
    for (int j = 0; j < k; ++j) {
      const int n = static_cast<int>(acts.size());
      op.inputs.push_back(acts[uniform(2) == 0 ? n - 1 : uniform(n)]);
    }
    if (uniform(3) == 0) op.inputs.push_back("w");
    op.outputs.push_back(absl::StrCat("a", i));
    if (uniform(4) == 0) op.outputs.push_back(absl::StrCat("side", i));  // read by nobody
    acts.push_back(op.outputs[0]);
    b.AddOp(std::move(op));
  }
  {
    graph::OpSpec op;
    op.type = "Loss";
    op.inputs = {acts.back(), acts[uniform(static_cast<int>(acts.size()))]};
    op.outputs = {"loss"};
    b.AddOp(std::move(op));
  }
  // A forward reader off the loss path (like Accuracy): memonger did not see it.
  {
    graph::OpSpec op;
    op.type = "Accuracy";
    op.inputs = {acts[1 + uniform(static_cast<int>(acts.size()) - 1)]};
    op.outputs = {"accuracy"};
    b.AddOp(std::move(op));
    b.AddExternalOutput("accuracy");
  }
  b.AddLoss("loss");
  std::vector<std::string> grads;
  {
    graph::OpSpec op;
    op.type = "ConstantFill";
    op.is_gradient_op = true;
    op.inputs = {"loss"};
    op.outputs = {"loss_autogen_grad"};
    grads.push_back("loss_autogen_grad");
    b.AddOp(std::move(op));
  }
  for (int i = 0; i < backward_ops; ++i) {
    graph::OpSpec op;
    op.type = "G";
    op.is_gradient_op = true;
    const int n = static_cast<int>(grads.size());
    op.inputs.push_back(grads[uniform(2) == 0 ? n - 1 : uniform(n)]);
    if (uniform(2) == 0) op.inputs.push_back(grads[uniform(n)]);
    if (uniform(2) == 0) op.inputs.push_back(acts[uniform(static_cast<int>(acts.size()))]);
    if (uniform(5) == 0 && op.inputs[0] != "loss_autogen_grad") {
      op.outputs.push_back(op.inputs[0]);  // in place
    } else {
      op.outputs.push_back(absl::StrCat("g", i));
      grads.push_back(op.outputs[0]);
    }
    if (uniform(4) == 0) {
      const std::string pg = absl::StrCat("w_grad", i);
      op.outputs.push_back(pg);
      b.AddParamGrad("w", pg);
    }
    b.AddOp(std::move(op));
  }
  absl::StatusOr<graph::Graph> g = std::move(b).Build();
  EXPECT_TRUE(g.ok()) << g.status();
  std::map<std::string, int64_t> bytes;
  for (int i = 0; i < forward_ops + backward_ops; ++i) {
    for (const std::string& name : {absl::StrCat("a", i), absl::StrCat("g", i),
                                    absl::StrCat("side", i), absl::StrCat("w_grad", i)}) {
      bytes[name] = 1 + static_cast<int64_t>(rng() % 5000);
    }
  }
  testing::AssignByteTypes(*g, bytes, 128);
  return *std::move(g);
}

TEST(MemongerDagRandomTrainingTest, TrainingVerifies) {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    SCOPED_TRACE(seed);
    const graph::Graph g = RandomTrainingGraph(seed, 8 + static_cast<int>(seed % 20),
                                               10 + static_cast<int>(seed % 30));
    for (ExecutionModel execution : {ExecutionModel::kSerial, ExecutionModel::kParallel}) {
      for (OrderKind order : {OrderKind::kGiven, OrderKind::kLongestPath}) {
        for (bool activations : {false, true}) {
          SCOPED_TRACE(absl::StrCat(ExecutionName(execution), " ", OrderName(order),
                                    activations ? " activations" : ""));
          PlanOptions o = Training(execution);
          o.order = order;
          o.memonger.share_activations = activations;
          const DagResult r = PlanDag(g, o);
          EXPECT_GE(r.plan.arena_bytes, r.plan.lower_bound_bytes);
          EXPECT_LE(r.plan.arena_bytes, r.plan.naive_bytes);
        }
      }
    }
  }
}

}  // namespace
}  // namespace memonger
