#include "workloads/workload_attention.h"

#include <map>
#include <string>

#include "gmock/gmock.h"
#include "graph/tensor_type.h"
#include "gtest/gtest.h"

namespace memonger::graph {
namespace {

using ::testing::HasSubstr;

// Small dims: heads 2, dim 8 (d = 4), mlp 16, depth 2.
constexpr char kSmall[] = "attention:heads=2,dim=8,mlp=16,depth=2";

Graph Build(const std::string& extra) {
  absl::StatusOr<WorkloadSpec> spec = ParseWorkloadSpec(absl::StrCat(kSmall, ",", extra));
  EXPECT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<AttentionWorkload> w = ParseAttentionWorkload(*spec);
  EXPECT_TRUE(w.ok()) << w.status();
  absl::StatusOr<Graph> g = BuildAttentionGraph(*w);
  EXPECT_TRUE(g.ok()) << g.status();
  return *std::move(g);
}

std::string TypeOf(const Graph& g, const std::string& name) {
  const std::optional<ValueId> id = g.FindValue(name);
  if (!id.has_value()) return "absent";
  return TensorTypeToString(*g.value(*id).type);
}

std::map<std::string, int> OpCounts(const Graph& g) {
  std::map<std::string, int> counts;
  for (const Op& op : g.ops()) ++counts[op.type];
  return counts;
}

TEST(AttentionWorkloadTest, DefaultsAreTitanAsReleased) {
  absl::StatusOr<AttentionWorkload> w = ParseAttentionWorkload(*ParseWorkloadSpec("attention"));
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->n, 18000);
  EXPECT_EQ(w->tokens(), 18001);
  EXPECT_EQ(w->dim, 768);
  EXPECT_EQ(w->heads, 12);
  EXPECT_EQ(w->depth, 6);
  EXPECT_EQ(w->mlp, 3072);
  EXPECT_EQ(w->dtype, DataType::kFloat16);
  EXPECT_FALSE(w->efficient);
  EXPECT_TRUE(w->alibi);
  EXPECT_EQ(w->bias_dtype, DataType::kFloat32);
}

// Math kernel, fp32 bias, fp16 activations: a per-layer cast, scores and probabilities.
TEST(AttentionWorkloadTest, MathWithFp32BiasCastsPerLayer) {
  const Graph g = Build("n=7");  // L = 8
  EXPECT_EQ(TypeOf(g, "x"), "float16[1,8,8]");
  EXPECT_EQ(TypeOf(g, "coords"), "int64[7,2]");
  EXPECT_EQ(TypeOf(g, "alibi_bias"), "float32[1,2,8,8]");
  for (const char* block : {"b0/", "b1/"}) {
    SCOPED_TRACE(block);
    const std::string b = block;
    EXPECT_EQ(TypeOf(g, b + "bias_cast"), "float16[1,2,8,8]");
    EXPECT_EQ(TypeOf(g, b + "q"), "float16[1,2,8,4]");
    EXPECT_EQ(TypeOf(g, b + "kT"), "float16[1,2,4,8]");
    EXPECT_EQ(TypeOf(g, b + "scores"), "float16[1,2,8,8]");
    EXPECT_EQ(TypeOf(g, b + "probs"), "float16[1,2,8,8]");
    EXPECT_EQ(TypeOf(g, b + "attn"), "float16[1,8,8]");
    EXPECT_EQ(TypeOf(g, b + "gelu"), "float16[1,8,16]");
  }
  EXPECT_EQ(TypeOf(g, "y"), "float16[1,8,8]");
  // Per block: 9 (ln1, qkv, heads) + 1 cast + 9 (math attention with the bias add) + 10 (tail);
  // plus the bias builder.
  EXPECT_EQ(g.num_ops(), 2 * 29 + 1);
  const std::map<std::string, int> counts = OpCounts(g);
  EXPECT_EQ(counts.at("AlibiBias"), 1);
  EXPECT_EQ(counts.at("Cast"), 2);
  EXPECT_EQ(counts.at("AddAttentionBias"), 2);
  EXPECT_EQ(counts.at("Softmax"), 2);
  EXPECT_EQ(counts.count("EfficientAttention"), 0u);
  // The bias add and the linear layers' bias adds write in place.
  EXPECT_NE(g.value(*g.FindValue("b0/scores")).inplace_of, kNone);
}

TEST(AttentionWorkloadTest, EfficientWithPaddedFp16BiasNeedsNoCopies) {
  const Graph g = Build("n=9,kernel=efficient,bias_dtype=fp16,bias_pad=8");  // L = 10
  EXPECT_EQ(TypeOf(g, "alibi_bias"), "float16[1,2,10,16]");
  EXPECT_EQ(TypeOf(g, "b0/attn"), "float16[1,10,8]");
  EXPECT_EQ(TypeOf(g, "b0/attn_workspace"), "float32[10,6]");
  EXPECT_EQ(TypeOf(g, "b0/bias_cast"), "absent");
  EXPECT_EQ(TypeOf(g, "b0/bias_padded"), "absent");
  EXPECT_EQ(TypeOf(g, "b0/scores"), "absent");
  EXPECT_EQ(g.num_ops(), 2 * (9 + 1 + 10) + 1);
}

TEST(AttentionWorkloadTest, EfficientWithUnpaddedBiasPadsACopyPerLayer) {
  const Graph g = Build("n=9,kernel=efficient,bias_dtype=fp16");  // rows of 10
  EXPECT_EQ(TypeOf(g, "alibi_bias"), "float16[1,2,10,10]");
  EXPECT_EQ(TypeOf(g, "b0/bias_padded"), "float16[1,2,10,16]");
  EXPECT_EQ(TypeOf(g, "b1/bias_padded"), "float16[1,2,10,16]");
  EXPECT_EQ(OpCounts(g).at("PadLastDim"), 2);
  // Rows already a multiple of 8: no copy.
  const Graph aligned = Build("n=15,kernel=efficient,bias_dtype=fp16");  // L = 16
  EXPECT_EQ(OpCounts(aligned).count("PadLastDim"), 0u);
}

TEST(AttentionWorkloadTest, NoBiasHasNoBiasOps) {
  const Graph g = Build("n=7,bias=none");
  EXPECT_EQ(TypeOf(g, "coords"), "absent");
  EXPECT_EQ(TypeOf(g, "alibi_bias"), "absent");
  const std::map<std::string, int> counts = OpCounts(g);
  EXPECT_EQ(counts.count("AlibiBias") + counts.count("AddAttentionBias") + counts.count("Cast"),
            0u);
  EXPECT_EQ(g.num_ops(), 2 * (9 + 8 + 10));
}

TEST(AttentionWorkloadTest, BatchBroadcastOrRepeat) {
  const Graph expand = Build("n=7,batch=3,bias_dtype=fp16");
  EXPECT_EQ(TypeOf(expand, "alibi_bias"), "float16[1,2,8,8]");
  EXPECT_EQ(TypeOf(expand, "b0/scores"), "float16[3,2,8,8]");
  EXPECT_EQ(TypeOf(expand, "alibi_bias_batched"), "absent");
  const Graph repeat = Build("n=7,batch=3,bias_dtype=fp16,broadcast=repeat");
  EXPECT_EQ(TypeOf(repeat, "alibi_bias_batched"), "float16[3,2,8,8]");
}

TEST(AttentionWorkloadTest, Bf16AndFp32Activations) {
  EXPECT_EQ(TypeOf(Build("n=7,dtype=bf16,bias_dtype=bf16"), "b0/probs"), "bfloat16[1,2,8,8]");
  const Graph fp32 = Build("n=7,dtype=fp32");
  EXPECT_EQ(TypeOf(fp32, "b0/probs"), "float32[1,2,8,8]");
  EXPECT_EQ(TypeOf(fp32, "b0/bias_cast"), "absent");  // the fp32 bias is used as it is
}

// The parameters are those of a ViT block: 3D^2+3D (qkv), D^2+D (proj), 2DF+F+D (MLP), 4D
// (two LayerNorms), in the activation dtype.
TEST(AttentionWorkloadTest, ParameterBytesMatchTheBlockFormula) {
  const Graph g = Build("n=7");
  int64_t param_bytes = 0;
  for (const Value& v : g.values()) {
    if (v.role == Role::kParam) param_bytes += *ByteSize(*v.type, v.name);
  }
  const int64_t D = 8, F = 16;
  EXPECT_EQ(param_bytes, 2 * 2 * (3 * D * D + 3 * D + D * D + D + 2 * D * F + F + D + 4 * D));
}

struct BadAttention {
  std::string name;
  std::string spec;
  std::string error;
  absl::StatusCode code = absl::StatusCode::kInvalidArgument;
};
void PrintTo(const BadAttention& c, std::ostream* os) { *os << c.name; }

class BadAttentionWorkloadTest : public ::testing::TestWithParam<BadAttention> {};

TEST_P(BadAttentionWorkloadTest, IsAClearError) {
  const BadAttention& c = GetParam();
  absl::StatusOr<WorkloadSpec> spec = ParseWorkloadSpec(c.spec);
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::Status status;
  absl::StatusOr<AttentionWorkload> w = ParseAttentionWorkload(*spec);
  if (!w.ok()) {
    status = w.status();
  } else {
    status = BuildAttentionGraph(*w).status();
  }
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), c.code) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(c.error));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadAttentionWorkloadTest,
    ::testing::Values(
        BadAttention{"unknown_key", "attention:tokens=5", "unknown key 'tokens' (known: n, cls"},
        BadAttention{"n_zero", "attention:n=0", "n=0 is out of range"},
        BadAttention{"n_word", "attention:n=lots", "n=lots is not an integer"},
        BadAttention{"heads_not_dividing", "attention:dim=768,heads=10",
                     "heads=10 does not divide dim=768"},
        BadAttention{"bias_pad_negative", "attention:bias_pad=-8", "bias_pad=-8 is out of range"},
        BadAttention{"kernel_flash", "attention:kernel=flash",
                     "kernel=flash is not one of math, efficient"},
        BadAttention{"dtype_int8", "attention:dtype=int8", "dtype=int8 is not one of fp32, fp16, bf16"},
        BadAttention{"bias_dtype_without_bias", "attention:bias=none,bias_dtype=fp16",
                     "need bias=alibi"},
        BadAttention{"mode_word", "attention:mode=train", "mode=train is not one of"}),
    [](const ::testing::TestParamInfo<BadAttention>& info) { return info.param.name; });

}  // namespace
}  // namespace memonger::graph
