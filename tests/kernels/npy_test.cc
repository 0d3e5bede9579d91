// .npy files: header layout (magic, version, 64-byte aligned data, shape tuples), descr per
// element type, file names from value names.
#include "kernels/npy.h"

#include <cstring>
#include <ostream>
#include <string>

#include "gtest/gtest.h"

namespace memonger::alloc {
namespace {

using graph::DataType;

struct NpyCase {
  const char* name;
  graph::TensorType type;
  std::string header;  // the dict, without padding
};
// Printed by name (gtest would otherwise dump the bytes, padding included).
void PrintTo(const NpyCase& c, std::ostream* os) { *os << c.name; }

class NpyTest : public ::testing::TestWithParam<NpyCase> {};

TEST_P(NpyTest, HeaderAndData) {
  const NpyCase& c = GetParam();
  const std::string data(static_cast<size_t>(*graph::ByteSize(c.type, "t")), '\x5a');
  absl::StatusOr<std::string> bytes = NpyBytes(c.type, reinterpret_cast<const std::byte*>(data.data()));
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  ASSERT_GE(bytes->size(), 10u);
  EXPECT_EQ(bytes->substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t header_len = static_cast<unsigned char>((*bytes)[8]) |
                            (static_cast<unsigned char>((*bytes)[9]) << 8);
  EXPECT_EQ((10 + header_len) % 64, 0u);
  const std::string header = bytes->substr(10, header_len);
  EXPECT_EQ(header.substr(0, c.header.size()), c.header);
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(bytes->substr(10 + header_len), data);
}

INSTANTIATE_TEST_SUITE_P(
    Types, NpyTest,
    ::testing::Values(
        NpyCase{"float32_matrix", {DataType::kFloat32, {2, 3}},
                "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"},
        NpyCase{"float16_vector", {DataType::kFloat16, {5}},
                "{'descr': '<f2', 'fortran_order': False, 'shape': (5,), }"},
        NpyCase{"int64_scalar", {DataType::kInt64, {}},
                "{'descr': '<i8', 'fortran_order': False, 'shape': (), }"},
        NpyCase{"bfloat16_as_bits", {DataType::kBFloat16, {1, 2}},
                "{'descr': '<u2', 'fortran_order': False, 'shape': (1, 2), }"},
        NpyCase{"bool_empty", {DataType::kBool, {0, 4}},
                "{'descr': '|b1', 'fortran_order': False, 'shape': (0, 4), }"}),
    [](const ::testing::TestParamInfo<NpyCase>& info) { return info.param.name; });

TEST(NpyTest, FileNames) {
  EXPECT_EQ(NpyFileName("y"), "y.npy");
  EXPECT_EQ(NpyFileName("layer/1:out"), "layer_1_out.npy");
  EXPECT_EQ(NpyFileName(".."), "_...npy");
  EXPECT_EQ(NpyFileName(""), "_.npy");
  EXPECT_FALSE(NpyDescr(DataType::kUndefined).ok());
}

}  // namespace
}  // namespace memonger::alloc
