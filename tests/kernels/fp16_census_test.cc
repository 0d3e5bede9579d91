// The float16 census (kernels/fp16_census.h): the counting rule at its boundaries, a crafted
// bfloat16 tensor holding values above 65504 stored in float16 (--store-fp16) and run through
// the planned net, float32 values too small for float16, the report line, the wrapper leaving
// other Casts alone, and the CLI line after "executed".
#include "kernels/fp16_census.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "allocator/host_run.h"
#include "graph/fp16_storage.h"
#include "graph/shape_inference.h"
#include "gtest/gtest.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/float16.h"
#include "memonger/planner.h"
#include "tests/kernel_test_support.h"
#include "tests/test_support.h"

namespace memonger::alloc {
namespace {

using graph::DataType;
using graph::Graph;

Fp16Counts Count(DataType from, const std::vector<double>& values) {
  const testing::TestTensor t =
      testing::MakeTensor(from, {static_cast<int64_t>(values.size())}, values);
  return CountFp16Rounding(from, t.bytes(), static_cast<int64_t>(values.size()));
}

TEST(Fp16CensusTest, CountsFollowTheFloat16RoundingAtItsBoundaries) {
  const double two_m25 = std::ldexp(1.0, -25);
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Fp16Counts c = Count(
      DataType::kFloat32,
      {65504,                                   // largest finite float16: kept
       65519,                                   // rounds down to 65504: kept
       65520, -65520, 1e6,                      // halfway to 2^16 and beyond: overflow
       two_m25, -two_m25, 1e-9,                 // at most 2^-25: flushed to zero
       std::nextafter(static_cast<float>(two_m25), 1.0f), 1e-5,  // subnormal
       std::ldexp(1.0, -14), 1.0, 0.0, -0.0,    // normal, or zero already: nothing
       inf, -inf, nan});                        // not finite: in no count
  EXPECT_EQ(c.elements, 17);
  EXPECT_EQ(c.overflowed, 3);
  EXPECT_EQ(c.flushed_to_zero, 3);
  EXPECT_EQ(c.subnormal, 2);
}

// A feature cache in bfloat16 (8 exponent bits: values far above float16's 65504 are ordinary)
// stored in float16 with --store-fp16: the census counts what the Cast after its producer lost.
constexpr char kBf16Cache[] = R"pb(
  name: "bf16_cache"
  external_input: "x"
  external_output: "y"
  op { name: "produce" type: "Relu" input: "x" output: "features" }
  op { name: "consume" type: "Neg" input: "features" output: "y" }
  value_info { name: "x" dtype: BFLOAT16 has_shape: true dim { size: 2 } dim { size: 6 } }
)pb";

TEST(Fp16CensusTest, CraftedBfloat16ValuesAbove65504OverflowWhenStoredInFloat16) {
  absl::StatusOr<Graph> g = testing::GraphFromText(kBf16Cache);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(graph::InferShapes(*g, graph::ShapeBindings{}).ok());
  absl::StatusOr<Graph> stored = graph::StoreInFp16(*g, {"features"});
  ASSERT_TRUE(stored.ok()) << stored.status();
  absl::StatusOr<Plan> plan = PlanMemory(*stored, PlanOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status();

  // Every value is exact in bfloat16. After Relu: 65536, 98304, 3.0e38-ish and 1e5 overflow
  // float16; 65280 (< 65504) and 1.0 survive; 1e-8 flushes to zero; 1e-6 becomes subnormal;
  // the negatives become 0 (Relu) before the Cast and count as nothing.
  const std::vector<double> x = {65536, 98304, 3.0e38, 100352, 65280, 1.0,
                                 1e-8,  1e-6,  -70000, -1.0,   0.0,   2.0};
  const testing::TestTensor t = testing::MakeTensor(DataType::kBFloat16, {2, 6}, x);
  HostRunOptions options;
  options.data["x"] = TensorData{t.type, std::string(reinterpret_cast<const char*>(t.bytes()),
                                                     static_cast<size_t>(t.num_bytes()))};
  Fp16Census census(*stored);
  options.fp16_census = &census;
  absl::StatusOr<HostRunReport> report = RunOnHost(*stored, *plan, options);
  ASSERT_TRUE(report.ok()) << report.status();

  ASSERT_EQ(census.entries().size(), 1u);
  const Fp16CensusEntry& e = census.entries()[0];
  EXPECT_EQ(e.value_name, "features");
  EXPECT_EQ(e.from, DataType::kBFloat16);
  EXPECT_EQ(e.casts, 1);
  EXPECT_EQ(e.counts.elements, 12);
  EXPECT_EQ(e.counts.overflowed, 4);
  EXPECT_EQ(e.counts.flushed_to_zero, 1);
  EXPECT_EQ(e.counts.subnormal, 1);
  EXPECT_EQ(census.ToText(),
            "fp16 census     'features': 4 of 12 overflowed, 1 flushed to zero, 1 subnormal\n");

  // What the reader got back: the overflowed elements are -inf after Neg, the flushed one 0.
  ASSERT_EQ(report->outputs.size(), 1u);
  const uint16_t* y = reinterpret_cast<const uint16_t*>(report->outputs[0].bytes.data());
  for (int i : {0, 1, 2, 3}) EXPECT_EQ(BFloat16BitsToFloat(y[i]), -std::numeric_limits<float>::infinity()) << i;
  EXPECT_EQ(BFloat16BitsToFloat(y[4]), -65280.0f);
  EXPECT_EQ(BFloat16BitsToFloat(y[6]), 0.0f);
}

// float32 values below float16's range: a Cast to float16 in the net itself.
constexpr char kFp32Tiny[] = R"pb(
  name: "fp32_tiny"
  external_input: "x"
  external_output: "h"
  op { name: "to_half" type: "Cast" input: "x" output: "h" arg { name: "to" s: "float16" } }
  value_info { name: "x" dtype: FLOAT has_shape: true dim { size: 8 } }
)pb";

TEST(Fp16CensusTest, TinyFloat32ValuesFlushToZeroOrBecomeSubnormal) {
  absl::StatusOr<Graph> g = testing::GraphFromText(kFp32Tiny);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(graph::InferShapes(*g, graph::ShapeBindings{}).ok());
  absl::StatusOr<Plan> plan = PlanMemory(*g, PlanOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::vector<double> x = {1e-30, -2e-8, 2.9e-8, 3.0e-8, 1e-7, -4e-5, 7e-5, 0.5};
  const testing::TestTensor t = testing::MakeTensor(DataType::kFloat32, {8}, x);
  HostRunOptions options;
  options.data["x"] = TensorData{t.type, std::string(reinterpret_cast<const char*>(t.bytes()),
                                                     static_cast<size_t>(t.num_bytes()))};
  Fp16Census census(*g);
  options.fp16_census = &census;
  absl::StatusOr<HostRunReport> report = RunOnHost(*g, *plan, options);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(census.entries().size(), 1u);
  const Fp16Counts& c = census.entries()[0].counts;
  EXPECT_EQ(c.elements, 8);
  EXPECT_EQ(c.overflowed, 0);
  EXPECT_EQ(c.flushed_to_zero, 3);  // 1e-30, -2e-8, 2.9e-8 (all <= 2^-25 ~ 2.98e-8)
  EXPECT_EQ(c.subnormal, 3);        // 3.0e-8 (-> 2^-24), 1e-7, -4e-5 (below 2^-14 ~ 6.1e-5)
  // The census counts exactly what the Cast produced.
  const uint16_t* h = reinterpret_cast<const uint16_t*>(report->outputs[0].bytes.data());
  int zeros = 0, subnormals = 0;
  for (int i = 0; i < 8; ++i) {
    if ((h[i] & 0x7fffu) == 0) ++zeros;
    if ((h[i] & 0x7c00u) == 0 && (h[i] & 0x3ffu) != 0) ++subnormals;
  }
  EXPECT_EQ(zeros, 3);
  EXPECT_EQ(subnormals, 3);
}

TEST(Fp16CensusTest, OtherCastsAndTablesWithoutCastAreLeftAlone) {
  constexpr char kToFloat[] = R"pb(
    name: "to_float"
    external_input: "x"
    external_output: "y"
    op { name: "widen" type: "Cast" input: "x" output: "y" arg { name: "to" s: "float32" } }
    value_info { name: "x" dtype: FLOAT16 has_shape: true dim { size: 4 } }
  )pb";
  absl::StatusOr<Graph> g = testing::GraphFromText(kToFloat);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(graph::InferShapes(*g, graph::ShapeBindings{}).ok());
  absl::StatusOr<Plan> plan = PlanMemory(*g, PlanOptions{});
  ASSERT_TRUE(plan.ok());
  Fp16Census census(*g);
  HostRunOptions options;
  options.fp16_census = &census;
  ASSERT_TRUE(RunOnHost(*g, *plan, options).ok());
  EXPECT_TRUE(census.entries().empty());
  EXPECT_EQ(census.ToText(), "");

  const KernelTable empty = WithFp16Census(KernelTable(), &census);
  EXPECT_EQ(empty.size(), 0);
  const KernelTable full = WithFp16Census(MakeCpuKernelTable(), &census);
  EXPECT_EQ(full.size(), MakeCpuKernelTable().size());
}

TEST(Fp16CensusTest, TheCliReportsOneLinePerStoredValueAfterExecuted) {
  const testing::CommandResult r = testing::RunOptimizeNet(
      "--workload mlp:layers=2,mode=training --store-fp16 fc0 --execute host");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t executed = r.out.find("executed        host kernels");
  const size_t census = r.out.find("fp16 census     'fc0': 0 of 40 overflowed, 0 flushed to zero");
  ASSERT_NE(executed, std::string::npos) << r.out;
  ASSERT_NE(census, std::string::npos) << r.out;
  EXPECT_LT(executed, census);
}

}  // namespace
}  // namespace memonger::alloc
