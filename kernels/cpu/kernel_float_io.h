// Float32 views of floating-point tensors for the CPU kernels that mix element types in one op
// (fp16 activations with fp32 statistics, fp32 workspaces beside bf16 outputs, gradients whose
// accumulators are float32 whatever the storage): load a run of elements of any float storage
// type into float32, and round a float32 run into any float storage type once.
//
//   MG_ASSIGN_OR_RETURN(FloatLoader load, LoaderFor(args, *args.input_types[1]));
//   std::vector<float> scale = load.Run(args.inputs[1], 0, channels);
//   MG_ASSIGN_OR_RETURN(FloatStorer store, StorerFor(args, *args.output_types[1]));
//   store.Run(args.outputs[1], 0, channels, dscale.data());
//
// Not part of the library's interface (kernel_internal). float64 storage goes through float32
// here: the kernels that use these helpers compute in float32 by contract.
#ifndef MEMONGER_KERNELS_CPU_KERNEL_FLOAT_IO_H_
#define MEMONGER_KERNELS_CPU_KERNEL_FLOAT_IO_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/kernel_util.h"
#include "util/status_macros.h"

namespace memonger::alloc::kernel_internal {

// Reads elements [begin, begin + count) of a tensor of one float storage type as float32.
struct FloatLoader {
  void (*run)(const std::byte* data, int64_t begin, int64_t count, float* out) = nullptr;
  float At(const std::byte* data, int64_t i) const {
    float v;
    run(data, i, 1, &v);
    return v;
  }
  std::vector<float> Run(const std::byte* data, int64_t begin, int64_t count) const {
    std::vector<float> out(static_cast<size_t>(count));
    if (count > 0) run(data, begin, count, out.data());
    return out;
  }
};

// Writes float32 values to elements [begin, begin + count), rounding once to the storage type.
struct FloatStorer {
  void (*run)(std::byte* data, int64_t begin, int64_t count, const float* values) = nullptr;
};

namespace float_io_internal {
template <typename T>
void LoadRun(const std::byte* data, int64_t begin, int64_t count, float* out) {
  const T* p = reinterpret_cast<const T*>(data) + begin;
  for (int64_t i = 0; i < count; ++i) out[i] = static_cast<float>(Load(p[i]));
}
template <typename T>
void StoreRun(std::byte* data, int64_t begin, int64_t count, const float* values) {
  T* p = reinterpret_cast<T*>(data) + begin;
  for (int64_t i = 0; i < count; ++i) p[i] = Store<T>(static_cast<Compute<T>>(values[i]));
}
}  // namespace float_io_internal

// Unimplemented (naming the op) for a non-floating-point type.
inline absl::StatusOr<FloatLoader> LoaderFor(const KernelArgs& args, const graph::TensorType& t) {
  using namespace float_io_internal;  // NOLINT
  switch (t.dtype) {
    case graph::DataType::kFloat32: return FloatLoader{LoadRun<float>};
    case graph::DataType::kFloat16: return FloatLoader{LoadRun<Half>};
    case graph::DataType::kBFloat16: return FloatLoader{LoadRun<BFloat16>};
    case graph::DataType::kFloat64: return FloatLoader{LoadRun<double>};
    default: return UnsupportedDtype(args, t.dtype, "float32, float16, bfloat16, float64");
  }
}

inline absl::StatusOr<FloatStorer> StorerFor(const KernelArgs& args, const graph::TensorType& t) {
  using namespace float_io_internal;  // NOLINT
  switch (t.dtype) {
    case graph::DataType::kFloat32: return FloatStorer{StoreRun<float>};
    case graph::DataType::kFloat16: return FloatStorer{StoreRun<Half>};
    case graph::DataType::kBFloat16: return FloatStorer{StoreRun<BFloat16>};
    case graph::DataType::kFloat64: return FloatStorer{StoreRun<double>};
    default: return UnsupportedDtype(args, t.dtype, "float32, float16, bfloat16, float64");
  }
}

// Loads a whole tensor (input `in`) as float32.
inline absl::StatusOr<std::vector<float>> LoadInput(const KernelArgs& args, int in) {
  MG_ASSIGN_OR_RETURN(FloatLoader load, LoaderFor(args, *args.input_types[in]));
  return load.Run(args.inputs[in], 0, NumElements(args.input_types[in]->dims));
}

// Rounds `values` (one per element) into output `out`.
inline absl::Status StoreOutput(const KernelArgs& args, int out, const std::vector<float>& values) {
  MG_ASSIGN_OR_RETURN(FloatStorer store, StorerFor(args, *args.output_types[out]));
  if (static_cast<int64_t>(values.size()) != NumElements(args.output_types[out]->dims)) {
    return KernelError(args, "internal: an output buffer has the wrong size");
  }
  if (!values.empty()) {
    store.run(args.outputs[out], 0, static_cast<int64_t>(values.size()), values.data());
  }
  return absl::OkStatus();
}

}  // namespace memonger::alloc::kernel_internal

#endif  // MEMONGER_KERNELS_CPU_KERNEL_FLOAT_IO_H_
