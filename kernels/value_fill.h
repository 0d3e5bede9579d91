// Deterministic values for tensors a run has no data for (graph inputs, and params or constants
// whose values the model file does not carry): the same name and seed always give the same
// bytes, whatever the plan, so runs reproduce and can be compared byte for byte.
//
//   alloc::FillSeeded(type, "w_qkv", /*seed=*/0, executor.ValueAddress(id));
//
// Floating-point types: element i is uniform in [-1, 1), from splitmix64 of (hash(name) xor
// seed, i): 24 random bits scaled to [0, 1), times 2, minus 1 (exact in float32), then rounded
// to the element type. Integer types get 0 and bool false: an integer input is usually an index
// or a shape, and 0 is the one value valid for every non-empty dim.
#ifndef MEMONGER_KERNELS_VALUE_FILL_H_
#define MEMONGER_KERNELS_VALUE_FILL_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "graph/tensor_type.h"

namespace memonger::alloc {

// 64-bit FNV-1a of `name`.
uint64_t NameHash(absl::string_view name);

// Writes ByteSize(type) bytes at `data` (host memory). REQUIRES: `type` has a byte size.
void FillSeeded(const graph::TensorType& type, absl::string_view name, uint64_t seed,
                std::byte* data);

}  // namespace memonger::alloc

#endif  // MEMONGER_KERNELS_VALUE_FILL_H_
