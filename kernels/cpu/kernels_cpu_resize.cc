// Resize (ONNX opsets 11-19, as torch.onnx.export writes F.interpolate and nn.Upsample):
// X -> Y of the planned dims (from `sizes`, or `scales` and the input dims, by inference).
// mode 'nearest' (nearest_mode round_prefer_floor, round_prefer_ceil, floor, ceil) and
// 'linear' (separable: bilinear over two resized axes, trilinear over three), each axis by its
// coordinate_transformation_mode: half_pixel, pytorch_half_pixel, align_corners, asymmetric,
// tf_half_pixel_for_nn. The scale of an axis is the `scales` input where one is given (a float
// tensor of one element per axis: the value PyTorch computed with), else out / in. 'cubic',
// tf_crop_and_resize, antialias and the opset-18 axes/keep_aspect_ratio_policy are refused
// (Unimplemented), never approximated. Storage float32, float16, bfloat16, float64;
// interpolation in float32. The output must not overlap the input.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/kernel_float_io.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/kernel_util.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

using graph::DataType;
using graph::TensorType;
using namespace kernel_internal;  // NOLINT: the helpers of every kernel file

// The input coordinate of output index o along an axis of `in` -> `out` elements at `scale`.
// align_corners divides by the resized length less one, which ONNX takes as in * scale (not
// rounded down) where scales are given.
double SourceCoordinate(const std::string& mode, int64_t o, int64_t in, int64_t out,
                        double scale, bool scales_given) {
  if (mode == "align_corners") {
    const double resized = scales_given ? in * scale : static_cast<double>(out);
    return resized <= 1 ? 0.0 : o * static_cast<double>(in - 1) / (resized - 1);
  }
  if (mode == "asymmetric") return o / scale;
  if (mode == "tf_half_pixel_for_nn") return (o + 0.5) / scale;
  if (mode == "pytorch_half_pixel") return out > 1 ? (o + 0.5) / scale - 0.5 : 0.0;
  return (o + 0.5) / scale - 0.5;  // half_pixel
}

int64_t NearestIndex(const std::string& mode, double x, int64_t in) {
  double r;
  if (mode == "floor") {
    r = std::floor(x);
  } else if (mode == "ceil") {
    r = std::ceil(x);
  } else if (mode == "round_prefer_ceil") {
    r = std::round(x);  // halves away from zero: up for the non-negative coordinates
  } else {              // round_prefer_floor
    r = x - std::floor(x) == 0.5 ? std::floor(x) : std::round(x);
  }
  return std::clamp<int64_t>(static_cast<int64_t>(r), 0, in - 1);
}

// Per output index of one axis: two source indices and the weight of the second.
struct AxisMap {
  std::vector<int64_t> lo, hi;
  std::vector<float> w;
};

absl::Status Resize(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 4, 1, 1));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  const TensorType& x = *args.input_types[0];
  const TensorType& y = *args.output_types[0];
  const size_t rank = x.dims.size();
  if (y.dtype != x.dtype || y.dims.size() != rank) {
    return KernelError(args, "Y must have X's element type and rank");
  }
  MG_ASSIGN_OR_RETURN(const std::optional<std::string> mode_attr, StringAttr(args, "mode"));
  MG_ASSIGN_OR_RETURN(const std::optional<std::string> ctm_attr,
                      StringAttr(args, "coordinate_transformation_mode"));
  MG_ASSIGN_OR_RETURN(const std::optional<std::string> nearest_attr,
                      StringAttr(args, "nearest_mode"));
  const std::string mode = mode_attr.value_or("nearest");
  const std::string ctm = ctm_attr.value_or("half_pixel");
  const std::string nearest = nearest_attr.value_or("round_prefer_floor");
  if (mode != "nearest" && mode != "linear") {
    return KernelUnimplemented(args, absl::StrCat("mode '", mode, "' is not run"));
  }
  if (ctm != "half_pixel" && ctm != "pytorch_half_pixel" && ctm != "align_corners" &&
      ctm != "asymmetric" && ctm != "tf_half_pixel_for_nn") {
    return KernelUnimplemented(args, absl::StrCat("coordinate_transformation_mode '", ctm,
                                                  "' is not run"));
  }
  if (nearest != "round_prefer_floor" && nearest != "round_prefer_ceil" && nearest != "floor" &&
      nearest != "ceil") {
    return KernelError(args, absl::StrCat("nearest_mode '", nearest, "'"));
  }
  MG_ASSIGN_OR_RETURN(const int64_t antialias, IntAttr(args, "antialias", 0));
  if (antialias != 0 || FindAttr(args, "axes") != nullptr) {
    return KernelUnimplemented(args, "antialias and axes are not run");
  }
  // The scales input: a float tensor of one element per axis (roi has two per axis, sizes is
  // int64); an empty one is absent.
  std::vector<double> scales(rank, 0.0);
  for (size_t k = 1; k < args.inputs.size(); ++k) {
    const TensorType& t = *args.input_types[k];
    if (t.dtype == DataType::kInt64 || NumElements(t.dims) != static_cast<int64_t>(rank)) continue;
    if (t.dtype != DataType::kFloat32 && t.dtype != DataType::kFloat64) continue;
    MG_ASSIGN_OR_RETURN(const std::vector<float> s, LoadInput(args, static_cast<int>(k)));
    for (size_t d = 0; d < rank; ++d) scales[d] = s[d];
  }
  std::vector<AxisMap> maps(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t in = x.dims[d], out = y.dims[d];
    if (out > 0 && in == 0) return KernelError(args, "X has an empty axis to resize");
    const double scale = scales[d] > 0 ? scales[d] : static_cast<double>(out) / std::max<int64_t>(in, 1);
    AxisMap& m = maps[d];
    for (int64_t o = 0; o < out; ++o) {
      const double c = in == out && scales[d] <= 0 ? static_cast<double>(o)
                                                   : SourceCoordinate(ctm, o, in, out, scale, scales[d] > 0);
      if (mode == "nearest") {
        const int64_t i = in == out && scales[d] <= 0 ? o : NearestIndex(nearest, c, in);
        m.lo.push_back(i);
        m.hi.push_back(i);
        m.w.push_back(0.0f);
      } else {
        const double clamped = std::clamp(c, 0.0, static_cast<double>(in - 1));
        const int64_t i0 = static_cast<int64_t>(std::floor(clamped));
        m.lo.push_back(i0);
        m.hi.push_back(std::min<int64_t>(i0 + 1, in - 1));
        m.w.push_back(static_cast<float>(clamped - static_cast<double>(i0)));
      }
    }
  }
  MG_ASSIGN_OR_RETURN(const std::vector<float> in, LoadInput(args, 0));
  // Separable: one axis at a time, from the last, each pass over the current tensor.
  std::vector<float> cur = in;
  std::vector<int64_t> dims = x.dims;
  for (size_t step = 0; step < rank; ++step) {
    const size_t d = rank - 1 - step;
    if (dims[d] == y.dims[d] && scales[d] <= 0) continue;
    int64_t outer = 1, inner = 1;
    for (size_t k = 0; k < d; ++k) outer *= dims[k];
    for (size_t k = d + 1; k < rank; ++k) inner *= dims[k];
    const int64_t n_in = dims[d], n_out = y.dims[d];
    std::vector<float> next(static_cast<size_t>(outer * n_out * inner));
    const AxisMap& m = maps[d];
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < n_out; ++j) {
        const float* a = cur.data() + (o * n_in + m.lo[j]) * inner;
        const float* b = cur.data() + (o * n_in + m.hi[j]) * inner;
        float* dst = next.data() + (o * n_out + j) * inner;
        const float w = m.w[j];
        for (int64_t i = 0; i < inner; ++i) dst[i] = w == 0.0f ? a[i] : a[i] + (b[i] - a[i]) * w;
      }
    }
    cur = std::move(next);
    dims[d] = n_out;
  }
  return StoreOutput(args, 0, cur);
}

}  // namespace

void AddCpuResizeKernels(KernelMap& kernels) { kernels["Resize"] = Resize; }

}  // namespace memonger::alloc
