// NumPy .npy files (format version 1.0) for tensors the executor computed, so that results can
// be compared with numpy (np.load) or between runs byte for byte.
//
//   MG_RETURN_IF_ERROR(alloc::WriteNpy("out/y.npy", type, data));
//
// Layout: the magic "\x93NUMPY", version 1.0, a little-endian uint16 header length, then a
// Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with
// spaces and a newline so that the data starts at a multiple of 64 bytes, then the elements in
// C order, little-endian. descr per element type: float32 '<f4', float16 '<f2', float64 '<f8',
// int64 '<i8', int32 '<i4', int16 '<i2', int8 '|i1', uint8 '|u1', bool '|b1'. NumPy has no
// bfloat16: bfloat16 tensors are written as their bit patterns, '<u2' (as the ONNX test data
// stores them); convert with (x.astype(np.uint32) << 16).view(np.float32).
#ifndef MEMONGER_KERNELS_NPY_H_
#define MEMONGER_KERNELS_NPY_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/tensor_type.h"

namespace memonger::alloc {

// The descr string of `dtype` (above); InvalidArgument for kUndefined.
absl::StatusOr<std::string> NpyDescr(graph::DataType dtype);

// The whole file: header and the ByteSize(type) bytes at `data` (host memory, little-endian).
absl::StatusOr<std::string> NpyBytes(const graph::TensorType& type, const std::byte* data);

// Writes NpyBytes to `path`; InvalidArgument naming the path when it cannot be written.
absl::Status WriteNpy(const std::string& path, const graph::TensorType& type,
                      const std::byte* data);

// A file name for a value name: characters other than letters, digits, '_', '-' and '.' become
// '_', a leading '.' (or an empty name) gets a '_' before it; ".npy" is appended.
std::string NpyFileName(absl::string_view value_name);

}  // namespace memonger::alloc

#endif  // MEMONGER_KERNELS_NPY_H_
