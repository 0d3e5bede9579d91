#include "kernels/tensor_files.h"

#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/npy.h"
#include "tests/test_support.h"

namespace memonger::alloc {
namespace {

using ::memonger::testing::WriteTempFile;
using ::testing::HasSubstr;

std::string Npy(const graph::TensorType& type, const std::vector<float>& values) {
  auto bytes = NpyBytes(type, reinterpret_cast<const std::byte*>(values.data()));
  EXPECT_TRUE(bytes.ok());
  return *bytes;
}

void Put16(std::string& out, uint32_t v) {
  out.push_back(static_cast<char>(v & 0xff));
  out.push_back(static_cast<char>((v >> 8) & 0xff));
}
void Put32(std::string& out, uint32_t v) {
  Put16(out, v & 0xffff);
  Put16(out, v >> 16);
}

std::string RawDeflate(const std::string& data) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8,
                         Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, data.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// A ZIP archive as numpy.savez (method 0) or savez_compressed (method 8) writes one.
std::string Zip(const std::vector<std::pair<std::string, std::string>>& members, int method) {
  std::string out, central;
  for (const auto& [name, data] : members) {
    const std::string stored = method == 8 ? RawDeflate(data) : data;
    const uint32_t crc = crc32(0, reinterpret_cast<const Bytef*>(data.data()), data.size());
    const uint32_t offset = static_cast<uint32_t>(out.size());
    Put32(out, 0x04034b50);
    Put16(out, 20); Put16(out, 0); Put16(out, method); Put16(out, 0); Put16(out, 0);
    Put32(out, crc); Put32(out, stored.size()); Put32(out, data.size());
    Put16(out, name.size()); Put16(out, 0);
    out += name + stored;
    Put32(central, 0x02014b50);
    Put16(central, 20); Put16(central, 20); Put16(central, 0); Put16(central, method);
    Put16(central, 0); Put16(central, 0);
    Put32(central, crc); Put32(central, stored.size()); Put32(central, data.size());
    Put16(central, name.size()); Put16(central, 0); Put16(central, 0); Put16(central, 0);
    Put16(central, 0); Put32(central, 0); Put32(central, offset);
    central += name;
  }
  const uint32_t cd_offset = static_cast<uint32_t>(out.size());
  out += central;
  Put32(out, 0x06054b50);
  Put16(out, 0); Put16(out, 0); Put16(out, members.size()); Put16(out, members.size());
  Put32(out, central.size()); Put32(out, cd_offset); Put16(out, 0);
  return out;
}

TEST(TensorFilesTest, ReadsNpyFilesFoldersAndArchives) {
  const graph::TensorType x{graph::DataType::kFloat32, {2, 3}};
  const std::vector<float> xv = {1, 2, 3, 4, 5, 6};
  const graph::TensorType y{graph::DataType::kFloat32, {4}};
  const std::vector<float> yv = {0.5f, -1, 7, 8};
  const std::string dir = memonger::testing::TempDir() + "/tensor_files";
  std::filesystem::create_directories(dir + "/folder");
  std::ofstream(dir + "/folder/x.npy", std::ios::binary) << Npy(x, xv);
  std::ofstream(dir + "/folder/y.npy", std::ios::binary) << Npy(y, yv);
  std::ofstream(dir + "/folder/notes.txt") << "ignored";
  for (int method : {0, 8}) {
    SCOPED_TRACE(method);
    const std::string npz = dir + "/a" + std::to_string(method) + ".npz";
    std::ofstream(npz, std::ios::binary)
        << Zip({{"x.npy", Npy(x, xv)}, {"y.npy", Npy(y, yv)}}, method);
    for (const std::string& path : {dir + "/folder", npz}) {
      auto tensors = ReadTensorFiles(path);
      ASSERT_TRUE(tensors.ok()) << tensors.status();
      ASSERT_EQ(tensors->size(), 2u);
      EXPECT_EQ(tensors->at("x").type, x);
      EXPECT_EQ(tensors->at("y").type, y);
      EXPECT_EQ(tensors->at("y").bytes,
                std::string(reinterpret_cast<const char*>(yv.data()), 16));
    }
  }
  auto one = ReadTensorFiles(dir + "/folder/x.npy");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->begin()->first, "x");
}

TEST(TensorFilesTest, RefusesWhatItCannotReadFaithfully) {
  const graph::TensorType x{graph::DataType::kFloat32, {2, 3}};
  const std::string good = Npy(x, {1, 2, 3, 4, 5, 6});
  auto with_header = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos);
    s.replace(at, from.size(), to);
    return s;
  };
  struct Case {
    std::string bytes;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"not numpy at all", "not a .npy file"},
      {good.substr(0, good.size() - 4), "holds 20 data bytes"},
      {with_header("'<f4'", "'>f4'"), "big-endian"},
      {with_header("False", "True "), "Fortran-ordered"},
      {with_header("'<f4'", "'|O8'"), "element type"},
      {with_header("'<f4'", "'<c8'"), "element type"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    auto t = ParseNpy(c.bytes, "t.npy");
    ASSERT_FALSE(t.ok());
    EXPECT_THAT(t.status().message(), HasSubstr(c.message));
  }
  EXPECT_EQ(ReadTensorFiles("/nonexistent/inputs").status().code(),
            absl::StatusCode::kNotFound);
  const std::string bad = WriteTempFile("bad.npz", Zip({{"x.txt", "hello"}}, 0));
  auto archive = ReadTensorFiles(bad);
  ASSERT_FALSE(archive.ok());
  EXPECT_THAT(archive.status().message(), HasSubstr("is not a .npy file"));
  const std::string truncated = WriteTempFile("cut.npz", Zip({{"x.npy", good}}, 8).substr(0, 40));
  EXPECT_FALSE(ReadTensorFiles(truncated).ok());
}

}  // namespace
}  // namespace memonger::alloc
