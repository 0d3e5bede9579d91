// ConvTranspose (ONNX opsets 1-11, as torch.onnx.export writes nn.ConvTranspose1d/2d/3d):
// X [N, C, spatial...], W [C, M / group, kernel...], optional B [M] -> Y [N, M, out...], NCHW,
// 1 to 3 spatial dims. Input position i and kernel tap k write output position
// i * stride + k * dilation - pad_begin; positions outside [0, out) are dropped. The output's
// dims are the planned ones (shape inference read output_shape, output_padding and the pads);
// the begin pads come from `pads`, or, where `output_shape` or auto_pad SAME_UPPER/SAME_LOWER
// decide them, from the total padding stride * (in - 1) + output_padding +
// (kernel - 1) * dilation + 1 - out split as ONNX says (SAME_UPPER puts the smaller half first;
// halves round down).
//
// The algorithm: per image and group, the columns W_g^T x X_g ([M/group * kernel taps] x
// in positions) in one matrix product (GemmCpu), then each column added into the output
// positions it reaches (col2im), then the bias. O(N * M * C / group * taps * in positions).
// Storage float32, float16, bfloat16, float64 (through float32); the output is rounded once.
// The columns (M/group * taps * in positions floats) and an accumulator of the output image
// live outside the arena. The output must not overlap an input.
#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/gemm_cpu.h"
#include "kernels/cpu/kernel_float_io.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/kernel_util.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

using graph::DataType;
using graph::TensorType;
using namespace kernel_internal;  // NOLINT: the helpers of every kernel file

// Spatial vectors widened to three dims with leading 1s (0 for pads), as kernel_window.h does.
struct TransposeGeometry3 {
  std::array<int64_t, 3> in{1, 1, 1}, out{1, 1, 1}, kernel{1, 1, 1}, stride{1, 1, 1},
      dilation{1, 1, 1}, pad{0, 0, 0};
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
  int64_t taps() const { return kernel[0] * kernel[1] * kernel[2]; }
};

absl::StatusOr<Dims> SpatialAttr(const KernelArgs& args, absl::string_view name, size_t count,
                                 int64_t fallback) {
  MG_ASSIGN_OR_RETURN(const std::optional<Dims> v, IntsAttr(args, name));
  if (!v.has_value()) return Dims(count, fallback);
  if (v->size() != count) {
    return KernelError(args, absl::StrCat("attribute '", name, "' has ", v->size(),
                                          " values; ", count, " expected"));
  }
  return *v;
}

absl::Status ConvTranspose(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 2, 3, 1, 1));
  const TensorType& x = *args.input_types[0];
  const TensorType& w = *args.input_types[1];
  const TensorType& y = *args.output_types[0];
  const size_t rank = x.dims.size();
  if (rank < 3 || rank > 5 || w.dims.size() != rank || y.dims.size() != rank) {
    return KernelError(args, "X, W and Y must have one rank, 3 to 5 (1 to 3 spatial dims)");
  }
  const size_t spatial = rank - 2;
  MG_ASSIGN_OR_RETURN(const int64_t group, IntAttr(args, "group", 1));
  const int64_t n = x.dims[0], c = x.dims[1], m = y.dims[1];
  if (group <= 0 || c % group != 0 || w.dims[0] != c || w.dims[1] * group != m ||
      y.dims[0] != n) {
    return KernelError(args, absl::StrCat("W [", absl::StrJoin(w.dims, ", "), "] and group ",
                                          group, " do not fit X's ", c, " channels and Y's ",
                                          m));
  }
  const int b_input = FindInputSlot(args, 2);
  if (b_input >= 0 && args.input_types[b_input]->dims != Dims{m}) {
    return KernelError(args, absl::StrCat("B must have dims [", m, "]"));
  }
  const Dims kernel_dims(w.dims.begin() + 2, w.dims.end());
  MG_ASSIGN_OR_RETURN(const Dims kernel, SpatialAttr(args, "kernel_shape", spatial, 0));
  for (size_t i = 0; i < spatial; ++i) {
    if (FindAttr(args, "kernel_shape") != nullptr && kernel[i] != kernel_dims[i]) {
      return KernelError(args, "kernel_shape contradicts W's dims");
    }
  }
  MG_ASSIGN_OR_RETURN(const Dims strides, SpatialAttr(args, "strides", spatial, 1));
  MG_ASSIGN_OR_RETURN(const Dims dilations, SpatialAttr(args, "dilations", spatial, 1));
  MG_ASSIGN_OR_RETURN(const Dims output_padding,
                      SpatialAttr(args, "output_padding", spatial, 0));
  MG_ASSIGN_OR_RETURN(const Dims pads, SpatialAttr(args, "pads", 2 * spatial, 0));
  MG_ASSIGN_OR_RETURN(const std::optional<std::string> auto_pad_attr,
                      StringAttr(args, "auto_pad"));
  const std::string auto_pad = auto_pad_attr.value_or("NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER" &&
      auto_pad != "VALID") {
    return KernelError(args, absl::StrCat("auto_pad '", auto_pad, "' is not supported"));
  }
  const bool derive_pads = FindAttr(args, "output_shape") != nullptr ||
                           auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  TransposeGeometry3 g;
  for (size_t i = 0; i < spatial; ++i) {
    const size_t at = 3 - spatial + i;
    if (strides[i] <= 0 || dilations[i] <= 0 || output_padding[i] < 0) {
      return KernelError(args, "strides and dilations must be positive, output_padding not "
                               "negative");
    }
    g.in[at] = x.dims[2 + i];
    g.out[at] = y.dims[2 + i];
    g.kernel[at] = kernel_dims[i];
    g.stride[at] = strides[i];
    g.dilation[at] = dilations[i];
    const int64_t reach = strides[i] * (g.in[at] - 1) + output_padding[i] +
                          (kernel_dims[i] - 1) * dilations[i] + 1;
    if (derive_pads) {
      // The total may be negative (an output_shape past the reach, the rest zero-filled):
      // halves round down, as ONNX's reference computes them.
      const int64_t total = reach - g.out[at];
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      g.pad[at] = auto_pad == "SAME_UPPER" ? half : total - half;
    } else {
      g.pad[at] = auto_pad == "VALID" ? 0 : pads[i];
      const int64_t end = auto_pad == "VALID" ? 0 : pads[spatial + i];
      if (reach - g.pad[at] - end != g.out[at]) {
        return KernelError(args, absl::StrCat("Y's spatial dim ", i, " is ", g.out[at],
                                              "; the attributes give ",
                                              reach - g.pad[at] - end));
      }
    }
  }
  for (const TensorType* t : {&x, &w, &y}) {
    if (!graph::IsFloatingPoint(t->dtype)) {
      return UnsupportedDtype(args, t->dtype, "float32, float16, bfloat16, float64");
    }
  }
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));

  MG_ASSIGN_OR_RETURN(FloatLoader load_x, LoaderFor(args, x));
  MG_ASSIGN_OR_RETURN(FloatLoader load_w, LoaderFor(args, w));
  MG_ASSIGN_OR_RETURN(FloatStorer store_y, StorerFor(args, y));
  std::vector<float> bias(static_cast<size_t>(m), 0.0f);
  if (b_input >= 0) {
    MG_ASSIGN_OR_RETURN(FloatLoader load_b, LoaderFor(args, *args.input_types[b_input]));
    bias = load_b.Run(args.inputs[b_input], 0, m);
  }
  const std::vector<float> weights = load_w.Run(args.inputs[1], 0, NumElements(w.dims));
  const int64_t cg = c / group, mg = m / group;
  const int64_t in_size = g.in_size(), out_size = g.out_size(), taps = g.taps();
  std::vector<float> image(static_cast<size_t>(c * in_size));
  std::vector<float> columns(static_cast<size_t>(mg * taps * in_size));
  std::vector<float> acc(static_cast<size_t>(m * out_size));
  for (int64_t img = 0; img < n; ++img) {
    load_x.run(args.inputs[0], img * c * in_size, c * in_size, image.data());
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t grp = 0; grp < group; ++grp) {
      // columns[(oc * taps + tap), i] = sum over ic of W[grp * cg + ic, oc, tap] * X[ic, i].
      // W_g is stored [cg, mg * taps]: its transpose is the left operand.
      MG_RETURN_IF_ERROR(GemmCpu(
          mg * taps, in_size, cg,
          GemmOperand{DataType::kFloat32,
                      reinterpret_cast<const std::byte*>(weights.data() + grp * cg * mg * taps),
                      mg * taps, true},
          GemmOperand{DataType::kFloat32,
                      reinterpret_cast<const std::byte*>(image.data() + grp * cg * in_size),
                      in_size, false},
          [&](int64_t row, int64_t col, int64_t count, const float* values) {
            std::copy_n(values, count, columns.begin() + row * in_size + col);
          }));
      // col2im: each column element to the output position its input position and tap reach.
      for (int64_t oc = 0; oc < mg; ++oc) {
        float* out = acc.data() + (grp * mg + oc) * out_size;
        for (int64_t tap = 0; tap < taps; ++tap) {
          const int64_t k0 = tap / (g.kernel[1] * g.kernel[2]);
          const int64_t k1 = tap / g.kernel[2] % g.kernel[1];
          const int64_t k2 = tap % g.kernel[2];
          const float* col = columns.data() + (oc * taps + tap) * in_size;
          for (int64_t i0 = 0; i0 < g.in[0]; ++i0) {
            const int64_t o0 = i0 * g.stride[0] + k0 * g.dilation[0] - g.pad[0];
            if (o0 < 0 || o0 >= g.out[0]) continue;
            for (int64_t i1 = 0; i1 < g.in[1]; ++i1) {
              const int64_t o1 = i1 * g.stride[1] + k1 * g.dilation[1] - g.pad[1];
              if (o1 < 0 || o1 >= g.out[1]) continue;
              const float* src = col + (i0 * g.in[1] + i1) * g.in[2];
              float* dst = out + (o0 * g.out[1] + o1) * g.out[2];
              for (int64_t i2 = 0; i2 < g.in[2]; ++i2) {
                const int64_t o2 = i2 * g.stride[2] + k2 * g.dilation[2] - g.pad[2];
                if (o2 >= 0 && o2 < g.out[2]) dst[o2] += src[i2];
              }
            }
          }
        }
      }
    }
    for (int64_t oc = 0; oc < m; ++oc) {
      float* out = acc.data() + oc * out_size;
      for (int64_t i = 0; i < out_size; ++i) out[i] += bias[oc];
    }
    store_y.run(args.outputs[0], img * m * out_size, m * out_size, acc.data());
  }
  return absl::OkStatus();
}

}  // namespace

void AddCpuConvTransposeKernels(KernelMap& kernels) { kernels["ConvTranspose"] = ConvTranspose; }

}  // namespace memonger::alloc
