// Helpers for the CPU kernel tests: tensors built from doubles in any element type, read back as
// doubles, and one call of a kernel of MakeCpuKernelTable() through KernelArgs with hand-made
// types (no graph, no plan), as the executor would call it.
//
//   TestTensor x = MakeTensor(DataType::kFloat16, {2, 3}, {1, 2, 3, 4, 5, 6});
//   TestTensor y = EmptyTensor(DataType::kFloat16, {2, 3});
//   ASSERT_TRUE(RunKernel("Relu", {}, {&x}, {&y}).ok());
//   std::vector<double> values = ToDoubles(y);
//
// Passing one TestTensor as both an input and an output runs the kernel in place (one address).
#ifndef MEMONGER_TESTS_KERNEL_TEST_SUPPORT_H_
#define MEMONGER_TESTS_KERNEL_TEST_SUPPORT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "allocator/executor.h"
#include "graph/attribute.h"
#include "graph/dtype.h"
#include "graph/tensor_type.h"

namespace memonger::testing {

struct TestTensor {
  graph::TensorType type;
  // 64-byte aligned storage (a vector of max_align_t-sized blocks would be 16): bytes() points
  // into `storage` at the first 64-byte boundary.
  std::vector<std::byte> storage;
  size_t shift = 0;
  std::byte* bytes() { return storage.data() + shift; }
  const std::byte* bytes() const { return storage.data() + shift; }
  int64_t num_bytes() const;
};

// The product of `dims` (the element count of a tensor of these dims).
int64_t Count(const std::vector<int64_t>& dims);

// A tensor of `dtype` and `dims` holding `values` converted (rounded to nearest for the half
// types, truncated toward zero for integers). values.size() must be the element count.
TestTensor MakeTensor(graph::DataType dtype, std::vector<int64_t> dims,
                      const std::vector<double>& values);
// A tensor whose bytes are all 0xA5 (so that a kernel that forgets an element is seen).
TestTensor EmptyTensor(graph::DataType dtype, std::vector<int64_t> dims);
// Deterministic values uniform in [lo, hi) from `seed`.
std::vector<double> RandomValues(int64_t count, uint64_t seed, double lo = -1, double hi = 1);
std::vector<double> ToDoubles(const TestTensor& t);

// Calls the kernel of `op_type` in MakeCpuKernelTable() on host memory.
absl::Status RunKernel(const std::string& op_type, std::vector<graph::Attribute> attrs,
                       const std::vector<TestTensor*>& inputs,
                       const std::vector<TestTensor*>& outputs, int threads = 1);

// The same with another table's kernel (e.g. alloc::MakeDeviceKernelTableOnHost()).
absl::Status RunKernelWith(const alloc::KernelTable& table, const std::string& op_type,
                           std::vector<graph::Attribute> attrs,
                           const std::vector<TestTensor*>& inputs,
                           const std::vector<TestTensor*>& outputs, int threads = 1);

// RunKernel for an op whose output sizes depend on the data, its outputs' types upper bounds
// (KernelArgs::measured_dims): `measured` receives the dims each output measured.
absl::Status RunKernelMeasuring(const std::string& op_type, std::vector<graph::Attribute> attrs,
                                const std::vector<TestTensor*>& inputs,
                                const std::vector<TestTensor*>& outputs,
                                std::vector<std::vector<int64_t>>* measured);

// Largest |a - b| / (atol + rtol * |b|) over elements (<= 1 means within tolerance); NaNs must
// match. Returns a description of the worst element when it exceeds 1, else "".
std::string CompareClose(const std::vector<double>& actual, const std::vector<double>& expected,
                         double rtol, double atol);

}  // namespace memonger::testing

#endif  // MEMONGER_TESTS_KERNEL_TEST_SUPPORT_H_
