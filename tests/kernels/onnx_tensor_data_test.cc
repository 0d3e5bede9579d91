// ONNX tensor data: TensorProto decoding (raw data, typed fields, float16 bits in int32_data,
// bfloat16 references stored as UINT16, length checks, refusals) and the constants of a model
// file (initializers and Constant nodes) by value name.
#include "kernels/onnx_tensor_data.h"

#include <cstring>
#include <fstream>
#include <string>

#include "graph/model_loader.h"
#include "gtest/gtest.h"
#include "kernels/float16.h"
#include "tests/test_support.h"

namespace memonger::alloc {
namespace {

using graph::DataType;

TEST(OnnxTensorDataTest, DecodesRawAndTypedFields) {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_dims(2);
  t.add_float_data(1.5f);
  t.add_float_data(-2.0f);
  absl::StatusOr<TensorData> d = DecodeTensorProto(t);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->type, (graph::TensorType{DataType::kFloat32, {2}}));
  float values[2];
  std::memcpy(values, d->bytes.data(), 8);
  EXPECT_EQ(values[0], 1.5f);
  EXPECT_EQ(values[1], -2.0f);

  onnx::TensorProto h;
  h.set_data_type(onnx::TensorProto::FLOAT16);
  h.add_dims(1);
  h.add_int32_data(FloatToHalfBits(0.5f));
  d = DecodeTensorProto(h);
  ASSERT_TRUE(d.ok());
  uint16_t bits;
  std::memcpy(&bits, d->bytes.data(), 2);
  EXPECT_EQ(HalfBitsToFloat(bits), 0.5f);

  onnx::TensorProto raw;
  raw.set_data_type(onnx::TensorProto::INT64);
  raw.add_dims(1);
  const int64_t seven = 7;
  raw.set_raw_data(std::string(reinterpret_cast<const char*>(&seven), 8));
  d = DecodeTensorProto(raw);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->bytes, std::string(reinterpret_cast<const char*>(&seven), 8));
}

TEST(OnnxTensorDataTest, Bfloat16ReferencesStoredAsUint16) {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::UINT16);
  t.add_dims(1);
  t.set_raw_data(std::string("\x80\x3f", 2));
  EXPECT_FALSE(DecodeTensorProto(t).ok());  // uint16 has no graph::DataType
  absl::StatusOr<TensorData> d = DecodeTensorProto(t, DataType::kBFloat16);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->type.dtype, DataType::kBFloat16);
}

TEST(OnnxTensorDataTest, RefusesShortDataExternalDataAndStrings) {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_dims(3);
  t.add_float_data(1);
  EXPECT_EQ(DecodeTensorProto(t).status().code(), absl::StatusCode::kInvalidArgument);
  // External data is read by the importer first (graph::ReadExternalData); decoding a tensor
  // whose bytes are still in another file is a caller's mistake.
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  EXPECT_EQ(DecodeTensorProto(t).status().code(), absl::StatusCode::kFailedPrecondition);
  onnx::TensorProto s;
  s.set_data_type(onnx::TensorProto::STRING);
  EXPECT_FALSE(DecodeTensorProto(s).ok());
  EXPECT_EQ(ReadTensorProtoFile("/nonexistent/input_0.pb").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(OnnxTensorDataTest, ConstantsOfAModelByName) {
  // y = Add(x, w) with w an initializer; z = Mul(y, c) with c a Constant node.
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(13);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name("consts");
  auto add_info = [](onnx::ValueInfoProto* vi, const std::string& name) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_value(2);
  };
  add_info(g->add_input(), "x");
  add_info(g->add_output(), "z");
  onnx::TensorProto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(2);
  w->add_float_data(3);
  w->add_float_data(4);
  onnx::NodeProto* c = g->add_node();
  c->set_op_type("Constant");
  c->add_output("c");
  onnx::AttributeProto* value = c->add_attribute();
  value->set_name("value_float");
  value->set_type(onnx::AttributeProto::FLOAT);
  value->set_f(0.5f);
  onnx::NodeProto* add = g->add_node();
  add->set_op_type("Add");
  add->add_input("x");
  add->add_input("w");
  add->add_output("y");
  onnx::NodeProto* mul = g->add_node();
  mul->set_op_type("Mul");
  mul->add_input("y");
  mul->add_input("c");
  mul->add_output("z");
  const std::string path = testing::TempDir() + "/consts.onnx";
  {
    std::ofstream out(path, std::ios::binary);
    out << model.SerializeAsString();
  }
  absl::StatusOr<graph::Graph> graph = graph::LoadModel(path, graph::LoadOptions{});
  ASSERT_TRUE(graph.ok()) << graph.status();
  absl::StatusOr<absl::flat_hash_map<std::string, TensorData>> constants =
      ReadOnnxConstants(path, *graph);
  ASSERT_TRUE(constants.ok()) << constants.status();
  ASSERT_TRUE(constants->contains("w"));
  ASSERT_TRUE(constants->contains("c"));
  EXPECT_EQ(constants->at("w").type, (graph::TensorType{DataType::kFloat32, {2}}));
  EXPECT_EQ(constants->at("c").type, (graph::TensorType{DataType::kFloat32, {}}));
  float half;
  std::memcpy(&half, constants->at("c").bytes.data(), 4);
  EXPECT_EQ(half, 0.5f);
  EXPECT_FALSE(constants->contains("x"));
}

}  // namespace
}  // namespace memonger::alloc
