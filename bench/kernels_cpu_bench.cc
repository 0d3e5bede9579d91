// CPU kernel speed on the shapes of the fp16 transformer block: the MLP MatMul
// [1, 1024, 768] x [768, 3072] and EfficientAttention at L = 1024, H = 12, d = 64, in float16
// and float32; and Conv on ResNet-18's layers. Counter GFLOPs: useful floating-point operations per second (2 per multiply-add;
// attention counts q k^T and p v: 4 L^2 d per head).
//
//   build-dir/bench/kernels_cpu_bench --benchmark_counters_tabular=true
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "allocator/executor.h"
#include "benchmark/benchmark.h"
#include "graph/graph.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/float16.h"
#include "util/check.h"

namespace memonger::alloc {
namespace {

using graph::DataType;

// A tensor of uniform [-1, 1) values (fixed seed) in `dtype`, owned by the benchmark.
struct Tensor {
  graph::TensorType type;
  std::vector<std::byte> bytes;
};

Tensor Make(DataType dtype, std::vector<int64_t> dims, uint32_t seed) {
  Tensor t{graph::TensorType{dtype, std::move(dims)}, {}};
  int64_t n = 1;
  for (int64_t d : t.type.dims) n *= d;
  t.bytes.resize(static_cast<size_t>(n * graph::DataTypeSize(dtype)));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < n; ++i) {
    const float v = dist(rng);
    if (dtype == DataType::kFloat16) {
      reinterpret_cast<uint16_t*>(t.bytes.data())[i] = FloatToHalfBits(v);
    } else if (dtype == DataType::kFloat32) {
      reinterpret_cast<float*>(t.bytes.data())[i] = v;
    }
  }
  return t;
}

void Run(benchmark::State& state, const std::string& type, std::vector<Tensor*> inputs,
         std::vector<Tensor*> outputs, double flops, std::vector<graph::Attribute> attrs = {},
         int threads = 1) {
  const KernelTable table = MakeCpuKernelTable();
  const Kernel* kernel = table.Find(type);
  MG_CHECK(kernel != nullptr);
  graph::Op op;
  op.type = type;
  op.attrs = std::move(attrs);
  KernelArgs args;
  args.op = &op;
  args.threads = threads;
  for (Tensor* t : inputs) {
    args.inputs.push_back(t->bytes.data());
    args.input_types.push_back(&t->type);
  }
  for (Tensor* t : outputs) {
    args.outputs.push_back(t->bytes.data());
    args.output_types.push_back(&t->type);
  }
  for (auto _ : state) {
    const absl::Status s = (*kernel)(args);
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
  }
  state.counters["GFLOPs"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_MatMulMlp(benchmark::State& state) {
  const DataType dtype = state.range(0) == 16 ? DataType::kFloat16 : DataType::kFloat32;
  Tensor a = Make(dtype, {1, 1024, 768}, 1);
  Tensor b = Make(dtype, {768, 3072}, 2);
  Tensor y = Make(dtype, {1, 1024, 3072}, 3);
  Run(state, "MatMul", {&a, &b}, {&y}, 2.0 * 1024 * 768 * 3072);
}
BENCHMARK(BM_MatMulMlp)->Arg(16)->Arg(32)->Unit(benchmark::kMillisecond);

void BM_EfficientAttention(benchmark::State& state) {
  const DataType dtype = state.range(0) == 16 ? DataType::kFloat16 : DataType::kFloat32;
  const int64_t h = 12, l = 1024, d = 64;
  Tensor q = Make(dtype, {1, h, l, d}, 4);
  Tensor k = Make(dtype, {1, h, l, d}, 5);
  Tensor v = Make(dtype, {1, h, l, d}, 6);
  Tensor o = Make(dtype, {1, l, h * d}, 7);
  Tensor ws = Make(DataType::kFloat32, {l, d + 2}, 8);
  Run(state, "EfficientAttention", {&q, &k, &v}, {&o, &ws}, 4.0 * h * l * l * d);
}
BENCHMARK(BM_EfficientAttention)->Arg(16)->Arg(32)->Unit(benchmark::kMillisecond);

// Conv2D as ResNet-18 runs it at 224 px, one image: args (channels, size, kernel, stride),
// threads. 2 flops per multiply-add of the direct definition.
void BM_Conv(benchmark::State& state) {
  const int64_t c = state.range(0), size = state.range(1), k = state.range(2);
  const int64_t stride = state.range(3), pad = k / 2;
  const int64_t out = (size + 2 * pad - k) / stride + 1;
  Tensor x = Make(DataType::kFloat32, {1, c, size, size}, 1);
  Tensor w = Make(DataType::kFloat32, {c, c, k, k}, 2);
  Tensor y = Make(DataType::kFloat32, {1, c, out, out}, 3);
  Run(state, "Conv", {&x, &w}, {&y}, 2.0 * c * c * k * k * out * out,
      {{"kernel_shape", std::vector<int64_t>{k, k}},
       {"strides", std::vector<int64_t>{stride, stride}},
       {"pads", std::vector<int64_t>{pad, pad, pad, pad}}},
      static_cast<int>(state.range(4)));
}
BENCHMARK(BM_Conv)
    ->ArgNames({"c", "size", "k", "stride", "threads"})
    ->Args({64, 56, 3, 1, 1})
    ->Args({256, 14, 3, 1, 1})
    ->Args({512, 7, 3, 1, 1})
    ->Args({256, 56, 1, 1, 1})
    ->Args({64, 56, 3, 1, 2})
    ->Args({512, 7, 3, 1, 2})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace memonger::alloc

BENCHMARK_MAIN();
