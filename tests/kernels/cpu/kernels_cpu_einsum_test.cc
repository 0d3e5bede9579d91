// The Einsum kernel against a reference written here from the definition: every assignment of
// every letter, the operands' product summed into the output element the output letters name
// (in double). The reference reads equations without "..." (a test spells the broadcast dims
// out as letters) and takes a size-1 dim as broadcast. Cases: attention's batched products (as
// torch.einsum and MaxViT write them, spaces and capitals), transposes, diagonals and traces,
// implicit outputs, three operands, "..." broadcasting, labels summed in one operand, empty
// dims; float32, float16, bfloat16 and float64; outputs of the wrong dims or overlapping an
// input are refused.
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/kernel_test_support.h"

namespace memonger::alloc {
namespace {

using graph::DataType;
using testing::CompareClose;
using testing::Count;
using testing::EmptyTensor;
using testing::MakeTensor;
using testing::RandomValues;
using testing::RunKernel;
using testing::TestTensor;
using testing::ToDoubles;

// `equation` is "t1,t2,...->out" with letters only.
std::vector<double> Reference(const std::string& equation,
                              const std::vector<std::vector<int64_t>>& dims,
                              const std::vector<std::vector<double>>& values,
                              std::vector<int64_t>* out_dims) {
  const size_t arrow = equation.find("->");
  std::vector<std::string> terms;
  std::string lhs = equation.substr(0, arrow);
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  const std::string out = equation.substr(arrow + 2);
  std::map<char, int64_t> size;  // the occurrences' size; 1 broadcasts
  for (size_t t = 0; t < terms.size(); ++t) {
    for (size_t d = 0; d < terms[t].size(); ++d) {
      auto [it, first] = size.emplace(terms[t][d], dims[t][d]);
      if (!first && it->second == 1) it->second = dims[t][d];
    }
  }
  std::vector<char> letters;
  for (const auto& [c, s] : size) letters.push_back(c);
  out_dims->clear();
  for (char c : out) out_dims->push_back(size[c]);
  std::vector<double> result(static_cast<size_t>(Count(*out_dims)), 0.0);
  std::map<char, int64_t> at;
  for (char c : letters) at[c] = 0;
  for (char c : letters) {
    if (size[c] == 0) return result;
  }
  while (true) {
    double product = 1;
    for (size_t t = 0; t < terms.size(); ++t) {
      int64_t offset = 0;
      for (size_t d = 0; d < terms[t].size(); ++d) {
        offset = offset * dims[t][d] + (dims[t][d] == 1 ? 0 : at[terms[t][d]]);
      }
      product *= values[t][static_cast<size_t>(offset)];
    }
    int64_t o = 0;
    for (size_t d = 0; d < out.size(); ++d) o = o * (*out_dims)[d] + at[out[d]];
    result[static_cast<size_t>(o)] += product;
    size_t i = letters.size();
    while (i > 0) {
      --i;
      if (++at[letters[i]] < size[letters[i]]) break;
      at[letters[i]] = 0;
      if (i == 0) return result;
    }
    if (letters.empty()) return result;
  }
}

struct Case {
  std::string equation;   // as the kernel reads it
  std::string reference;  // the same without "...", for Reference
  std::vector<std::vector<int64_t>> dims;
};

double Rtol(DataType d) {
  return d == DataType::kFloat16 ? 2e-3 : d == DataType::kBFloat16 ? 1.6e-2
                                          : d == DataType::kFloat64 ? 1e-12 : 2e-5;
}

void ExpectMatches(const Case& c, DataType dtype) {
  SCOPED_TRACE(c.equation + " " + std::string(graph::DataTypeName(dtype)));
  std::vector<TestTensor> inputs;
  std::vector<std::vector<double>> values;
  for (size_t i = 0; i < c.dims.size(); ++i) {
    inputs.push_back(MakeTensor(dtype, c.dims[i], RandomValues(Count(c.dims[i]), 7 + i)));
    values.push_back(ToDoubles(inputs.back()));  // as stored: the half types' rounding
  }
  std::vector<int64_t> out_dims;
  const std::vector<double> expected = Reference(c.reference, c.dims, values, &out_dims);
  TestTensor out = EmptyTensor(dtype, out_dims);
  std::vector<TestTensor*> in;
  for (TestTensor& t : inputs) in.push_back(&t);
  const absl::Status s = RunKernel("Einsum", {{"equation", c.equation}}, in, {&out});
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(CompareClose(ToDoubles(out), expected, Rtol(dtype), 1e-6), "");
}

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {"bhid,bhjd->bhij", "bhid,bhjd->bhij", {{2, 3, 5, 4}, {2, 3, 6, 4}}},
      {"bhij,bhjd->bhid", "bhij,bhjd->bhid", {{2, 2, 5, 6}, {2, 2, 6, 3}}},
      {"B G H I D, B G H J D -> B G H I J", "BGHID,BGHJD->BGHIJ",
       {{1, 2, 3, 4, 5}, {1, 2, 3, 6, 5}}},
      {"ij->ji", "ij->ji", {{3, 5}}},
      {"ii->i", "ii->i", {{4, 4}}},
      {"ii", "ii->", {{4, 4}}},
      {"bij,bjk", "bij,bjk->ik", {{2, 3, 4}, {2, 4, 5}}},
      {"ba", "ba->ab", {{3, 2}}},
      {"i,i", "i,i->", {{6}, {6}}},
      {"i,j->ij", "i,j->ij", {{3}, {4}}},
      {"ij,jk,kl->il", "ij,jk,kl->il", {{3, 4}, {4, 5}, {5, 2}}},
      {"ij,jk,ki->", "ij,jk,ki->", {{3, 4}, {4, 5}, {5, 3}}},
      {"...ij,...jk->...ik", "xyij,yjk->xyik", {{2, 1, 3, 4}, {5, 4, 2}}},
      {"...i->i...", "xyi->ixy", {{2, 3, 4}}},
      {"ij,ij->ij", "ij,ij->ij", {{3, 1}, {3, 4}}},
      {"ij,jk->k", "ij,jk->k", {{3, 4}, {4, 2}}},
      {"bii,bi->bi", "bii,bi->bi", {{2, 3, 3}, {2, 3}}},
      {"ij,jk->ik", "ij,jk->ik", {{3, 0}, {0, 2}}},
      {"ij,jk->ik", "ij,jk->ik", {{0, 4}, {4, 2}}},
  };
  return cases;
}

TEST(EinsumKernelTest, MatchesTheDefinitionInEveryFloatType) {
  for (const Case& c : Cases()) {
    for (DataType d : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                       DataType::kFloat64}) {
      ExpectMatches(c, d);
    }
  }
}

TEST(EinsumKernelTest, ALargeProductGivesTheSameBitsOnAnyThreadCount) {
  // 64 x 64 x 1024 x 2 batches: over GemmCpu's threading threshold.
  TestTensor a = MakeTensor(DataType::kFloat32, {2, 64, 1024}, RandomValues(2 * 64 * 1024, 1));
  TestTensor b = MakeTensor(DataType::kFloat32, {2, 64, 1024}, RandomValues(2 * 64 * 1024, 2));
  TestTensor one = EmptyTensor(DataType::kFloat32, {2, 64, 64});
  TestTensor four = EmptyTensor(DataType::kFloat32, {2, 64, 64});
  ASSERT_TRUE(RunKernel("Einsum", {{"equation", std::string("bik,bjk->bij")}}, {&a, &b}, {&one},
                        1)
                  .ok());
  ASSERT_TRUE(RunKernel("Einsum", {{"equation", std::string("bik,bjk->bij")}}, {&a, &b},
                        {&four}, 4)
                  .ok());
  EXPECT_EQ(ToDoubles(one), ToDoubles(four));
}

TEST(EinsumKernelTest, RefusesWhatTheEquationDoesNotGive) {
  TestTensor a = MakeTensor(DataType::kFloat32, {2, 3}, RandomValues(6, 1));
  TestTensor b = MakeTensor(DataType::kFloat32, {3, 4}, RandomValues(12, 2));
  TestTensor wrong = EmptyTensor(DataType::kFloat32, {2, 5});
  EXPECT_NE(RunKernel("Einsum", {{"equation", std::string("ij,jk->ik")}}, {&a, &b}, {&wrong})
                .message()
                .find("is not the equation's [2,4]"),
            std::string::npos);
  TestTensor out = EmptyTensor(DataType::kFloat32, {2, 4});
  EXPECT_NE(RunKernel("Einsum", {{"equation", std::string("ijk,jk->ik")}}, {&a, &b}, {&out})
                .message()
                .find("rank 2"),
            std::string::npos);
  TestTensor c = MakeTensor(DataType::kFloat32, {4, 4}, RandomValues(16, 3));
  EXPECT_NE(RunKernel("Einsum", {{"equation", std::string("ij,jk->ik")}}, {&a, &c}, {&out})
                .message()
                .find("do not broadcast"),
            std::string::npos);
  TestTensor square = MakeTensor(DataType::kFloat32, {3, 3}, RandomValues(9, 3));
  EXPECT_FALSE(RunKernel("Einsum", {{"equation", std::string("ij->ji")}}, {&square}, {&square})
                   .ok());  // in place: the output overlaps the input
  TestTensor ints = MakeTensor(DataType::kInt64, {3}, {1, 2, 3});
  TestTensor int_out = EmptyTensor(DataType::kInt64, {});
  EXPECT_EQ(RunKernel("Einsum", {{"equation", std::string("i->")}}, {&ints}, {&int_out}).code(),
            absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace memonger::alloc
