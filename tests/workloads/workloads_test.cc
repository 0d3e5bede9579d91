#include "workloads/workloads.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "graph/tensor_type.h"
#include "gtest/gtest.h"

namespace memonger::graph {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<Graph> Build(const std::string& text) {
  absl::StatusOr<WorkloadSpec> spec = ParseWorkloadSpec(text);
  if (!spec.ok()) return spec.status();
  return BuildWorkload(*spec);
}

// memonger's FC test net: layers x (FC, Relu), the prediction FC, Softmax, LabelCrossEntropy,
// AveragedLoss; the loss is declared and is the output.
TEST(WorkloadsTest, MlpIsMemongersFcNet) {
  absl::StatusOr<Graph> g = Build("mlp:layers=2,batch=4,dim=10,classes=8");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->num_ops(), 2 * 2 + 4);
  EXPECT_EQ(TensorTypeToString(*g->value(*g->FindValue("relu1")).type), "float32[4,10]");
  EXPECT_EQ(TensorTypeToString(*g->value(*g->FindValue("softmax")).type), "float32[4,8]");
  EXPECT_EQ(TensorTypeToString(*g->value(*g->FindValue("loss")).type), "float32[]");
  ASSERT_EQ(g->losses().size(), 1u);
  EXPECT_EQ(g->value(g->losses()[0]).name, "loss");
  EXPECT_EQ(g->value(*g->FindValue("fc1_w")).role, Role::kParam);
}

TEST(WorkloadsTest, AttentionIsBuilt) {
  absl::StatusOr<Graph> g = Build("attention:n=15,heads=2,dim=8,mlp=16,depth=1");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->AllTypesKnown());
}

// Caffe2's ResNet-50: 25.6 M float parameters (with BN statistics), 1000 classes; 53 convs.
TEST(WorkloadsTest, Resnet50InferenceAndTraining) {
  absl::StatusOr<Graph> g = Build("resnet50:batch=2,image=224");
  ASSERT_TRUE(g.ok()) << g.status();
  int64_t params = 0;
  int convs = 0;
  for (const Value& v : g->values()) {
    if (v.role == Role::kParam) params += *ByteSize(*v.type, v.name);
  }
  for (const Op& op : g->ops()) convs += op.type == "Conv";
  EXPECT_EQ(convs, 53);
  EXPECT_EQ(params, 102440608);  // 25,610,152 floats
  EXPECT_EQ(TensorTypeToString(*g->value(*g->FindValue("pool1")).type), "float32[2,64,56,56]");
  EXPECT_EQ(TensorTypeToString(*g->value(*g->FindValue("res5_2_sum")).type),
            "float32[2,2048,7,7]");
  EXPECT_EQ(TensorTypeToString(*g->value(*g->FindValue("pool5")).type), "float32[2,2048,1,1]");
  absl::StatusOr<Graph> training = Build("resnet50:batch=2,image=64,mode=training");
  ASSERT_TRUE(training.ok()) << training.status();
  int conv_grads = 0;
  for (const Op& op : training->ops()) conv_grads += op.type == "ConvGradient";
  EXPECT_EQ(conv_grads, 53);
  // Every conv weight, BN scale and bias, and the classifier have gradients (not BN's running
  // statistics).
  EXPECT_EQ(training->param_grads().size(), 53u + 2u * 53u + 2u);
}

TEST(WorkloadsTest, UnknownKindsAndKeysAreErrors) {
  absl::StatusOr<Graph> unknown = Build("transformer:n=5");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(std::string(unknown.status().message()),
              HasSubstr("unknown workload 'transformer' (known: attention, guillotine, mlp, random, randwire, resnet50)"));
  absl::StatusOr<Graph> key = Build("mlp:width=5");
  ASSERT_FALSE(key.ok());
  EXPECT_THAT(std::string(key.status().message()), HasSubstr("unknown key 'width'"));
  absl::StatusOr<Graph> training = Build("mlp:mode=training");
  ASSERT_TRUE(training.ok()) << training.status();
  EXPECT_EQ(training->param_grads().size(), 8u);
}

// The table of keys (WorkloadKeys, IsWorkloadSizeKey), which --fit checks against, says what
// each kind's parser reads: every key it lists is read (a bad value for it is an error naming
// it), a size key as an integer and a choice as a word.
TEST(WorkloadsTest, EveryKeyTheTableListsIsReadAsItSays) {
  for (const std::string kind : {"attention", "guillotine", "mlp", "random", "randwire",
                                 "resnet50"}) {
    const std::vector<std::string>& keys = WorkloadKeys(kind);
    ASSERT_FALSE(keys.empty()) << kind;
    for (const std::string& key : keys) {
      SCOPED_TRACE(kind + ":" + key);
      absl::StatusOr<Graph> g = Build(kind + ":" + key + "=bogus");
      ASSERT_FALSE(g.ok());
      EXPECT_THAT(std::string(g.status().message()),
                  HasSubstr(IsWorkloadSizeKey(kind, key) ? key + "=bogus is not an integer"
                                                         : key + "=bogus is not one of"));
    }
    absl::StatusOr<Graph> unknown = Build(kind + ":nosuchkey=1");
    ASSERT_FALSE(unknown.ok());
    EXPECT_THAT(std::string(unknown.status().message()),
                HasSubstr(absl::StrCat("unknown key 'nosuchkey' (known: ",
                                       absl::StrJoin(keys, ", "), ")")));
  }
}

}  // namespace
}  // namespace memonger::graph
