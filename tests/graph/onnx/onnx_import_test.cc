#include "graph/onnx/onnx_import.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "graph/model_loader.h"
#include "graph/onnx/onnx_fold.h"
#include "graph/shape_inference.h"
#include "gtest/gtest.h"
#include "graph/retype.h"
#include "onnx/onnx_pb.h"
#include "tests/test_support.h"

namespace memonger::graph {
namespace {

using ::memonger::testing::WriteTempFile;
using ::testing::AllOf;
using ::testing::HasSubstr;
using onnx::TensorProto;

// ---------------------------------------------------------------------------------------------
// Building small ModelProtos.

// A declared dim: a number, a symbol, or neither (Dim::Unknown()).
struct Dim {
  Dim(int64_t v) : value(v) {}              // NOLINT: implicit on purpose
  Dim(const char* symbol) : param(symbol) {}  // NOLINT
  static Dim Unknown() { return Dim(int64_t{-1}); }
  int64_t value = -1;
  std::string param;
};

class OnnxModel {
 public:
  explicit OnnxModel(int64_t opset = 13, int64_t ir_version = 7) {
    model_.set_ir_version(ir_version);
    model_.set_producer_name("memonger-test");
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    graph()->set_name("test_graph");
  }

  onnx::GraphProto* graph() { return model_.mutable_graph(); }
  onnx::ModelProto& proto() { return model_; }

  OnnxModel& Input(const std::string& name, int32_t elem, const std::vector<Dim>& dims) {
    SetType(graph()->add_input(), name, elem, &dims);
    return *this;
  }
  // An input declared by name only, as onnx.helper.make_empty_tensor_value_info writes it.
  OnnxModel& UntypedInput(const std::string& name) {
    graph()->add_input()->set_name(name);
    return *this;
  }
  OnnxModel& InputWithoutShape(const std::string& name, int32_t elem) {
    SetType(graph()->add_input(), name, elem, nullptr);
    return *this;
  }
  // An output declared by name only (libonnx infers its type).
  OnnxModel& Output(const std::string& name) {
    graph()->add_output()->set_name(name);
    return *this;
  }
  OnnxModel& Output(const std::string& name, int32_t elem, const std::vector<Dim>& dims) {
    SetType(graph()->add_output(), name, elem, &dims);
    return *this;
  }
  OnnxModel& ValueInfo(const std::string& name, int32_t elem, const std::vector<Dim>& dims) {
    SetType(graph()->add_value_info(), name, elem, &dims);
    return *this;
  }
  OnnxModel& FloatInit(const std::string& name, const std::vector<int64_t>& dims, float fill = 0) {
    TensorProto* t = graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      n *= d;
    }
    for (int64_t i = 0; i < n; ++i) t->add_float_data(fill);
    return *this;
  }
  OnnxModel& IntInit(const std::string& name, const std::vector<int64_t>& values,
                     bool scalar = false) {
    TensorProto* t = graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(TensorProto::INT64);
    if (!scalar) t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
    return *this;
  }
  onnx::NodeProto* Node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name = "") {
    onnx::NodeProto* n = graph()->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const std::string& in : inputs) n->add_input(in);
    for (const std::string& out : outputs) n->add_output(out);
    return n;
  }

  std::string Bytes() const { return model_.SerializeAsString(); }
  std::string Write(const std::string& file = "model.onnx") const {
    return WriteTempFile(file, Bytes());
  }

 private:
  static void SetType(onnx::ValueInfoProto* vi, const std::string& name, int32_t elem,
                      const std::vector<Dim>* dims) {
    vi->set_name(name);
    onnx::TypeProto_Tensor* t = vi->mutable_type()->mutable_tensor_type();
    t->set_elem_type(elem);
    if (dims == nullptr) return;
    onnx::TensorShapeProto* shape = t->mutable_shape();
    for (const Dim& d : *dims) {
      auto* dim = shape->add_dim();
      if (!d.param.empty()) {
        dim->set_dim_param(d.param);
      } else if (d.value >= 0) {
        dim->set_dim_value(d.value);
      }
    }
  }

  onnx::ModelProto model_;
};

void AttrInt(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
void AttrInts(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
void AttrFloat(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
void AttrString(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}
void AttrTensor(onnx::NodeProto* n, const std::string& name, const TensorProto& t) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::TENSOR);
  *a->mutable_t() = t;
}

absl::StatusOr<Graph> Import(const OnnxModel& m, const ShapeBindings& bindings = {}) {
  return ImportOnnxBytes(m.Bytes(), bindings, "test.onnx");
}

const Value& ValueNamed(const Graph& g, const std::string& name) {
  const auto id = g.FindValue(name);
  EXPECT_TRUE(id.has_value()) << name;
  return g.value(*id);
}

TensorType Type(DataType dtype, std::vector<int64_t> dims) { return {dtype, std::move(dims)}; }

const Op* OpOfType(const Graph& g, const std::string& type) {
  for (const Op& op : g.ops()) {
    if (op.type == type) return &op;
  }
  return nullptr;
}

// x[2,3] -> MatMul W[3,4] -> Add B[4] -> Relu -> y.
OnnxModel LinearModel() {
  OnnxModel m;
  m.Input("x", TensorProto::FLOAT, {2, 3});
  m.FloatInit("W", {3, 4}).FloatInit("B", {4});
  m.Node("MatMul", {"x", "W"}, {"h"}, "mm");
  m.Node("Add", {"h", "B"}, {"a"}, "add");
  m.Node("Relu", {"a"}, {"y"}, "relu");
  m.Output("y");
  return m;
}

// ---------------------------------------------------------------------------------------------
// Roles, types, attributes.

TEST(OnnxImportTest, RolesAndTypes) {
  absl::StatusOr<Graph> g = Import(LinearModel());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->name(), "test_graph");
  EXPECT_EQ(g->num_ops(), 3);
  EXPECT_EQ(ValueNamed(*g, "x").role, Role::kInput);
  EXPECT_EQ(ValueNamed(*g, "W").role, Role::kParam);
  EXPECT_EQ(ValueNamed(*g, "B").role, Role::kParam);
  EXPECT_EQ(ValueNamed(*g, "h").role, Role::kActivation);
  EXPECT_EQ(ValueNamed(*g, "y").role, Role::kOutput);
  EXPECT_EQ(ValueNamed(*g, "x").type, Type(DataType::kFloat32, {2, 3}));
  EXPECT_EQ(ValueNamed(*g, "W").type, Type(DataType::kFloat32, {3, 4}));
  EXPECT_EQ(ValueNamed(*g, "h").type, Type(DataType::kFloat32, {2, 4}));
  EXPECT_EQ(ValueNamed(*g, "y").type, Type(DataType::kFloat32, {2, 4}));
  EXPECT_TRUE(g->AllTypesKnown());
  EXPECT_EQ(g->op(0).name, "mm");
  // InferShapes keeps what the importer typed.
  EXPECT_TRUE(InferShapes(*g, {}).ok());
}

TEST(OnnxImportTest, Ir3InitializersListedAsInputsAreParamsOnce) {
  OnnxModel m(/*opset=*/8, /*ir_version=*/3);
  m.Input("x", TensorProto::FLOAT, {2, 3});
  m.Input("W", TensorProto::FLOAT, {3, 4});  // IR < 4: initializers are listed as inputs too
  m.FloatInit("W", {3, 4});
  m.Node("MatMul", {"x", "W"}, {"y"});
  m.Output("y");
  absl::StatusOr<Graph> g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->FindVersions("W").size(), 1u);
  EXPECT_EQ(ValueNamed(*g, "W").role, Role::kParam);
  int listed = 0;
  for (ValueId id : g->inputs()) listed += g->value(id).name == "W";
  EXPECT_EQ(listed, 1);
  EXPECT_EQ(ValueNamed(*g, "y").type, Type(DataType::kFloat32, {2, 4}));
}

// An IR 3 input that declares its initializer otherwise than the data holds: the data fixes the
// type, and the contradiction is an error naming both (it was silently overruled).
TEST(OnnxImportTest, Ir3InputDeclaredOtherwiseThanItsInitializerIsRefused) {
  for (const bool other_type : {false, true}) {
    SCOPED_TRACE(other_type);
    OnnxModel m(/*opset=*/8, /*ir_version=*/3);
    m.Input("x", TensorProto::FLOAT, {2, 64});
    m.Input("W", other_type ? TensorProto::DOUBLE : TensorProto::FLOAT,
            other_type ? std::vector<Dim>{64, 128} : std::vector<Dim>{3, 3});
    m.FloatInit("W", {64, 128});
    m.Node("MatMul", {"x", "W"}, {"y"});
    m.Output("y");
    absl::StatusOr<Graph> g = Import(m);
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(g.status().message()), HasSubstr("graph input 'W' is declared"));
    EXPECT_THAT(std::string(g.status().message()), HasSubstr("its initializer holds FLOAT"));
    EXPECT_THAT(std::string(g.status().message()), HasSubstr("[64,128]"));
  }
}

TEST(OnnxImportTest, AttributesDomainAndNames) {
  OnnxModel m;
  m.Input("x", TensorProto::FLOAT, {1, 2, 5, 5});
  m.FloatInit("w", {4, 2, 3, 3});
  onnx::NodeProto* conv = m.Node("Conv", {"x", "w"}, {"c"});  // unnamed
  AttrInts(conv, "kernel_shape", {3, 3});
  AttrInts(conv, "pads", {1, 1, 1, 1});
  AttrString(conv, "auto_pad", "NOTSET");
  AttrInt(conv, "group", 1);
  onnx::NodeProto* leaky = m.Node("LeakyRelu", {"c"}, {"y"}, "leaky");
  AttrFloat(leaky, "alpha", 0.25f);
  leaky->set_domain("ai.onnx");
  m.Output("y");
  absl::StatusOr<Graph> g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  const Op& c = g->op(0);
  EXPECT_EQ(c.name, "Conv_0");  // named by the builder
  EXPECT_EQ(c.attributes().GetInts("kernel_shape"), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(c.attributes().GetString("auto_pad"), "NOTSET");
  EXPECT_EQ(c.attributes().GetInt("group"), 1);
  const Op& l = g->op(1);
  EXPECT_EQ(l.domain, "ai.onnx");
  EXPECT_DOUBLE_EQ(*l.attributes().GetFloat("alpha"), 0.25);
  EXPECT_EQ(ValueNamed(*g, "y").type, Type(DataType::kFloat32, {1, 4, 5, 5}));
}

TEST(OnnxImportTest, ConvKernelShapeStaysAsWritten) {
  OnnxModel m;
  m.Input("x", TensorProto::FLOAT, {1, 2, 6, 6});
  m.FloatInit("w", {3, 2, 3, 3});
  m.Node("Conv", {"x", "w"}, {"y"}, "conv");  // kernel_shape comes from w
  m.Output("y");
  absl::StatusOr<Graph> g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_FALSE(g->op(0).attributes().Has("kernel_shape"));
  EXPECT_EQ(ValueNamed(*g, "y").type, Type(DataType::kFloat32, {1, 3, 4, 4}));

  m.graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->
      mutable_dim()->RemoveLast();  // input rank 3, weight rank 4
  g = Import(m);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), AllOf(HasSubstr("Conv node 'conv'"), HasSubstr("rank")));
}

TEST(OnnxImportTest, ConstantNodesBecomeConstantInputs) {
  OnnxModel m;
  m.Input("x", TensorProto::FLOAT, {2, 3});
  TensorProto k;
  k.set_data_type(TensorProto::FLOAT);
  k.add_dims(3);
  for (float v : {1.f, 2.f, 3.f}) k.add_float_data(v);
  AttrTensor(m.Node("Constant", {}, {"k"}, "const_k"), "value", k);
  m.Node("Mul", {"x", "k"}, {"y"});
  m.Output("y");
  absl::StatusOr<Graph> g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->num_ops(), 1);  // the Constant node is not an op
  const Value& kv = ValueNamed(*g, "k");
  EXPECT_EQ(kv.role, Role::kConstant);
  EXPECT_EQ(kv.producer, kNone);
  EXPECT_EQ(kv.type, Type(DataType::kFloat32, {3}));
}

TEST(OnnxImportTest, OmittedOptionalInputsAreDroppedWithTheirSlotsRecorded) {
  OnnxModel m;
  m.Input("x", TensorProto::FLOAT, {4});
  TensorProto hi;
  hi.set_data_type(TensorProto::FLOAT);
  hi.add_float_data(6.f);
  AttrTensor(m.Node("Constant", {}, {"hi"}), "value", hi);
  m.Node("Clip", {"x", "", "hi"}, {"y"}, "clip");  // min omitted, max given
  m.Output("y");
  absl::StatusOr<Graph> g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  const Op* clip = OpOfType(*g, "Clip");
  ASSERT_NE(clip, nullptr);
  EXPECT_EQ(clip->inputs.size(), 2u);
  EXPECT_EQ(clip->attributes().GetInts("onnx_input_slots"), (std::vector<int64_t>{0, 2}));
}

TEST(OnnxImportTest, NodesOutOfOrderAreSorted) {
  OnnxModel m;
  m.Input("x", TensorProto::FLOAT, {3});
  m.Node("Relu", {"h"}, {"y"}, "second");
  m.Node("Neg", {"x"}, {"h"}, "first");
  m.Output("y");
  absl::StatusOr<Graph> g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(ValueNamed(*g, "y").type, Type(DataType::kFloat32, {3}));
}

// ---------------------------------------------------------------------------------------------
// Shape bindings.

OnnxModel SymbolicModel() {
  OnnxModel m;
  m.Input("x", TensorProto::FLOAT, {"N", 3});
  m.Input("z", TensorProto::FLOAT, {"N", 3});
  m.Node("Add", {"x", "z"}, {"s"});
  m.Node("Relu", {"s"}, {"y"});
  m.Output("y", TensorProto::FLOAT, {"N", 3});
  return m;
}

// What --fit and ranges import at each binding: the model without its large weights, the same
// net for planning where nothing folds them; a fold that reads a weight makes the nets differ
// (the caller then keeps the weights), and a weight whose data is malformed is refused first.
TEST(OnnxImportTest, PlanningBytesImportToTheSameNetWithoutTheWeights) {
  OnnxModel m;
  m.Input("x", TensorProto::FLOAT, {"N", 8});
  m.FloatInit("W", {8, 8}, 0.5f).FloatInit("B", {8});
  m.Node("MatMul", {"x", "W"}, {"h"});
  m.Node("Add", {"h", "B"}, {"y"});
  m.Output("y");
  const std::string bytes = m.Bytes();
  LoadOptions options;
  ASSERT_TRUE(ParseDimBinding("N=3", options.bindings).ok());
  absl::StatusOr<std::string> planning = PlanningBytes(bytes, "m.onnx", options);
  ASSERT_TRUE(planning.ok()) << planning.status();
  EXPECT_LT(planning->size() + 64 * sizeof(float) / 2, bytes.size());
  absl::StatusOr<Graph> full = LoadModelBytes(bytes, "m.onnx", options);
  absl::StatusOr<Graph> stripped = LoadModelBytes(*planning, "m.onnx", options);
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_TRUE(stripped.ok()) << stripped.status();
  EXPECT_TRUE(SamePlanningGraph(*full, *stripped));
  EXPECT_EQ(ValueNamed(*stripped, "W").type, Type(DataType::kFloat32, {8, 8}));
  // Another binding is another net.
  LoadOptions other = options;
  other.bindings.dims["N"] = 4;
  absl::StatusOr<Graph> at_4 = LoadModelBytes(*planning, "m.onnx", other);
  ASSERT_TRUE(at_4.ok()) << at_4.status();
  EXPECT_FALSE(SamePlanningGraph(*full, *at_4));
  // Other formats are read as they are.
  absl::StatusOr<std::string> text = PlanningBytes("name: \"n\"", "n.pbtxt", options);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "name: \"n\"");

  // Inference folds a Transpose of the weight into a param: without the data it cannot.
  OnnxModel folded;
  folded.Input("x", TensorProto::FLOAT, {"N", 8});
  folded.FloatInit("W", {8, 8}, 0.5f);
  folded.Node("Transpose", {"W"}, {"Wt"});
  folded.Node("MatMul", {"x", "Wt"}, {"y"});
  folded.Output("y");
  absl::StatusOr<std::string> folded_planning = PlanningBytes(folded.Bytes(), "f.onnx", options);
  ASSERT_TRUE(folded_planning.ok()) << folded_planning.status();
  absl::StatusOr<Graph> folded_full = LoadModelBytes(folded.Bytes(), "f.onnx", options);
  ASSERT_TRUE(folded_full.ok()) << folded_full.status();
  EXPECT_EQ(OpOfType(*folded_full, "Transpose"), nullptr);
  absl::StatusOr<Graph> folded_stripped = LoadModelBytes(*folded_planning, "f.onnx", options);
  EXPECT_FALSE(folded_stripped.ok() && SamePlanningGraph(*folded_full, *folded_stripped));

  OnnxModel bad = m;
  TensorProto* w = bad.graph()->mutable_initializer(0);
  w->clear_float_data();
  w->set_raw_data(std::string(7, '\0'));  // not 64 floats
  absl::StatusOr<std::string> refused = PlanningBytes(bad.Bytes(), "bad.onnx", options);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("initializer 'W'"));
}

TEST(OnnxImportTest, SymbolBoundByDim) {
  ShapeBindings b;
  ASSERT_TRUE(ParseDimBinding("N=5", b).ok());
  absl::StatusOr<Graph> g = Import(SymbolicModel(), b);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(ValueNamed(*g, "x").type, Type(DataType::kFloat32, {5, 3}));
  EXPECT_EQ(ValueNamed(*g, "y").type, Type(DataType::kFloat32, {5, 3}));
  // The declaration keeps the symbol.
  ASSERT_TRUE(ValueNamed(*g, "x").declared.dims.has_value());
  EXPECT_EQ(ValueNamed(*g, "x").declared.dims->at(0).symbol, "N");
}

TEST(OnnxImportTest, InputShapeBindsItsSymbolsEverywhere) {
  ShapeBindings b;
  ASSERT_TRUE(ParseInputShapeBinding("x=7,3", b).ok());
  absl::StatusOr<Graph> g = Import(SymbolicModel(), b);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(ValueNamed(*g, "x").type, Type(DataType::kFloat32, {7, 3}));
  EXPECT_EQ(ValueNamed(*g, "z").type, Type(DataType::kFloat32, {7, 3}));  // N = 7 through x
  EXPECT_EQ(ValueNamed(*g, "y").type, Type(DataType::kFloat32, {7, 3}));
}

TEST(OnnxImportTest, InputShapeReplacesConcreteDims) {
  OnnxModel m;
  m.Input("x", TensorProto::FLOAT, {1, 3});
  m.Node("Relu", {"x"}, {"y"});
  m.Output("y");
  ShapeBindings b;
  ASSERT_TRUE(ParseInputShapeBinding("x=8,3", b).ok());
  absl::StatusOr<Graph> g = Import(m, b);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(ValueNamed(*g, "y").type, Type(DataType::kFloat32, {8, 3}));
}

TEST(OnnxImportTest, UnboundSymbolIsNamed) {
  absl::StatusOr<Graph> g = Import(SymbolicModel());
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(),
              AllOf(HasSubstr("test.onnx"), HasSubstr("graph input 'x'"), HasSubstr("'N'"),
                    HasSubstr("--dim N=")));
}

TEST(OnnxImportTest, UnboundSymbolInValueInfoIsNamed) {
  OnnxModel m;
  m.Input("x", TensorProto::FLOAT, {2, 3});
  m.Node("Relu", {"x"}, {"y"});
  // A custom op whose output only the value_info describes, with a symbol nobody binds.
  auto* op = m.proto().add_opset_import();
  op->set_domain("com.example");
  op->set_version(1);
  onnx::NodeProto* custom = m.Node("Mystery", {"y"}, {"z"}, "mystery");
  custom->set_domain("com.example");
  m.ValueInfo("z", TensorProto::FLOAT, {"T", 3});
  m.Output("z");
  absl::StatusOr<Graph> g = Import(m);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), AllOf(HasSubstr("'z'"), HasSubstr("'T'"), HasSubstr("--dim T=")));

  ShapeBindings b;
  ASSERT_TRUE(ParseDimBinding("T=4", b).ok());
  absl::StatusOr<Graph> bound = Import(m, b);
  ASSERT_TRUE(bound.ok()) << bound.status();
  EXPECT_EQ(ValueNamed(*bound, "z").type, Type(DataType::kFloat32, {4, 3}));
  EXPECT_EQ(OpOfType(*bound, "Mystery")->domain, "com.example");
}

TEST(OnnxImportTest, OpWithoutSchemaAndWithoutDeclaredTypeIsUnimplemented) {
  OnnxModel m;
  m.Input("x", TensorProto::FLOAT, {2});
  auto* op = m.proto().add_opset_import();
  op->set_domain("com.example");
  op->set_version(1);
  m.Node("Mystery", {"x"}, {"y"}, "m1")->set_domain("com.example");
  m.Output("y");
  absl::StatusOr<Graph> g = Import(m);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(g.status().message(),
              AllOf(HasSubstr("'y'"), HasSubstr("Mystery node 'm1'"), HasSubstr("no schema")));
}

TEST(OnnxImportTest, DomainWithoutOpsetImportIsInvalid) {
  OnnxModel m;
  m.Input("x", TensorProto::FLOAT, {2});
  m.Node("Mystery", {"x"}, {"y"}, "m1")->set_domain("com.example");
  m.Output("y");
  absl::StatusOr<Graph> g = Import(m);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(),
              AllOf(HasSubstr("Mystery node 'm1'"), HasSubstr("'com.example'"),
                    HasSubstr("opset_import")));
}

TEST(OnnxImportTest, ModelLocalFunctionIsOneOp) {
  OnnxModel m;
  auto* op = m.proto().add_opset_import();
  op->set_domain("local");
  op->set_version(1);
  onnx::FunctionProto* f = m.proto().add_functions();
  f->set_name("DoubleRelu");
  f->set_domain("local");
  f->add_input("a");
  f->add_output("b");
  f->add_opset_import()->set_version(13);
  onnx::NodeProto* body = f->add_node();
  body->set_op_type("Relu");
  body->add_input("a");
  body->add_output("t");
  onnx::NodeProto* body2 = f->add_node();
  body2->set_op_type("Add");
  body2->add_input("t");
  body2->add_input("t");
  body2->add_output("b");
  m.Input("x", TensorProto::FLOAT, {2, 5});
  m.Node("DoubleRelu", {"x"}, {"y"}, "fn")->set_domain("local");
  m.Output("y");
  absl::StatusOr<Graph> g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->num_ops(), 1);
  EXPECT_EQ(g->op(0).domain, "local");
  EXPECT_EQ(ValueNamed(*g, "y").type, Type(DataType::kFloat32, {2, 5}));
}

TEST(OnnxImportTest, InputDimWithoutSizeIsNamed) {
  OnnxModel m;
  m.Input("x", TensorProto::FLOAT, {3, Dim::Unknown()});
  m.Node("Relu", {"x"}, {"y"});
  m.Output("y");
  absl::StatusOr<Graph> g = Import(m);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), AllOf(HasSubstr("graph input 'x'"), HasSubstr("dim 1")));

  m.graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  g = Import(m);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), AllOf(HasSubstr("'x'"), HasSubstr("no shape")));
}

struct BindingErrorCase {
  std::string label;
  std::string binding;     // --input-shape
  std::string expected;    // in the message
};

void PrintTo(const BindingErrorCase& c, std::ostream* os) { *os << c.label; }

class OnnxBindingErrorTest : public ::testing::TestWithParam<BindingErrorCase> {};

TEST_P(OnnxBindingErrorTest, IsInvalidArgument) {
  ShapeBindings b;
  ASSERT_TRUE(ParseInputShapeBinding(GetParam().binding, b).ok());
  OnnxModel m = SymbolicModel();
  m.FloatInit("W", {3});
  absl::StatusOr<Graph> g = Import(m, b);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr(GetParam().expected));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, OnnxBindingErrorTest,
    ::testing::Values(
        BindingErrorCase{"rank_mismatch", /*binding=*/"x=2,3,4", /*expected=*/"rank"},
        BindingErrorCase{"not_an_input", /*binding=*/"nope=1", /*expected=*/"not a graph input"},
        BindingErrorCase{"initializer", /*binding=*/"W=3", /*expected=*/"initializer"}),
    [](const auto& info) { return info.param.label; });

// ---------------------------------------------------------------------------------------------
// Graph inputs without a type take the one their readers' schemas fix.

// x (untyped) -> MatMul with a float weight; idx (untyped) -> Gather indices; cond (untyped) ->
// Where's condition.
OnnxModel UntypedInputsModel() {
  OnnxModel m;
  m.UntypedInput("x").UntypedInput("idx").UntypedInput("cond");
  m.FloatInit("W", {3, 4}).FloatInit("table", {10, 4});
  m.Node("MatMul", {"x", "W"}, {"h"}, "mm");
  m.Node("Gather", {"table", "idx"}, {"rows"}, "gather");
  m.Node("Where", {"cond", "h", "rows"}, {"y"}, "where");
  m.Output("y");
  return m;
}

ShapeBindings UntypedShapes() {
  ShapeBindings b;
  EXPECT_TRUE(ParseInputShapeBinding("x=2,3", b).ok());
  EXPECT_TRUE(ParseInputShapeBinding("idx=2", b).ok());
  EXPECT_TRUE(ParseInputShapeBinding("cond=2,4", b).ok());
  return b;
}

TEST(OnnxInputTypesTest, UntypedInputsTakeTheTypeTheirReadersFix) {
  absl::StatusOr<Graph> g = Import(UntypedInputsModel(), UntypedShapes());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(ValueNamed(*g, "x").type, Type(DataType::kFloat32, {2, 3}));
  EXPECT_EQ(ValueNamed(*g, "idx").type, Type(DataType::kInt64, {2}));  // int32 or int64
  EXPECT_EQ(ValueNamed(*g, "cond").type, Type(DataType::kBool, {2, 4}));
  EXPECT_EQ(ValueNamed(*g, "y").type, Type(DataType::kFloat32, {2, 4}));
}

TEST(OnnxInputTypesTest, InputTypeOverridesTheReadersAndTheDeclaration) {
  ShapeBindings b = UntypedShapes();
  ASSERT_TRUE(ParseInputTypeBinding("idx=int32", b).ok());
  absl::StatusOr<Graph> g = Import(UntypedInputsModel(), b);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(ValueNamed(*g, "idx").type, Type(DataType::kInt32, {2}));

  // A declared float16 input, read by a float32 MatMul, typed float32 by the flag.
  OnnxModel m;
  m.Input("x", TensorProto::FLOAT16, {2, 3}).FloatInit("W", {3, 4});
  m.Node("MatMul", {"x", "W"}, {"y"}, "mm");
  m.Output("y");
  ShapeBindings f32;
  ASSERT_TRUE(ParseInputTypeBinding("x=float32", f32).ok());
  absl::StatusOr<Graph> typed = Import(m, f32);
  ASSERT_TRUE(typed.ok()) << typed.status();
  EXPECT_EQ(ValueNamed(*typed, "x").type, Type(DataType::kFloat32, {2, 3}));
  // Without the flag the declaration stands.
  absl::StatusOr<Graph> declared = Import(m);
  ASSERT_TRUE(declared.ok()) << declared.status();
  EXPECT_EQ(ValueNamed(*declared, "x").type, Type(DataType::kFloat16, {2, 3}));
}

TEST(OnnxInputTypesTest, ReadersWithoutACommonTypeAreNamed) {
  OnnxModel m;
  m.UntypedInput("v").FloatInit("table", {10, 4});
  m.Node("Gather", {"table", "v"}, {"rows"}, "gather");  // v: int32 or int64
  m.Node("Relu", {"v"}, {"r"}, "relu");                   // v: floating point
  m.Output("rows").Output("r");
  ShapeBindings b;
  ASSERT_TRUE(ParseInputShapeBinding("v=2", b).ok());
  absl::StatusOr<Graph> g = Import(m, b);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(),
              AllOf(HasSubstr("'v' declares no type"), HasSubstr("Gather node 'gather' (input 1)"),
                    HasSubstr("Relu node 'relu' (input 0)"), HasSubstr("--input-type v=")));
  // The flag settles it.
  ASSERT_TRUE(ParseInputTypeBinding("v=int64", b).ok());
  absl::StatusOr<Graph> typed = Import(m, b);
  ASSERT_TRUE(typed.ok()) << typed.status();
  EXPECT_EQ(ValueNamed(*typed, "v").type, Type(DataType::kInt64, {2}));
}

TEST(OnnxInputTypesTest, InputTypeForANameThatIsNotAnInputIsRefused) {
  for (const char* binding : {"nope=int32", "W=float16"}) {
    SCOPED_TRACE(binding);
    ShapeBindings b = UntypedShapes();
    ASSERT_TRUE(ParseInputTypeBinding(binding, b).ok());
    OnnxModel m = UntypedInputsModel();
    m.FloatInit("W2", {1});
    absl::StatusOr<Graph> g = Import(m, b);
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(g.status().message(),
                HasSubstr(binding[0] == 'W' ? "initializer" : "not a graph input"));
  }
}

TEST(OnnxInputTypesTest, UntypedInputWithoutAShapeAsksForOne) {
  absl::StatusOr<Graph> g = Import(UntypedInputsModel());
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("declares no shape; pass --input-shape x="));
}

TEST(OnnxImportTest, ConflictingSymbolFromTwoInputs) {
  ShapeBindings b;
  ASSERT_TRUE(ParseInputShapeBinding("x=2,3", b).ok());
  ASSERT_TRUE(ParseInputShapeBinding("z=4,3", b).ok());
  absl::StatusOr<Graph> g = Import(SymbolicModel(), b);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), AllOf(HasSubstr("'N'"), HasSubstr("--input-shape")));
}

// ---------------------------------------------------------------------------------------------
// Folding shape subgraphs.

// x[B, S, 8] -> Reshape(x, [B, -1, 8 / 2]) = [B, 2 S, 4] where the target is computed from Shape(x):
// Shape -> Gather -> Unsqueeze -> Concat (with a Div that libonnx's data propagation does not
// cover) -> Reshape.
OnnxModel ShapeChainModel(const std::vector<Dim>& x_dims) {
  OnnxModel m;
  m.Input("x", TensorProto::FLOAT, x_dims);
  m.IntInit("i0", {0}, /*scalar=*/true).IntInit("i2", {2}, /*scalar=*/true);
  m.IntInit("two", {2}, /*scalar=*/true).IntInit("minus1", {-1}).IntInit("axes0", {0});
  m.Node("Shape", {"x"}, {"shape"}, "shape");
  m.Node("Gather", {"shape", "i0"}, {"batch"}, "g0");
  m.Node("Gather", {"shape", "i2"}, {"width"}, "g2");
  m.Node("Div", {"width", "two"}, {"half"}, "div");
  m.Node("Unsqueeze", {"batch", "axes0"}, {"batch1"}, "u0");
  m.Node("Unsqueeze", {"half", "axes0"}, {"half1"}, "u2");
  AttrInt(m.Node("Concat", {"batch1", "minus1", "half1"}, {"target"}, "concat"), "axis", 0);
  m.Node("Reshape", {"x", "target"}, {"r"}, "reshape");
  m.Node("Relu", {"r"}, {"y"}, "relu");
  m.Output("y");
  return m;
}

TEST(OnnxImportTest, LibonnxAloneLeavesTheShapeChainUnknown) {
  OnnxModel m = ShapeChainModel({2, 3, 8});
  ASSERT_TRUE(onnx_fold::RunOnnxShapeInference(m.proto(), /*strict=*/false).ok());
  bool reshape_static = false;
  for (const onnx::ValueInfoProto& vi : m.graph()->value_info()) {
    if (vi.name() == "r") reshape_static = onnx_fold::StaticDims(vi.type()).has_value();
  }
  EXPECT_FALSE(reshape_static) << "the fold path is not exercised: libonnx resolves it alone";
}

TEST(OnnxImportTest, ShapeChainIsFolded) {
  ShapeBindings b;
  ASSERT_TRUE(ParseDimBinding("B=2", b).ok());
  ASSERT_TRUE(ParseDimBinding("S=3", b).ok());
  absl::StatusOr<Graph> g = Import(ShapeChainModel({"B", "S", 8}), b);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(ValueNamed(*g, "r").type, Type(DataType::kFloat32, {2, 6, 4}));
  EXPECT_EQ(ValueNamed(*g, "y").type, Type(DataType::kFloat32, {2, 6, 4}));
  // The shape arithmetic is gone; its result is a constant feeding the Reshape.
  EXPECT_EQ(g->num_ops(), 2);
  const Op* reshape = OpOfType(*g, "Reshape");
  ASSERT_NE(reshape, nullptr);
  const Value& target = g->value(reshape->inputs[1]);
  EXPECT_EQ(target.name, "target");
  EXPECT_EQ(target.role, Role::kConstant);
  EXPECT_EQ(target.type, Type(DataType::kInt64, {3}));
  EXPECT_FALSE(g->FindValue("shape").has_value());
}

// The shape chain folds into a constant that holds B ([B, -1, 4]): the retyper made from the
// imports at B = 1 and 2 gives the import at B = 7, its folded target included.
TEST(RetyperTest, RetypesTheImportAtAThirdBinding) {
  auto at = [](int64_t batch) {
    ShapeBindings b;
    b.dims["B"] = batch;
    b.dims["S"] = 3;
    return b;
  };
  const OnnxModel m = ShapeChainModel({"B", "S", 8});
  absl::StatusOr<Graph> at_1 = Import(m, at(1)), at_2 = Import(m, at(2)), at_7 = Import(m, at(7));
  ASSERT_TRUE(at_1.ok() && at_2.ok() && at_7.ok());
  EXPECT_FALSE(SameNetButTypes(*at_1, *at_2));  // the folded targets differ
  absl::StatusOr<Retyper> retyper = Retyper::Make(*at_1, *at_2, "B", 1, 2, at(2));
  ASSERT_TRUE(retyper.ok()) << retyper.status();
  absl::StatusOr<Graph> retyped = retyper->At(at(7));
  ASSERT_TRUE(retyped.ok()) << retyped.status();
  EXPECT_TRUE(SamePlanningGraph(*retyped, *at_7));
  EXPECT_TRUE(SameNetButTypes(*retyped, *at_7));
  EXPECT_EQ(ValueNamed(*retyped, "y").type, Type(DataType::kFloat32, {7, 6, 4}));
  // Two different nets make none; nor do two imports at one value.
  absl::StatusOr<Graph> other = Import(LinearModel());
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(Retyper::Make(*at_1, *other, "B", 1, 2, at(2)).ok());
  EXPECT_FALSE(Retyper::Make(*at_1, *at_1, "B", 1, 1, at(1)).ok());
}

TEST(OnnxImportTest, InferAndFoldReportsWhatItFolded) {
  OnnxModel m = ShapeChainModel({2, 3, 8});
  absl::StatusOr<onnx_fold::FoldReport> report =
      onnx_fold::InferAndFold(m.proto(), onnx_fold::FoldOptions{});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->folded_values, std::vector<std::string>{"target"});
  EXPECT_EQ(report->removed_nodes, 7);  // Shape, 2 Gather, Div, 2 Unsqueeze, Concat
  EXPECT_EQ(report->inference_runs, 2);
}

// A transformer attention block whose head split is computed from the input's shape.
OnnxModel AttentionModel() {
  OnnxModel m;
  m.Input("x", TensorProto::FLOAT, {"batch", "seq", 16});
  for (const char* w : {"Wq", "Wk", "Wv", "Wo"}) m.FloatInit(w, {16, 16}, 0.1f);
  m.IntInit("i0", {0}, true).IntInit("i1", {1}, true).IntInit("axes0", {0});
  m.IntInit("heads", {2, 8}).IntInit("hidden", {16});
  TensorProto scale;
  scale.set_data_type(TensorProto::FLOAT);
  scale.add_float_data(std::sqrt(8.f));
  AttrTensor(m.Node("Constant", {}, {"scale"}), "value", scale);
  m.Node("Shape", {"x"}, {"xs"});
  m.Node("Gather", {"xs", "i0"}, {"b"});
  m.Node("Gather", {"xs", "i1"}, {"s"});
  m.Node("Unsqueeze", {"b", "axes0"}, {"b1"});
  m.Node("Unsqueeze", {"s", "axes0"}, {"s1"});
  AttrInt(m.Node("Concat", {"b1", "s1", "heads"}, {"split_shape"}), "axis", 0);
  AttrInt(m.Node("Concat", {"b1", "s1", "hidden"}, {"merge_shape"}), "axis", 0);
  for (const char* p : {"q", "k", "v"}) {
    const std::string name(p);
    std::string w = "W" + name;
    m.Node("MatMul", {"x", w}, {name + "_proj"});
    m.Node("Reshape", {name + "_proj", "split_shape"}, {name + "_heads"});
  }
  AttrInts(m.Node("Transpose", {"q_heads"}, {"qt"}), "perm", {0, 2, 1, 3});
  AttrInts(m.Node("Transpose", {"k_heads"}, {"kt"}), "perm", {0, 2, 3, 1});
  AttrInts(m.Node("Transpose", {"v_heads"}, {"vt"}), "perm", {0, 2, 1, 3});
  m.Node("MatMul", {"qt", "kt"}, {"scores"});
  m.Node("Div", {"scores", "scale"}, {"scaled"});
  AttrInt(m.Node("Softmax", {"scaled"}, {"probs"}), "axis", -1);
  m.Node("MatMul", {"probs", "vt"}, {"ctx"});
  AttrInts(m.Node("Transpose", {"ctx"}, {"ctx_t"}), "perm", {0, 2, 1, 3});
  m.Node("Reshape", {"ctx_t", "merge_shape"}, {"merged"});
  m.Node("MatMul", {"merged", "Wo"}, {"out"});
  m.Output("out");
  return m;
}

TEST(OnnxImportTest, AttentionBlockResolves) {
  ShapeBindings b;
  ASSERT_TRUE(ParseDimBinding("batch=2", b).ok());
  ASSERT_TRUE(ParseDimBinding("seq=5", b).ok());
  absl::StatusOr<Graph> g = Import(AttentionModel(), b);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(ValueNamed(*g, "scores").type, Type(DataType::kFloat32, {2, 2, 5, 5}));
  EXPECT_EQ(ValueNamed(*g, "probs").type, Type(DataType::kFloat32, {2, 2, 5, 5}));
  EXPECT_EQ(ValueNamed(*g, "out").type, Type(DataType::kFloat32, {2, 5, 16}));
  EXPECT_EQ(ValueNamed(*g, "scale").role, Role::kConstant);
  EXPECT_TRUE(InferShapes(*g, b).ok());
}

// ---------------------------------------------------------------------------------------------
// The evaluator, one op at a time.

onnx_fold::ConstTensor Ints(std::vector<int64_t> dims, std::vector<int64_t> values,
                            int32_t dtype = TensorProto::INT64) {
  onnx_fold::ConstTensor t;
  t.dtype = dtype;
  t.dims = std::move(dims);
  t.ints = std::move(values);
  return t;
}

struct EvalCase {
  std::string label;
  std::string op;
  std::vector<std::pair<std::string, std::vector<int64_t>>> int_attrs;
  std::vector<onnx_fold::ConstTensor> inputs;
  std::vector<int64_t> expected_dims;
  std::vector<int64_t> expected;  // empty with expected_dims {-1}: not foldable
};

void PrintTo(const EvalCase& c, std::ostream* os) { *os << c.label; }

class OnnxFoldEvalTest : public ::testing::TestWithParam<EvalCase> {};

TEST_P(OnnxFoldEvalTest, Evaluates) {
  const EvalCase& c = GetParam();
  onnx::NodeProto node;
  node.set_op_type(c.op);
  node.add_output("out");
  for (size_t i = 0; i < c.inputs.size(); ++i) node.add_input(absl::StrCat("in", i));
  for (const auto& [name, values] : c.int_attrs) {
    const bool list = name == "axes" || name == "perm" || name == "starts" || name == "ends";
    if (values.size() == 1 && !list) {
      AttrInt(&node, name, values[0]);
    } else {
      AttrInts(&node, name, values);
    }
  }
  std::vector<onnx_fold::FoldInput> inputs(c.inputs.size());
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    inputs[i].present = true;
    inputs[i].value = &c.inputs[i];
    inputs[i].dims = &c.inputs[i].dims;
  }
  auto result = onnx_fold::EvaluateNode(node, inputs, /*max_elements=*/1000);
  if (c.expected_dims == std::vector<int64_t>{-1}) {
    EXPECT_FALSE(result.has_value());
    return;
  }
  ASSERT_TRUE(result.has_value());
  ASSERT_EQ(result->size(), 1u);
  EXPECT_EQ(result->at(0).dims, c.expected_dims);
  EXPECT_EQ(result->at(0).ints, c.expected);
}

INSTANTIATE_TEST_SUITE_P(
    Ops, OnnxFoldEvalTest,
    ::testing::Values(
        EvalCase{"shape", "Shape", {}, {Ints({2, 3, 4}, std::vector<int64_t>(24, 0))},
                 {3}, {2, 3, 4}},
        EvalCase{"shape_start_end", "Shape", {{"start", {1}}, {"end", {-1}}},
                 {Ints({2, 3, 4}, std::vector<int64_t>(24, 0))}, {1}, {3}},
        EvalCase{"size", "Size", {}, {Ints({2, 3}, std::vector<int64_t>(6, 0))}, {}, {6}},
        EvalCase{"gather_scalar", "Gather", {}, {Ints({3}, {5, 6, 7}), Ints({}, {-1})}, {}, {7}},
        EvalCase{"gather_axis1", "Gather", {{"axis", {1}}},
                 {Ints({2, 3}, {1, 2, 3, 4, 5, 6}), Ints({2}, {2, 0})}, {2, 2}, {3, 1, 6, 4}},
        EvalCase{"gather_out_of_range", "Gather", {}, {Ints({3}, {5, 6, 7}), Ints({}, {3})},
                 {-1}, {}},
        EvalCase{"slice_inputs", "Slice", {},
                 {Ints({5}, {0, 1, 2, 3, 4}), Ints({1}, {1}), Ints({1}, {INT64_MAX})}, {4},
                 {1, 2, 3, 4}},
        EvalCase{"slice_negative_step", "Slice", {},
                 {Ints({5}, {0, 1, 2, 3, 4}), Ints({1}, {-1}), Ints({1}, {INT64_MIN}),
                  Ints({1}, {0}), Ints({1}, {-2})},
                 {3}, {4, 2, 0}},
        EvalCase{"slice_opset1_attrs", "Slice", {{"starts", {0}}, {"ends", {-1}}, {"axes", {1}}},
                 {Ints({2, 3}, {1, 2, 3, 4, 5, 6})}, {2, 2}, {1, 2, 4, 5}},
        EvalCase{"concat", "Concat", {{"axis", {0}}}, {Ints({1}, {2}), Ints({2}, {-1, 4})}, {3},
                 {2, -1, 4}},
        EvalCase{"unsqueeze_input_axes", "Unsqueeze", {}, {Ints({}, {7}), Ints({1}, {0})}, {1},
                 {7}},
        EvalCase{"unsqueeze_attr_axes", "Unsqueeze", {{"axes", {0, -1}}}, {Ints({2}, {1, 2})},
                 {1, 2, 1}, {1, 2}},
        EvalCase{"squeeze_all", "Squeeze", {}, {Ints({1, 2, 1}, {3, 4})}, {2}, {3, 4}},
        EvalCase{"reshape_zero_and_infer", "Reshape", {},
                 {Ints({2, 3}, {1, 2, 3, 4, 5, 6}), Ints({2}, {0, -1})}, {2, 3},
                 {1, 2, 3, 4, 5, 6}},
        EvalCase{"div_truncates", "Div", {}, {Ints({2}, {7, -7}), Ints({}, {2})}, {2}, {3, -3}},
        EvalCase{"mod_sign_of_divisor", "Mod", {}, {Ints({}, {-7}), Ints({}, {3})}, {}, {2}},
        EvalCase{"mul_broadcast", "Mul", {}, {Ints({2, 1}, {1, 2}), Ints({3}, {1, 10, 100})},
                 {2, 3}, {1, 10, 100, 2, 20, 200}},
        EvalCase{"mul_overflow", "Mul", {}, {Ints({}, {INT64_MAX}), Ints({}, {2})}, {-1}, {}},
        EvalCase{"equal", "Equal", {}, {Ints({3}, {1, 2, 3}), Ints({}, {2})}, {3}, {0, 1, 0}},
        EvalCase{"where", "Where", {},
                 {Ints({3}, {1, 0, 1}, TensorProto::BOOL), Ints({3}, {1, 2, 3}),
                  Ints({}, {-1})},
                 {3}, {1, -1, 3}},
        EvalCase{"range", "Range", {}, {Ints({}, {10}), Ints({}, {1}), Ints({}, {-3})}, {3},
                 {10, 7, 4}},
        EvalCase{"range_too_large", "Range", {}, {Ints({}, {0}), Ints({}, {1000000}),
                                                  Ints({}, {1})},
                 {-1}, {}},
        EvalCase{"reduce_prod", "ReduceProd", {{"keepdims", {0}}}, {Ints({3}, {2, 3, 4})}, {},
                 {24}},
        EvalCase{"cast_to_int32", "Cast", {{"to", {TensorProto::INT32}}},
                 {Ints({2}, {1, int64_t{1} << 33})}, {2}, {1, 0}},
        EvalCase{"constant_of_shape_too_large", "ConstantOfShape", {},
                 {Ints({2}, {100000, 100000})}, {-1}, {}},
        EvalCase{"expand", "Expand", {}, {Ints({1}, {5}), Ints({2}, {2, 2})}, {2, 2},
                 {5, 5, 5, 5}},
        EvalCase{"tile", "Tile", {}, {Ints({2}, {1, 2}), Ints({1}, {2})}, {4}, {1, 2, 1, 2}},
        EvalCase{"transpose", "Transpose", {{"perm", {1, 0}}},
                 {Ints({2, 3}, {1, 2, 3, 4, 5, 6})}, {3, 2}, {1, 4, 2, 5, 3, 6}},
        EvalCase{"unknown_op", "Relu6", {}, {Ints({1}, {1})}, {-1}, {}}),
    [](const auto& info) { return info.param.label; });

TEST(OnnxFoldTest, TensorRoundTripThroughRawData) {
  TensorProto raw;
  raw.set_data_type(TensorProto::INT32);
  raw.add_dims(3);
  const int32_t values[] = {7, -1, 42};
  raw.set_raw_data(std::string(reinterpret_cast<const char*>(values), sizeof(values)));
  auto t = onnx_fold::TensorFromProto(raw);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->ints, (std::vector<int64_t>{7, -1, 42}));
  auto back = onnx_fold::TensorFromProto(onnx_fold::TensorToProto(*t, "t"));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->ints, t->ints);
  EXPECT_EQ(back->dims, t->dims);

  raw.set_raw_data("abc");  // wrong byte count
  EXPECT_FALSE(onnx_fold::TensorFromProto(raw).has_value());
  TensorProto huge;
  huge.set_data_type(TensorProto::FLOAT);
  huge.add_dims(int64_t{1} << 40);
  EXPECT_FALSE(onnx_fold::TensorFromProto(huge).has_value());  // not materialised
}

// ---------------------------------------------------------------------------------------------
// Refusals.

// Control flow: onnx_control_flow_test.cc.

TEST(OnnxImportTest, UnsupportedElementTypesAreNamed) {
  for (int32_t elem : {TensorProto::STRING, TensorProto::UINT32, TensorProto::COMPLEX64}) {
    SCOPED_TRACE(elem);
    OnnxModel m;
    m.Input("x", TensorProto::FLOAT, {2});
    AttrInt(m.Node("Cast", {"x"}, {"c"}, "cast"), "to", elem);
    m.Output("c");
    absl::StatusOr<Graph> g = Import(m);
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_THAT(g.status().message(), AllOf(HasSubstr("'c'"), HasSubstr("element type")));
  }
  OnnxModel m;
  m.Input("s", TensorProto::STRING, {2});
  m.Node("Identity", {"s"}, {"y"});
  m.Output("y");
  absl::StatusOr<Graph> g = Import(m);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(g.status().message(), AllOf(HasSubstr("'s'"), HasSubstr("STRING")));
}

TEST(OnnxImportTest, SequencesAreUnimplemented) {
  OnnxModel m(/*opset=*/13);
  m.Input("a", TensorProto::FLOAT, {2});
  m.Input("b", TensorProto::FLOAT, {2});
  m.Node("SequenceConstruct", {"a", "b"}, {"seq"}, "make_seq");
  m.Node("SequenceAt", {"seq", "i"}, {"y"});
  m.IntInit("i", {0}, true);
  m.Output("y");
  absl::StatusOr<Graph> g = Import(m);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(g.status().message(), AllOf(HasSubstr("'seq'"), HasSubstr("sequence")));
}

// A length read from the data has no bound (NonZero's and friends' do: onnx_control_flow_test).
TEST(OnnxImportTest, DataDependentShapeWithoutABoundIsInvalidArgument) {
  OnnxModel m;
  m.Input("limit", TensorProto::INT64, {});
  m.IntInit("start", {0}, /*scalar=*/true).IntInit("delta", {1}, /*scalar=*/true);
  m.Node("Range", {"start", "limit", "delta"}, {"r"}, "range");
  m.Output("r");
  absl::StatusOr<Graph> g = Import(m);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(),
              AllOf(HasSubstr("'r'"), HasSubstr("Range node"), HasSubstr("'limit'")));
}

struct StructureCase {
  std::string label;
  std::function<void(OnnxModel&)> corrupt;
  std::string expected;
};

void PrintTo(const StructureCase& c, std::ostream* os) { *os << c.label; }

class OnnxStructureTest : public ::testing::TestWithParam<StructureCase> {};

// Checked before libonnx sees the graph (an undefined input crashes libonnx 1.12's inference).
TEST_P(OnnxStructureTest, IsInvalidArgument) {
  OnnxModel m = LinearModel();
  GetParam().corrupt(m);
  absl::StatusOr<Graph> g = Import(m);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << g.status();
  EXPECT_THAT(g.status().message(), HasSubstr(GetParam().expected));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, OnnxStructureTest,
    ::testing::Values(
        StructureCase{"undefined_input",
                      [](OnnxModel& m) { m.graph()->mutable_node(1)->set_input(0, "ghost"); },
                      "Add node 'add' reads 'ghost'"},
        StructureCase{"unnamed_graph_input",
                      [](OnnxModel& m) { m.graph()->mutable_input(0)->clear_name(); },
                      "graph input has an empty name"},
        StructureCase{"written_twice",
                      [](OnnxModel& m) { m.graph()->mutable_node(2)->set_output(0, "h"); },
                      "Relu node 'relu' writes 'h'"},
        StructureCase{"overwrites_an_input",
                      [](OnnxModel& m) { m.graph()->mutable_node(0)->set_output(0, "x"); },
                      "writes 'x'"},
        StructureCase{"cycle",
                      [](OnnxModel& m) { m.graph()->mutable_node(0)->set_input(0, "y"); },
                      "cycle"},
        StructureCase{"no_op_type",
                      [](OnnxModel& m) { m.graph()->mutable_node(1)->clear_op_type(); },
                      "no op type"},
        StructureCase{"undefined_output", [](OnnxModel& m) { m.Output("nowhere"); },
                      "graph output 'nowhere'"}),
    [](const auto& info) { return info.param.label; });

TEST(OnnxImportTest, ModelsWithoutGraphOrNodesAreInvalid) {
  onnx::ModelProto no_graph;
  no_graph.set_ir_version(7);
  absl::StatusOr<Graph> g = ImportOnnxBytes(no_graph.SerializeAsString(), {}, "nograph.onnx");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), AllOf(HasSubstr("nograph.onnx"), HasSubstr("no graph")));

  OnnxModel empty;
  empty.Input("x", TensorProto::FLOAT, {1});
  g = Import(empty);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("no nodes"));
}

TEST(OnnxImportTest, FilesThatAreNotOnnxAreInvalidArgument) {
  std::mt19937 rng(1);
  std::string random(4096, '\0');
  for (char& c : random) c = static_cast<char>(rng());
  const std::string valid = AttentionModel().Bytes();
  const struct {
    const char* file;
    std::string contents;
  } cases[] = {
      {"empty.onnx", ""},
      {"random.onnx", random},
      {"truncated.onnx", valid.substr(0, valid.size() / 2)},
      {"text.onnx", "This is a README, not a model.\nIt has two lines.\n"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.file);
    const std::string path = WriteTempFile(c.file, c.contents);
    absl::StatusOr<Graph> g = LoadModel(path, LoadOptions{});
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << g.status();
    EXPECT_THAT(g.status().message(), HasSubstr(path));
  }
}

// libonnx 1.12 types an Einsum's output by its rank alone; our rule (graph/onnx/shape_rules.h)
// gives the dims, as MaxViT's attention ("B G H I D, B G H J D -> B G H I J") needs, and what
// follows the Einsum is typed from them. Operands the equation cannot pair are refused by name.
TEST(OnnxImportTest, EinsumOutputsAreTypedFromTheEquation) {
  OnnxModel m(/*opset=*/17);
  m.Input("q", TensorProto::FLOAT, {2, 3, 4, 8});
  m.Input("k", TensorProto::FLOAT, {2, 3, 6, 8});
  AttrString(m.Node("Einsum", {"q", "k"}, {"s"}, "scores"), "equation", "B H I D, B H J D -> B H I J");
  m.Node("Softmax", {"s"}, {"p"}, "softmax");
  AttrString(m.Node("Einsum", {"p"}, {"t"}, "sum"), "equation", "bhij");
  m.Output("t");
  absl::StatusOr<Graph> g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(ValueNamed(*g, "s").type, Type(DataType::kFloat32, {2, 3, 4, 6}));
  EXPECT_EQ(ValueNamed(*g, "p").type, Type(DataType::kFloat32, {2, 3, 4, 6}));
  EXPECT_EQ(ValueNamed(*g, "t").type, Type(DataType::kFloat32, {2, 3, 4, 6}));

  OnnxModel bad(/*opset=*/17);
  bad.Input("q", TensorProto::FLOAT, {2, 4, 8});
  bad.Input("k", TensorProto::FLOAT, {2, 6, 7});
  AttrString(bad.Node("Einsum", {"q", "k"}, {"s"}, "scores"), "equation", "bid,bjd->bij");
  bad.Output("s");
  g = Import(bad);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << g.status();
  EXPECT_THAT(g.status().message(), HasSubstr("Einsum node 'scores'"));
  EXPECT_THAT(g.status().message(), HasSubstr("do not broadcast"));
}

// Models that crash libonnx 1.12's shape functions (it runs in a child process): a status.
TEST(OnnxImportTest, ModelsThatCrashLibonnxAreInvalidArgument) {
  OnnxModel norm(/*opset=*/17);
  norm.Input("x", TensorProto::FLOAT, {2, 3});
  norm.FloatInit("scale", {3}).FloatInit("bias", {3});
  AttrInt(norm.Node("LayerNormalization", {"x", "scale", "bias"}, {"y", "mean", "inv_std"}, "ln"),
          "axis", -4097);
  norm.Output("y").Output("mean").Output("inv_std");
  OnnxModel einsum(/*opset=*/12);
  einsum.Input("a", TensorProto::FLOAT, {5});
  einsum.Input("b", TensorProto::FLOAT, {5});
  AttrString(einsum.Node("Einsum", {"a", "b"}, {"y"}, "es"), "equation", "i,J");
  einsum.Output("y");
  for (const OnnxModel* m : {&norm, &einsum}) {
    absl::StatusOr<Graph> g = Import(*m);
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << g.status();
    EXPECT_THAT(g.status().message(), HasSubstr("test.onnx"));
  }
}

// Every prefix of a valid model and single-byte corruptions: a status, never a crash.
TEST(OnnxImportTest, CorruptedModelsNeverCrash) {
  const std::string valid = ShapeChainModel({2, 3, 8}).Bytes();
  for (size_t n = 0; n < valid.size(); n += 7) {
    (void)ImportOnnxBytes(valid.substr(0, n), {}, "prefix.onnx");
  }
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    SCOPED_TRACE(trial);
    std::string bytes = valid;
    bytes[rng() % bytes.size()] = static_cast<char>(rng());
    (void)ImportOnnxBytes(bytes, {}, "corrupt.onnx");
  }
}

// ---------------------------------------------------------------------------------------------
// Through LoadModel.

TEST(OnnxImportTest, LoadModelReadsOnnxFiles) {
  const std::string path = AttentionModel().Write("attention.onnx");
  LoadOptions options;
  ASSERT_TRUE(ParseDimBinding("batch=1", options.bindings).ok());
  ASSERT_TRUE(ParseInputShapeBinding("x=1,9,16", options.bindings).ok());
  absl::StatusOr<Graph> g = LoadModel(path, options);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(ValueNamed(*g, "out").type, Type(DataType::kFloat32, {1, 9, 16}));
  EXPECT_TRUE(InferShapes(*g, options.bindings).ok());

  absl::StatusOr<Graph> missing = LoadModel(path + ".missing.onnx", options);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);

  absl::StatusOr<Graph> unbound = LoadModel(path, LoadOptions{});
  ASSERT_FALSE(unbound.ok());
  EXPECT_THAT(unbound.status().message(), AllOf(HasSubstr(path), HasSubstr("'batch'")));
}


// ---------------------------------------------------------------------------------------------
// Declared shapes are hints (the model zoo's first failure): an exporter's own names for output
// dims are unified with what inference computes, never demanded as --dim.

// x [N, 4] -> Gemm(W [3, 4], transB) -> y, declared [Gemmy_dim_0, 3] as torch.onnx.export
// writes an output whose dynamic axes the user did not name; z = Relu(y) declared the same.
OnnxModel ExporterNamedOutputs(const std::vector<Dim>& z_dims) {
  OnnxModel m(17);
  m.Input("x", TensorProto::FLOAT, {"N", 4});
  m.FloatInit("W", {3, 4}, 0.5f);
  AttrInt(m.Node("Gemm", {"x", "W"}, {"y"}, "gemm"), "transB", 1);
  m.Node("Relu", {"y"}, {"z"}, "relu");
  m.Output("y", TensorProto::FLOAT, {"Gemmy_dim_0", 3});
  m.Output("z", TensorProto::FLOAT, z_dims);
  return m;
}

TEST(OnnxImportTest, ExporterNamedOutputDimsAreUnifiedWithInference) {
  ShapeBindings bindings;
  ASSERT_TRUE(ParseDimBinding("N=5", bindings).ok());
  absl::StatusOr<Graph> g = Import(ExporterNamedOutputs({"Gemmy_dim_0", 3}), bindings);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(InferShapes(*g, bindings).ok()) << InferShapes(*g, bindings);
  EXPECT_EQ(ValueNamed(*g, "y").type, Type(DataType::kFloat32, {5, 3}));
  EXPECT_EQ(ValueNamed(*g, "z").type, Type(DataType::kFloat32, {5, 3}));
}

// The symbols that broke real models planned before (tf2onnx's 'unk__315' in value_info,
// paddle2onnx's 'p2o.DynamicDimension.3' on outputs): names, not sizes to bind.
TEST(OnnxImportTest, ConverterNamedDimsInValueInfoAndOutputsNeedNoBinding) {
  OnnxModel m(13);
  m.Input("x", TensorProto::FLOAT, {"p2o.DynamicDimension.0", 4});
  m.FloatInit("W", {4, 3}, 0.5f);
  m.Node("MatMul", {"x", "W"}, {"y"}, "mm");
  m.Node("Sigmoid", {"y"}, {"z"}, "sig");
  m.ValueInfo("y", TensorProto::FLOAT, {"unk__315", 3});
  m.Output("z", TensorProto::FLOAT, {"p2o.DynamicDimension.3", 3});
  ShapeBindings bindings;
  ASSERT_TRUE(ParseDimBinding("p2o.DynamicDimension.0=6", bindings).ok());
  absl::StatusOr<Graph> g = Import(m, bindings);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(InferShapes(*g, bindings).ok()) << InferShapes(*g, bindings);
  EXPECT_EQ(ValueNamed(*g, "z").type, Type(DataType::kFloat32, {6, 3}));
  // The input's own symbol is still the user's to bind.
  absl::StatusOr<Graph> unbound = Import(m);
  ASSERT_FALSE(unbound.ok());
  EXPECT_THAT(unbound.status().message(), HasSubstr("p2o.DynamicDimension.0"));
}

TEST(OnnxImportTest, ADeclaredDimThatContradictsInferenceNamesBoth) {
  ShapeBindings bindings;
  ASSERT_TRUE(ParseDimBinding("N=5", bindings).ok());
  // z declares the symbol that y's dim 0 was unified with (5) as its dim 1, which is 3.
  absl::StatusOr<Graph> g = Import(ExporterNamedOutputs({"Gemmy_dim_0", "Gemmy_dim_0"}), bindings);
  ASSERT_TRUE(g.ok()) << g.status();
  const absl::Status s = InferShapes(*g, bindings);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), AllOf(HasSubstr("'z'"), HasSubstr("Gemmy_dim_0"), HasSubstr("'y'"),
                                 HasSubstr("5"), HasSubstr("float32[5,3]")));
  // A number that contradicts inference: libonnx's merge refuses it, naming the node.
  absl::StatusOr<Graph> h = Import(ExporterNamedOutputs({7, 3}), bindings);
  ASSERT_FALSE(h.ok());
  EXPECT_THAT(h.status().message(), AllOf(HasSubstr("relu"), HasSubstr("7"), HasSubstr("5")));
}

TEST(OnnxImportTest, IdentityOfAWeightIsTheWeightNotAnActivation) {
  // torch.onnx.export ties weights through Identity of an initializer.
  OnnxModel m(17);
  m.Input("x", TensorProto::FLOAT, {2, 4});
  m.FloatInit("W", {4, 4}, 0.25f);
  m.Node("Identity", {"W"}, {"W_tied"}, "tie");
  m.Node("MatMul", {"x", "W"}, {"h"}, "mm1");
  m.Node("MatMul", {"h", "W_tied"}, {"y"}, "mm2");
  m.Output("y");
  absl::StatusOr<Graph> g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->num_ops(), 2);
  EXPECT_FALSE(g->FindValue("W_tied").has_value());
  EXPECT_EQ(ValueNamed(*g, "W").role, Role::kParam);
  // A pure op of constants folds to a constant.
  OnnxModel c(17);
  c.Input("x", TensorProto::FLOAT, {2, 3});
  c.IntInit("shape", {3, 2});
  c.FloatInit("B", {6}, 1.0f);
  c.Node("Reshape", {"B", "shape"}, {"B2"}, "reshape_const");
  c.Node("MatMul", {"x", "B2"}, {"y"}, "mm");
  c.Output("y");
  absl::StatusOr<Graph> h = Import(c);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->num_ops(), 1);
  EXPECT_EQ(ValueNamed(*h, "B2").role, Role::kConstant);
  EXPECT_EQ(ValueNamed(*h, "B2").type, Type(DataType::kFloat32, {3, 2}));
}

// ConstantOfShape's tensor attribute 'value' reaches the op as a number (its kernel fills it).
TEST(OnnxImportTest, ConstantOfShapeCarriesItsFillValue) {
  for (const bool integer : {true, false}) {
    OnnxModel m(17);
    m.Input("x", TensorProto::FLOAT, {2, 3});
    m.Node("Shape", {"x"}, {"s"}, "shape");
    onnx::NodeProto* fill = m.Node("ConstantOfShape", {"s"}, {"c"}, "fill");
    TensorProto value;
    value.add_dims(1);
    if (integer) {
      value.set_data_type(TensorProto::INT64);
      value.add_int64_data(-7);
    } else {
      value.set_data_type(TensorProto::FLOAT);
      value.add_float_data(0.25f);
    }
    AttrTensor(fill, "value", value);
    m.Node("Add", {"x", "x"}, {"y"}, "add");
    m.Output("c");
    m.Output("y");
    absl::StatusOr<Graph> g = Import(m);
    ASSERT_TRUE(g.ok()) << g.status();
    const Value& c = ValueNamed(*g, "c");
    ASSERT_NE(c.producer, kNone) << "a value of a graph output's node is kept as an op";
    const Op& op = g->op(c.producer);
    const std::optional<Attribute> carried = [&]() -> std::optional<Attribute> {
      for (const Attribute& a : op.attrs) {
        if (a.name == "value") return a;
      }
      return std::nullopt;
    }();
    ASSERT_TRUE(carried.has_value());
    if (integer) {
      EXPECT_EQ(std::get<int64_t>(carried->data), -7);
    } else {
      EXPECT_EQ(std::get<double>(carried->data), 0.25);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// External data: read relative to the model's folder, checked, carried with the graph.

struct ExternalModel {
  std::string dir;
  std::string path;
};

ExternalModel WriteExternalModel(const std::string& tag, const std::string& location,
                                 int64_t length_bytes) {
  const std::string dir = absl::StrCat(::memonger::testing::TempDir(), "/external_", tag);
  std::filesystem::create_directories(dir);
  std::vector<float> w = {1, 2, 3, 4, 5, 6, 7, 8};
  std::string bytes(reinterpret_cast<const char*>(w.data()), w.size() * sizeof(float));
  {
    std::ofstream out(dir + "/weights.bin", std::ios::binary);
    out << std::string(16, 'x') << bytes;  // the tensor at offset 16
  }
  OnnxModel m(17);
  m.Input("x", TensorProto::FLOAT, {2, 4});
  TensorProto* t = m.graph()->add_initializer();
  t->set_name("W");
  t->set_data_type(TensorProto::FLOAT);
  t->add_dims(4);
  t->add_dims(2);
  t->set_data_location(TensorProto::EXTERNAL);
  auto entry = [&](const std::string& key, const std::string& value) {
    auto* e = t->add_external_data();
    e->set_key(key);
    e->set_value(value);
  };
  entry("location", location);
  entry("offset", "16");
  entry("length", absl::StrCat(length_bytes));
  m.Node("MatMul", {"x", "W"}, {"y"}, "mm");
  m.Output("y");
  const std::string path = dir + "/model.onnx";
  std::ofstream(path, std::ios::binary) << m.Bytes();
  return {dir, path};
}

TEST(OnnxImportTest, ExternalDataIsReadBesideTheModelAndTravelsWithTheGraph) {
  const ExternalModel model = WriteExternalModel("ok", "weights.bin", 32);
  LoadOptions options;
  options.keep_data = true;
  absl::StatusOr<Graph> g = LoadModel(model.path, options);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_NE(g->static_data(), nullptr);
  const auto it = g->static_data()->find("W");
  ASSERT_NE(it, g->static_data()->end());
  ASSERT_EQ(it->second.bytes.size(), 32u);
  float w[8];
  std::memcpy(w, it->second.bytes.data(), 32);
  EXPECT_EQ(w[0], 1.0f);
  EXPECT_EQ(w[7], 8.0f);
  // A copy (as every rewrite makes) keeps the data.
  Graph copy = *g;
  EXPECT_EQ(copy.static_data(), g->static_data());
  // Planning alone checks the file but keeps no weights (at most small in-file constants).
  absl::StatusOr<Graph> planning = LoadModel(model.path, LoadOptions{});
  ASSERT_TRUE(planning.ok()) << planning.status();
  ASSERT_NE(planning->static_data(), nullptr);
  EXPECT_FALSE(planning->static_data()->contains("W"));
}

TEST(OnnxImportTest, ExternalDataThatCannotBeReadIsAnErrorNamingTheFile) {
  for (const bool keep : {false, true}) {
    LoadOptions options;
    options.keep_data = keep;
    const ExternalModel missing = WriteExternalModel("missing", "nowhere.bin", 32);
    absl::StatusOr<Graph> a = LoadModel(missing.path, options);
    ASSERT_FALSE(a.ok());
    EXPECT_THAT(a.status().message(), AllOf(HasSubstr("nowhere.bin"), HasSubstr("'W'")));
    const ExternalModel escape = WriteExternalModel("escape", "../external_ok/weights.bin", 32);
    absl::StatusOr<Graph> b = LoadModel(escape.path, options);
    ASSERT_FALSE(b.ok());
    EXPECT_THAT(b.status().message(), HasSubstr("outside the model's folder"));
    const ExternalModel short_data = WriteExternalModel("short", "weights.bin", 28);
    absl::StatusOr<Graph> c = LoadModel(short_data.path, options);
    ASSERT_FALSE(c.ok());
    EXPECT_THAT(c.status().message(), AllOf(HasSubstr("32"), HasSubstr("28")));
  }
  // As bytes, there is no folder to read from.
  const ExternalModel model = WriteExternalModel("bytes", "weights.bin", 32);
  std::ifstream in(model.path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  absl::StatusOr<Graph> d = ImportOnnxBytes(bytes, {}, "bytes.onnx");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), AllOf(HasSubstr("weights.bin"), HasSubstr("without its folder")));
}

}  // namespace
}  // namespace memonger::graph
