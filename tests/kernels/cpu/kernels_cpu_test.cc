// The CPU kernel table: every op the kernels issue asked for has a kernel; kernels refuse
// device memory and wrong argument counts with a status naming the op.
#include "kernels/cpu/kernels_cpu.h"

#include "absl/strings/match.h"
#include "graph/graph.h"
#include "gtest/gtest.h"
#include "tests/kernel_test_support.h"
#include "workloads/workloads.h"

namespace memonger::alloc {
namespace {

TEST(KernelsCpuTest, TableHasTheOpsOfTheBrief) {
  const KernelTable table = MakeCpuKernelTable();
  for (const char* type :
       {"MatMul", "Gemm", "FC", "Add", "Sub", "Mul", "Div", "Relu", "Gelu", "Sigmoid", "Tanh",
        "Exp", "Log", "Sqrt", "Softmax", "LayerNormalization", "Transpose", "Reshape", "Flatten",
        "Squeeze", "Unsqueeze", "Identity", "Cast", "Concat", "Split", "Slice", "Pad",
        "ReduceMean", "ReduceSum", "Where", "Shape", "Gather", "AlibiBias",
        "EfficientAttention", "GlobalAveragePool", "GlobalMaxPool", "HardSwish", "Dropout",
        "Range", "NonZero", "NonMaxSuppression", "RoiAlign"}) {
    EXPECT_NE(table.Find(type), nullptr) << type;
  }
  EXPECT_EQ(table.Find("NegativeLogLikelihoodLoss"), nullptr);
}

// Every op of the generated training nets (forward ops, saved statistics, the gradient ops of
// graph/gradient_builder.h) has a kernel, so they run for real (tests/allocator/training_run_test.cc).
TEST(KernelsCpuTest, TableCoversTheGeneratedTrainingNets) {
  const KernelTable table = MakeCpuKernelTable();
  for (const char* spec :
       {"mlp:mode=training", "resnet50:batch=1,image=32,mode=training",
        "attention:n=15,heads=2,dim=16,mlp=32,depth=1,mode=training",
        "attention:n=14,heads=2,dim=16,mlp=32,depth=1,batch=2,kernel=efficient,mode=training,"
        "broadcast=repeat"}) {
    absl::StatusOr<graph::Graph> g = graph::BuildWorkload(*graph::ParseWorkloadSpec(spec));
    ASSERT_TRUE(g.ok()) << spec << ": " << g.status();
    for (const graph::Op& op : g->ops()) EXPECT_NE(table.Find(op.type), nullptr) << spec << ": " << op.type;
  }
}

TEST(KernelsCpuTest, DeviceMemoryAndArityAreRefused) {
  const KernelTable table = MakeCpuKernelTable();
  testing::TestTensor x = testing::MakeTensor(graph::DataType::kFloat32, {2}, {1, 2});
  graph::Op op;
  op.type = "Relu";
  KernelArgs args;
  args.op = &op;
  args.device = Device::kCuda;
  args.inputs = {x.bytes()};
  args.input_types = {&x.type};
  args.outputs = {x.bytes()};
  args.output_types = {&x.type};
  absl::Status s = (*table.Find("Relu"))(args);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(s.message(), "Relu")) << s;
  args.device = Device::kHost;
  args.outputs.clear();
  args.output_types.clear();
  s = (*table.Find("Relu"))(args);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "outputs")) << s;
}

}  // namespace
}  // namespace memonger::alloc
