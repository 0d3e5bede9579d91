#include "kernels/value_fill.h"

#include <cstring>

#include "kernels/float16.h"
#include "kernels/verify_kernels.h"

namespace memonger::alloc {

uint64_t NameHash(absl::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

void FillSeeded(const graph::TensorType& type, absl::string_view name, uint64_t seed,
                std::byte* data) {
  int64_t n = 1;
  for (int64_t d : type.dims) n *= d;
  const uint64_t key = NameHash(name) ^ seed;
  // splitmix64 of (key, i): the verify kernels' PatternWord is exactly that hash.
  auto uniform = [key](int64_t i) {
    const uint64_t bits = PatternWord(key, static_cast<uint64_t>(i)) >> 40;  // 24 bits
    return static_cast<float>(bits) * (2.0f / 16777216.0f) - 1.0f;
  };
  switch (type.dtype) {
    case graph::DataType::kFloat32:
      for (int64_t i = 0; i < n; ++i) reinterpret_cast<float*>(data)[i] = uniform(i);
      return;
    case graph::DataType::kFloat64:
      for (int64_t i = 0; i < n; ++i) reinterpret_cast<double*>(data)[i] = uniform(i);
      return;
    case graph::DataType::kFloat16:
      for (int64_t i = 0; i < n; ++i) reinterpret_cast<Half*>(data)[i] = Half::FromFloat(uniform(i));
      return;
    case graph::DataType::kBFloat16:
      for (int64_t i = 0; i < n; ++i) {
        reinterpret_cast<BFloat16*>(data)[i] = BFloat16::FromFloat(uniform(i));
      }
      return;
    default:
      std::memset(data, 0, static_cast<size_t>(n * graph::DataTypeSize(type.dtype)));
      return;
  }
}

}  // namespace memonger::alloc
