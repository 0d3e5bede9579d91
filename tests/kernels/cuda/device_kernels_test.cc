// The device kernels (kernels/cuda/kernels_device.h) against the CPU kernels, where no GPU exists:
// MakeDeviceKernelTableOnHost() runs the very bodies and the cuBLAS argument mapping that
// kernels_cuda.cu launches, so a wrong index, broadcast, transposition or leading dimension
// shows here as a difference from the CPU kernels.
//
//   - every variant of the attention workload (both attention kernels; float32, float16,
//     bfloat16; the bias options; inference and training) in a planned arena: each graph output
//     (training: the loss and every parameter gradient) against the CPU kernels' within a
//     tolerance by dtype, and byte-identical between --planner none and auto (in-place and
//     shared memory handled exactly);
//   - MatMul and MatMulGradient over the geometries the GEMM mapping must get right (batch
//     broadcast on either side, 1-D operands, transpositions, Caffe2's axis flattening), and the
//     ops the workloads do not reach (Sub, Div, Relu, Sigmoid, Tanh, ReduceSum over inner axes,
//     Transpose of 2-byte elements) one call at a time;
//   - bad arguments fail with the op's name before anything is launched.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "allocator/host_run.h"
#include "gtest/gtest.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cuda/device_kernel_util.h"
#include "kernels/cuda/kernels_device.h"
#include "memonger/planner.h"
#include "tests/kernel_test_support.h"
#include "workloads/workloads.h"

namespace memonger::testing {
namespace {

using graph::DataType;

absl::StatusOr<graph::Graph> Workload(const std::string& spec) {
  absl::StatusOr<graph::WorkloadSpec> parsed = graph::ParseWorkloadSpec(spec);
  if (!parsed.ok()) return parsed.status();
  return graph::BuildWorkload(*parsed);
}

// Patch coordinates on a 4-wide grid (seeded int64 would be all zeros: every ALiBi distance 0)
// and the math kernel's sqrt(scale) constant.
absl::flat_hash_map<std::string, alloc::TensorData> InputsFor(const graph::Graph& g, int64_t head_dim) {
  absl::flat_hash_map<std::string, alloc::TensorData> data;
  for (const graph::Value& v : g.values()) {
    if (v.producer != graph::kNone || !v.type.has_value()) continue;
    if (v.name == "coords" && v.type->dtype == DataType::kInt64) {
      std::vector<int64_t> xy;
      for (int64_t i = 0; i < v.type->dims[0]; ++i) {
        xy.push_back(i % 4);
        xy.push_back(i / 4);
      }
      data[v.name] = {*v.type, std::string(reinterpret_cast<const char*>(xy.data()),
                                           xy.size() * sizeof(int64_t))};
    } else if (v.name == "sqrt_scale") {
      const TestTensor t = MakeTensor(v.type->dtype, v.type->dims,
                                      {std::pow(static_cast<double>(head_dim), -0.25)});
      data[v.name] = {*v.type, std::string(reinterpret_cast<const char*>(t.bytes()),
                                           static_cast<size_t>(t.num_bytes()))};
    }
  }
  return data;
}

absl::StatusOr<alloc::HostRunReport> PlanAndRun(const graph::Graph& g, PlannerKind planner, bool training,
                                                alloc::NetRunTarget target, int64_t head_dim) {
  PlanOptions options;
  options.planner = planner;
  options.memonger.mode = training ? Mode::kTraining : Mode::kInference;
  options.time_limit_seconds = 0.2;
  absl::StatusOr<Plan> plan = PlanMemory(g, options);
  if (!plan.ok()) return plan.status();
  alloc::HostRunOptions run;
  run.seed = 11;
  run.data = InputsFor(g, head_dim);
  return alloc::RunNet(g, *plan, run, target);
}

std::vector<double> AsDoubles(const alloc::HostRunOutput& out) {
  TestTensor t = EmptyTensor(out.type.dtype, out.type.dims);
  std::memcpy(t.bytes(), out.bytes.data(), out.bytes.size());
  return ToDoubles(t);
}

// max |a - b| / max |b| (0 when b is all zero and a equals it).
double RelativeError(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

struct Variant {
  std::string spec;  // workload keys after the common ones
  double tolerance;  // max |device - cpu| / max |cpu| per output
};
void PrintTo(const Variant& v, std::ostream* os) { *os << v.spec; }

alloc::NetRunTarget OnHost(const alloc::KernelTable* kernels) {
  alloc::NetRunTarget target;
  target.kernels = kernels;
  return target;
}

// Runs `spec` with the CPU kernels and with `target`'s; every graph output must agree within
// `tolerance` and, when `also_unshared`, be byte-identical under --planner none.
void ExpectMatchesCpu(const std::string& spec, double tolerance, const alloc::NetRunTarget& target,
                      bool also_unshared) {
  absl::StatusOr<graph::Graph> g = Workload(spec);
  ASSERT_TRUE(g.ok()) << g.status();
  const bool training = spec.find("mode=training") != std::string::npos;
  absl::StatusOr<alloc::HostRunReport> cpu = PlanAndRun(*g, PlannerKind::kAuto, training, OnHost(nullptr), 8);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  absl::StatusOr<alloc::HostRunReport> shared = PlanAndRun(*g, PlannerKind::kAuto, training, target, 8);
  ASSERT_TRUE(shared.ok()) << shared.status();
  absl::StatusOr<alloc::HostRunReport> alone = shared;
  if (also_unshared) {
    alone = PlanAndRun(*g, PlannerKind::kNone, training, target, 8);
    ASSERT_TRUE(alone.ok()) << alone.status();
  }
  ASSERT_EQ(cpu->outputs.size(), shared->outputs.size());
  ASSERT_GE(cpu->outputs.size(), training ? 5u : 1u) << "training nets output the parameter gradients";
  double worst = 0;
  size_t nonzero = 0;
  for (size_t i = 0; i < cpu->outputs.size(); ++i) {
    const std::string& name = cpu->outputs[i].name;
    EXPECT_EQ(shared->outputs[i].bytes, alone->outputs[i].bytes)
        << name << ": the device kernels' result depends on the plan";
    const std::vector<double> want = AsDoubles(cpu->outputs[i]);
    const std::vector<double> got = AsDoubles(shared->outputs[i]);
    double scale = 0;
    for (double w : want) scale = std::max(scale, std::abs(w));
    // A gradient may be all zero (a Relu that is off everywhere); then it must be zero here too.
    if (scale > 0) ++nonzero;
    const double error = RelativeError(got, want);
    worst = std::max(worst, error);
    EXPECT_LE(error, tolerance) << name << " differs from the CPU kernels' result";
  }
  ASSERT_GE(2 * nonzero, cpu->outputs.size()) << "most outputs are all zero: the comparison would "
                                                 "prove little";
  std::cout << "  " << spec << ": worst relative error " << worst << " over "
            << cpu->outputs.size() << " outputs\n";
}

class AttentionOnDeviceKernels : public ::testing::TestWithParam<Variant> {};

// Batch 2 (bias broadcast and MatMul gradients summed over the batch), two blocks, head dim 8.
constexpr char kCommon[] = "attention:n=15,batch=2,dim=16,heads=2,depth=2,mlp=32,";

TEST_P(AttentionOnDeviceKernels, MatchCpuKernelsAndArePlanIndependent) {
  const alloc::KernelTable device = alloc::MakeDeviceKernelTableOnHost();
  ExpectMatchesCpu(absl::StrCat(kCommon, GetParam().spec), GetParam().tolerance, OnHost(&device),
                   /*also_unshared=*/true);
}

// The same nets on a GPU, where there is one: the CUDA launches, cuBLAS and the copies.
TEST_P(AttentionOnDeviceKernels, MatchCpuKernelsOnTheGpu) {
  absl::StatusOr<alloc::KernelTable> cuda = alloc::MakeCudaKernelTable();
  if (!cuda.ok()) GTEST_SKIP() << "no CUDA kernels here: " << cuda.status();
  alloc::NetRunTarget target;
  target.device = alloc::Device::kCuda;
  target.kernels = &*cuda;
  // cuBLAS may sum in another order (and use tensor cores for the half types): 10x the margin.
  ExpectMatchesCpu(absl::StrCat(kCommon, GetParam().spec), 10 * GetParam().tolerance, target,
                   /*also_unshared=*/false);
}

// Tolerances: float32 differs only in summation order and libm vs CUDA-style math (expected
// around 1e-6); the half types round every stored value, and training amplifies that through
// the backward pass.
INSTANTIATE_TEST_SUITE_P(
    Variants, AttentionOnDeviceKernels,
    ::testing::Values(
        Variant{"dtype=fp32,bias_dtype=fp32,kernel=math", 1e-5},
        Variant{"dtype=fp32,bias_dtype=fp32,kernel=efficient", 1e-5},
        Variant{"dtype=fp16,bias_dtype=fp32,kernel=math,broadcast=repeat", 2e-3},
        Variant{"dtype=fp16,bias_dtype=fp16,kernel=math,bias_pad=8", 2e-3},
        Variant{"dtype=fp16,bias_dtype=fp16,kernel=efficient,bias_pad=8", 2e-3},
        Variant{"dtype=bf16,bias_dtype=bf16,kernel=efficient,bias_pad=5", 2e-2},
        Variant{"dtype=fp16,bias=none,kernel=efficient", 2e-3},
        Variant{"dtype=fp32,bias_dtype=fp32,kernel=math,mode=training", 1e-4},
        Variant{"dtype=fp32,bias_dtype=fp32,kernel=efficient,mode=training", 1e-4},
        Variant{"dtype=fp16,bias_dtype=fp32,kernel=math,mode=training", 1e-2},
        Variant{"dtype=fp16,bias_dtype=fp16,kernel=efficient,bias_pad=8,mode=training", 1e-2},
        Variant{"dtype=bf16,bias_dtype=bf16,kernel=math,broadcast=repeat,mode=training", 5e-2}));

// memonger's MLP (FC, Relu, Softmax, LabelCrossEntropy, AveragedLoss and their gradients).
TEST(DeviceWorkloads, MlpTrainingMatchesCpuKernels) {
  const alloc::KernelTable device = alloc::MakeDeviceKernelTableOnHost();
  ExpectMatchesCpu("mlp:layers=3,batch=4,dim=10,classes=8,mode=training", 1e-5, OnHost(&device),
                   /*also_unshared=*/true);
}

// The random workload: FC, MatMul, Sigmoid, Tanh, Gelu, LayerNormalization, Softmax, Concat,
// Split, views and in-place ops, in every storage type, with their gradients.
TEST(DeviceWorkloads, RandomTrainingNetsMatchCpuKernels) {
  const alloc::KernelTable device = alloc::MakeDeviceKernelTableOnHost();
  for (const char* spec : {"random:ops=80,seed=3,width=16,mode=training",
                           "random:ops=80,seed=5,width=16,dtype=fp16,inplace=60,mode=training",
                           "random:ops=80,seed=7,width=16,dtype=bf16,mode=training"}) {
    SCOPED_TRACE(spec);
    const double tolerance = std::string(spec).find("fp16") != std::string::npos   ? 1e-2
                             : std::string(spec).find("bf16") != std::string::npos ? 5e-2
                                                                                   : 1e-4;
    ExpectMatchesCpu(spec, tolerance, OnHost(&device), /*also_unshared=*/true);
  }
}

// The scratch block the CUDA kernels allocate before the first step: DeviceScratchBytes(graph)
// is enough for every net here (the host backend takes its scratch from a block of exactly that
// size, as the CUDA backend does, and the outputs still match the CPU kernels; an upper bound,
// since a MatMulGradient asks only when it sums over a broadcast batch), and the kernels really
// take their scratch from the block: with none, the run fails naming it.
TEST(DeviceScratch, TheBlockSizedForANetIsEnoughAndNeeded) {
  int needed_somewhere = 0;
  for (const char* spec :
       {"attention:n=15,batch=2,dim=16,heads=2,depth=2,mlp=32,kernel=math,mode=training",
        "attention:n=15,batch=2,dim=16,heads=2,depth=2,mlp=32,kernel=efficient,mode=training",
        "random:ops=80,seed=3,width=16,mode=training", "mlp:layers=3,mode=training"}) {
    SCOPED_TRACE(spec);
    absl::StatusOr<graph::Graph> g = Workload(spec);
    ASSERT_TRUE(g.ok()) << g.status();
    const int64_t bytes = alloc::DeviceScratchBytes(*g);
    const alloc::KernelTable pooled = alloc::MakeDeviceKernelTableOnHost(bytes);
    ExpectMatchesCpu(spec, 1e-4, OnHost(&pooled), /*also_unshared=*/false);
    if (bytes == 0) continue;
    ++needed_somewhere;
    const alloc::KernelTable none = alloc::MakeDeviceKernelTableOnHost(0);
    absl::StatusOr<alloc::HostRunReport> run =
        PlanAndRun(*g, PlannerKind::kAuto, true, OnHost(&none), 8);
    ASSERT_FALSE(run.ok());
    EXPECT_EQ(run.status().code(), absl::StatusCode::kResourceExhausted) << run.status();
    EXPECT_NE(run.status().message().find("scratch block"), std::string::npos);
  }
  EXPECT_GE(needed_somewhere, 2);  // MatMulGradient and LayerNormalizationGradient ask for some
}

TEST(DeviceScratch, PoolReusesReleasedBytesInOrder) {
  std::vector<std::byte> block(4096);
  const alloc::device::ScratchPool pool(block.data(), 4096);
  absl::StatusOr<std::shared_ptr<void>> a = pool.Take(1000);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->get(), block.data());
  absl::StatusOr<std::shared_ptr<void>> b = pool.Take(1000);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->get(), block.data() + 1024);  // 256-byte aligned
  EXPECT_EQ(pool.Take(3000).status().code(), absl::StatusCode::kResourceExhausted);
  a->reset();  // released out of order: its bytes stay taken while b lives
  absl::StatusOr<std::shared_ptr<void>> c = pool.Take(100);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->get(), block.data() + 2048);
  c->reset();
  b->reset();  // now everything is free again
  absl::StatusOr<std::shared_ptr<void>> d = pool.Take(4096);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->get(), block.data());
}

TEST(DeviceWorkloads, MlpTrainingMatchesCpuKernelsOnTheGpu) {
  absl::StatusOr<alloc::KernelTable> cuda = alloc::MakeCudaKernelTable();
  if (!cuda.ok()) GTEST_SKIP() << "no CUDA kernels here: " << cuda.status();
  alloc::NetRunTarget target;
  target.device = alloc::Device::kCuda;
  target.kernels = &*cuda;
  ExpectMatchesCpu("mlp:layers=3,batch=4,dim=10,classes=8,mode=training", 1e-4, target,
                   /*also_unshared=*/false);
}

// A sequence long enough that every row launch spans several blocks of 256 threads (L = 301),
// with a real head dimension (32): the multi-block paths the n = 15 variants never reach. GPU
// only (the CPU reference is cheap; the host backend of the device kernels is slow at this size).
TEST(DeviceWorkloads, LongerAttentionMatchesCpuKernelsOnTheGpu) {
  absl::StatusOr<alloc::KernelTable> cuda = alloc::MakeCudaKernelTable();
  if (!cuda.ok()) GTEST_SKIP() << "no CUDA kernels here: " << cuda.status();
  alloc::NetRunTarget target;
  target.device = alloc::Device::kCuda;
  target.kernels = &*cuda;
  for (const char* variant : {"kernel=math", "kernel=efficient", "kernel=math,mode=training",
                              "kernel=efficient,mode=training"}) {
    SCOPED_TRACE(variant);
    ExpectMatchesCpu(absl::StrCat("attention:n=300,batch=1,dim=64,heads=2,depth=1,mlp=128,"
                                  "dtype=fp32,bias_dtype=fp32,",
                                  variant),
                     1e-4, target, /*also_unshared=*/false);
  }
}

// ---- one op at a time ------------------------------------------------------------------------

// Runs `type` with the CPU kernels and the device kernels on copies of the same inputs and
// compares every output.
void ExpectSameAsCpu(const std::string& type, const std::vector<graph::Attribute>& attrs,
                     const std::vector<TestTensor>& inputs,
                     const std::vector<graph::TensorType>& outputs, double rtol = 1e-5) {
  std::vector<TestTensor> in = inputs;
  std::vector<TestTensor*> in_ptrs;
  for (TestTensor& t : in) in_ptrs.push_back(&t);
  std::vector<TestTensor> cpu, dev;
  for (const graph::TensorType& t : outputs) {
    cpu.push_back(EmptyTensor(t.dtype, t.dims));
    dev.push_back(EmptyTensor(t.dtype, t.dims));
  }
  std::vector<TestTensor*> cpu_ptrs, dev_ptrs;
  for (size_t i = 0; i < outputs.size(); ++i) {
    cpu_ptrs.push_back(&cpu[i]);
    dev_ptrs.push_back(&dev[i]);
  }
  ASSERT_TRUE(RunKernel(type, attrs, in_ptrs, cpu_ptrs).ok());
  const absl::Status status =
      RunKernelWith(alloc::MakeDeviceKernelTableOnHost(), type, attrs, in_ptrs, dev_ptrs);
  ASSERT_TRUE(status.ok()) << status;
  for (size_t i = 0; i < outputs.size(); ++i) {
    EXPECT_EQ(CompareClose(ToDoubles(dev[i]), ToDoubles(cpu[i]), rtol, 1e-6), "")
        << type << " output " << i;
  }
}

TestTensor Random(DataType dtype, std::vector<int64_t> dims, uint64_t seed) {
  return MakeTensor(dtype, dims, RandomValues(Count(dims), seed));
}

std::vector<int64_t> MatMulDims(std::vector<int64_t> a, std::vector<int64_t> b, bool ta, bool tb) {
  // numpy's rule, as the schema infers it (enough for the cases below).
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  const int64_t m = ta ? a[a.size() - 1] : a[a.size() - 2];
  const int64_t n = tb ? b[b.size() - 2] : b[b.size() - 1];
  std::vector<int64_t> batch_a(a.begin(), a.end() - 2), batch_b(b.begin(), b.end() - 2);
  const size_t rank = std::max(batch_a.size(), batch_b.size());
  std::vector<int64_t> out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i + batch_a.size() >= rank ? batch_a[i + batch_a.size() - rank] : 1;
    const int64_t db = i + batch_b.size() >= rank ? batch_b[i + batch_b.size() - rank] : 1;
    out[i] = std::max(da, db);
  }
  out.push_back(m);
  out.push_back(n);
  return out;
}

struct MatMulCase {
  std::vector<int64_t> a, b;
  bool trans_a = false, trans_b = false;
};

TEST(DeviceMatMul, GeometriesMatchCpuForwardAndBackward) {
  const MatMulCase cases[] = {
      {{5, 7}, {7, 3}},
      {{2, 3, 5, 7}, {7, 4}},               // B broadcast over two batch dims
      {{5, 7}, {2, 3, 7, 4}},               // A broadcast
      {{2, 1, 5, 7}, {1, 3, 7, 4}},         // both broadcast, on different dims
      {{3, 5, 7}, {3, 7, 4}},               // plain batch
      {{7}, {2, 7, 4}},                     // 1-D A
      {{2, 5, 7}, {7}},                     // 1-D B
      {{3, 7, 5}, {3, 4, 7}, true, true},   // both transposed
      {{7, 5}, {2, 7, 4}, true, false},     // transposed, broadcast A
      {{2, 5, 7}, {4, 7}, false, true},     // transposed, broadcast B
  };
  for (const DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
    for (const MatMulCase& c : cases) {
      SCOPED_TRACE(absl::StrCat(graph::DataTypeName(dtype), " A ", graph::DimsToString(c.a), " B ",
                                graph::DimsToString(c.b), " ta ", c.trans_a, " tb ", c.trans_b));
      std::vector<graph::Attribute> attrs;
      if (c.trans_a) attrs.push_back(graph::Attribute{"trans_a", int64_t{1}});
      if (c.trans_b) attrs.push_back(graph::Attribute{"trans_b", int64_t{1}});
      const std::vector<int64_t> y = MatMulDims(c.a, c.b, c.trans_a, c.trans_b);
      const TestTensor a = Random(dtype, c.a, 1), b = Random(dtype, c.b, 2);
      const double rtol = dtype == DataType::kFloat32 ? 1e-5 : 2e-3;
      ExpectSameAsCpu("MatMul", attrs, {a, b}, {{dtype, y}}, rtol);
      ExpectSameAsCpu("MatMulGradient", attrs, {Random(dtype, y, 3), a, b},
                      {{dtype, c.a}, {dtype, c.b}}, rtol);
    }
  }
}

TEST(DeviceMatMul, CaffeAxisFlattening) {
  const std::vector<graph::Attribute> attrs = {graph::Attribute{"axis_a", int64_t{2}},
                                               graph::Attribute{"axis_b", int64_t{1}}};
  const TestTensor a = Random(DataType::kFloat32, {2, 3, 4, 5}, 4);
  const TestTensor b = Random(DataType::kFloat32, {20, 3, 2}, 5);
  ExpectSameAsCpu("MatMul", attrs, {a, b}, {{DataType::kFloat32, {6, 6}}});
  ExpectSameAsCpu("MatMulGradient", attrs, {Random(DataType::kFloat32, {6, 6}, 6), a, b},
                  {{DataType::kFloat32, {2, 3, 4, 5}}, {DataType::kFloat32, {20, 3, 2}}});
}

TEST(DeviceFc, ForwardAndBackwardMatchCpu) {
  for (const DataType dtype : {DataType::kFloat32, DataType::kBFloat16}) {
    SCOPED_TRACE(graph::DataTypeName(dtype));
    const double rtol = dtype == DataType::kFloat32 ? 1e-5 : 1e-2;
    // X [2, 3, 4] flattened at axis 1 to [2, 12]; W [5, 12]; FCTransposed's W [12, 5].
    const TestTensor x = Random(dtype, {2, 3, 4}, 30), b = Random(dtype, {5}, 31);
    const TestTensor w = Random(dtype, {5, 12}, 32), wt = Random(dtype, {12, 5}, 33);
    const TestTensor dy = Random(dtype, {2, 5}, 34);
    ExpectSameAsCpu("FC", {}, {x, w, b}, {{dtype, {2, 5}}}, rtol);
    ExpectSameAsCpu("FCTransposed", {}, {x, wt, b}, {{dtype, {2, 5}}}, rtol);
    ExpectSameAsCpu("FCGradient", {}, {x, w, dy}, {{dtype, {5, 12}}, {dtype, {5}}, {dtype, {2, 3, 4}}},
                    rtol);
    ExpectSameAsCpu("FCTransposedGradient", {}, {x, wt, dy},
                    {{dtype, {12, 5}}, {dtype, {5}}, {dtype, {2, 3, 4}}}, rtol);
    // axis 2: X as [6, 4], W [5, 4].
    ExpectSameAsCpu("FC", {graph::Attribute{"axis", int64_t{2}}}, {x, Random(dtype, {5, 4}, 35), b},
                    {{dtype, {2, 3, 5}}}, rtol);
  }
  const TestTensor p = MakeTensor(DataType::kFloat32, {3, 4}, {0.1, 0.2, 0.3, 0.4, 0.7, 0.1, 0.1, 0.1,
                                                               0.0, 0.5, 0.25, 0.25});
  const TestTensor label = MakeTensor(DataType::kInt32, {3}, {3, 0, 0});  // the last: p = 0
  ExpectSameAsCpu("LabelCrossEntropy", {}, {p, label}, {{DataType::kFloat32, {3}}});
  ExpectSameAsCpu("LabelCrossEntropyGradient", {}, {p, label, Random(DataType::kFloat32, {3}, 36)},
                  {{DataType::kFloat32, {3, 4}}});
  TestTensor bad_label = MakeTensor(DataType::kInt32, {3}, {3, 4, 0});
  TestTensor probs = p;
  TestTensor y = EmptyTensor(DataType::kFloat32, {3});
  const absl::Status status = RunKernelWith(alloc::MakeDeviceKernelTableOnHost(), "LabelCrossEntropy",
                                            {}, {&probs, &bad_label}, {&y});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("label[1] = 4"), std::string::npos) << status;
}

TEST(DeviceOps, PointwiseAndReductionsMatchCpu) {
  const TestTensor x = Random(DataType::kFloat16, {3, 4, 5}, 7);
  const TestTensor row = Random(DataType::kFloat16, {5}, 8);
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    SCOPED_TRACE(op);
    ExpectSameAsCpu(op, {}, {x, row}, {{DataType::kFloat16, {3, 4, 5}}}, 1e-3);
    ExpectSameAsCpu(op, {}, {Random(DataType::kFloat16, {4, 1}, 9), x},
                    {{DataType::kFloat16, {3, 4, 5}}}, 1e-3);
  }
  for (const char* op : {"Relu", "Gelu", "Sigmoid", "Tanh"}) {
    SCOPED_TRACE(op);
    ExpectSameAsCpu(op, {}, {x}, {{DataType::kFloat16, {3, 4, 5}}}, 1e-3);
  }
  ExpectSameAsCpu("Gelu", {graph::Attribute{"approximate", std::string("tanh")}}, {x},
                  {{DataType::kFloat16, {3, 4, 5}}}, 1e-3);
  ExpectSameAsCpu("Sum", {}, {x, row, Random(DataType::kFloat16, {4, 5}, 10)},
                  {{DataType::kFloat16, {3, 4, 5}}}, 1e-3);
  const TestTensor f = Random(DataType::kFloat32, {3, 4, 5}, 11);
  ExpectSameAsCpu("ReduceSum", {graph::Attribute{"axes", std::vector<int64_t>{0, 2}},
                                graph::Attribute{"keepdims", int64_t{1}}},
                  {f}, {{DataType::kFloat32, {1, 4, 1}}});
  ExpectSameAsCpu("ReduceSum", {graph::Attribute{"keepdims", int64_t{0}}}, {f},
                  {{DataType::kFloat32, {}}});
  ExpectSameAsCpu("Softmax", {graph::Attribute{"axis", int64_t{1}}}, {f}, {{DataType::kFloat32, {3, 4, 5}}});
  ExpectSameAsCpu("Transpose", {graph::Attribute{"perm", std::vector<int64_t>{2, 0, 1}}}, {x},
                  {{DataType::kFloat16, {5, 3, 4}}}, 0);
  ExpectSameAsCpu("Cast", {graph::Attribute{"to", std::string("bfloat16")}}, {f},
                  {{DataType::kBFloat16, {3, 4, 5}}}, 0);
  ExpectSameAsCpu("Concat", {graph::Attribute{"axis", int64_t{1}}}, {f, Random(DataType::kFloat32, {3, 2, 5}, 12)},
                  {{DataType::kFloat32, {3, 6, 5}}}, 0);
  ExpectSameAsCpu("Split", {graph::Attribute{"axis", int64_t{2}}}, {f},
                  {{DataType::kFloat32, {3, 4, 2}}, {DataType::kFloat32, {3, 4, 3}}}, 0);
  ExpectSameAsCpu("PadLastDim", {graph::Attribute{"multiple", int64_t{8}}}, {x},
                  {{DataType::kFloat16, {3, 4, 8}}}, 0);
  // LayerNormalization over the last two dims with a broadcast Scale, and its gradient.
  const TestTensor scale = Random(DataType::kFloat32, {1, 5}, 13);
  const TestTensor bias = Random(DataType::kFloat32, {4, 5}, 14);
  ExpectSameAsCpu("LayerNormalization", {graph::Attribute{"axis", int64_t{1}}}, {f, scale, bias},
                  {{DataType::kFloat32, {3, 4, 5}}, {DataType::kFloat32, {3, 1, 1}},
                   {DataType::kFloat32, {3, 1, 1}}});
  const TestTensor mean = Random(DataType::kFloat32, {3, 1, 1}, 15);
  const TestTensor inv = MakeTensor(DataType::kFloat32, {3, 1, 1}, {0.5, 1.5, 2.0});
  ExpectSameAsCpu("LayerNormalizationGradient", {graph::Attribute{"axis", int64_t{1}}},
                  {Random(DataType::kFloat32, {3, 4, 5}, 16), f, scale, mean, inv},
                  {{DataType::kFloat32, {3, 4, 5}}, {DataType::kFloat32, {1, 5}},
                   {DataType::kFloat32, {1, 5}}}, 1e-4);
}

TEST(DeviceOps, InPlaceElementwiseWritesOverItsInput) {
  TestTensor s = Random(DataType::kFloat16, {2, 3, 4}, 17);
  TestTensor bias = Random(DataType::kFloat16, {4}, 18);
  TestTensor cpu = s;
  ASSERT_TRUE(RunKernel("Add", {}, {&cpu, &bias}, {&cpu}).ok());
  ASSERT_TRUE(RunKernelWith(alloc::MakeDeviceKernelTableOnHost(), "Add", {}, {&s, &bias}, {&s}).ok());
  EXPECT_EQ(ToDoubles(s), ToDoubles(cpu));
}

TEST(DeviceOps, BadArgumentsNameTheOp) {
  const alloc::KernelTable device = alloc::MakeDeviceKernelTableOnHost();
  TestTensor a = Random(DataType::kFloat32, {2, 3}, 19);
  TestTensor b = Random(DataType::kFloat32, {4, 5}, 20);
  TestTensor y = EmptyTensor(DataType::kFloat32, {2, 5});
  absl::Status status = RunKernelWith(device, "MatMul", {}, {&a, &b}, {&y});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("MatMul"), std::string::npos) << status;

  TestTensor d = MakeTensor(DataType::kFloat64, {2}, {1, 2});
  TestTensor e = EmptyTensor(DataType::kFloat64, {2});
  status = RunKernelWith(device, "Relu", {}, {&d}, {&e});
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
  EXPECT_NE(status.message().find("float64"), std::string::npos) << status;

  // A partial overlap of output and input is refused, not computed.
  TestTensor big = Random(DataType::kFloat32, {8}, 21);
  TestTensor x = big, z = big;
  x.type.dims = {4};
  z.type.dims = {4};
  x.shift = big.shift;
  z.shift = big.shift;
  absl::Status overlap;
  {
    alloc::KernelArgs args;
    graph::Op op;
    op.name = "t";
    op.type = "Relu";
    args.op = &op;
    args.inputs = {big.bytes()};
    args.input_types = {&x.type};
    args.outputs = {big.bytes() + 8};
    args.output_types = {&z.type};
    overlap = (*device.Find("Relu"))(args);
  }
  EXPECT_EQ(overlap.code(), absl::StatusCode::kFailedPrecondition) << overlap;

  // A value off its element alignment (a plan with --alignment 1): refused before any load.
  {
    TestTensor raw = Random(DataType::kFloat32, {9}, 22);
    graph::TensorType four{DataType::kFloat32, {4}};
    alloc::KernelArgs args;
    graph::Op op;
    op.type = "Relu";
    args.op = &op;
    args.inputs = {raw.bytes() + 2};
    args.input_types = {&four};
    args.outputs = {raw.bytes() + 20};
    args.output_types = {&four};
    const absl::Status misaligned = (*device.Find("Relu"))(args);
    EXPECT_EQ(misaligned.code(), absl::StatusCode::kInvalidArgument) << misaligned;
    EXPECT_NE(misaligned.message().find("--alignment"), std::string::npos) << misaligned;
  }

  // The table is for one device: values elsewhere are refused.
  alloc::KernelArgs args;
  graph::Op op;
  op.type = "Relu";
  args.op = &op;
  args.device = alloc::Device::kCuda;
  args.inputs = {a.bytes()};
  args.input_types = {&a.type};
  args.outputs = {a.bytes()};
  args.output_types = {&a.type};
  EXPECT_EQ((*device.Find("Relu"))(args).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CudaKernelTable, MatchesTheBuild) {
  absl::StatusOr<alloc::KernelTable> table = alloc::MakeCudaKernelTable();
  if (!alloc::BuiltWithCuda()) {
    ASSERT_FALSE(table.ok());
    EXPECT_EQ(table.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(table.status().message().find("without CUDA"), std::string::npos);
    return;
  }
  if (!table.ok()) {
    GTEST_SKIP() << "no usable CUDA device: " << table.status();
  }
  EXPECT_GE(table->size(), 30);
}

}  // namespace
}  // namespace memonger::testing
