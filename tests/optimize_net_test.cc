// optimize-net as a user meets it: exit codes, messages on stderr, never a signal.
#include <nlohmann/json.hpp>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace memonger {
namespace {

using ::memonger::testing::RunOptimizeNet;
using ::memonger::testing::SourcePath;
using ::memonger::testing::WriteTempFile;
using ::testing::HasSubstr;

std::string Example() { return SourcePath("examples/transformer_block_fp16.pbtxt"); }

TEST(OptimizeNetTest, SummarisesTheBundledExample) {
  auto r = RunOptimizeNet(Example() + " --dim L=1025");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("transformer_block_fp16"));
  EXPECT_THAT(r.out, HasSubstr("naive bytes"));
  // The [1,12,L,L] fp16 tensors are the largest values.
  EXPECT_THAT(r.out, HasSubstr("float16[1,12,1025,1025]"));
}

TEST(OptimizeNetTest, JsonFormatIsValidJson) {
  auto r = RunOptimizeNet(Example() + " --dim L=1025 --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["schema"], "memonger.summary/v1");
  EXPECT_EQ(j["ops"], 27);
  // Bias, scores, probs: 12 * 1025^2 fp16 values each.
  EXPECT_EQ(j["largest_values"][0]["bytes"], int64_t{12} * 1025 * 1025 * 2);
}

TEST(OptimizeNetTest, HelpAndUsageErrors) {
  auto help = RunOptimizeNet("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("--input-shape"));
  EXPECT_EQ(RunOptimizeNet("").exit_code, 2);                               // no model
  EXPECT_EQ(RunOptimizeNet(Example() + " --no-such-flag").exit_code, 2);  // unknown flag
  EXPECT_EQ(RunOptimizeNet(Example() + " --format yaml").exit_code, 2);   // bad choice
}

struct BadInputCase {
  std::string label;
  std::string file_name;  // empty: use the bundled example
  std::string contents;
  std::string flags;
  std::string expected;  // part of the stderr message
};
void PrintTo(const BadInputCase& c, std::ostream* os) { *os << c.label; }

class BadInputTest : public ::testing::TestWithParam<BadInputCase> {};

TEST_P(BadInputTest, ExitsOneWithAMessage) {
  const BadInputCase& c = GetParam();
  std::string model = c.file_name.empty() ? Example() : WriteTempFile(c.file_name, c.contents);
  if (c.label == "missing_file") model = memonger::testing::TempDir() + "/does_not_exist.pbtxt";
  auto r = RunOptimizeNet("'" + model + "' " + c.flags);
  EXPECT_EQ(r.signal, 0) << "killed by signal " << r.signal << "; stderr: " << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(c.expected));
  EXPECT_TRUE(r.out.empty()) << r.out;
}

std::string Garbage(int n) {
  std::string s;
  unsigned x = 12345;
  for (int i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    s.push_back(static_cast<char>(x >> 24));
  }
  return s;
}

constexpr char kRelu[] = R"pb(
  external_input: "x"
  op { name: "relu" type: "Relu" input: "x" output: "y" }
  external_output: "y"
)pb";

INSTANTIATE_TEST_SUITE_P(
    Cases, BadInputTest,
    ::testing::Values(
        BadInputCase{"empty_file", "empty.pbtxt", "", "", "empty"},
        BadInputCase{"empty_onnx", "empty.onnx", "", "", "empty.onnx"},
        BadInputCase{"truncated_protobuf", "truncated.pb", std::string("\x0a\x10net", 5), "",
                     "truncated.pb"},
        BadInputCase{"random_bytes_pb", "random.pb", Garbage(2048), "", "random.pb"},
        BadInputCase{"random_bytes_onnx", "random.onnx", Garbage(2048), "", "random.onnx"},
        BadInputCase{"text_with_onnx_extension", "text.onnx", kRelu, "", "text.onnx"},
        BadInputCase{"missing_file", "", "", "", "no such file"},
        BadInputCase{"cyclic_net", "cycle.pbtxt", R"pb(
            external_input: "x"
            op { name: "a" type: "Add" input: "x" input: "b_out" output: "a_out" }
            op { name: "b" type: "Relu" input: "a_out" output: "b_out" }
          )pb", "--input-shape x=4", "cycle"},
        BadInputCase{"undefined_input", "undefined.pbtxt", R"pb(
            external_input: "x"
            op { name: "add" type: "Add" input: "x" input: "ghost" output: "y" }
          )pb", "--input-shape x=4", "'ghost'"},
        BadInputCase{"negative_dim", "relu.pbtxt", kRelu, "--input-shape x=2,-3",
                     "negative dimension"},
        BadInputCase{"overflowing_shape", "overflow.pbtxt", R"pb(
            external_input: "x"
            op { name: "relu" type: "Relu" input: "x" output: "y" }
            value_info { name: "x" dtype: FLOAT has_shape: true
                         dim { size: 4294967296 } dim { size: 4294967296 } }
          )pb", "", "64 bits"},
        BadInputCase{"overflowing_bytes", "overflow_bytes.pbtxt", R"pb(
            external_input: "x"
            op { name: "relu" type: "Relu" input: "x" output: "y" }
            value_info { name: "x" dtype: DOUBLE has_shape: true
                         dim { size: 2147483648 } dim { size: 2147483648 } }
          )pb", "", "'x'"},
        BadInputCase{"unknown_op_without_shapes", "unknown.pbtxt", R"pb(
            external_input: "x"
            op { name: "mystery" type: "FrobnicateTensor" input: "x" output: "y" }
          )pb", "--input-shape x=4", "FrobnicateTensor"},
        BadInputCase{"unbound_symbol", "", "", "", "'L'"},
        BadInputCase{"malformed_input_shape", "relu.pbtxt", kRelu, "--input-shape x=2,abc",
                     "'abc' is not an integer"},
        BadInputCase{"input_shape_without_name", "relu.pbtxt", kRelu, "--input-shape =2,3",
                     "malformed"},
        BadInputCase{"input_shape_for_a_non_input", "relu.pbtxt", kRelu,
                     "--input-shape x=2 --input-shape y=2", "'y'"},
        BadInputCase{"malformed_dim", "", "", "--dim L", "malformed"}),
    [](const ::testing::TestParamInfo<BadInputCase>& info) { return info.param.label; });

}  // namespace
}  // namespace memonger
