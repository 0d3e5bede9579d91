// The bias plumbing of our attention ops (docs/ops.md, "Attention ops"):
//   AddAttentionBias(S [B, H, L, L], bias [1 or B, H, L, Lp >= L]) -> S'
//       S'[b, h, i, j] = S[b, h, i, j] + bias[b or 0, h, i, j] for j < L: the bias is read with
//       its row stride Lp, so a padded bias needs no copy. Computed in float32, rounded once.
//       S' may be S itself (the nets write it in place); the bias must not overlap S'.
//   PadLastDim(X) -> Y
//       Y = X with its last dim rounded up to a multiple of `multiple` (required, >= 1), zeros
//       after; Y must not overlap X. Any element type (bytes are copied).
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/kernel_util.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

using graph::TensorType;
using namespace kernel_internal;  // NOLINT: the helpers of every kernel file

absl::Status AddAttentionBias(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 2, 2, 1, 1));
  const TensorType& s = *args.input_types[0];
  const TensorType& bias = *args.input_types[1];
  if (*args.output_types[0] != s) return KernelError(args, "S' must have S's type");
  if (s.dims.size() != 4 || s.dims[2] != s.dims[3]) {
    return KernelError(args, absl::StrCat("S must be [B, H, L, L]; got ",
                                          graph::TensorTypeToString(s)));
  }
  const int64_t batch = s.dims[0], heads = s.dims[1], l = s.dims[2];
  if (bias.dtype != s.dtype || bias.dims.size() != 4 ||
      (bias.dims[0] != 1 && bias.dims[0] != batch) || bias.dims[1] != heads ||
      bias.dims[2] != l || bias.dims[3] < l) {
    return KernelError(args, absl::StrCat("bias must be [1 or B, H, L, Lp >= L] of S's type; got ",
                                          graph::TensorTypeToString(bias), " for S ",
                                          graph::TensorTypeToString(s)));
  }
  // In place: S' is S exactly. Anything else that overlaps is refused.
  if (!(args.inputs[0] == args.outputs[0])) MG_RETURN_IF_ERROR(CheckNoOverlap(args, 0, 0));
  MG_RETURN_IF_ERROR(CheckNoOverlap(args, 1, 0));
  const int64_t lp = bias.dims[3];
  const bool broadcast = bias.dims[0] == 1;
  return DispatchFloat(args, s.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* in = reinterpret_cast<const T*>(args.inputs[0]);
    const T* pb = reinterpret_cast<const T*>(args.inputs[1]);
    T* out = reinterpret_cast<T*>(args.outputs[0]);
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t h = 0; h < heads; ++h) {
        const T* bias_head = pb + ((broadcast ? 0 : b) * heads + h) * l * lp;
        const int64_t head = (b * heads + h) * l * l;
        for (int64_t i = 0; i < l; ++i) {
          const T* brow = bias_head + i * lp;
          for (int64_t j = 0; j < l; ++j) {
            out[head + i * l + j] = Store<T>(Load(in[head + i * l + j]) + Load(brow[j]));
          }
        }
      }
    }
    return absl::OkStatus();
  });
}

absl::Status PadLastDim(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 1));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  const TensorType& x = *args.input_types[0];
  const TensorType& y = *args.output_types[0];
  MG_ASSIGN_OR_RETURN(const int64_t multiple, IntAttr(args, "multiple", 0));
  if (multiple < 1) return KernelError(args, absl::StrCat("multiple ", multiple, " must be at least 1"));
  if (x.dims.empty()) return KernelError(args, "X must have rank >= 1");
  TensorType expected = x;
  expected.dims.back() = (x.dims.back() + multiple - 1) / multiple * multiple;
  if (y != expected) {
    return KernelError(args, absl::StrCat("Y must be ", graph::TensorTypeToString(expected),
                                          "; got ", graph::TensorTypeToString(y)));
  }
  const int64_t elem = graph::DataTypeSize(x.dtype);
  const int64_t in_row = x.dims.back() * elem;
  const int64_t out_row = y.dims.back() * elem;
  const int64_t rows = Product(x.dims, 0, x.dims.size() - 1);
  for (int64_t r = 0; r < rows; ++r) {
    std::byte* dst = args.outputs[0] + r * out_row;
    if (in_row > 0) std::memcpy(dst, args.inputs[0] + r * in_row, static_cast<size_t>(in_row));
    // All-zero bytes are +0 in every element type.
    std::memset(dst + in_row, 0, static_cast<size_t>(out_row - in_row));
  }
  return absl::OkStatus();
}

}  // namespace

void AddCpuAttentionBiasKernels(KernelMap& kernels) {
  kernels["AddAttentionBias"] = AddAttentionBias;
  kernels["PadLastDim"] = PadLastDim;
}

}  // namespace memonger::alloc
