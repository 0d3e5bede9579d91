// Tensors a user hands a run, read from NumPy files: one `.npy` (format 1.0, 2.0 or 3.0), a
// folder of them (one per tensor, named `<name>.npy`), or an `.npz` archive (numpy.savez,
// stored, or numpy.savez_compressed, deflated; each member `<name>.npy`).
//
//   MG_ASSIGN_OR_RETURN(auto tensors, alloc::ReadTensorFiles("inputs/"));   // or "x.npz"
//   // tensors["x"].type, tensors["x"].bytes
//
// Element types (descr): '<f4' float32, '<f2' float16, '<f8' float64, '<i8' int64, '<i4' int32,
// '<i2' int16, '|i1' int8, '|u1' uint8, '|b1' bool, and '<u2' as bfloat16 bit patterns (NumPy
// has no bfloat16; kernels/npy.h writes them so). '=' and '|' read as '<' (this is a
// little-endian host). Refused with InvalidArgument naming the file: big-endian data, Fortran
// order, object arrays, other element types, a header or data shorter than it says, a byte size
// over 2^60, an archive member that is not a .npy file, a name given twice (a.npy and an
// archive member of the same name cannot both exist: one folder or one archive per call).
// The file is read under `limits` (util::ReadInputFile).
#ifndef MEMONGER_KERNELS_TENSOR_FILES_H_
#define MEMONGER_KERNELS_TENSOR_FILES_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/onnx_tensor_data.h"
#include "util/limits.h"

namespace memonger::alloc {

// One .npy file's bytes; `what` names it in messages.
absl::StatusOr<TensorData> ParseNpy(absl::string_view bytes, absl::string_view what);

// A folder of .npy files, an .npz archive or one .npy file, by tensor name (the file or member
// name without ".npy"). Files of a folder that do not end in .npy are ignored. NotFound for a
// path that does not exist.
absl::StatusOr<std::map<std::string, TensorData>> ReadTensorFiles(
    const std::string& path, const util::InputLimits& limits = {});

}  // namespace memonger::alloc

#endif  // MEMONGER_KERNELS_TENSOR_FILES_H_
