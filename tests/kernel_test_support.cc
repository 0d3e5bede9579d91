#include "tests/kernel_test_support.h"

#include <cmath>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "allocator/executor.h"
#include "graph/graph.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/float16.h"

namespace memonger::testing {

int64_t Count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

namespace {

using graph::DataType;

TestTensor Allocate(DataType dtype, std::vector<int64_t> dims) {
  TestTensor t;
  t.type = graph::TensorType{dtype, std::move(dims)};
  const size_t bytes = static_cast<size_t>(Count(t.type.dims) * graph::DataTypeSize(dtype));
  t.storage.assign(bytes + 64, std::byte{0xA5});
  const auto address = reinterpret_cast<uintptr_t>(t.storage.data());
  t.shift = static_cast<size_t>((64 - address % 64) % 64);
  return t;
}

void StoreDouble(DataType dtype, std::byte* p, int64_t i, double v) {
  switch (dtype) {
    case DataType::kFloat32: reinterpret_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DataType::kFloat64: reinterpret_cast<double*>(p)[i] = v; break;
    case DataType::kFloat16:
      reinterpret_cast<uint16_t*>(p)[i] = alloc::FloatToHalfBits(static_cast<float>(v));
      break;
    case DataType::kBFloat16:
      reinterpret_cast<uint16_t*>(p)[i] = alloc::FloatToBFloat16Bits(static_cast<float>(v));
      break;
    case DataType::kInt64: reinterpret_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); break;
    case DataType::kInt32: reinterpret_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); break;
    case DataType::kInt16: reinterpret_cast<int16_t*>(p)[i] = static_cast<int16_t>(v); break;
    case DataType::kInt8: reinterpret_cast<int8_t*>(p)[i] = static_cast<int8_t>(v); break;
    case DataType::kUInt8: reinterpret_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); break;
    case DataType::kBool: reinterpret_cast<bool*>(p)[i] = v != 0; break;
    default: break;
  }
}

double LoadDouble(DataType dtype, const std::byte* p, int64_t i) {
  switch (dtype) {
    case DataType::kFloat32: return reinterpret_cast<const float*>(p)[i];
    case DataType::kFloat64: return reinterpret_cast<const double*>(p)[i];
    case DataType::kFloat16: return alloc::HalfBitsToFloat(reinterpret_cast<const uint16_t*>(p)[i]);
    case DataType::kBFloat16:
      return alloc::BFloat16BitsToFloat(reinterpret_cast<const uint16_t*>(p)[i]);
    case DataType::kInt64: return static_cast<double>(reinterpret_cast<const int64_t*>(p)[i]);
    case DataType::kInt32: return reinterpret_cast<const int32_t*>(p)[i];
    case DataType::kInt16: return reinterpret_cast<const int16_t*>(p)[i];
    case DataType::kInt8: return reinterpret_cast<const int8_t*>(p)[i];
    case DataType::kUInt8: return reinterpret_cast<const uint8_t*>(p)[i];
    case DataType::kBool: return reinterpret_cast<const bool*>(p)[i] ? 1 : 0;
    default: return 0;
  }
}

}  // namespace

int64_t TestTensor::num_bytes() const {
  return Count(type.dims) * graph::DataTypeSize(type.dtype);
}

TestTensor MakeTensor(DataType dtype, std::vector<int64_t> dims, const std::vector<double>& values) {
  TestTensor t = Allocate(dtype, std::move(dims));
  const int64_t n = Count(t.type.dims);
  for (int64_t i = 0; i < n && i < static_cast<int64_t>(values.size()); ++i) {
    StoreDouble(dtype, t.bytes(), i, values[i]);
  }
  return t;
}

TestTensor EmptyTensor(DataType dtype, std::vector<int64_t> dims) {
  return Allocate(dtype, std::move(dims));
}

std::vector<double> RandomValues(int64_t count, uint64_t seed, double lo, double hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(count));
  for (double& x : v) x = dist(rng);
  return v;
}

std::vector<double> ToDoubles(const TestTensor& t) {
  const int64_t n = Count(t.type.dims);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = LoadDouble(t.type.dtype, t.bytes(), i);
  return v;
}

absl::Status RunKernel(const std::string& op_type, std::vector<graph::Attribute> attrs,
                       const std::vector<TestTensor*>& inputs,
                       const std::vector<TestTensor*>& outputs, int threads) {
  return RunKernelWith(alloc::MakeCpuKernelTable(), op_type, std::move(attrs), inputs, outputs,
                       threads);
}

namespace {

absl::Status Run(const alloc::KernelTable& table, const std::string& op_type,
                 std::vector<graph::Attribute> attrs, const std::vector<TestTensor*>& inputs,
                 const std::vector<TestTensor*>& outputs, int threads,
                 std::vector<std::vector<int64_t>>* measured) {
  const alloc::Kernel* kernel = table.Find(op_type);
  if (kernel == nullptr) return absl::NotFoundError(absl::StrCat("no kernel for ", op_type));
  graph::Op op;
  op.name = "test";
  op.type = op_type;
  op.attrs = std::move(attrs);
  alloc::KernelArgs args;
  args.op = &op;
  args.threads = threads;
  for (TestTensor* t : inputs) {
    args.inputs.push_back(t->bytes());
    args.input_types.push_back(&t->type);
  }
  for (TestTensor* t : outputs) {
    args.outputs.push_back(t->bytes());
    args.output_types.push_back(&t->type);
  }
  args.measured_dims = measured;
  return (*kernel)(args);
}

}  // namespace

absl::Status RunKernelWith(const alloc::KernelTable& table, const std::string& op_type,
                           std::vector<graph::Attribute> attrs,
                           const std::vector<TestTensor*>& inputs,
                           const std::vector<TestTensor*>& outputs, int threads) {
  return Run(table, op_type, std::move(attrs), inputs, outputs, threads, nullptr);
}

absl::Status RunKernelMeasuring(const std::string& op_type, std::vector<graph::Attribute> attrs,
                                const std::vector<TestTensor*>& inputs,
                                const std::vector<TestTensor*>& outputs,
                                std::vector<std::vector<int64_t>>* measured) {
  return Run(alloc::MakeCpuKernelTable(), op_type, std::move(attrs), inputs, outputs, 1,
             measured);
}

std::string CompareClose(const std::vector<double>& actual, const std::vector<double>& expected,
                         double rtol, double atol) {
  if (actual.size() != expected.size()) {
    return absl::StrCat("sizes differ: ", actual.size(), " vs ", expected.size());
  }
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i];
    const double e = expected[i];
    if (std::isnan(a) || std::isnan(e)) {
      if (std::isnan(a) != std::isnan(e)) return absl::StrCat("element ", i, ": ", a, " vs ", e);
      continue;
    }
    if (std::isinf(a) || std::isinf(e)) {
      if (a != e) return absl::StrCat("element ", i, ": ", a, " vs ", e);
      continue;
    }
    const double ratio = std::abs(a - e) / (atol + rtol * std::abs(e));
    if (ratio > worst) {
      worst = ratio;
      at = i;
    }
  }
  if (worst <= 1) return "";
  return absl::StrCat("element ", at, ": got ", actual[at], ", expected ", expected[at],
                      " (|diff| ", std::abs(actual[at] - expected[at]), " is ", worst,
                      " times the tolerance atol ", atol, " + rtol ", rtol, " * |expected|)");
}

}  // namespace memonger::testing
