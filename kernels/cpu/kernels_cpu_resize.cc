// Resize (ONNX opsets 11-19, as torch.onnx.export writes F.interpolate and nn.Upsample):
// X -> Y of the planned dims (from `sizes`, or `scales` and the input dims, by inference).
// mode 'nearest' (nearest_mode round_prefer_floor, round_prefer_ceil, floor, ceil), 'linear'
// (separable: bilinear over two resized axes, trilinear over three) and 'cubic' (separable,
// four taps per axis weighted by cubic_coeff_a, -0.75 as PyTorch's bicubic; taps beyond an
// edge read the edge element, or with exclude_outside weigh nothing and the rest are
// renormalised), each axis by its coordinate_transformation_mode: half_pixel,
// pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn. The scale of an axis is
// the `scales` input where one is given (a float tensor of one element per axis: the value
// PyTorch computed with), else out / in. tf_crop_and_resize, antialias and the opset-18
// axes/keep_aspect_ratio_policy are refused (Unimplemented), never approximated. Storage
// float32, float16, bfloat16, float64; interpolation in float32. The output must not overlap
// the input. ResizeGradient(dY, [roi, scales, sizes]) -> dX runs the same maps transposed.
//
// GridSample (opset 16, as F.grid_sample exports): X [N, C, H, W] sampled at grid [N, Ho, Wo,
// 2] (x then y, normalised to [-1, 1]) -> Y [N, C, Ho, Wo]; modes bilinear, nearest (halves to
// even) and bicubic (a = -0.75); padding_mode zeros, border, reflection; align_corners either
// way; the arithmetic of PyTorch's grid_sampler_2d, in float32. RoiAlign (opset 16, avg):
// bilinear samples averaged per bin, as torchvision's roi_align.
#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
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
  // Bounded first (the result is clamped to [0, in) anyway): a coordinate from a huge or NaN
  // scale never reaches an out-of-range conversion.
  if (!(x > -1)) x = -1;
  if (x > static_cast<double>(in)) x = static_cast<double>(in);
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

// Per output index of one axis: two source indices and the weight of the second (nearest,
// linear), or four taps and their weights (cubic).
struct AxisMap {
  std::vector<int64_t> lo, hi;
  std::vector<float> w;
  std::vector<std::array<int64_t, 4>> taps;
  std::vector<std::array<float, 4>> tap_weights;
};

// Cubic convolution weights of the taps at floor(c) - 1 .. floor(c) + 2 for fraction t of c,
// with coefficient a (ONNX's cubic_coeff_a, -0.75 as PyTorch's bicubic).
std::array<double, 4> CubicWeights(double t, double a) {
  auto near = [a](double x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };      // |x| <= 1
  auto far = [a](double x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };  // 1 < |x| < 2
  return {far(t + 1), near(t), near(1 - t), far(2 - t)};
}

// The per-axis maps of resizing `x` to `y` under the op's attributes and its scales input (any
// input after the first: ResizeGradient reads Resize's). Shared by Resize and its gradient,
// which runs the same maps transposed.
struct ResizeMaps {
  std::vector<AxisMap> maps;
  std::vector<double> scales;  // per axis; 0: none given
};
absl::StatusOr<ResizeMaps> MapsOf(const KernelArgs& args, const TensorType& x,
                                  const TensorType& y) {
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
  if (mode != "nearest" && mode != "linear" && mode != "cubic") {
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
  MG_ASSIGN_OR_RETURN(const double cubic_a, FloatAttr(args, "cubic_coeff_a", -0.75));
  MG_ASSIGN_OR_RETURN(const int64_t exclude_outside, IntAttr(args, "exclude_outside", 0));
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
      if (mode == "cubic") {
        // Taps outside the axis read its edge element (ONNX pads by the edge), or, with
        // exclude_outside, weigh nothing and the others are renormalised.
        // Beyond two of an edge every tap reads the edge: bounded there, so that a huge or NaN
        // coordinate never reaches an out-of-range conversion.
        const double bounded = c > -2 ? std::min(c, static_cast<double>(in) + 1) : -2.0;
        const double i0 = std::floor(bounded);
        std::array<double, 4> w = CubicWeights(bounded - i0, cubic_a);
        std::array<int64_t, 4> taps;
        double sum = 0;
        for (int t = 0; t < 4; ++t) {
          const int64_t i = static_cast<int64_t>(i0) - 1 + t;
          if (exclude_outside != 0 && (i < 0 || i >= in)) w[t] = 0;
          sum += w[t];
          taps[t] = std::clamp<int64_t>(i, 0, in - 1);
        }
        std::array<float, 4> wf;
        for (int t = 0; t < 4; ++t) {
          wf[t] = static_cast<float>(exclude_outside != 0 && sum != 0 ? w[t] / sum : w[t]);
        }
        m.taps.push_back(taps);
        m.tap_weights.push_back(wf);
      } else if (mode == "nearest") {
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
  return ResizeMaps{std::move(maps), std::move(scales)};
}

absl::Status Resize(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 4, 1, 1));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  const TensorType& x = *args.input_types[0];
  const TensorType& y = *args.output_types[0];
  MG_ASSIGN_OR_RETURN(const ResizeMaps resize, MapsOf(args, x, y));
  const std::vector<AxisMap>& maps = resize.maps;
  const std::vector<double>& scales = resize.scales;
  const size_t rank = x.dims.size();
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
      for (int64_t j = 0; j < n_out && !m.taps.empty(); ++j) {
        float* dst = next.data() + (o * n_out + j) * inner;
        const std::array<float, 4>& w = m.tap_weights[j];
        for (int64_t i = 0; i < inner; ++i) {
          float v = 0;
          for (int t = 0; t < 4; ++t) v += w[t] * cur[(o * n_in + m.taps[j][t]) * inner + i];
          dst[i] = v;
        }
      }
      for (int64_t j = 0; j < n_out && m.taps.empty(); ++j) {
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


// ResizeGradient(dY, [roi, scales, sizes]) -> dX, Resize's attributes: the transpose of
// Resize's separable map, one axis at a time from the first (each output element's weights
// added back onto the elements it read, in float32), dX of the op's output type (X's).
absl::Status ResizeGradient(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 4, 1, 1));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  const TensorType& dy = *args.input_types[0];
  const TensorType& dx = *args.output_types[0];
  MG_ASSIGN_OR_RETURN(const ResizeMaps resize, MapsOf(args, dx, dy));
  const size_t rank = dx.dims.size();
  MG_ASSIGN_OR_RETURN(std::vector<float> cur, LoadInput(args, 0));
  std::vector<int64_t> dims = dy.dims;
  for (size_t d = 0; d < rank; ++d) {
    if (dims[d] == dx.dims[d] && resize.scales[d] <= 0) continue;
    int64_t outer = 1, inner = 1;
    for (size_t k = 0; k < d; ++k) outer *= dims[k];
    for (size_t k = d + 1; k < rank; ++k) inner *= dims[k];
    const int64_t n_out = dims[d], n_in = dx.dims[d];
    std::vector<float> next(static_cast<size_t>(outer * n_in * inner), 0.0f);
    const AxisMap& m = resize.maps[d];
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < n_out; ++j) {
        const float* src = cur.data() + (o * n_out + j) * inner;
        auto add = [&](int64_t i_in, float w) {
          float* dst = next.data() + (o * n_in + i_in) * inner;
          for (int64_t i = 0; i < inner; ++i) dst[i] += w * src[i];
        };
        if (!m.taps.empty()) {
          for (int t = 0; t < 4; ++t) add(m.taps[j][t], m.tap_weights[j][t]);
        } else if (m.w[j] == 0.0f) {
          add(m.lo[j], 1.0f);
        } else {
          add(m.lo[j], 1.0f - m.w[j]);
          add(m.hi[j], m.w[j]);
        }
      }
    }
    cur = std::move(next);
    dims[d] = n_in;
  }
  return StoreOutput(args, 0, cur);
}

// ---- GridSample --------------------------------------------------------------------------------

enum class GridPadding { kZeros, kBorder, kReflection };

// A normalised grid coordinate to pixel units along an axis of `size` pixels.
float Unnormalize(float g, int64_t size, bool align_corners) {
  return align_corners ? (g + 1) / 2 * static_cast<float>(size - 1)
                       : ((g + 1) * static_cast<float>(size) - 1) / 2;
}

// Mirrors `x` into [low, high] given as twice their values (so that -0.5 is exact).
float Reflect(float x, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) return 0;
  const float min = static_cast<float>(twice_low) / 2;
  const float span = static_cast<float>(twice_high - twice_low) / 2;
  x = std::fabs(x - min);
  const float extra = std::fmod(x, span);
  // The parity of the flips in floating point: a huge coordinate has no int64 flip count.
  const bool even = std::fmod(std::floor(x / span), 2.0f) == 0;
  return even ? extra + min : span - extra + min;
}

// The padding mode applied to a pixel coordinate: border clamps, reflection mirrors then clamps,
// zeros leaves it (out-of-range pixels then read as 0).
float PadCoordinate(float x, int64_t size, GridPadding padding, bool align_corners) {
  if (padding == GridPadding::kZeros) return x;
  if (padding == GridPadding::kReflection) {
    x = align_corners ? Reflect(x, 0, 2 * (size - 1)) : Reflect(x, -1, 2 * size - 1);
  }
  return std::clamp(x, 0.0f, static_cast<float>(size - 1));
}

// A pixel coordinate as an index: NaN, infinities and coordinates far outside any image (a grid
// is data: it may hold anything) become an index outside every image, read as padding, never
// an out-of-range conversion.
int64_t PixelIndex(float v) {
  constexpr int64_t kOutside = -(int64_t{1} << 40);
  return std::isfinite(v) && std::abs(v) < 1e9f ? static_cast<int64_t>(v) : kOutside;
}

absl::Status GridSample(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 2, 2, 1, 1));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  const TensorType& x = *args.input_types[0];
  const TensorType& grid = *args.input_types[1];
  const TensorType& y = *args.output_types[0];
  if (x.dims.size() != 4) {
    return KernelUnimplemented(args, "only 4-D X [N, C, H, W] is sampled (opset 16)");
  }
  const int64_t n = x.dims[0], c = x.dims[1], h = x.dims[2], w = x.dims[3];
  if (grid.dims.size() != 4 || grid.dims[0] != n || grid.dims[3] != 2) {
    return KernelError(args, "grid must have dims [N, Ho, Wo, 2]");
  }
  const int64_t ho = grid.dims[1], wo = grid.dims[2];
  if (y.dims != Dims{n, c, ho, wo} || y.dtype != x.dtype) {
    return KernelError(args, "Y must have dims [N, C, Ho, Wo] and X's element type");
  }
  MG_ASSIGN_OR_RETURN(const std::optional<std::string> mode_attr, StringAttr(args, "mode"));
  MG_ASSIGN_OR_RETURN(const std::optional<std::string> padding_attr,
                      StringAttr(args, "padding_mode"));
  MG_ASSIGN_OR_RETURN(const int64_t align_attr, IntAttr(args, "align_corners", 0));
  const std::string mode = mode_attr.value_or("bilinear");
  const std::string padding_name = padding_attr.value_or("zeros");
  if (mode != "bilinear" && mode != "nearest" && mode != "bicubic") {
    return KernelError(args, absl::StrCat("mode '", mode, "' is not bilinear, nearest or bicubic"));
  }
  GridPadding padding;
  if (padding_name == "zeros") {
    padding = GridPadding::kZeros;
  } else if (padding_name == "border") {
    padding = GridPadding::kBorder;
  } else if (padding_name == "reflection") {
    padding = GridPadding::kReflection;
  } else {
    return KernelError(args, absl::StrCat("padding_mode '", padding_name, "'"));
  }
  const bool align = align_attr != 0;
  MG_ASSIGN_OR_RETURN(const std::vector<float> in, LoadInput(args, 0));
  MG_ASSIGN_OR_RETURN(const std::vector<float> g, LoadInput(args, 1));
  std::vector<float> out(static_cast<size_t>(n * c * ho * wo));
  const int64_t plane = h * w;
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t oy = 0; oy < ho; ++oy) {
      for (int64_t ox = 0; ox < wo; ++ox) {
        const float* gp = g.data() + ((b * ho + oy) * wo + ox) * 2;
        const float fx = Unnormalize(gp[0], w, align);
        const float fy = Unnormalize(gp[1], h, align);
        float* dst = out.data() + (b * c * ho + oy) * wo + ox;  // channel 0
        const float* src = in.data() + b * c * plane;            // channel 0
        auto pixel = [&](int64_t ch, int64_t iy, int64_t ix) {
          return iy >= 0 && iy < h && ix >= 0 && ix < w ? src[ch * plane + iy * w + ix] : 0.0f;
        };
        if (mode == "bicubic") {
          const float x0 = std::floor(fx), y0 = std::floor(fy);
          const std::array<double, 4> wx = CubicWeights(fx - x0, -0.75);
          const std::array<double, 4> wy = CubicWeights(fy - y0, -0.75);
          // Each tap's coordinate goes through the padding mode on its own.
          std::array<int64_t, 4> tx, ty;
          for (int t = 0; t < 4; ++t) {
            tx[t] = PixelIndex(PadCoordinate(x0 - 1 + t, w, padding, align));
            ty[t] = PixelIndex(PadCoordinate(y0 - 1 + t, h, padding, align));
          }
          for (int64_t ch = 0; ch < c; ++ch) {
            float v = 0;
            for (int j = 0; j < 4; ++j) {
              float row = 0;
              for (int i = 0; i < 4; ++i) row += static_cast<float>(wx[i]) * pixel(ch, ty[j], tx[i]);
              v += static_cast<float>(wy[j]) * row;
            }
            dst[ch * ho * wo] = v;
          }
          continue;
        }
        const float px = PadCoordinate(fx, w, padding, align);
        const float py = PadCoordinate(fy, h, padding, align);
        if (mode == "nearest") {
          const int64_t ix = PixelIndex(std::nearbyint(px));
          const int64_t iy = PixelIndex(std::nearbyint(py));
          for (int64_t ch = 0; ch < c; ++ch) dst[ch * ho * wo] = pixel(ch, iy, ix);
          continue;
        }
        const int64_t x0 = PixelIndex(std::floor(px));
        const int64_t y0 = PixelIndex(std::floor(py));
        const float ax = px - std::floor(px), ay = py - std::floor(py);
        for (int64_t ch = 0; ch < c; ++ch) {
          dst[ch * ho * wo] = pixel(ch, y0, x0) * (1 - ax) * (1 - ay) +
                              pixel(ch, y0, x0 + 1) * ax * (1 - ay) +
                              pixel(ch, y0 + 1, x0) * (1 - ax) * ay +
                              pixel(ch, y0 + 1, x0 + 1) * ax * ay;
        }
      }
    }
  }
  return StoreOutput(args, 0, out);
}

// ---- RoiAlign -------------------------------------------------------------------------------

// RoiAlign(X [N, C, H, W], rois [R, 4] (x1, y1, x2, y2), batch_indices [R]) -> Y [R, C, oh, ow]
// (ONNX opset 16, as torchvision's roi_align exports): each bin of a region averages
// sampling_ratio^2 bilinear samples (0: ceil(region / bins) per axis). Mode avg only; the
// arithmetic of torchvision's CPU roi_align in float32: coordinates scaled by spatial_scale,
// less 0.5 for half_pixel (aligned=True); output_half_pixel (aligned=False) widens a region to
// at least one pixel; a sample more than one pixel outside X reads 0, one within clamps.
absl::Status RoiAlign(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 3, 3, 1, 1));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  const TensorType& x = *args.input_types[0];
  const TensorType& rois = *args.input_types[1];
  const TensorType& batch = *args.input_types[2];
  const TensorType& y = *args.output_types[0];
  MG_ASSIGN_OR_RETURN(const int64_t oh, IntAttr(args, "output_height", 1));
  MG_ASSIGN_OR_RETURN(const int64_t ow, IntAttr(args, "output_width", 1));
  MG_ASSIGN_OR_RETURN(const int64_t sampling, IntAttr(args, "sampling_ratio", 0));
  MG_ASSIGN_OR_RETURN(const double scale, FloatAttr(args, "spatial_scale", 1.0));
  MG_ASSIGN_OR_RETURN(const std::optional<std::string> mode, StringAttr(args, "mode"));
  MG_ASSIGN_OR_RETURN(const std::optional<std::string> transform,
                      StringAttr(args, "coordinate_transformation_mode"));
  if (mode.has_value() && *mode != "avg") {
    return KernelUnimplemented(args, absl::StrCat("mode '", *mode, "' (only avg)"));
  }
  const std::string how = transform.value_or("half_pixel");
  if (how != "half_pixel" && how != "output_half_pixel") {
    return KernelError(args, absl::StrCat("coordinate_transformation_mode '", how, "'"));
  }
  if (x.dims.size() != 4 || rois.dims.size() != 2 || rois.dims[1] != 4 ||
      batch.dims != Dims{rois.dims[0]} || oh < 1 || ow < 1 || sampling < 0 ||
      y.dims != Dims{rois.dims[0], x.dims[1], oh, ow} || y.dtype != x.dtype) {
    return KernelError(args, "expects X [N, C, H, W], rois [R, 4], batch_indices [R] and Y "
                             "[R, C, output_height, output_width] of X's type");
  }
  const bool aligned = how == "half_pixel";
  const int64_t n = x.dims[0], channels = x.dims[1], height = x.dims[2], width = x.dims[3];
  const int64_t regions = rois.dims[0];
  MG_ASSIGN_OR_RETURN(const Dims batch_of, ReadInts(args, 2, "batch_indices"));
  MG_ASSIGN_OR_RETURN(FloatLoader load, LoaderFor(args, x));
  MG_ASSIGN_OR_RETURN(FloatLoader load_rois, LoaderFor(args, rois));
  const std::vector<float> boxes = load_rois.Run(args.inputs[1], 0, NumElements(rois.dims));
  // Each region's sampling geometry, checked before any work: a region whose coordinates are
  // not finite samples nothing (its bins are 0), and one asking for more samples per bin than
  // 2^20 is refused (torchvision would loop for ever).
  struct Region {
    float start_h, start_w, bin_h, bin_w;
    int64_t grid_h, grid_w;
    bool finite;
  };
  std::vector<Region> region(static_cast<size_t>(regions));
  for (int64_t r = 0; r < regions; ++r) {
    if (batch_of[r] < 0 || batch_of[r] >= n) {
      return KernelError(args, absl::StrCat("batch index ", batch_of[r], " of region ", r,
                                            " is outside [0, ", n, ")"));
    }
    const float offset = aligned ? 0.5f : 0.0f;
    const float* box = &boxes[r * 4];
    Region& g = region[r];
    g.start_w = box[0] * static_cast<float>(scale) - offset;
    g.start_h = box[1] * static_cast<float>(scale) - offset;
    float roi_w = box[2] * static_cast<float>(scale) - offset - g.start_w;
    float roi_h = box[3] * static_cast<float>(scale) - offset - g.start_h;
    if (!aligned) {
      roi_w = std::max(roi_w, 1.0f);
      roi_h = std::max(roi_h, 1.0f);
    }
    g.finite = std::isfinite(g.start_w) && std::isfinite(g.start_h) && std::isfinite(roi_w) &&
               std::isfinite(roi_h);
    g.bin_h = roi_h / static_cast<float>(oh);
    g.bin_w = roi_w / static_cast<float>(ow);
    const double want_h = sampling > 0 ? sampling : std::ceil(roi_h / static_cast<float>(oh));
    const double want_w = sampling > 0 ? sampling : std::ceil(roi_w / static_cast<float>(ow));
    if (g.finite && want_h * want_w > double{1 << 20}) {
      return KernelError(args, absl::StrCat("region ", r, " asks for ", want_h * want_w,
                                            " samples per bin, more than 2^20"));
    }
    g.grid_h = g.finite ? std::max<int64_t>(static_cast<int64_t>(want_h), 0) : 0;
    g.grid_w = g.finite ? std::max<int64_t>(static_cast<int64_t>(want_w), 0) : 0;
  }
  std::vector<float> out(static_cast<size_t>(NumElements(y.dims)), 0.0f);
  std::vector<float> plane(static_cast<size_t>(height * width));
  // One plane of X at a time, for every region of its image (an empty image: bins of 0).
  for (int64_t b = 0; b < n && height > 0 && width > 0; ++b) {
    for (int64_t c = 0; c < channels; ++c) {
      bool loaded = false;
      auto at = [&](int64_t yy, int64_t xx) { return plane[yy * width + xx]; };
      for (int64_t r = 0; r < regions; ++r) {
        if (batch_of[r] != b) continue;
        if (!loaded) {
          load.run(args.inputs[0], (b * channels + c) * height * width, height * width,
                   plane.data());
          loaded = true;
        }
        const Region& g = region[r];
        const float count = static_cast<float>(std::max<int64_t>(g.grid_h * g.grid_w, 1));
        for (int64_t ph = 0; ph < oh; ++ph) {
          for (int64_t pw = 0; pw < ow; ++pw) {
            float sum = 0;
            for (int64_t iy = 0; iy < g.grid_h; ++iy) {
              const float sy = g.start_h + static_cast<float>(ph) * g.bin_h +
                               (static_cast<float>(iy) + 0.5f) * g.bin_h /
                                   static_cast<float>(g.grid_h);
              for (int64_t ix = 0; ix < g.grid_w; ++ix) {
                const float sx = g.start_w + static_cast<float>(pw) * g.bin_w +
                                 (static_cast<float>(ix) + 0.5f) * g.bin_w /
                                     static_cast<float>(g.grid_w);
                // Also false for NaN: only samples within a pixel of X are read.
                if (!(sy >= -1.0f && sy <= static_cast<float>(height) && sx >= -1.0f &&
                      sx <= static_cast<float>(width))) {
                  continue;
                }
                float yy = std::max(sy, 0.0f), xx = std::max(sx, 0.0f);
                int64_t y0 = static_cast<int64_t>(yy), x0 = static_cast<int64_t>(xx), y1, x1;
                if (y0 >= height - 1) {
                  y0 = y1 = height - 1;
                  yy = static_cast<float>(y0);
                } else {
                  y1 = y0 + 1;
                }
                if (x0 >= width - 1) {
                  x0 = x1 = width - 1;
                  xx = static_cast<float>(x0);
                } else {
                  x1 = x0 + 1;
                }
                const float ly = yy - static_cast<float>(y0), lx = xx - static_cast<float>(x0);
                const float hy = 1.0f - ly, hx = 1.0f - lx;
                sum += hy * hx * at(y0, x0) + hy * lx * at(y0, x1) + ly * hx * at(y1, x0) +
                       ly * lx * at(y1, x1);
              }
            }
            out[((r * channels + c) * oh + ph) * ow + pw] = sum / count;
          }
        }
      }
    }
  }
  MG_ASSIGN_OR_RETURN(FloatStorer store, StorerFor(args, y));
  store.run(args.outputs[0], 0, static_cast<int64_t>(out.size()), out.data());
  return absl::OkStatus();
}

}  // namespace

void AddCpuResizeKernels(KernelMap& kernels) {
  kernels["RoiAlign"] = RoiAlign;
  kernels["Resize"] = Resize;
  kernels["ResizeGradient"] = ResizeGradient;
  kernels["GridSample"] = GridSample;
}

}  // namespace memonger::alloc
