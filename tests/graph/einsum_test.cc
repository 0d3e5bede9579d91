// ResolveEinsum (graph/einsum.h): the output dims and labels of explicit and implicit equations,
// "..." broadcasting, diagonals, and the errors a malformed equation or mismatched operand gives.
#include "graph/einsum.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memonger::graph {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<int64_t> OutputDims(const std::string& equation,
                                const std::vector<std::vector<int64_t>>& dims) {
  absl::StatusOr<EinsumSpec> spec = ResolveEinsum(equation, dims);
  EXPECT_TRUE(spec.ok()) << equation << ": " << spec.status();
  return spec.ok() ? spec->output_dims : std::vector<int64_t>{-1};
}

std::string Error(const std::string& equation, const std::vector<std::vector<int64_t>>& dims) {
  absl::StatusOr<EinsumSpec> spec = ResolveEinsum(equation, dims);
  EXPECT_FALSE(spec.ok()) << equation;
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(spec.status().message());
}

TEST(EinsumTest, ExplicitOutputs) {
  EXPECT_THAT(OutputDims("bhid,bhjd->bhij", {{2, 3, 4, 8}, {2, 3, 6, 8}}),
              ElementsAre(2, 3, 4, 6));
  EXPECT_THAT(OutputDims("B G H I D, B G H J D -> B G H I J", {{1, 2, 3, 4, 5}, {1, 2, 3, 6, 5}}),
              ElementsAre(1, 2, 3, 4, 6));
  EXPECT_THAT(OutputDims("ij->ji", {{3, 5}}), ElementsAre(5, 3));
  EXPECT_THAT(OutputDims("ii->i", {{4, 4}}), ElementsAre(4));
  EXPECT_THAT(OutputDims("i,i->", {{4}, {4}}), ElementsAre());
  EXPECT_THAT(OutputDims("ij,ij->ij", {{3, 1}, {3, 4}}), ElementsAre(3, 4));  // 1 broadcasts
  EXPECT_THAT(OutputDims("ij,ij->ij", {{0, 1}, {1, 4}}), ElementsAre(0, 4));
}

TEST(EinsumTest, ImplicitOutputsAreTheLettersSeenOnceInAsciiOrder) {
  EXPECT_THAT(OutputDims("ba", {{3, 2}}), ElementsAre(2, 3));
  EXPECT_THAT(OutputDims("aB", {{3, 2}}), ElementsAre(2, 3));  // 'B' < 'a'
  EXPECT_THAT(OutputDims("ij,jk", {{2, 3}, {3, 4}}), ElementsAre(2, 4));
  EXPECT_THAT(OutputDims("ii", {{4, 4}}), ElementsAre());  // a trace
  EXPECT_THAT(OutputDims("...ij,...jk", {{7, 2, 3}, {3, 4}}), ElementsAre(7, 2, 4));
}

TEST(EinsumTest, EllipsisDimsBroadcastRightAligned) {
  absl::StatusOr<EinsumSpec> spec =
      ResolveEinsum("...ij,...jk->...ik", {{2, 1, 3, 4}, {5, 4, 6}});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->output_dims, ElementsAre(2, 5, 3, 6));
  EXPECT_THAT(spec->operands[0].labels,
              ElementsAre(kEinsumEllipsisLabel, kEinsumEllipsisLabel + 1, 'i', 'j'));
  EXPECT_THAT(spec->operands[1].labels, ElementsAre(kEinsumEllipsisLabel + 1, 'j', 'k'));
  EXPECT_THAT(OutputDims("i...->...i", {{3}}), ElementsAre(3));  // "..." of no dims
}

TEST(EinsumTest, MalformedEquationsAndOperandsAreNamed) {
  EXPECT_THAT(Error("ij,jk->>ik", {{2, 3}, {3, 4}}), HasSubstr("character '>'"));
  EXPECT_THAT(Error("ij->i->j", {{2, 3}}), HasSubstr("more than one '->'"));
  EXPECT_THAT(Error("ij->j", {{2, 3}, {3}}), HasSubstr("1 input terms for 2 inputs"));
  EXPECT_THAT(Error("ij->k", {{2, 3}}), HasSubstr("outputs 'k', which no input has"));
  EXPECT_THAT(Error("ij->ii", {{2, 3}}), HasSubstr("outputs 'i' twice"));
  EXPECT_THAT(Error("...i...->i", {{2, 3}}), HasSubstr("more than one '...'"));
  EXPECT_THAT(Error("ijk,jk->ik", {{2, 3}, {3, 4}}), HasSubstr("rank 2"));
  EXPECT_THAT(Error("i,i->i", {{3}, {4}}), HasSubstr("do not broadcast"));
  EXPECT_THAT(Error("ii->i", {{3, 4}}), HasSubstr("a diagonal needs equal dims"));
  EXPECT_THAT(Error("...ij->ij", {{5, 2, 3}}), HasSubstr("does not name"));
  EXPECT_THAT(Error("", {}), HasSubstr("is empty"));
  EXPECT_TRUE(CheckEinsumSyntax("a b , b c -> a c", 2).ok());
}

}  // namespace
}  // namespace memonger::graph
