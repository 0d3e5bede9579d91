#include "graph/net_def.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "gmock/gmock.h"
#include "graph/model_loader.h"
#include "graph/shape_inference.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"
#include "workloads/workloads.h"

namespace memonger::graph {
namespace {

using ::memonger::testing::SourcePath;
using ::memonger::testing::WriteTempFile;
using ::testing::HasSubstr;

// Two graphs are the same when ops, values (names, versions, roles, in-place links, producers,
// consumers, declarations) and the external lists match.
void ExpectSameGraph(const Graph& a, const Graph& b) {
  ASSERT_EQ(a.num_ops(), b.num_ops());
  ASSERT_EQ(a.num_values(), b.num_values());
  EXPECT_EQ(a.name(), b.name());
  for (OpId i = 0; i < a.num_ops(); ++i) {
    SCOPED_TRACE(a.op(i).name);
    EXPECT_EQ(a.op(i).name, b.op(i).name);
    EXPECT_EQ(a.op(i).type, b.op(i).type);
    EXPECT_EQ(a.op(i).inputs, b.op(i).inputs);
    EXPECT_EQ(a.op(i).outputs, b.op(i).outputs);
    EXPECT_EQ(a.op(i).control_inputs, b.op(i).control_inputs);
    EXPECT_EQ(a.op(i).device, b.op(i).device);
    EXPECT_EQ(a.op(i).is_gradient_op, b.op(i).is_gradient_op);
    EXPECT_EQ(a.op(i).attrs.size(), b.op(i).attrs.size());
    for (size_t k = 0; k < a.op(i).attrs.size() && k < b.op(i).attrs.size(); ++k) {
      EXPECT_EQ(a.op(i).attrs[k].name, b.op(i).attrs[k].name);
      EXPECT_EQ(a.op(i).attrs[k].data, b.op(i).attrs[k].data);
    }
  }
  for (ValueId v = 0; v < a.num_values(); ++v) {
    SCOPED_TRACE(a.value(v).DisplayName());
    EXPECT_EQ(a.value(v).name, b.value(v).name);
    EXPECT_EQ(a.value(v).version, b.value(v).version);
    EXPECT_EQ(a.value(v).role, b.value(v).role);
    EXPECT_EQ(a.value(v).producer, b.value(v).producer);
    EXPECT_EQ(a.consumers(v), b.consumers(v));
    EXPECT_EQ(a.value(v).inplace_of, b.value(v).inplace_of);
    EXPECT_EQ(a.value(v).declared.dtype, b.value(v).declared.dtype);
    EXPECT_EQ(a.value(v).declared.dims.has_value(), b.value(v).declared.dims.has_value());
  }
  EXPECT_EQ(a.inputs(), b.inputs());
  EXPECT_EQ(a.outputs(), b.outputs());
  EXPECT_EQ(a.losses(), b.losses());
  EXPECT_EQ(a.param_grads(), b.param_grads());
}

constexpr char kTrainingNet[] = R"pb(
  name: "mlp"
  external_input: "data"
  external_input: "label"
  external_input: "fc1_w"
  external_input: "fc1_b"
  external_output: "loss"
  op { name: "fc1" type: "FC" input: "data" input: "fc1_w" input: "fc1_b" output: "fc1"
       arg { name: "axis" i: 1 } }
  op { type: "Relu" input: "fc1" output: "fc1" }
  op { type: "Softmax" input: "fc1" output: "pred" }
  op { type: "LabelCrossEntropy" input: "pred" input: "label" output: "xent" }
  op { type: "AveragedLoss" input: "xent" output: "loss" }
  op { type: "ConstantFill" input: "loss" output: "loss_grad" arg { name: "value" f: 1.0 }
       is_gradient_op: true }
  op { type: "AveragedLossGradient" input: "xent" input: "loss_grad" output: "xent_grad"
       is_gradient_op: true }
  op { type: "LabelCrossEntropyGradient" input: "pred" input: "label" input: "xent_grad"
       output: "pred_grad" is_gradient_op: true }
  op { type: "SoftmaxGradient" input: "pred" input: "pred_grad" output: "fc1_grad"
       is_gradient_op: true }
  op { type: "ReluGradient" input: "fc1" input: "fc1_grad" output: "fc1_grad"
       is_gradient_op: true }
  op { type: "FCGradient" input: "data" input: "fc1_w" input: "fc1_grad"
       output: "fc1_w_grad" output: "fc1_b_grad" output: "data_grad" is_gradient_op: true
       device_option { device_type: 1 device_id: 0 } }
  value_info { name: "data" dtype: FLOAT16 has_shape: true dim { symbol: "B" } dim { size: 4 } }
  value_info { name: "label" dtype: INT32 has_shape: true dim { symbol: "B" } }
  value_info { name: "fc1_w" dtype: FLOAT16 has_shape: true dim { size: 8 } dim { size: 4 }
               role: ROLE_PARAM }
  value_info { name: "fc1_b" dtype: FLOAT16 has_shape: true dim { size: 8 } role: ROLE_PARAM }
  loss: "loss"
  param_grad { param: "fc1_w" grad: "fc1_w_grad" }
  param_grad { param: "fc1_b" grad: "fc1_b_grad" }
  execution: EXECUTION_PARALLEL
)pb";

TEST(NetDefTest, TextToGraphToBinaryToGraphIsTheSameGraph) {
  auto first = memonger::testing::GraphFromText(kTrainingNet);
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string pb = memonger::testing::TempDir() + "/net.pb";
  ASSERT_TRUE(WriteNetDef(GraphToNetDef(*first), pb, NetFileFormat::kBinary).ok());
  auto second = LoadModel(pb, {});
  ASSERT_TRUE(second.ok()) << second.status();
  ExpectSameGraph(*first, *second);
  EXPECT_TRUE(second->prefers_parallel());
  EXPECT_EQ(second->value(*second->FindValue("fc1_w")).role, Role::kParam);

  // And back to text once more.
  const std::string pbtxt = memonger::testing::TempDir() + "/net.pbtxt";
  ASSERT_TRUE(WriteNetDef(GraphToNetDef(*second), pbtxt, NetFileFormat::kText).ok());
  auto third = LoadModel(pbtxt, {});
  ASSERT_TRUE(third.ok()) << third.status();
  ExpectSameGraph(*first, *third);
}

// The gradient builder makes parameter gradients graph outputs with role gradient; derivation
// alone would call them outputs, so the role must be written for them to load back as written.
TEST(NetDefTest, ParameterGradientsThatAreOutputsKeepTheirRole) {
  absl::StatusOr<WorkloadSpec> spec = ParseWorkloadSpec("mlp:layers=2,mode=training");
  ASSERT_TRUE(spec.ok());
  absl::StatusOr<Graph> first = BuildWorkload(*spec);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_FALSE(first->param_grads().empty());
  const std::string pb = memonger::testing::TempDir() + "/mlp_training.pb";
  ASSERT_TRUE(WriteNetDef(GraphToNetDef(*first), pb, NetFileFormat::kBinary).ok());
  absl::StatusOr<Graph> second = LoadModel(pb, {});
  ASSERT_TRUE(second.ok()) << second.status();
  ExpectSameGraph(*first, *second);
  for (const auto& [param, grad] : second->param_grads()) {
    EXPECT_EQ(second->value(grad).role, Role::kGradient) << second->value(grad).DisplayName();
  }
}

TEST(NetDefTest, BundledExampleRoundTrips) {
  auto first = LoadModel(SourcePath("examples/transformer_block_fp16.pbtxt"), {});
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string pb = memonger::testing::TempDir() + "/example.pb";
  ASSERT_TRUE(WriteNetDef(GraphToNetDef(*first), pb, NetFileFormat::kBinary).ok());
  auto second = LoadModel(pb, {});
  ASSERT_TRUE(second.ok()) << second.status();
  ExpectSameGraph(*first, *second);
}

// Writes protobuf wire format by hand, so the bytes hold exactly the fields (and field numbers)
// Caffe2's caffe2.proto gives them, including ones our proto does not declare.
class WireWriter {
 public:
  WireWriter& String(int field, const std::string& s) {
    Key(field, 2);
    Varint(s.size());
    bytes_ += s;
    return *this;
  }
  WireWriter& Int(int field, uint64_t v) {
    Key(field, 0);
    Varint(v);
    return *this;
  }
  WireWriter& Float(int field, float f) {
    Key(field, 5);
    char raw[4];
    std::memcpy(raw, &f, 4);
    bytes_.append(raw, 4);
    return *this;
  }
  WireWriter& Message(int field, const WireWriter& m) { return String(field, m.bytes_); }
  const std::string& bytes() const { return bytes_; }

 private:
  void Key(int field, int wire_type) { Varint((static_cast<uint64_t>(field) << 3) | wire_type); }
  void Varint(uint64_t v) {
    while (v >= 0x80) {
      bytes_.push_back(static_cast<char>((v & 0x7F) | 0x80));
      v >>= 7;
    }
    bytes_.push_back(static_cast<char>(v));
  }
  std::string bytes_;
};

TEST(NetDefTest, BinaryCaffe2NetDefLoads) {
  // caffe2.proto: NetDef{name=1, op=2, type=3, num_workers=4, device_option=5, arg=6,
  // external_input=7, external_output=8}; OperatorDef{input=1, output=2, name=3, type=4, arg=5,
  // device_option=6, engine=7, control_input=8, is_gradient_op=9}; Argument{name=1, f=2, i=3,
  // s=4, floats=5, ints=6, strings=7, t=10}; DeviceOption{device_type=1, device_id=2}.
  WireWriter tensor;  // a TensorProto in Argument.t: not declared by us, kept as unknown
  tensor.Int(1, 2).Int(2, 1);
  WireWriter fc;
  fc.String(1, "data").String(1, "fc1_w").String(1, "fc1_b").String(2, "fc1").String(3, "fc1")
      .String(4, "FC")
      .Message(5, WireWriter().String(1, "axis").Int(3, 1))
      .Message(5, WireWriter().String(1, "init").Message(10, tensor))
      .Message(6, WireWriter().Int(1, 1).Int(2, 3))
      .String(7, "CUDNN");
  WireWriter relu;
  relu.String(1, "fc1").String(2, "fc1").String(4, "Relu").String(8, "data");
  WireWriter grad;
  grad.String(1, "fc1").String(2, "fc1_grad").String(4, "ReluGradient").Int(9, 1);
  WireWriter net;
  net.String(1, "caffe2_net").Message(2, fc).Message(2, relu).Message(2, grad).String(3, "dag")
      .Int(4, 4)
      .Message(6, WireWriter().String(1, "scale").Float(2, 0.5f))
      .String(7, "data").String(7, "fc1_w").String(7, "fc1_b").String(8, "fc1_grad");

  const std::string path = WriteTempFile("caffe2_net.pb", net.bytes());
  auto g = LoadModel(path, {});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->name(), "caffe2_net");
  ASSERT_EQ(g->num_ops(), 3);
  EXPECT_EQ(g->op(0).type, "FC");
  EXPECT_EQ(g->op(0).device, (Device{1, 3}));
  EXPECT_EQ(g->op(0).engine, "CUDNN");
  EXPECT_EQ(g->op(0).attributes().GetInt("axis"), 1);
  EXPECT_EQ(g->op(1).control_inputs.size(), 1u);
  EXPECT_TRUE(g->op(2).is_gradient_op);
  const ValueId relu_out = g->op(1).outputs[0];
  EXPECT_EQ(g->value(relu_out).inplace_of, g->op(0).outputs[0]);
  EXPECT_EQ(g->value(*g->FindValue("fc1_grad")).role, Role::kOutput);
  EXPECT_EQ(g->inputs().size(), 3u);
}

TEST(NetDefTest, DeviceFieldsUpToTheirLimitLoad) {
  const std::string path = WriteTempFile(
      "device_limit.pbtxt",
      "external_input: \"x\" op { type: \"Relu\" input: \"x\" output: \"y\" "
      "device_option { device_type: 32767 device_id: 32767 } }");
  auto g = LoadModel(path, {});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->op(0).device, (Device{32767, 32767}));
  EXPECT_EQ(DeviceToString(g->op(0).device), "device32767:32767");
}

struct BadNetCase {
  std::string label;
  std::string file_name;
  std::string contents;
  std::string expected;  // part of the message
};

void PrintTo(const BadNetCase& c, std::ostream* os) { *os << c.label; }

class BadNetTest : public ::testing::TestWithParam<BadNetCase> {};

TEST_P(BadNetTest, IsAnErrorNamingTheProblem) {
  const BadNetCase& c = GetParam();
  const std::string path = WriteTempFile(c.file_name, c.contents);
  auto g = LoadModel(path, {});
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(std::string(g.status().message()), HasSubstr(c.expected));
}

std::string RandomBytes(int n, unsigned seed) {
  std::string s;
  unsigned x = seed;
  for (int i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    s.push_back(static_cast<char>(x >> 16));
  }
  return s;
}

INSTANTIATE_TEST_SUITE_P(
    Files, BadNetTest,
    ::testing::Values(
        BadNetCase{"empty_pb", "empty.pb", "", "empty"},
        BadNetCase{"empty_pbtxt", "empty.pbtxt", "", "empty"},
        BadNetCase{"truncated_pb", "truncated.pb",
                   WireWriter().String(1, "net").Message(2, WireWriter().String(4, "Relu"))
                       .bytes().substr(0, 9),
                   "not a binary NetDef"},
        BadNetCase{"random_bytes", "random.pb", RandomBytes(4096, 7), "random.pb"},
        BadNetCase{"text_in_pb", "text.pb", "op { type: \"Relu\" input: \"x\" output: \"y\" }",
                   "text.pb"},
        BadNetCase{"binary_in_pbtxt", "binary.pbtxt", RandomBytes(64, 3), "not a text NetDef"},
        BadNetCase{"syntax_error", "syntax.pbtxt", "op { type: \"Relu\" input: }",
                   "line 1"},
        BadNetCase{"no_ops", "no_ops.pbtxt", "name: \"x\"", "no ops"},
        BadNetCase{"unknown_extension", "model.bin", "abc", "unknown model extension"},
        BadNetCase{"negative_declared_dim", "neg.pbtxt",
                   "external_input: \"x\" op { type: \"Relu\" input: \"x\" output: \"y\" } "
                   "value_info { name: \"x\" dim { size: -3 } }",
                   "negative dimension -3"},
        BadNetCase{"bad_dtype", "dtype.pbtxt",
                   "external_input: \"x\" op { type: \"Relu\" input: \"x\" output: \"y\" } "
                   "value_info { name: \"x\" dtype: 8 }",
                   "dtype"},
        // A device is held in two bytes a field: beyond them the file is refused, not cut.
        BadNetCase{"device_id_out_of_range", "device.pbtxt",
                   "external_input: \"x\" op { name: \"r\" type: \"Relu\" input: \"x\" "
                   "output: \"y\" device_option { device_type: 1 device_id: 70000 } }",
                   "Relu op 'r': device_option device_id 70000 is out of range [0, 32767]"},
        BadNetCase{"net_device_type_negative", "net_device.pbtxt",
                   "device_option { device_type: -1 } external_input: \"x\" "
                   "op { type: \"Relu\" input: \"x\" output: \"y\" }",
                   "the net's device_option device_type -1 is out of range"},
        // Declarations that contradict each other, or name nothing: which one holds, or what
        // was meant, would be a guess (both used to load without a word).
        BadNetCase{"value_info_twice", "twice.pbtxt",
                   "external_input: \"x\" op { type: \"Relu\" input: \"x\" output: \"y\" } "
                   "value_info { name: \"x\" dtype: FLOAT has_shape: true dim { size: 4 } } "
                   "value_info { name: \"x\" dtype: FLOAT has_shape: true dim { size: 8 } }",
                   "value_info 'x' is given twice"},
        BadNetCase{"value_info_of_no_value", "nothing.pbtxt",
                   "external_input: \"x\" op { type: \"Relu\" input: \"x\" output: \"y\" } "
                   "value_info { name: \"x\" dtype: FLOAT has_shape: true dim { size: 4 } } "
                   "value_info { name: \"xx\" dtype: FLOAT has_shape: true dim { size: 8 } }",
                   "names 'xx', which is no value of the net"}),
    [](const ::testing::TestParamInfo<BadNetCase>& info) { return info.param.label; });

}  // namespace
}  // namespace memonger::graph
