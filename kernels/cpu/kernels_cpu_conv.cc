// Convolution CPU kernels (Caffe2/ONNX Conv, NCHW, 1 to 3 spatial dims, groups, strides,
// dilations, pads; kernel_window.h reads the attributes):
//   Conv(X [N, C, in...], W [M, C/group, k...], [b [M]]) -> Y [N, M, out...]
//   ConvGradient(X, W, dY) -> dW, db, [dX]; with no_bias=1: dW, [dX]
//   ConvTranspose(X [N, C, in...], W [C, M/group, k...], [B [M]]) -> Y [N, M, out...]: the
//   backward data pass with X as dY (see ConvTranspose below)
//
// The algorithm, per image n and group g (Cg = C/group input channels, Mg = M/group maps,
// P output positions, K = prod(k) taps):
//   1. im2col: col [Cg*K, P] float32, col[c*K + t, p] = X[n, g*Cg + c, p*stride - pad +
//      t*dilation] (0 in the padding);
//   2. forward: Y_g [Mg, P] = W_g [Mg, Cg*K] x col, plus b, rounded once into Y (depthwise
//      groups, one input channel each, add their taps directly instead: DepthwiseConv);
//   3. backward: dW_g += dY_g [Mg, P] x col^T, db += the row sums of dY_g, and
//      dcol = W_g^T x dY_g scattered back (col2im) into a float32 dX of the image.
// Products go through GemmCpu (float32 sums over k in ascending order; the forward product on
// KernelArgs::threads threads, the same bits for any count); images are visited in order, so dW
// and db accumulate deterministically. The col buffers (Cg*K*P floats per group)
// are scratch outside the arena, like GemmCpu's packing buffers: the schema gives Conv no
// workspace. Storage float32, float16, bfloat16 (X, W, dY of one type). Outputs must not
// overlap inputs (FailedPrecondition).
#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/gemm_cpu.h"
#include "kernels/cpu/kernel_float_io.h"
#include "kernels/cpu/kernel_threads.h"
#include "kernels/cpu/kernel_window.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/kernel_util.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

using graph::DataType;
using graph::TensorType;
using namespace kernel_internal;  // NOLINT: the helpers of every kernel file

struct ConvShape {
  WindowGeometry win;
  int64_t group = 1;
  int64_t maps = 0;           // M
  int64_t group_channels = 0; // Cg
  int64_t group_maps = 0;     // Mg
  int64_t taps = 0;           // K
  int64_t positions = 0;      // P
  int64_t col_rows() const { return group_channels * taps; }
};

absl::StatusOr<ConvShape> ReadConvShape(const KernelArgs& args, const TensorType& x,
                                        const TensorType& w, const Dims& y_dims) {
  for (const TensorType* t : {&x, &w}) {
    if (t->dtype != DataType::kFloat32 && t->dtype != DataType::kFloat16 &&
        t->dtype != DataType::kBFloat16) {
      return UnsupportedDtype(args, t->dtype, "float32, float16, bfloat16");
    }
  }
  if (w.dtype != x.dtype || w.dims.size() != x.dims.size()) {
    return KernelError(args, "W must have X's element type and rank");
  }
  ConvShape s;
  MG_ASSIGN_OR_RETURN(s.group, IntAttr(args, "group", 1));
  s.maps = w.dims[0];
  if (s.group <= 0 || x.dims.size() < 3 || x.dims[1] % s.group != 0 || s.maps % s.group != 0 ||
      w.dims[1] != x.dims[1] / s.group) {
    return KernelError(args, absl::StrCat("X ", graph::TensorTypeToString(x), " and W ",
                                          graph::TensorTypeToString(w), " do not agree with group ",
                                          s.group));
  }
  MG_ASSIGN_OR_RETURN(s.win, ReadWindowGeometry(args, x, Dims(w.dims.begin() + 2, w.dims.end()),
                                                y_dims));
  if (y_dims[1] != s.maps) return KernelError(args, "the output must have W.dims[0] channels");
  s.group_channels = x.dims[1] / s.group;
  s.group_maps = s.maps / s.group;
  s.taps = s.win.kernel_size();
  s.positions = s.win.out_size();
  return s;
}

// Calls fn(col_index, in_index) for every (tap, output position) of one channel whose input
// element lies inside the image: col_index = t * P + p in the channel's [K, P] block of the
// column matrix, in_index into the channel's plane (Col2ImAdd's scatter).
template <typename Fn>
void ForEachWindowTap(const WindowGeometry& w, int64_t positions, Fn fn) {
  int64_t t = 0;
  for (int64_t k0 = 0; k0 < w.kernel[0]; ++k0) {
    for (int64_t k1 = 0; k1 < w.kernel[1]; ++k1) {
      for (int64_t k2 = 0; k2 < w.kernel[2]; ++k2, ++t) {
        int64_t p = 0;
        for (int64_t o0 = 0; o0 < w.out[0]; ++o0) {
          const int64_t i0 = o0 * w.stride[0] - w.pad[0] + k0 * w.dilation[0];
          for (int64_t o1 = 0; o1 < w.out[1]; ++o1) {
            const int64_t i1 = o1 * w.stride[1] - w.pad[1] + k1 * w.dilation[1];
            for (int64_t o2 = 0; o2 < w.out[2]; ++o2, ++p) {
              const int64_t i2 = o2 * w.stride[2] - w.pad[2] + k2 * w.dilation[2];
              if (i0 < 0 || i0 >= w.in[0] || i1 < 0 || i1 >= w.in[1] || i2 < 0 || i2 >= w.in[2]) {
                continue;
              }
              fn(t * positions + p, (i0 * w.in[1] + i1) * w.in[2] + i2);
            }
          }
        }
      }
    }
  }
}

// Columns of the column matrix for output rows [row_begin, row_end) of the batch: row r is
// (o0, o1) = (rr / out[1], rr % out[1]) of image r / R, rr = r % R, R = out[0] * out[1] rows an
// image, each row out[2] positions. `chunk` is [Cg*K, (row_end - row_begin) * out[2]]; every
// element is written (0 where a tap reads the padding), so it needs no clearing. planes(n, c)
// is channel c (of the group) of image n as float32.
template <typename PlaneFn>
void Im2ColRows(const ConvShape& s, int64_t row_begin, int64_t row_end, PlaneFn planes,
                float* chunk) {
  const WindowGeometry& w = s.win;
  const int64_t width = w.out[2];
  const int64_t image_rows = w.out[0] * w.out[1];
  const int64_t chunk_positions = (row_end - row_begin) * width;
  for (int64_t c = 0; c < s.group_channels; ++c) {
    int64_t t = 0;
    for (int64_t k0 = 0; k0 < w.kernel[0]; ++k0) {
      for (int64_t k1 = 0; k1 < w.kernel[1]; ++k1) {
        for (int64_t k2 = 0; k2 < w.kernel[2]; ++k2, ++t) {
          // Output columns [lo, hi) read inside the input row; the rest read the padding.
          const int64_t off2 = k2 * w.dilation[2] - w.pad[2];
          const int64_t stride2 = w.stride[2];
          int64_t lo = 0, hi = width;
          while (lo < hi && lo * stride2 + off2 < 0) ++lo;
          while (hi > lo && (hi - 1) * stride2 + off2 >= w.in[2]) --hi;
          float* dst = chunk + (c * s.taps + t) * chunk_positions;
          for (int64_t r = row_begin; r < row_end; ++r, dst += width) {
            const int64_t rr = r % image_rows;
            const int64_t o0 = rr / w.out[1], o1 = rr % w.out[1];
            const int64_t i0 = o0 * w.stride[0] - w.pad[0] + k0 * w.dilation[0];
            const int64_t i1 = o1 * w.stride[1] - w.pad[1] + k1 * w.dilation[1];
            if (i0 < 0 || i0 >= w.in[0] || i1 < 0 || i1 >= w.in[1]) {
              std::fill(dst, dst + width, 0.0f);
              continue;
            }
            // Element o2 reads the row at o2 * stride2 + off2 (inside for o2 in [lo, hi)).
            const float* row = planes(r / image_rows, c) + (i0 * w.in[1] + i1) * w.in[2];
            std::fill(dst, dst + lo, 0.0f);
            if (stride2 == 1) {
              std::copy(row + lo + off2, row + hi + off2, dst + lo);
            } else {
              for (int64_t o2 = lo; o2 < hi; ++o2) dst[o2] = row[o2 * stride2 + off2];
            }
            std::fill(dst + hi, dst + width, 0.0f);
          }
        }
      }
    }
  }
}

// col [Cg*K, P] for image n, group g (float32; 0 where a tap reads the padding), for the
// backward pass, which needs the whole image's columns at once. `planes` is scratch.
void Im2Col(const ConvShape& s, const FloatLoader& load, const std::byte* x, int64_t n, int64_t g,
            std::vector<float>& planes, std::vector<float>& col) {
  const int64_t in_size = s.win.in_size();
  planes.resize(static_cast<size_t>(s.group_channels * in_size));
  load.run(x, (n * s.win.channels + g * s.group_channels) * in_size, s.group_channels * in_size,
           planes.data());
  col.resize(static_cast<size_t>(s.col_rows() * s.positions));
  if (s.positions == 0) return;
  Im2ColRows(s, 0, s.positions / s.win.out[2],
             [&](int64_t, int64_t c) { return planes.data() + c * in_size; }, col.data());
}

// dx (the image's float32 gradient, all channels) += col2im(dcol) for group g.
void Col2ImAdd(const ConvShape& s, const std::vector<float>& dcol, int64_t g, float* dx) {
  const WindowGeometry& w = s.win;
  for (int64_t c = 0; c < s.group_channels; ++c) {
    float* plane = dx + (g * s.group_channels + c) * w.in_size();
    const float* block = dcol.data() + c * s.taps * s.positions;
    ForEachWindowTap(w, s.positions, [&](int64_t col_index, int64_t in_index) {
      plane[in_index] += block[col_index];
    });
  }
}

GemmOperand FloatOperand(const float* m, int64_t ld, bool transposed) {
  return GemmOperand{DataType::kFloat32, reinterpret_cast<const std::byte*>(m), ld, transposed};
}
GemmOperand FloatOperand(const std::vector<float>& m, int64_t ld, bool transposed) {
  return FloatOperand(m.data(), ld, transposed);
}

// One output plane of a depthwise Conv: out = the taps of `taps` over `plane`, output row by
// output row (the row stays in cache while every tap adds to it), each sum over the taps in the
// column matrix's order from 0, skipping taps that read the padding, `bias` added last.
// Multiplies and adds stay separate (ISO C++: no contraction), so the AVX-512 and AVX2 clones
// the loader picks give the default build's bits.
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void DepthwisePlane(const WindowGeometry& w, const float* taps, const float* plane,
                    const int64_t* lo, const int64_t* hi, float bias, float* out) {
  for (int64_t o0 = 0; o0 < w.out[0]; ++o0) {
    for (int64_t o1 = 0; o1 < w.out[1]; ++o1) {
      float* dst = out + (o0 * w.out[1] + o1) * w.out[2];
      std::fill(dst, dst + w.out[2], 0.0f);
      int64_t t = 0;
      for (int64_t k0 = 0; k0 < w.kernel[0]; ++k0) {
        const int64_t i0 = o0 * w.stride[0] - w.pad[0] + k0 * w.dilation[0];
        for (int64_t k1 = 0; k1 < w.kernel[1]; ++k1) {
          const int64_t i1 = o1 * w.stride[1] - w.pad[1] + k1 * w.dilation[1];
          if (i0 < 0 || i0 >= w.in[0] || i1 < 0 || i1 >= w.in[1]) {
            t += w.kernel[2];
            continue;
          }
          const float* row = plane + (i0 * w.in[1] + i1) * w.in[2];
          for (int64_t k2 = 0; k2 < w.kernel[2]; ++k2, ++t) {
            const float wt = taps[t];
            const int64_t off2 = k2 * w.dilation[2] - w.pad[2];
            const int64_t stride = w.stride[2];
            if (stride == 1) {
              for (int64_t o2 = lo[k2]; o2 < hi[k2]; ++o2) dst[o2] += wt * row[o2 + off2];
            } else {
              for (int64_t o2 = lo[k2]; o2 < hi[k2]; ++o2) dst[o2] += wt * row[o2 * stride + off2];
            }
          }
        }
      }
      for (int64_t o2 = 0; o2 < w.out[2]; ++o2) dst[o2] += bias;
    }
  }
}

// Conv where every group reads one input channel (depthwise: MobileNet, EfficientNet, MnasNet,
// ShuffleNet, RegNet): each output plane is its channel's taps added straight from the input,
// with no column matrix and no matrix product (one per group would cost more in packing than in
// arithmetic): DepthwisePlane. Planes (image, channel) are split over KernelArgs::threads,
// each computed as on one thread.
absl::Status DepthwiseConv(const KernelArgs& args, const ConvShape& s,
                           const std::vector<float>& bias, const FloatLoader& load,
                           const FloatStorer& store) {
  const WindowGeometry& w = s.win;
  MG_ASSIGN_OR_RETURN(const FloatLoader load_w, LoaderFor(args, *args.input_types[1]));
  const std::vector<float> weights =
      load_w.Run(args.inputs[1], 0, NumElements(args.input_types[1]->dims));
  // Output columns [lo[k2], hi[k2]) read inside the input row at tap k2.
  std::vector<int64_t> lo(static_cast<size_t>(w.kernel[2])), hi(lo.size());
  for (int64_t k2 = 0; k2 < w.kernel[2]; ++k2) {
    const int64_t off2 = k2 * w.dilation[2] - w.pad[2];
    int64_t l = 0, h = w.out[2];
    while (l < h && l * w.stride[2] + off2 < 0) ++l;
    while (h > l && (h - 1) * w.stride[2] + off2 >= w.in[2]) --h;
    lo[k2] = l;
    hi[k2] = h;
  }
  const int64_t planes = w.batch * s.group;
  const int workers = WorkersFor(
      args.threads, static_cast<double>(w.batch * s.maps) * s.positions * s.taps, planes);
  RunOnWorkers(workers, [&](int worker) {
    std::vector<float> plane(static_cast<size_t>(w.in_size()));
    std::vector<float> out(static_cast<size_t>(s.positions));
    for (int64_t piece = worker; piece < planes; piece += workers) {
      const int64_t n = piece / s.group, g = piece % s.group;
      load.run(args.inputs[0], (n * w.channels + g) * w.in_size(), w.in_size(), plane.data());
      for (int64_t mi = 0; mi < s.group_maps; ++mi) {
        const int64_t m = g * s.group_maps + mi;
        DepthwisePlane(w, weights.data() + m * s.taps, plane.data(), lo.data(), hi.data(),
                       bias[m], out.data());
        store.run(args.outputs[0], (n * s.maps + m) * s.positions, s.positions, out.data());
      }
    }
  });
  return absl::OkStatus();
}

// A 1x1 window with unit strides and no padding: the column matrix is X itself.
bool IsPointwise(const WindowGeometry& w) {
  for (int i = 0; i < 3; ++i) {
    if (w.kernel[i] != 1 || w.stride[i] != 1 || w.pad[i] != 0 || w.out[i] != w.in[i]) return false;
  }
  return true;
}

// A 1x1 window reads X directly where an image has at least this many positions (two of the
// product's column tiles); smaller images go through the column matrix, several to a product,
// so that W is packed once for them.
constexpr int64_t kDirectPositions = 512;

// Output rows per chunk of the forward pass's column matrix: about kColumnChunkFloats floats
// (so the chunk stays in cache between im2col and the product's packing), but at least two of
// the product's column tiles, and at least one row; at most the batch's rows.
constexpr int64_t kColumnChunkFloats = int64_t{1} << 18;  // 1 MiB
int64_t ColumnChunkRows(const ConvShape& s) {
  const int64_t width = s.win.out[2];
  const int64_t rows = s.win.batch * (s.positions / width);
  const int64_t positions =
      std::max<int64_t>(kColumnChunkFloats / std::max<int64_t>(s.col_rows(), 1), 512);
  return std::clamp<int64_t>(positions / width, 1, std::max<int64_t>(rows, 1));
}

int64_t CeilDiv(int64_t x, int64_t m) { return (x + m - 1) / m; }

absl::Status Conv(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 2, 3, 1, 1));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  const TensorType& x = *args.input_types[0];
  const TensorType& w = *args.input_types[1];
  const TensorType& y = *args.output_types[0];
  if (y.dtype != x.dtype) return KernelError(args, "Y must have X's element type");
  MG_ASSIGN_OR_RETURN(const ConvShape s, ReadConvShape(args, x, w, y.dims));
  std::vector<float> bias(static_cast<size_t>(s.maps), 0.0f);
  if (args.inputs.size() == 3) {
    if (NumElements(args.input_types[2]->dims) != s.maps) return KernelError(args, "b must hold M elements");
    MG_ASSIGN_OR_RETURN(bias, LoadInput(args, 2));
  }
  MG_ASSIGN_OR_RETURN(const FloatLoader load, LoaderFor(args, x));
  MG_ASSIGN_OR_RETURN(const FloatStorer store, StorerFor(args, y));
  if (s.group_channels == 1 && s.group > 1) return DepthwiseConv(args, s, bias, load, store);
  if (s.positions == 0) return absl::OkStatus();
  const int64_t w_elem = graph::DataTypeSize(w.dtype);
  const WindowGeometry& win = s.win;
  // Y_g = W_g x cols for the batch's output positions [q0, q0 + count) (position q is p = q % P
  // of image q / P), cols [Cg*K, count].
  // `worker`: the Conv worker calling (its scratch buffers are the product's).
  auto product = [&](int64_t g, const GemmOperand& cols, int64_t q0, int64_t count,
                     int threads, int worker) -> absl::Status {
    const GemmOperand wg{w.dtype, args.inputs[1] + g * s.group_maps * s.col_rows() * w_elem,
                         s.col_rows(), false};
    // Called from several threads at once (args.threads): its buffer is its own.
    return GemmCpu(
        s.group_maps, count, s.col_rows(), wg, cols,
        [&](int64_t r, int64_t c, int64_t len_all, const float* acc) {
          constexpr int64_t kChunk = 64;
          float row[kChunk];
          const float b = bias[g * s.group_maps + r];
          for (int64_t j0 = 0; j0 < len_all;) {
            const int64_t q = q0 + c + j0;
            const int64_t n = q / s.positions, p = q % s.positions;
            const int64_t len = std::min({kChunk, len_all - j0, s.positions - p});
            for (int64_t j = 0; j < len; ++j) row[j] = acc[j0 + j] + b;
            store.run(args.outputs[0], (n * s.maps + g * s.group_maps + r) * s.positions + p,
                      len, row);
            j0 += len;
          }
        },
        threads, GemmKernel::kAuto, GemmScratch{args.scratch, worker});
  };
  const int64_t x_elem = graph::DataTypeSize(x.dtype);
  if (IsPointwise(win) && s.positions >= kDirectPositions) {
    // The column matrix is the image's channels as stored: the product reads X directly.
    for (int64_t n = 0; n < win.batch; ++n) {
      for (int64_t g = 0; g < s.group; ++g) {
        const GemmOperand xg{
            x.dtype, args.inputs[0] + (n * win.channels + g * s.group_channels) * s.positions * x_elem,
            s.positions, false};
        MG_RETURN_IF_ERROR(product(g, xg, n * s.positions, s.positions, args.threads, 0));
      }
    }
    return absl::OkStatus();
  }
  // Chunks of output rows across the batch: small images share one product (W_g packed once).
  // With threads, whole chunks (im2col and product) go to the workers where there are at least
  // two per worker; else one chunk at a time, its product split over the threads.
  const int64_t width = win.out[2];
  const int64_t image_rows = s.positions / width;
  const int64_t all_rows = win.batch * image_rows;
  const int64_t chunk_rows = ColumnChunkRows(s);
  const int64_t group_chunks = CeilDiv(all_rows, chunk_rows);
  const int64_t pieces = s.group * group_chunks;
  const double macs = static_cast<double>(win.batch * s.maps) * s.positions * s.col_rows();
  const int workers =
      pieces >= 2 * int64_t{args.threads} ? WorkersFor(args.threads, macs, pieces) : 1;
  const int product_threads = workers > 1 ? 1 : args.threads;
  const int64_t plane_block = s.group_channels * win.in_size();  // a group's planes
  const float* x32 = reinterpret_cast<const float*>(args.inputs[0]);
  std::vector<absl::Status> errors(static_cast<size_t>(workers));
  RunOnWorkers(workers, [&](int worker) {
    const ScratchFloats chunk(args.scratch, worker, ScratchUse::kConvColumns,
                              static_cast<size_t>(s.col_rows() * chunk_rows * width));
    std::vector<float> converted;  // images [n_first, n_last] of the chunk as float32 (half storage)
    // What `converted` holds (group, first and last image): the chunks of one image reuse it.
    int64_t held_g = -1, held_first = -1, held_last = -1;
    for (int64_t piece = worker; piece < pieces && errors[worker].ok(); piece += workers) {
      const int64_t g = piece / group_chunks;
      const int64_t r0 = (piece % group_chunks) * chunk_rows;
      const int64_t r1 = std::min(all_rows, r0 + chunk_rows);
      const int64_t n_first = r0 / image_rows, n_last = (r1 - 1) / image_rows;
      auto first_of = [&](int64_t n) {
        return (n * win.channels + g * s.group_channels) * win.in_size();
      };
      if (x.dtype != DataType::kFloat32 &&
          (g != held_g || n_first != held_first || n_last != held_last)) {
        converted.resize(static_cast<size_t>((n_last - n_first + 1) * plane_block));
        for (int64_t n = n_first; n <= n_last; ++n) {
          load.run(args.inputs[0], first_of(n), plane_block,
                   converted.data() + (n - n_first) * plane_block);
        }
        held_g = g;
        held_first = n_first;
        held_last = n_last;
      }
      Im2ColRows(
          s, r0, r1,
          [&](int64_t n, int64_t c) {
            return x.dtype == DataType::kFloat32
                       ? x32 + first_of(n) + c * win.in_size()
                       : converted.data() + (n - n_first) * plane_block + c * win.in_size();
          },
          chunk.data());
      GemmOperand cols = FloatOperand(chunk.data(), (r1 - r0) * width, false);
      cols.bf16_values = x.dtype == DataType::kBFloat16;  // copies of X's values, or 0
      errors[worker] =
          product(g, cols, r0 * width, (r1 - r0) * width, product_threads, worker);
    }
  });
  for (const absl::Status& error : errors) MG_RETURN_IF_ERROR(error);
  return absl::OkStatus();
}

absl::Status ConvGradient(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 3, 3, 1, 3));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  const TensorType& x = *args.input_types[0];
  const TensorType& w = *args.input_types[1];
  const TensorType& dy = *args.input_types[2];
  if (dy.dtype != x.dtype) return KernelError(args, "dY must have X's element type");
  MG_ASSIGN_OR_RETURN(const ConvShape s, ReadConvShape(args, x, w, dy.dims));
  MG_ASSIGN_OR_RETURN(const int64_t no_bias, IntAttr(args, "no_bias", 0));
  const int n_out = static_cast<int>(args.outputs.size());
  const int db_out = no_bias == 0 ? 1 : -1;
  const int dx_out = (no_bias == 0 ? 2 : 1) < n_out ? (no_bias == 0 ? 2 : 1) : -1;
  if ((no_bias == 0 && n_out < 2) || (no_bias != 0 && n_out > 2)) {
    return KernelError(args, absl::StrCat("has ", n_out, " outputs; with no_bias=", no_bias,
                                          " it has ", no_bias == 0 ? "dW, db, [dX]" : "dW, [dX]"));
  }
  if (*args.output_types[0] != w || (dx_out >= 0 && *args.output_types[dx_out] != x) ||
      (db_out >= 0 && NumElements(args.output_types[db_out]->dims) != s.maps)) {
    return KernelError(args, "dW must have W's type, db hold M elements, dX have X's type");
  }
  MG_ASSIGN_OR_RETURN(const FloatLoader load_x, LoaderFor(args, x));
  MG_ASSIGN_OR_RETURN(const FloatLoader load_dy, LoaderFor(args, dy));
  const int64_t w_elem = graph::DataTypeSize(w.dtype);
  const int64_t dy_elem = graph::DataTypeSize(dy.dtype);
  std::vector<float> dw(static_cast<size_t>(NumElements(w.dims)), 0.0f);
  std::vector<float> db(static_cast<size_t>(s.maps), 0.0f);
  std::vector<float> dx_image;
  std::optional<FloatStorer> store_dx;
  if (dx_out >= 0) {
    MG_ASSIGN_OR_RETURN(store_dx, StorerFor(args, x));
  }
  std::vector<float> planes, col, dcol;
  for (int64_t n = 0; n < s.win.batch; ++n) {
    if (store_dx.has_value()) dx_image.assign(static_cast<size_t>(s.win.channels * s.win.in_size()), 0.0f);
    for (int64_t g = 0; g < s.group; ++g) {
      const int64_t dy_base = (n * s.maps + g * s.group_maps) * s.positions;
      const GemmOperand dyg{dy.dtype, args.inputs[2] + dy_base * dy_elem, s.positions, false};
      Im2Col(s, load_x, args.inputs[0], n, g, planes, col);
      float* dwg = dw.data() + g * s.group_maps * s.col_rows();
      MG_RETURN_IF_ERROR(GemmCpu(s.group_maps, s.col_rows(), s.positions, dyg,
                                 FloatOperand(col, s.positions, true),
                                 [&](int64_t r, int64_t c, int64_t count, const float* acc) {
                                   float* dst = dwg + r * s.col_rows() + c;
                                   for (int64_t j = 0; j < count; ++j) dst[j] += acc[j];
                                 }));
      for (int64_t r = 0; r < s.group_maps; ++r) {
        const std::vector<float> v = load_dy.Run(args.inputs[2], dy_base + r * s.positions, s.positions);
        float sum = 0.0f;
        for (float e : v) sum += e;
        db[g * s.group_maps + r] += sum;
      }
      if (!store_dx.has_value()) continue;
      dcol.assign(static_cast<size_t>(s.col_rows() * s.positions), 0.0f);
      const GemmOperand wg_t{w.dtype, args.inputs[1] + g * s.group_maps * s.col_rows() * w_elem,
                             s.col_rows(), true};
      MG_RETURN_IF_ERROR(GemmCpu(s.col_rows(), s.positions, s.group_maps, wg_t, dyg,
                                 [&](int64_t r, int64_t c, int64_t count, const float* acc) {
                                   std::copy(acc, acc + count, dcol.data() + r * s.positions + c);
                                 }));
      Col2ImAdd(s, dcol, g, dx_image.data());
    }
    if (store_dx.has_value()) {
      store_dx->run(args.outputs[dx_out], n * s.win.channels * s.win.in_size(),
                    static_cast<int64_t>(dx_image.size()), dx_image.data());
    }
  }
  MG_RETURN_IF_ERROR(StoreOutput(args, 0, dw));
  if (db_out >= 0) MG_RETURN_IF_ERROR(StoreOutput(args, db_out, db));
  return absl::OkStatus();
}

// ConvTranspose's spatial attribute: `count` values, or `fallback` for each when absent.
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

// ConvTranspose (ONNX, as torch.onnx.export writes nn.ConvTranspose1d/2d/3d):
// X [N, C, in...], W [C, M / group, k...], [B [M]] -> Y [N, M, out...]. It is Conv's backward
// data pass with X in dY's place: input position i and tap k write output position
// i * stride + k * dilation - pad_begin (positions outside [0, out) dropped), so per image and
// group the columns W_g^T x X_g ([M/group * K, in positions]) are scattered by Col2ImAdd, with
// the window's roles swapped (its "input" is Y, its "output" X). Y's dims are the planned ones;
// the begin pads come from `pads`, or, where `output_shape` or auto_pad SAME_* decide them, from
// the total padding stride * (in - 1) + output_padding + (k - 1) * dilation + 1 - out split as
// ONNX's reference splits it (SAME_UPPER puts the smaller half first; halves round down, and the
// total may be negative). Storage float32, float16, bfloat16, float64 (through float32).
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
    return KernelError(args, absl::StrCat("W ", graph::DimsToString(w.dims), " and group ", group,
                                          " do not fit X's ", c, " channels and Y's ", m));
  }
  const int b_input = FindInputSlot(args, 2);
  if (b_input >= 0 && args.input_types[b_input]->dims != Dims{m}) {
    return KernelError(args, absl::StrCat("B must have dims [", m, "]"));
  }
  const Dims kernel_dims(w.dims.begin() + 2, w.dims.end());
  if (FindAttr(args, "kernel_shape") != nullptr) {
    MG_ASSIGN_OR_RETURN(const Dims kernel, SpatialAttr(args, "kernel_shape", spatial, 0));
    if (kernel != kernel_dims) return KernelError(args, "kernel_shape contradicts W's dims");
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
  // The window as Conv's backward pass sees it: in = Y's positions, out = X's.
  ConvShape s;
  s.win.batch = n;
  s.win.channels = m;
  for (size_t i = 0; i < spatial; ++i) {
    const size_t at = 3 - spatial + i;
    if (strides[i] <= 0 || dilations[i] <= 0 || output_padding[i] < 0) {
      return KernelError(args, "strides and dilations must be positive, output_padding not "
                               "negative");
    }
    s.win.in[at] = y.dims[2 + i];
    s.win.out[at] = x.dims[2 + i];
    s.win.kernel[at] = kernel_dims[i];
    s.win.stride[at] = strides[i];
    s.win.dilation[at] = dilations[i];
    const int64_t reach = strides[i] * (s.win.out[at] - 1) + output_padding[i] +
                          (kernel_dims[i] - 1) * dilations[i] + 1;
    if (derive_pads) {
      const int64_t total = reach - s.win.in[at];
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // rounded down
      s.win.pad[at] = auto_pad == "SAME_UPPER" ? half : total - half;
    } else {
      s.win.pad[at] = auto_pad == "VALID" ? 0 : pads[i];
      const int64_t end = auto_pad == "VALID" ? 0 : pads[spatial + i];
      if (reach - s.win.pad[at] - end != s.win.in[at]) {
        return KernelError(args, absl::StrCat("Y's spatial dim ", i, " is ", s.win.in[at],
                                              "; the attributes give ",
                                              reach - s.win.pad[at] - end));
      }
    }
  }
  s.group = group;
  s.maps = c;
  s.group_channels = m / group;  // Y's channels per group: the rows Col2ImAdd scatters
  s.group_maps = c / group;      // X's channels per group: the product's inner dimension
  s.taps = s.win.kernel_size();
  s.positions = s.win.out_size();
  for (const TensorType* t : {&x, &w, &y}) {
    if (!graph::IsFloatingPoint(t->dtype)) {
      return UnsupportedDtype(args, t->dtype, "float32, float16, bfloat16, float64");
    }
  }
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));

  MG_ASSIGN_OR_RETURN(const FloatLoader load_x, LoaderFor(args, x));
  MG_ASSIGN_OR_RETURN(const FloatLoader load_w, LoaderFor(args, w));
  MG_ASSIGN_OR_RETURN(const FloatStorer store_y, StorerFor(args, y));
  std::vector<float> bias(static_cast<size_t>(m), 0.0f);
  if (b_input >= 0) {
    MG_ASSIGN_OR_RETURN(bias, LoadInput(args, b_input));
  }
  const std::vector<float> weights = load_w.Run(args.inputs[1], 0, NumElements(w.dims));
  const int64_t cg = s.group_maps, rows = s.col_rows();  // rows = M/group * K
  const int64_t in_positions = s.positions, out_size = s.win.in_size();
  std::vector<float> image(static_cast<size_t>(c * in_positions));
  std::vector<float> columns(static_cast<size_t>(rows * in_positions));
  std::vector<float> out(static_cast<size_t>(m * out_size));
  for (int64_t img = 0; img < n; ++img) {
    load_x.run(args.inputs[0], img * c * in_positions, c * in_positions, image.data());
    std::fill(out.begin(), out.end(), 0.0f);
    for (int64_t g = 0; g < group; ++g) {
      // columns[(oc * K + tap), i] = sum over ic of W[g * cg + ic, oc, tap] * X[ic, i]; W_g is
      // stored [cg, M/group * K], so its transpose is the left operand.
      MG_RETURN_IF_ERROR(GemmCpu(
          rows, in_positions, cg, FloatOperand(weights.data() + g * cg * rows, rows, true),
          FloatOperand(image.data() + g * cg * in_positions, in_positions, false),
          [&](int64_t r, int64_t col, int64_t count, const float* values) {
            std::copy_n(values, count, columns.begin() + r * in_positions + col);
          }));
      Col2ImAdd(s, columns, g, out.data());
    }
    for (int64_t oc = 0; oc < m; ++oc) {
      float* plane = out.data() + oc * out_size;
      for (int64_t i = 0; i < out_size; ++i) plane[i] += bias[oc];
    }
    store_y.run(args.outputs[0], img * m * out_size, m * out_size, out.data());
  }
  return absl::OkStatus();
}

}  // namespace

void AddCpuConvKernels(KernelMap& kernels) {
  kernels["ConvTranspose"] = ConvTranspose;
  for (const char* type : {"Conv", "Conv1D", "Conv2D", "Conv3D"}) kernels[type] = Conv;
  for (const char* type : {"ConvGradient", "Conv1DGradient", "Conv2DGradient", "Conv3DGradient"}) {
    kernels[type] = ConvGradient;
  }
}

}  // namespace memonger::alloc
