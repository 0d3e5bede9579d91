// ONNX control flow and data-dependent sizes (graph/onnx/control_flow.h, sequences.h,
// size_bounds.h): Ifs the shapes decide become their branch, Loops they count become copies of
// their body (run against the Loop's meaning), lists stacked after a Loop become Concats, other
// control flow is refused by name, and the outputs
// of NonZero, NonMaxSuppression and friends are planned at upper bounds that the import checks
// grow with the run; the executor refuses to run at a bound.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_join.h"
#include "allocator/executor.h"
#include "allocator/host_run.h"
#include "gmock/gmock.h"
#include "graph/control_regions.h"
#include "graph/gradient_builder.h"
#include "graph/onnx/onnx_import.h"
#include "gtest/gtest.h"
#include "memonger/planner.h"
#include "memonger/verify_plan.h"
#include "onnx/onnx_pb.h"

namespace memonger::graph {
namespace {

using ::onnx::TensorProto;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

// Builds a model the way exporters write one: opset 17, typed inputs, outputs by name.
class Model {
 public:
  Model() {
    proto_.set_ir_version(8);
    auto* op = proto_.add_opset_import();
    op->set_domain("");
    op->set_version(17);
    graph_ = proto_.mutable_graph();
    graph_->set_name("g");
  }
  onnx::GraphProto* graph() { return graph_; }
  void Opset(int version) { proto_.mutable_opset_import(0)->set_version(version); }

  void Input(const std::string& name, int32_t elem, const std::vector<int64_t>& dims) {
    onnx::ValueInfoProto* vi = graph_->add_input();
    vi->set_name(name);
    auto* t = vi->mutable_type()->mutable_tensor_type();
    t->set_elem_type(elem);
    auto* shape = t->mutable_shape();
    for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
  }
  void Output(const std::string& name) { graph_->add_output()->set_name(name); }
  void Ints(const std::string& name, const std::vector<int64_t>& values, bool scalar = false) {
    TensorProto* t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(TensorProto::INT64);
    if (!scalar) t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
  }
  void Float(const std::string& name, float value) {
    TensorProto* t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(TensorProto::FLOAT);
    t->add_float_data(value);
  }
  static onnx::NodeProto* Node(onnx::GraphProto* g, const std::string& op,
                               const std::vector<std::string>& inputs,
                               const std::vector<std::string>& outputs,
                               const std::string& name = "") {
    onnx::NodeProto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? op + "_" + outputs[0] : name);
    for (const std::string& in : inputs) n->add_input(in);
    for (const std::string& out : outputs) n->add_output(out);
    return n;
  }
  onnx::NodeProto* Node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name = "") {
    return Node(graph_, op, inputs, outputs, name);
  }
  // An If reading `cond`, with branches built by the caller.
  onnx::NodeProto* If(const std::string& cond, const std::string& out, onnx::GraphProto then_g,
                      onnx::GraphProto else_g, const std::string& name) {
    onnx::NodeProto* n = Node("If", {cond}, {out}, name);
    for (auto [attr, g] : {std::pair{"then_branch", &then_g}, std::pair{"else_branch", &else_g}}) {
      auto* a = n->add_attribute();
      a->set_name(attr);
      a->set_type(onnx::AttributeProto::GRAPH);
      *a->mutable_g() = *g;
    }
    return n;
  }

  absl::StatusOr<Graph> Import(std::vector<std::string>* notes = nullptr) const {
    OnnxImportOptions options;
    options.notes = notes;
    return ImportOnnxBytes(proto_.SerializeAsString(), {}, "test.onnx", options);
  }
  // With the model's data, at the sizes a run measured.
  absl::StatusOr<Graph> ImportMeasured(
      const absl::flat_hash_map<std::string, std::vector<int64_t>>& measured) const {
    OnnxImportOptions options;
    options.keep_data = true;
    options.measured_sizes = measured;
    return ImportOnnxBytes(proto_.SerializeAsString(), {}, "test.onnx", options);
  }

 private:
  onnx::ModelProto proto_;
  onnx::GraphProto* graph_;
};

// One node reading `in` (an outer value), writing the branch's output `out`.
onnx::GraphProto Branch(const std::string& op, const std::string& in, const std::string& out) {
  onnx::GraphProto g;
  g.set_name("branch_" + out);
  Model::Node(&g, op, {in}, {out});
  g.add_output()->set_name(out);
  return g;
}

void AttrInt(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

const Value& Named(const Graph& g, const std::string& name) {
  const std::optional<ValueId> id = g.FindValue(name);
  EXPECT_TRUE(id.has_value()) << name;
  return g.value(id.value_or(0));
}

// 'empty' = Size(x) == 0: the condition torchvision's batched_nms branches on.
void WhetherEmpty(Model& m) {
  m.Ints("zero", {0}, /*scalar=*/true);
  m.Node("Size", {"x"}, {"n"});
  m.Node("Equal", {"n", "zero"}, {"empty"});
}

// torchvision's batched_nms: `if boxes.numel() == 0: return empty` as an If on Size(x) == 0.
Model SizeDecidedIf(int64_t rows) {
  Model m;
  m.Input("x", TensorProto::FLOAT, {rows, 3});
  WhetherEmpty(m);
  m.If("empty", "y", Branch("Identity", "x", "same"), Branch("Relu", "x", "relu"), "branchy");
  m.Node("Neg", {"y"}, {"z"});
  m.Output("z");
  return m;
}

TEST(OnnxControlFlowTest, AnIfTheShapesDecideIsReplacedByItsBranch) {
  std::vector<std::string> notes;
  absl::StatusOr<Graph> g = SizeDecidedIf(2).Import(&notes);
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<std::string> types;
  for (const Op& op : g->ops()) types.push_back(op.type);
  EXPECT_EQ(absl::StrJoin(types, ","), "Relu,Identity,Neg");
  EXPECT_EQ(Named(*g, "relu").type->dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Named(*g, "z").type->dims, (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_THAT(notes[0], AllOf(HasSubstr("If node 'branchy'"), HasSubstr("false"),
                              HasSubstr("else_branch (1 node)")));
  EXPECT_TRUE(g->data_dependent_sizes().empty());

  // No rows: the then_branch.
  g = SizeDecidedIf(0).Import();
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_FALSE(g->FindValue("relu").has_value());
  EXPECT_TRUE(g->FindValue("same").has_value());
}

// Two Ifs whose branches both define 't' (each branch is a scope of its own): inlined, the
// the second 't' is renamed and both outputs keep their own values.
TEST(OnnxControlFlowTest, NamesTwoBranchesShareAreKeptApart) {
  Model m;
  m.Input("x", TensorProto::FLOAT, {2, 3});
  WhetherEmpty(m);
  m.If("empty", "y1", Branch("Identity", "x", "t"), Branch("Relu", "x", "t"), "first");
  m.If("empty", "y2", Branch("Identity", "x", "t"), Branch("Neg", "x", "t"), "second");
  m.Node("Add", {"y1", "y2"}, {"z"});
  m.Output("z");
  absl::StatusOr<Graph> g = m.Import();
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<std::string> types;
  for (const Op& op : g->ops()) types.push_back(op.type);
  EXPECT_EQ(absl::StrJoin(types, ","), "Relu,Identity,Neg,Identity,Add");
  EXPECT_EQ(g->FindVersions("t").size(), 1u);
  EXPECT_TRUE(g->FindValue("t/second/else_branch_1").has_value());
}

// `inputs` by name: float or bool or int64 data of the given dims.
struct Data {
  DataType dtype;
  std::vector<double> values;
  std::vector<int64_t> dims;
};

TensorData Tensor(const Data& d) {
  TensorData t{{d.dtype, d.dims}, ""};
  for (double v : d.values) {
    if (d.dtype == DataType::kFloat32) {
      const float f = static_cast<float>(v);
      t.bytes.append(reinterpret_cast<const char*>(&f), sizeof(f));
    } else if (d.dtype == DataType::kInt64) {
      const int64_t i = static_cast<int64_t>(v);
      t.bytes.append(reinterpret_cast<const char*>(&i), sizeof(i));
    } else {
      t.bytes.push_back(v != 0 ? 1 : 0);
    }
  }
  return t;
}

// Imports, plans (the plan verified, and run in verify mode) and runs `m` on `inputs`;
// returns output 0's floats.
std::vector<float> RunRegions(const Model& m, const absl::flat_hash_map<std::string, Data>& inputs) {
  absl::StatusOr<Graph> g = m.ImportMeasured({});
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return {};
  EXPECT_TRUE(HasControlRegions(*g));
  absl::StatusOr<Plan> plan = PlanMemory(*g, PlanOptions{});
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return {};
  EXPECT_TRUE(VerifyPlan(*g, *plan).ok());
  absl::StatusOr<alloc::Arena> arena = alloc::Arena::Create(alloc::Device::kHost, plan->arena_bytes);
  EXPECT_TRUE(arena.ok());
  absl::StatusOr<alloc::Executor> verify = alloc::Executor::Create(*g, *plan, *arena);
  EXPECT_TRUE(verify.ok()) << verify.status();
  if (verify.ok()) EXPECT_TRUE(verify->RunVerify().ok()) << verify->RunVerify();
  alloc::HostRunOptions options;
  for (const auto& [name, data] : inputs) options.data[name] = Tensor(data);
  absl::StatusOr<alloc::HostRunReport> run = alloc::RunOnHost(*g, *plan, options);
  EXPECT_TRUE(run.ok()) << run.status();
  if (!run.ok() || run->outputs.empty()) return {};
  std::vector<float> values(run->outputs[0].bytes.size() / sizeof(float));
  if (!values.empty()) std::memcpy(values.data(), run->outputs[0].bytes.data(), values.size() * sizeof(float));
  return values;
}

// An If whose condition is a graph input: both branches are planned, between markers, and the
// run takes the one the condition names.
TEST(OnnxControlFlowTest, AnIfOnTensorValuesRunsTheBranchItsConditionTakes) {
  Model m;
  m.Input("x", TensorProto::FLOAT, {2});
  m.Input("cond", TensorProto::BOOL, {});
  m.If("cond", "y", Branch("Neg", "x", "a"), Branch("Relu", "x", "b"), "branchy");
  m.Node("Add", {"y", "x"}, {"z"});
  m.Output("z");
  std::vector<std::string> notes;
  absl::StatusOr<Graph> g = m.Import(&notes);
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<std::string> types;
  for (const Op& op : g->ops()) types.push_back(op.type);
  EXPECT_EQ(absl::StrJoin(types, ","), "IfThen,Neg,Identity,IfElse,Relu,Identity,IfEnd,Add");
  EXPECT_THAT(absl::StrJoin(notes, "\n"), HasSubstr("If node 'branchy': its condition depends on tensor values"));
  const Data x{DataType::kFloat32, {1.0, -2.0}, {2}};
  EXPECT_EQ(RunRegions(m, {{"x", x}, {"cond", {DataType::kBool, {1}, {}}}}),
            (std::vector<float>{0.0f, 0.0f}));
  EXPECT_EQ(RunRegions(m, {{"x", x}, {"cond", {DataType::kBool, {0}, {}}}}),
            (std::vector<float>{2.0f, -2.0f}));
  // The memory-aware order would move ops across the markers.
  PlanOptions memory_aware;
  memory_aware.order = OrderKind::kMemoryAware;
  absl::StatusOr<Plan> plan = PlanMemory(*g, memory_aware);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kUnimplemented);
}

TEST(OnnxControlFlowTest, AnIfWhoseBranchesGiveOtherShapesIsRefused) {
  Model m;
  m.Input("x", TensorProto::FLOAT, {2});
  m.Input("cond", TensorProto::BOOL, {});
  onnx::GraphProto wide;
  wide.set_name("wide");
  AttrInt(Model::Node(&wide, "Concat", {"x", "x"}, {"w"}), "axis", 0);
  wide.add_output()->set_name("w");
  m.If("cond", "y", Branch("Neg", "x", "a"), wide, "branchy");
  m.Output("y");
  absl::StatusOr<Graph> g = m.Import();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(g.status().message(), AllOf(HasSubstr("[2]"), HasSubstr("[4]"),
                                          HasSubstr("one type whichever branch runs")));
}

// The markers' structure is checked where the graph is read: a schedule that moves an op out
// of its region, or a marker left unmatched, is refused.
TEST(OnnxControlFlowTest, RegionsMustStayWhole) {
  Model m;
  m.Input("x", TensorProto::FLOAT, {2});
  m.Input("cond", TensorProto::BOOL, {});
  m.If("cond", "y", Branch("Neg", "x", "a"), Branch("Relu", "x", "b"), "branchy");
  m.Output("y");
  absl::StatusOr<Graph> g = m.Import();
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<std::vector<ControlRegion>> regions = FindControlRegions(*g);
  ASSERT_TRUE(regions.ok()) << regions.status();
  ASSERT_EQ(regions->size(), 1u);
  EXPECT_EQ((*regions)[0].kind, ControlRegion::Kind::kIf);
  std::vector<OpId> order(g->num_ops());
  for (OpId i = 0; i < g->num_ops(); ++i) order[i] = i;
  EXPECT_TRUE(CheckRegionSchedule(*g, *regions, order).ok());
  std::swap(order[1], order[3]);  // the then-branch's Neg after IfElse
  EXPECT_EQ(CheckRegionSchedule(*g, *regions, order).code(), absl::StatusCode::kInvalidArgument);

  GraphBuilder b("unmatched");
  b.AddExternalInput("x");
  b.AddOp({.type = "IfElse", .domain = std::string(kControlDomain)});
  b.AddOp({.type = "Relu", .inputs = {"x"}, .outputs = {"y"}});
  b.AddExternalOutput("y");
  absl::StatusOr<Graph> bad = std::move(b).Build();
  ASSERT_TRUE(bad.ok()) << bad.status();
  EXPECT_THAT(FindControlRegions(*bad).status().message(), HasSubstr("unmatched"));
}

TEST(OnnxControlFlowTest, OtherSubgraphsAreRefusedByName) {
  Model m;
  m.Input("x", TensorProto::FLOAT, {2});
  onnx::NodeProto* map = m.Node("SequenceMap", {"x"}, {"y"}, "mapper");
  auto* body = map->add_attribute();
  body->set_name("body");
  body->set_type(onnx::AttributeProto::GRAPH);
  *body->mutable_g() = Branch("Relu", "x", "b");
  m.Output("y");
  absl::StatusOr<Graph> g = m.Import();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(g.status().message(),
              AllOf(HasSubstr("SequenceMap node 'mapper'"), HasSubstr("control flow"),
                    HasSubstr("'body'")));
}

// A Loop body as torch.onnx writes a scripted `for i in range(n)`: inputs (i, cond, y), the
// condition passed on through an Identity, y + float(i) carried, -(y + float(i)) scanned.
onnx::GraphProto CountingBody() {
  onnx::GraphProto g;
  g.set_name("body");
  for (const char* in : {"i", "cond_in", "y_in"}) g.add_input()->set_name(in);
  AttrInt(Model::Node(&g, "Cast", {"i"}, {"i_float"}), "to", TensorProto::FLOAT);
  Model::Node(&g, "Add", {"y_in", "i_float"}, {"y_out"});
  Model::Node(&g, "Neg", {"y_out"}, {"scanned"});
  Model::Node(&g, "Identity", {"cond_in"}, {"cond_out"});
  for (const char* out : {"cond_out", "y_out", "scanned"}) g.add_output()->set_name(out);
  return g;
}

void AttrGraph(onnx::NodeProto* n, const std::string& name, onnx::GraphProto g) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = std::move(g);
}

// y, ys = Loop(count, cond, x) over CountingBody, then y + 0 and ys + 0 as the outputs.
Model CountingLoop(const std::string& count, const std::string& cond = "") {
  Model m;
  m.Input("x", TensorProto::FLOAT, {2});
  onnx::NodeProto* loop = m.Node("Loop", {count, cond, "x"}, {"y", "ys"}, "counter");
  AttrGraph(loop, "body", CountingBody());
  return m;
}

// Runs `m` on the host with float inputs of the given dims, returning each output's values and
// dims.
std::vector<std::pair<std::vector<float>, std::vector<int64_t>>> RunFloats(
    const Model& m,
    const absl::flat_hash_map<std::string, std::pair<std::vector<float>, std::vector<int64_t>>>& inputs) {
  std::vector<std::pair<std::vector<float>, std::vector<int64_t>>> outputs;
  absl::StatusOr<Graph> g = m.ImportMeasured({});
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return outputs;
  absl::StatusOr<Plan> plan = PlanMemory(*g, PlanOptions{});
  EXPECT_TRUE(plan.ok() && VerifyPlan(*g, *plan).ok());
  if (!plan.ok()) return outputs;
  alloc::HostRunOptions options;
  for (const auto& [name, input] : inputs) {
    const auto& [values, dims] = input;
    TensorData data{{DataType::kFloat32, dims},
                    std::string(values.size() * sizeof(float), '\0')};
    std::memcpy(data.bytes.data(), values.data(), data.bytes.size());
    options.data[name] = data;
  }
  absl::StatusOr<alloc::HostRunReport> run = alloc::RunOnHost(*g, *plan, options);
  EXPECT_TRUE(run.ok()) << run.status();
  if (!run.ok()) return outputs;
  for (const alloc::HostRunOutput& out : run->outputs) {
    std::vector<float> values(out.bytes.size() / sizeof(float));
    if (!values.empty()) std::memcpy(values.data(), out.bytes.data(), out.bytes.size());
    outputs.emplace_back(std::move(values), out.type.dims);
  }
  return outputs;
}

TEST(OnnxControlFlowTest, ALoopTheShapesCountIsUnrolledAndRunsAsTheLoop) {
  // The trip count is x's length + 1, as a scripted `range(x.size(0) + 1)` exports.
  Model m = CountingLoop("count");
  m.Ints("one", {1}, /*scalar=*/true);
  m.Node("Size", {"x"}, {"size"});
  m.Node("Add", {"size", "one"}, {"count"});
  m.Output("y");
  m.Output("ys");
  std::vector<std::string> notes;
  absl::StatusOr<Graph> g = m.Import(&notes);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_THAT(notes[0], AllOf(HasSubstr("Loop node 'counter'"), HasSubstr("3 iterations"),
                              HasSubstr("3 copies of its body (4 nodes)")));
  EXPECT_EQ(Named(*g, "ys").type->dims, (std::vector<int64_t>{3, 2}));
  int neg = 0;
  for (const Op& op : g->ops()) neg += op.type == "Neg";
  EXPECT_EQ(neg, 3);

  // y = x + 0 + 1 + 2; ys = -(x + 0), -(x + 1), -(x + 3).
  const auto out = RunFloats(m, {{"x", {{1.0f, -2.0f}, {2}}}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].first, (std::vector<float>{4.0f, 1.0f}));
  EXPECT_EQ(out[1].first, (std::vector<float>{-1.0f, 2.0f, -2.0f, 1.0f, -4.0f, -1.0f}));
  EXPECT_EQ(out[1].second, (std::vector<int64_t>{3, 2}));
}

TEST(OnnxControlFlowTest, ALoopWhoseConditionIsFalseRunsNoIteration) {
  Model m = CountingLoop("count", "no");
  m.Ints("count", {5}, /*scalar=*/true);
  TensorProto* no = m.graph()->add_initializer();
  no->set_name("no");
  no->set_data_type(TensorProto::BOOL);
  no->add_int32_data(0);
  m.Output("y");
  // Its scan output would be empty of an unknown element shape.
  m.Output("ys");
  absl::StatusOr<Graph> g = m.Import();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(g.status().message(), AllOf(HasSubstr("Loop node 'counter'"),
                                          HasSubstr("no iteration"), HasSubstr("'ys'")));
  // Without it, y is x.
  m.graph()->mutable_node(0)->set_output(1, "");
  m.graph()->mutable_output()->RemoveLast();
  const auto out = RunFloats(m, {{"x", {{1.0f, -2.0f}, {2}}}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].first, (std::vector<float>{1.0f, -2.0f}));
}

TEST(OnnxControlFlowTest, ALoopCountedByTensorValuesRunsAsOftenAsTheyCount) {
  Model m = CountingLoop("count");
  m.Input("count", TensorProto::INT64, {});
  m.Output("y");
  m.Output("ys");
  // Its scan output would need a bound on the count.
  absl::StatusOr<Graph> g = m.Import();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(g.status().message(),
              AllOf(HasSubstr("Loop node 'counter'"), HasSubstr("scan output 'ys'")));
  m.graph()->mutable_node(0)->set_output(1, "");
  m.graph()->mutable_output()->RemoveLast();
  g = m.Import();
  ASSERT_TRUE(g.ok()) << g.status();
  // y = x + 0 + 1 + 2 for a count of 3; x for none.
  const Data x{DataType::kFloat32, {1.0, -2.0}, {2}};
  EXPECT_EQ(RunRegions(m, {{"x", x}, {"count", {DataType::kInt64, {3}, {}}}}),
            (std::vector<float>{4.0f, 1.0f}));
  EXPECT_EQ(RunRegions(m, {{"x", x}, {"count", {DataType::kInt64, {0}, {}}}}),
            (std::vector<float>{1.0f, -2.0f}));
  // Training would differentiate through iterations the plan does not hold.
  EXPECT_EQ(AddGradientOps(*g, {"y"}).status().code(), absl::StatusCode::kUnimplemented);
}

// Verify mode proves a region's plan on real memory: a body value placed over the carried
// value it reads is found.
TEST(OnnxControlFlowTest, VerifyModeFindsABodyValueOverACarriedOne) {
  Model m = CountingLoop("count");
  m.Input("count", TensorProto::INT64, {});
  m.graph()->mutable_node(0)->set_output(1, "");
  m.Output("y");
  absl::StatusOr<Graph> g = m.Import();
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<Plan> plan = PlanMemory(*g, PlanOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::optional<ValueId> carried = g->FindValue("y_in/counter");
  const std::optional<ValueId> body = g->FindValue("i_float/counter/0");
  ASSERT_TRUE(carried.has_value() && body.has_value());
  plan->offset_of_value[*body] = plan->offset_of_value[*carried];
  absl::StatusOr<alloc::Arena> arena = alloc::Arena::Create(alloc::Device::kHost, plan->arena_bytes);
  ASSERT_TRUE(arena.ok());
  absl::StatusOr<alloc::Executor> executor = alloc::Executor::Create(*g, *plan, *arena);
  ASSERT_TRUE(executor.ok()) << executor.status();
  const absl::Status verified = executor->RunVerify();
  EXPECT_EQ(verified.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(verified.message(), HasSubstr("'y_in/counter' was clobbered"));
}

TEST(OnnxControlFlowTest, ACarriedValueThatChangesShapeIsRefused) {
  Model m;
  m.Input("x", TensorProto::FLOAT, {2});
  m.Input("count", TensorProto::INT64, {});
  onnx::GraphProto body;
  body.set_name("body");
  for (const char* in : {"i", "cond_in", "y_in"}) body.add_input()->set_name(in);
  AttrInt(Model::Node(&body, "Concat", {"y_in", "y_in"}, {"y_out"}), "axis", 0);
  Model::Node(&body, "Identity", {"cond_in"}, {"cond_out"});
  for (const char* out : {"cond_out", "y_out"}) body.add_output()->set_name(out);
  AttrGraph(m.Node("Loop", {"count", "", "x"}, {"y"}, "grower"), "body", body);
  m.Output("y");
  absl::StatusOr<Graph> g = m.Import();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(g.status().message(), AllOf(HasSubstr("[4]"), HasSubstr("[2]"),
                                          HasSubstr("keep its type from one iteration")));
}

// Mask R-CNN pastes each detection's mask in a Loop over the detections: counted by a bound.
TEST(OnnxControlFlowTest, ALoopCountedFromABoundIsRefused) {
  Model m = CountingLoop("count");
  m.Float("zero", 0.0f);
  m.Ints("first", {0}, /*scalar=*/true);
  m.Node("Greater", {"x", "zero"}, {"positive"});
  m.Node("NonZero", {"positive"}, {"where"}, "select");
  m.Node("Shape", {"where"}, {"shape"});
  AttrInt(m.Node("Gather", {"shape", "first"}, {"count"}), "axis", 0);
  m.Output("y");
  absl::StatusOr<Graph> g = m.Import();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(g.status().message(),
              AllOf(HasSubstr("Loop node 'counter'"), HasSubstr("upper bound")));
}

TEST(OnnxControlFlowTest, AWhileLoopRunsUntilItsBodySaysStop) {
  Model m;
  m.Input("x", TensorProto::FLOAT, {2});
  m.Ints("count", {4}, /*scalar=*/true);
  onnx::GraphProto body = CountingBody();
  // `while y.sum() < 10`: the condition is the body's own.
  body.mutable_node(3)->set_op_type("ReduceSum");
  body.mutable_node(3)->set_input(0, "y_out");
  body.mutable_node(3)->set_output(0, "total");
  onnx::TensorProto* ten = body.add_initializer();
  ten->set_name("ten");
  ten->set_data_type(TensorProto::FLOAT);
  ten->add_float_data(10.0f);
  Model::Node(&body, "Less", {"total", "ten"}, {"cond_out"});
  TensorProto* yes = m.graph()->add_initializer();
  yes->set_name("yes");
  yes->set_data_type(TensorProto::BOOL);
  yes->add_int32_data(1);
  onnx::NodeProto* loop = m.Node("Loop", {"count", "yes", "x"}, {"y", "ys"}, "counter");
  AttrGraph(loop, "body", body);
  m.Output("y");
  // A `while y.sum() < 10` runs as a region, as often as its condition holds (at most four
  // times): from [1, 2], y is [1, 2] (3), [2, 3] (5), [4, 5] (9), [7, 8] (15) after each
  // iteration; from [5, 6] one iteration.
  EXPECT_EQ(RunRegions(m, {{"x", {DataType::kFloat32, {1.0, 2.0}, {2}}}}),
            (std::vector<float>{7.0f, 8.0f}));
  EXPECT_EQ(RunRegions(m, {{"x", {DataType::kFloat32, {5.0, 6.0}, {2}}}}),
            (std::vector<float>{5.0f, 6.0f}));
  // A count of 2 stops it first: [2, 3].
  m.graph()->mutable_initializer(0)->set_int64_data(0, 2);
  EXPECT_EQ(RunRegions(m, {{"x", {DataType::kFloat32, {1.0, 2.0}, {2}}}}),
            (std::vector<float>{2.0f, 3.0f}));
  m.graph()->mutable_initializer(0)->set_int64_data(0, 4);

  // Without a condition input it is a `for` loop: ONNX ignores the body's condition, and all
  // four iterations run (y = x + 0 + 1 + 2 + 3).
  m.graph()->mutable_node(m.graph()->node_size() - 1)->set_input(1, "");
  const auto out = RunFloats(m, {{"x", {{1.0f, 2.0f}, {2}}}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].first, (std::vector<float>{7.0f, 8.0f}));
}

// Two Loops of one name, the second counted by the first's scan output: unrolled in two
// folding rounds, their copies' names stay apart.
TEST(OnnxControlFlowTest, LoopsUnrolledInLaterRoundsGetFreshNames) {
  Model m = CountingLoop("two");
  m.Ints("two", {2}, /*scalar=*/true);
  m.Ints("first", {0}, /*scalar=*/true);
  m.Node("Shape", {"ys"}, {"ys_shape"});
  AttrInt(m.Node("Gather", {"ys_shape", "first"}, {"again"}), "axis", 0);
  onnx::NodeProto* second = m.Node("Loop", {"again", "", "y"}, {"y2", "ys2"}, "counter");
  AttrGraph(second, "body", CountingBody());
  m.Output("y2");
  m.Output("ys2");
  const auto out = RunFloats(m, {{"x", {{1.0f, -2.0f}, {2}}}});
  ASSERT_EQ(out.size(), 2u);
  // y = x + 1; y2 = y + 1; ys2 = -(y + 0), -(y + 1).
  EXPECT_EQ(out[0].first, (std::vector<float>{3.0f, 0.0f}));
  EXPECT_EQ(out[1].first, (std::vector<float>{-2.0f, 1.0f, -3.0f, 0.0f}));
}

TEST(OnnxControlFlowTest, ALoopOfTooManyNodesIsRefused) {
  Model m = CountingLoop("count");
  m.Ints("count", {int64_t{1} << 20}, /*scalar=*/true);
  m.Output("y");
  absl::StatusOr<Graph> g = m.Import();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(g.status().message(), AllOf(HasSubstr("1048576 copies of its 4-node body"),
                                          HasSubstr("262144")));
}

TEST(OnnxControlFlowTest, ABodyWithTheWrongInputsIsRefused) {
  Model m;
  m.Input("x", TensorProto::FLOAT, {2});
  m.Ints("count", {2}, /*scalar=*/true);
  onnx::GraphProto body = CountingBody();
  body.add_input()->set_name("extra");
  onnx::NodeProto* loop = m.Node("Loop", {"count", "", "x"}, {"y", "ys"}, "counter");
  AttrGraph(loop, "body", body);
  m.Output("y");
  absl::StatusOr<Graph> g = m.Import();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), AllOf(HasSubstr("Loop node 'counter'"),
                                          HasSubstr("4 inputs, the Loop 3")))
      << g.status();
}

void AttrInts(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

// A running sum over the rows of x (the ONNX Scan example): state s, scan input x [3, 2];
// the final sum and each partial sum, doubled, as scan output.
Model RunningSum() {
  Model m;
  m.Input("x", TensorProto::FLOAT, {3, 2});
  m.Input("s0", TensorProto::FLOAT, {2});
  onnx::GraphProto body;
  body.set_name("body");
  for (const char* in : {"s_in", "row"}) body.add_input()->set_name(in);
  Model::Node(&body, "Add", {"s_in", "row"}, {"s_out"});
  Model::Node(&body, "Add", {"s_out", "s_out"}, {"doubled"});
  for (const char* out : {"s_out", "doubled"}) body.add_output()->set_name(out);
  onnx::NodeProto* scan = m.Node("Scan", {"s0", "x"}, {"s", "partial"}, "summer");
  AttrInt(scan, "num_scan_inputs", 1);
  AttrGraph(scan, "body", body);
  m.Output("s");
  m.Output("partial");
  return m;
}

TEST(OnnxControlFlowTest, AScanIsUnrolledAndRunsAsTheScan) {
  const Model m = RunningSum();
  std::vector<std::string> notes;
  absl::StatusOr<Graph> g = m.Import(&notes);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_THAT(notes[0], AllOf(HasSubstr("Scan node 'summer'"), HasSubstr("3 slices"),
                              HasSubstr("3 copies of its body (2 nodes)")));
  const auto out =
      RunFloats(m, {{"x", {{1, 2, 3, 4, 5, 6}, {3, 2}}}, {"s0", {{10, 20}, {2}}}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].first, (std::vector<float>{19, 32}));
  EXPECT_EQ(out[1].first, (std::vector<float>{22, 44, 28, 52, 38, 64}));
  EXPECT_EQ(out[1].second, (std::vector<int64_t>{3, 2}));
}

// Columns scanned from the last (axis 1, direction 1) and stacked from the last (axis -1,
// direction 1): -x, column for column.
TEST(OnnxControlFlowTest, AScanHonoursItsAxesAndDirections) {
  Model m;
  m.Input("x", TensorProto::FLOAT, {2, 3});
  onnx::GraphProto body;
  body.set_name("body");
  body.add_input()->set_name("column");
  Model::Node(&body, "Neg", {"column"}, {"negated"});
  body.add_output()->set_name("negated");
  onnx::NodeProto* scan = m.Node("Scan", {"x"}, {"y"}, "backwards");
  AttrInt(scan, "num_scan_inputs", 1);
  AttrInts(scan, "scan_input_axes", {1});
  AttrInts(scan, "scan_input_directions", {1});
  AttrInts(scan, "scan_output_axes", {-1});
  AttrInts(scan, "scan_output_directions", {1});
  AttrGraph(scan, "body", body);
  m.Output("y");
  const auto out = RunFloats(m, {{"x", {{1, 2, 3, 4, 5, 6}, {2, 3}}}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].first, (std::vector<float>{-1, -2, -3, -4, -5, -6}));
  EXPECT_EQ(out[0].second, (std::vector<int64_t>{2, 3}));
}

TEST(OnnxControlFlowTest, AScanOfOpset8IsRefused) {
  Model m = RunningSum();
  m.Opset(8);
  absl::StatusOr<Graph> g = m.Import();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(g.status().message(), AllOf(HasSubstr("Scan node 'summer'"), HasSubstr("opset 8")));
}

TEST(OnnxControlFlowTest, MalformedLoopsAndScansAreRefused) {
  {
    // Two carried values, one output.
    Model m;
    m.Input("x", TensorProto::FLOAT, {2});
    m.Ints("count", {2}, /*scalar=*/true);
    onnx::NodeProto* loop = m.Node("Loop", {"count", "", "x", "x"}, {"y"}, "short");
    AttrGraph(loop, "body", CountingBody());
    m.Output("y");
    absl::StatusOr<Graph> g = m.Import();
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(g.status().message(), AllOf(HasSubstr("Loop node 'short'"),
                                            HasSubstr("carries 2 values but has 1 outputs")));
  }
  for (int64_t scan_inputs : {int64_t{0}, int64_t{3}, (int64_t{1} << 32) + 1}) {
    Model m = RunningSum();
    onnx::NodeProto* scan = m.graph()->mutable_node(0);
    scan->mutable_attribute(0)->set_i(scan_inputs);
    absl::StatusOr<Graph> g = m.Import();
    ASSERT_FALSE(g.ok()) << scan_inputs;
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(g.status().message(), HasSubstr("num_scan_inputs must be"));
  }
  {
    Model m = RunningSum();
    AttrInts(m.graph()->mutable_node(0), "scan_input_axes", {0, 0});
    absl::StatusOr<Graph> g = m.Import();
    ASSERT_FALSE(g.ok());
    EXPECT_THAT(g.status().message(),
                AllOf(HasSubstr("'scan_input_axes'"), HasSubstr("2 entries for 1")));
  }
}

// `outs.append(torch.tanh(x[i] + h))` in a scripted loop, then `torch.stack(outs, 1)`: the list
// is a sequence the Loop carries, lowered to a Concat once the Loop is unrolled.
TEST(OnnxControlFlowTest, AListStackedAfterALoopBecomesAConcat) {
  Model m;
  m.Input("x", TensorProto::FLOAT, {3, 2});
  m.Ints("count", {3}, /*scalar=*/true);
  AttrInt(m.Node("SequenceEmpty", {}, {"empty"}), "dtype", TensorProto::FLOAT);
  onnx::GraphProto body;
  body.set_name("body");
  for (const char* in : {"i", "cond_in", "h_in", "list_in"}) body.add_input()->set_name(in);
  AttrInt(Model::Node(&body, "Gather", {"x", "i"}, {"row"}), "axis", 0);
  Model::Node(&body, "Add", {"row", "h_in"}, {"sum"});
  Model::Node(&body, "Tanh", {"sum"}, {"h_out"});
  Model::Node(&body, "SequenceInsert", {"list_in", "h_out"}, {"list_out"});
  for (const char* out : {"cond_in", "h_out", "list_out"}) body.add_output()->set_name(out);
  m.Float("h0", 0.5f);
  m.Ints("two", {2});
  m.Node("Expand", {"h0", "two"}, {"h"});
  onnx::NodeProto* loop = m.Node("Loop", {"count", "", "h", "empty"}, {"h_last", "list"}, "rnn");
  AttrGraph(loop, "body", body);
  onnx::NodeProto* stack = m.Node("ConcatFromSequence", {"list"}, {"stacked"}, "stack");
  AttrInt(stack, "axis", 1);
  AttrInt(stack, "new_axis", 1);
  m.Output("stacked");
  absl::StatusOr<Graph> g = m.Import();
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(Named(*g, "stacked").type->dims, (std::vector<int64_t>{2, 3}));
  for (const Op& op : g->ops()) EXPECT_THAT(op.type, Not(HasSubstr("Sequence")));

  const std::vector<float> x = {0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f};
  const auto out = RunFloats(m, {{"x", {x, {3, 2}}}});
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].first.size(), 6u);
  float h[2] = {0.5f, 0.5f};
  for (int t = 0; t < 3; ++t) {
    for (int c = 0; c < 2; ++c) {
      h[c] = std::tanh(x[t * 2 + c] + h[c]);
      EXPECT_NEAR(out[0].first[c * 3 + t], h[c], 1e-6) << t << "," << c;
    }
  }
}

TEST(OnnxControlFlowTest, ABranchMayNotRedefineAnOuterName) {
  Model m;
  m.Input("x", TensorProto::FLOAT, {2, 3});
  WhetherEmpty(m);
  m.If("empty", "y", Branch("Identity", "x", "same"), Branch("Relu", "x", "n"), "branchy");
  m.Output("y");
  absl::StatusOr<Graph> g = m.Import();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), AllOf(HasSubstr("If node 'branchy'"), HasSubstr("'n'"),
                                          HasSubstr("shadow")));
}

TEST(OnnxControlFlowTest, ABranchReadingAnUndefinedNameIsRefused) {
  Model m;
  m.Input("x", TensorProto::FLOAT, {2, 3});
  WhetherEmpty(m);
  m.If("empty", "y", Branch("Identity", "x", "same"), Branch("Relu", "nowhere", "r"), "branchy");
  m.Output("y");
  absl::StatusOr<Graph> g = m.Import();
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("'nowhere'"));
}

// SSD post-processing per class: the scores above a threshold (NonZero, GatherND), then the
// best min(count, 3) of them (TopK with k computed from the count's shape).
Model SelectThenTopK() {
  Model m;
  m.Input("x", TensorProto::FLOAT, {2, 4});
  m.Float("threshold", 0.5f);
  m.Ints("three", {3});
  m.Node("Greater", {"x", "threshold"}, {"above"});
  m.Node("NonZero", {"above"}, {"where"}, "select");
  m.Node("Transpose", {"where"}, {"indices"});
  m.Node("GatherND", {"x", "indices"}, {"picked"});
  m.Node("Shape", {"picked"}, {"count"});
  AttrInt(m.Node("Concat", {"count", "three"}, {"candidates"}), "axis", 0);
  AttrInt(m.Node("ReduceMin", {"candidates"}, {"k"}), "keepdims", 1);
  m.Node("TopK", {"picked", "k"}, {"best", "best_at"});
  m.Output("best");
  return m;
}

TEST(OnnxControlFlowTest, NonZeroIsPlannedAtItsBoundAndWhatFollowsFromIt) {
  std::vector<std::string> notes;
  absl::StatusOr<Graph> g = SelectThenTopK().Import(&notes);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(Named(*g, "where").type->dims, (std::vector<int64_t>{2, 8}));
  EXPECT_EQ(Named(*g, "picked").type->dims, (std::vector<int64_t>{8}));
  EXPECT_EQ(Named(*g, "best").type->dims, (std::vector<int64_t>{3}));
  ASSERT_EQ(g->data_dependent_sizes().size(), 1u);
  EXPECT_EQ(g->data_dependent_sizes()[0].value, "where");
  EXPECT_THAT(g->data_dependent_sizes()[0].why, HasSubstr("at most the 8 elements of 'above'"));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_THAT(notes[0], AllOf(HasSubstr("1 outputs"), HasSubstr("upper bounds"),
                              HasSubstr("1 x NonZero")));
  // Copies keep the bounds.
  Graph copy = *g;
  EXPECT_EQ(copy.data_dependent_sizes().size(), 1u);
}

TEST(OnnxControlFlowTest, TheExecutorRefusesToRunAtABound) {
  absl::StatusOr<Graph> g = SelectThenTopK().Import();
  ASSERT_TRUE(g.ok()) << g.status();
  PlanOptions options;
  absl::StatusOr<Plan> plan = PlanMemory(*g, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(VerifyPlan(*g, *plan).ok());
  absl::StatusOr<alloc::HostRunReport> run = alloc::RunOnHost(*g, *plan, {});
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(run.status().message(),
              AllOf(HasSubstr("'where'"), HasSubstr("upper bounds"), HasSubstr("fixed sizes")));
}

// The run measures NonZero's count and retypes the net: k = min(count, 3) values come out.
std::vector<float> RunSelectThenTopK(const std::vector<float>& x, int* retypes) {
  const Model m = SelectThenTopK();
  absl::StatusOr<Graph> g = m.ImportMeasured({});
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return {};
  absl::StatusOr<Plan> plan = PlanMemory(*g, PlanOptions{});
  EXPECT_TRUE(plan.ok() && VerifyPlan(*g, *plan).ok());
  if (!plan.ok()) return {};
  alloc::HostRunOptions options;
  TensorData data{{DataType::kFloat32, {2, 4}}, std::string(x.size() * sizeof(float), '\0')};
  std::memcpy(data.bytes.data(), x.data(), data.bytes.size());
  options.data["x"] = data;
  options.retype = [&m](const absl::flat_hash_map<std::string, std::vector<int64_t>>& measured) {
    return m.ImportMeasured(measured);
  };
  absl::StatusOr<alloc::HostRunReport> run = alloc::RunOnHost(*g, *plan, options);
  EXPECT_TRUE(run.ok()) << run.status();
  if (!run.ok()) return {};
  *retypes = run->retypes;
  const alloc::HostRunOutput& best = run->outputs.at(0);
  std::vector<float> values(best.bytes.size() / sizeof(float));
  if (!values.empty()) std::memcpy(values.data(), best.bytes.data(), best.bytes.size());
  EXPECT_EQ(best.type.dims, (std::vector<int64_t>{static_cast<int64_t>(values.size())}));
  return values;
}

TEST(OnnxControlFlowTest, ARunMeasuresTheDataDependentSizesInThePlanMadeAtTheBounds) {
  int retypes = 0;
  EXPECT_EQ(RunSelectThenTopK({0.9f, 0.1f, 0.7f, 0.6f, 0.2f, 0.8f, 0.3f, 0.55f}, &retypes),
            (std::vector<float>{0.9f, 0.8f, 0.7f}));
  EXPECT_EQ(retypes, 1);
  // Two above the threshold: k = 2, a smaller output than the plan's [3].
  EXPECT_EQ(RunSelectThenTopK({0.1f, 0.2f, 0.75f, 0.3f, 0.4f, 0.0f, 0.6f, 0.5f}, &retypes),
            (std::vector<float>{0.75f, 0.6f}));
  // None: NonZero [2, 0], an empty output.
  EXPECT_EQ(RunSelectThenTopK(std::vector<float>(8, 0.0f), &retypes), std::vector<float>{});
}

// A data-dependent output that is a graph output: the run retypes once more at the end, so the
// output has the measured size.
TEST(OnnxControlFlowTest, AMeasuredGraphOutputHasItsMeasuredSize) {
  Model m;
  m.Input("x", TensorProto::FLOAT, {4});
  m.Node("NonZero", {"x"}, {"where"}, "select");
  m.Output("where");
  absl::StatusOr<Graph> g = m.ImportMeasured({});
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<Plan> plan = PlanMemory(*g, PlanOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status();
  alloc::HostRunOptions options;
  const std::vector<float> x = {0, 1, 0, 1};
  TensorData data{{DataType::kFloat32, {4}}, std::string(16, '\0')};
  std::memcpy(data.bytes.data(), x.data(), 16);
  options.data["x"] = data;
  options.retype = [&m](const absl::flat_hash_map<std::string, std::vector<int64_t>>& measured) {
    return m.ImportMeasured(measured);
  };
  absl::StatusOr<alloc::HostRunReport> run = alloc::RunOnHost(*g, *plan, options);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->retypes, 1);
  ASSERT_EQ(run->outputs.size(), 1u);
  EXPECT_EQ(run->outputs[0].type.dims, (std::vector<int64_t>{1, 2}));
  std::vector<int64_t> at(2);
  std::memcpy(at.data(), run->outputs[0].bytes.data(), 16);
  EXPECT_EQ(at, (std::vector<int64_t>{1, 3}));
}

// A typing larger than the plan (a retype that lies about the sizes) is refused before any op
// runs in it.
TEST(OnnxControlFlowTest, ARunRefusesSizesBeyondThePlan) {
  const Model m = SelectThenTopK();
  absl::StatusOr<Graph> g = m.ImportMeasured({});
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<Plan> plan = PlanMemory(*g, PlanOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status();
  alloc::HostRunOptions options;
  options.retype = [&m](const absl::flat_hash_map<std::string, std::vector<int64_t>>&) {
    return m.ImportMeasured({{"where", {2, 100}}});
  };
  absl::StatusOr<alloc::HostRunReport> run = alloc::RunOnHost(*g, *plan, options);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(run.status().message(), AllOf(HasSubstr("'where' needs 1600 bytes"),
                                            HasSubstr("gives it 128")));
}

// Two counts of one bound: at counts 1 and 3 Add broadcasts, so its output may not be planned
// over an operand (one shape at the bounds): liveness leaves the pair apart, and a plan that
// pairs them anyway (a plan made elsewhere) is refused at run time.
TEST(OnnxControlFlowTest, AnInPlacePairWhoseShapesPartAtTheMeasuredSizesIsRefused) {
  Model m;
  m.Input("x", TensorProto::FLOAT, {4});
  m.Input("y", TensorProto::FLOAT, {4});
  m.Float("zero", 0.0f);
  for (const std::string v : {"x", "y"}) {
    m.Node("Greater", {v, "zero"}, {v + "_positive"});
    m.Node("NonZero", {v + "_positive"}, {v + "_where"}, v + "_select");
    m.Node("Transpose", {v + "_where"}, {v + "_at"});
    m.Node("GatherND", {v, v + "_at"}, {v + "_picked"});
  }
  m.Node("Add", {"x_picked", "y_picked"}, {"sum"});
  m.Output("sum");
  absl::StatusOr<Graph> g = m.ImportMeasured({});
  ASSERT_TRUE(g.ok()) << g.status();
  alloc::HostRunOptions options;
  const std::vector<float> x = {0, 5, 0, 0}, y = {1, 0, 2, 3};
  for (const auto& [name, values] : {std::pair{"x", &x}, std::pair{"y", &y}}) {
    TensorData data{{DataType::kFloat32, {4}}, std::string(16, '\0')};
    std::memcpy(data.bytes.data(), values->data(), 16);
    options.data[name] = data;
  }
  options.retype = [&m](const absl::flat_hash_map<std::string, std::vector<int64_t>>& measured) {
    return m.ImportMeasured(measured);
  };
  for (bool in_place : {true, false}) {
    SCOPED_TRACE(in_place);
    PlanOptions plan_options;
    plan_options.liveness.in_place = in_place;
    absl::StatusOr<Plan> plan = PlanMemory(*g, plan_options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_TRUE(VerifyPlan(*g, *plan).ok());
    const ValueId sum_id = *g->FindValue("sum"), x_picked = *g->FindValue("x_picked");
    EXPECT_NE(plan->offset_of_value[sum_id], plan->offset_of_value[x_picked]);
    if (in_place) {
      // Paired by hand, as a plan from elsewhere might: the run refuses it.
      Plan paired = *plan;
      paired.offset_of_value[sum_id] = paired.offset_of_value[x_picked];
      absl::StatusOr<alloc::HostRunReport> refused = alloc::RunOnHost(*g, paired, options);
      ASSERT_FALSE(refused.ok());
      EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_THAT(refused.status().message(), HasSubstr("their dims differ"));
    }
    absl::StatusOr<alloc::HostRunReport> run = alloc::RunOnHost(*g, *plan, options);
    ASSERT_TRUE(run.ok()) << run.status();
    std::vector<float> sum(3);
    ASSERT_EQ(run->outputs.at(0).bytes.size(), 12u);
    std::memcpy(sum.data(), run->outputs[0].bytes.data(), 12);
    EXPECT_EQ(sum, (std::vector<float>{6, 7, 8}));
  }
}

// NonMaxSuppression(boxes [1, 5, 4], scores [1, 2, 5], max_per_class): 1 x 2 x min(5, max).
std::vector<int64_t> NmsDims(int max_per_class_kind) {
  Model m;
  m.Input("boxes", TensorProto::FLOAT, {1, 5, 4});
  m.Input("scores", TensorProto::FLOAT, {1, 2, 5});
  std::vector<std::string> inputs = {"boxes", "scores"};
  if (max_per_class_kind == 1) {  // a constant
    m.Ints("max_per_class", {3});
    inputs.push_back("max_per_class");
  } else if (max_per_class_kind == 2) {  // a value of the run
    m.Input("max_per_class", TensorProto::INT64, {1});
    inputs.push_back("max_per_class");
  }
  m.Node("NonMaxSuppression", inputs, {"selected"}, "nms");
  m.Output("selected");
  absl::StatusOr<Graph> g = m.Import();
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? Named(*g, "selected").type->dims : std::vector<int64_t>{};
}

TEST(OnnxControlFlowTest, NonMaxSuppressionIsBoundedByBatchClassesAndBoxesPerClass) {
  EXPECT_EQ(NmsDims(0), (std::vector<int64_t>{0, 3}));   // omitted: ONNX selects none
  EXPECT_EQ(NmsDims(1), (std::vector<int64_t>{6, 3}));   // 1 x 2 x min(5, 3)
  EXPECT_EQ(NmsDims(2), (std::vector<int64_t>{10, 3}));  // 1 x 2 x 5
}

TEST(OnnxControlFlowTest, UniqueAndCompressAreBounded) {
  Model m;
  m.Input("x", TensorProto::FLOAT, {3, 4});
  m.Input("keep", TensorProto::BOOL, {2});
  m.Node("Unique", {"x"}, {"u", "u_at", "u_inverse", "u_counts"}, "unique");
  m.Node("Compress", {"x", "keep"}, {"flat"}, "squeeze_out");
  AttrInt(m.Node("Compress", {"x", "keep"}, {"rows"}, "rows_out"), "axis", 0);
  for (const char* out : {"u", "u_at", "u_inverse", "u_counts", "flat", "rows"}) m.Output(out);
  absl::StatusOr<Graph> g = m.Import();
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(Named(*g, "u").type->dims, (std::vector<int64_t>{12}));
  EXPECT_EQ(Named(*g, "u_inverse").type->dims, (std::vector<int64_t>{12}));
  EXPECT_EQ(Named(*g, "flat").type->dims, (std::vector<int64_t>{2}));
  EXPECT_EQ(Named(*g, "rows").type->dims, (std::vector<int64_t>{2, 4}));
}

// 10 - count elements: the fewer the nonzeros, the larger the tensor, so the count's bound is
// not a bound for it.
TEST(OnnxControlFlowTest, ASizeThatShrinksAsTheBoundGrowsIsRefused) {
  Model m;
  m.Input("x", TensorProto::FLOAT, {6});
  m.Float("zero", 0.0f);
  m.Ints("ten", {10});
  m.Ints("one", {1});
  m.Node("Greater", {"x", "zero"}, {"positive"});
  m.Node("NonZero", {"positive"}, {"where"}, "select");
  m.Node("Shape", {"where"}, {"shape"});
  AttrInt(m.Node("Gather", {"shape", "one"}, {"count"}), "axis", 0);
  m.Node("Sub", {"ten", "count"}, {"rest"});
  m.Node("ConstantOfShape", {"rest"}, {"padding"}, "pad");
  m.Output("padding");
  absl::StatusOr<Graph> g = m.Import();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(g.status().message(),
              AllOf(HasSubstr("'padding'"), HasSubstr("does not grow")));
}

}  // namespace
}  // namespace memonger::graph
