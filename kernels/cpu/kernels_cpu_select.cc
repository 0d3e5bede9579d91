// Ops whose output size depends on the data: NonZero, NonMaxSuppression, Compress and Unique.
// Each counts what
// it selects first, checks the count against the planned output (an upper bound when the run
// measures sizes, KernelArgs::measured_dims; else the exact size), then writes the output in
// the layout of the dims it computed.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/kernel_util.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

using graph::DataType;
using graph::TensorType;
using namespace kernel_internal;  // NOLINT: the helpers of every kernel file

// Output `k` has `dims`: within the plan's bytes when the run measures sizes (and then
// recorded), else exactly the planned dims.
absl::Status Measured(const KernelArgs& args, int k, const Dims& dims) {
  const TensorType& planned = *args.output_types[k];
  const bool fits = dims.size() == planned.dims.size() &&
                    NumElements(dims) <= NumElements(planned.dims);
  if (args.measured_dims == nullptr ? dims != planned.dims : !fits) {
    return KernelError(args, absl::StrCat("output ", k, " is [", absl::StrJoin(dims, ", "),
                                          "] on this data; the plan ",
                                          args.measured_dims == nullptr ? "has" : "bounds it by",
                                          " [", absl::StrJoin(planned.dims, ", "), "]"));
  }
  if (args.measured_dims != nullptr) {
    args.measured_dims->resize(args.outputs.size());
    (*args.measured_dims)[k] = dims;
  }
  return absl::OkStatus();
}

// ---- NonZero --------------------------------------------------------------------------------

// NonZero(X) -> int64 [rank(X), n]: row d holds the d-th coordinate of each element that is not
// zero (NaN is not zero; -0.0 is), elements in row-major order, as numpy.nonzero.
absl::Status NonZero(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 1));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  const TensorType& x = *args.input_types[0];
  if (args.output_types[0]->dtype != DataType::kInt64) {
    return KernelError(args, "the output must be int64");
  }
  const int64_t n = NumElements(x.dims);
  std::vector<int64_t> hits;
  MG_RETURN_IF_ERROR(DispatchAny(args, x.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* in = reinterpret_cast<const T*>(args.inputs[0]);
    for (int64_t i = 0; i < n; ++i) {
      if (Load(in[i]) != 0) hits.push_back(i);
    }
    return absl::OkStatus();
  }));
  const int64_t rank = Rank(x);
  const int64_t count = static_cast<int64_t>(hits.size());
  MG_RETURN_IF_ERROR(Measured(args, 0, {rank, count}));
  int64_t* out = reinterpret_cast<int64_t*>(args.outputs[0]);
  const Dims strides = Strides(x.dims);
  for (int64_t j = 0; j < count; ++j) {
    int64_t rest = hits[j];
    for (int64_t d = 0; d < rank; ++d) {
      out[d * count + j] = rest / strides[d];
      rest %= strides[d];
    }
  }
  return absl::OkStatus();
}

// ---- NonMaxSuppression ----------------------------------------------------------------------

// One float of input `input` (a scalar or [1]), `fallback` when the input is omitted.
absl::StatusOr<float> ScalarFloat(const KernelArgs& args, int input, float fallback,
                                  absl::string_view what) {
  if (input >= static_cast<int>(args.inputs.size())) return fallback;
  const TensorType& t = *args.input_types[input];
  if (NumElements(t.dims) != 1) {
    return KernelError(args, absl::StrCat(what, " must hold one number"));
  }
  float value = 0;
  MG_RETURN_IF_ERROR(DispatchFloat(args, t.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    value = static_cast<float>(Load(*reinterpret_cast<const T*>(args.inputs[input])));
    return absl::OkStatus();
  }));
  return value;
}

struct Box {
  float x1, y1, x2, y2, area;
};

// center_point_box 0: [y1, x1, y2, x2], either diagonal; 1: [x_center, y_center, width, height].
Box MakeBox(const float* b, bool center) {
  Box box;
  if (center) {
    box = {b[0] - b[2] / 2, b[1] - b[3] / 2, b[0] + b[2] / 2, b[1] + b[3] / 2, 0};
  } else {
    box = {std::min(b[1], b[3]), std::min(b[0], b[2]), std::max(b[1], b[3]), std::max(b[0], b[2]),
           0};
  }
  box.area = (box.x2 - box.x1) * (box.y2 - box.y1);
  return box;
}

// Whether `b` overlaps `a` by more than `threshold` (intersection over union, in float as
// ONNX Runtime and torchvision compute it; boxes without area never suppress).
bool Suppresses(const Box& a, const Box& b, float threshold) {
  const float w = std::max(0.0f, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
  const float h = std::max(0.0f, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
  const float inter = w * h;
  if (inter <= 0 || a.area <= 0 || b.area <= 0) return false;
  return inter / (a.area + b.area - inter) > threshold;
}

// NonMaxSuppression(boxes [B, N, 4], scores [B, C, N], [max_output_boxes_per_class],
// [iou_threshold], [score_threshold]; center_point_box) -> int64 [selected, 3] of (batch, class,
// box): for each batch and class, boxes scoring above score_threshold (all when it is omitted)
// in order of falling score (ties: the lower index), each kept unless a kept box overlaps it by
// more than iou_threshold, at most max_output_boxes_per_class (0, the default: none).
absl::Status NonMaxSuppression(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 2, 5, 1, 1));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  auto at = [&](int64_t slot) { return FindInputSlot(args, slot); };  // -1: omitted
  const TensorType& boxes_type = *args.input_types[0];
  const TensorType& scores_type = *args.input_types[1];
  if (Rank(boxes_type) != 3 || boxes_type.dims[2] != 4 || Rank(scores_type) != 3 ||
      scores_type.dims[0] != boxes_type.dims[0] || scores_type.dims[2] != boxes_type.dims[1]) {
    return KernelError(args, "boxes must be [B, N, 4] and scores [B, C, N]");
  }
  if (args.output_types[0]->dtype != DataType::kInt64) {
    return KernelError(args, "the output must be int64");
  }
  const int64_t batches = scores_type.dims[0], classes = scores_type.dims[1];
  const int64_t spatial = boxes_type.dims[1];
  int64_t max_per_class = 0;
  if (const int k = at(2); k >= 0) {
    MG_ASSIGN_OR_RETURN(const Dims v, ReadInts(args, k, "max_output_boxes_per_class"));
    if (v.size() != 1) return KernelError(args, "max_output_boxes_per_class must hold one integer");
    max_per_class = std::max<int64_t>(v[0], 0);
  }
  float iou = 0;
  if (const int k = at(3); k >= 0) {
    MG_ASSIGN_OR_RETURN(iou, ScalarFloat(args, k, 0, "iou_threshold"));
  }
  std::optional<float> score_threshold;
  if (const int k = at(4); k >= 0) {
    MG_ASSIGN_OR_RETURN(score_threshold, ScalarFloat(args, k, 0, "score_threshold"));
  }
  MG_ASSIGN_OR_RETURN(const int64_t center, IntAttr(args, "center_point_box", 0));
  if (center != 0 && center != 1) return KernelError(args, "center_point_box must be 0 or 1");

  std::vector<float> boxes(static_cast<size_t>(NumElements(boxes_type.dims)));
  std::vector<float> scores(static_cast<size_t>(NumElements(scores_type.dims)));
  for (int input = 0; input < 2; ++input) {
    std::vector<float>& dst = input == 0 ? boxes : scores;
    MG_RETURN_IF_ERROR(DispatchFloat(args, args.input_types[input]->dtype,
                                     [&](auto tag) -> absl::Status {
                                       using T = typename decltype(tag)::type;
                                       const T* in = reinterpret_cast<const T*>(args.inputs[input]);
                                       for (size_t i = 0; i < dst.size(); ++i) {
                                         dst[i] = static_cast<float>(Load(in[i]));
                                       }
                                       return absl::OkStatus();
                                     }));
  }
  std::vector<int64_t> selected;  // (batch, class, box) triples
  std::vector<int64_t> order;
  std::vector<Box> kept;  // by x1 ascending
  for (int64_t b = 0; b < batches; ++b) {
    std::vector<Box> batch_boxes(static_cast<size_t>(spatial));
    // Only a kept box whose x1 lies within 2 widths before a candidate's x1, and before its x2,
    // can overlap it (exporters offset each class's boxes apart: torchvision's batched_nms), so
    // the kept boxes are searched by x1. Unordered coordinates (NaN) search them all.
    float widest = 0;
    bool ordered = true;
    for (int64_t i = 0; i < spatial; ++i) {
      batch_boxes[i] = MakeBox(&boxes[(b * spatial + i) * 4], center == 1);
      const Box& box = batch_boxes[i];
      ordered = ordered && std::isfinite(box.x1) && std::isfinite(box.x2);
      widest = std::max(widest, box.x2 - box.x1);
    }
    for (int64_t c = 0; c < classes; ++c) {
      const float* s = &scores[(b * classes + c) * spatial];
      order.clear();
      for (int64_t i = 0; i < spatial; ++i) {
        if (!score_threshold || s[i] > *score_threshold) order.push_back(i);
      }
      // Falling score, NaN after every number (a strict weak order even with NaN).
      std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
        const bool nx = std::isnan(s[x]), ny = std::isnan(s[y]);
        return nx != ny ? ny : !nx && s[x] > s[y];
      });
      kept.clear();
      int64_t count = 0;
      auto by_x1 = [](const Box& k, float x) { return k.x1 < x; };
      for (int64_t i : order) {
        if (count >= max_per_class) break;
        const Box& box = batch_boxes[i];
        auto first = kept.begin(), last = kept.end();
        if (ordered) {
          first = std::lower_bound(kept.begin(), kept.end(), box.x1 - 2 * widest - 1, by_x1);
          last = std::lower_bound(first, kept.end(), box.x2, by_x1);
        }
        if (std::any_of(first, last, [&](const Box& k) { return Suppresses(k, box, iou); })) {
          continue;
        }
        kept.insert(std::lower_bound(kept.begin(), kept.end(), box.x1, by_x1), box);
        ++count;
        selected.insert(selected.end(), {b, c, i});
      }
    }
  }
  const int64_t count = static_cast<int64_t>(selected.size()) / 3;
  MG_RETURN_IF_ERROR(Measured(args, 0, {count, 3}));
  std::copy(selected.begin(), selected.end(), reinterpret_cast<int64_t*>(args.outputs[0]));
  return absl::OkStatus();
}

// ---- Compress -------------------------------------------------------------------------------

// The flattened input (no `axis`) or its slices along `axis` viewed as [outer, n, inner].
struct Slices {
  int64_t outer = 1, n = 0, inner = 1;
  int64_t axis = -1;  // -1: flattened
};

absl::StatusOr<Slices> SlicesOf(const KernelArgs& args, const TensorType& x) {
  MG_ASSIGN_OR_RETURN(const std::optional<int64_t> axis_attr, OptionalIntAttr(args, "axis"));
  Slices s;
  if (!axis_attr.has_value()) {
    s.n = NumElements(x.dims);
    return s;
  }
  MG_ASSIGN_OR_RETURN(s.axis, NormalizeAxis(args, *axis_attr, Rank(x), "axis"));
  const size_t a = static_cast<size_t>(s.axis);
  s.outer = Product(x.dims, 0, a);
  s.n = x.dims[a];
  s.inner = Product(x.dims, a + 1, x.dims.size());
  return s;
}

// The dims of `x` with `count` slices (or `count` elements, flattened).
Dims WithCount(const TensorType& x, const Slices& s, int64_t count) {
  if (s.axis < 0) return {count};
  Dims dims = x.dims;
  dims[static_cast<size_t>(s.axis)] = count;
  return dims;
}

// Compress(X, condition) -> the elements (no `axis`: of X flattened) or slices along `axis`
// whose condition is true, in order; a condition shorter than the axis selects nothing past
// its end (as numpy.compress), a longer one is an error.
absl::Status Compress(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 2, 2, 1, 1));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  const TensorType& x = *args.input_types[0];
  const TensorType& condition = *args.input_types[1];
  if (condition.dtype != DataType::kBool || condition.dims.size() != 1) {
    return KernelError(args, "the condition must be a 1-D bool tensor");
  }
  if (args.output_types[0]->dtype != x.dtype) {
    return KernelError(args, "the output must have the input's element type");
  }
  MG_ASSIGN_OR_RETURN(const Slices s, SlicesOf(args, x));
  const int64_t length = condition.dims[0];
  if (length > s.n) {
    return KernelError(args, absl::StrCat("the condition has ", length, " entries for ", s.n,
                                          s.axis < 0 ? " elements" : " slices"));
  }
  const bool* keep = reinterpret_cast<const bool*>(args.inputs[1]);
  std::vector<int64_t> kept;
  for (int64_t i = 0; i < length; ++i) {
    if (keep[i]) kept.push_back(i);
  }
  const int64_t count = static_cast<int64_t>(kept.size());
  MG_RETURN_IF_ERROR(Measured(args, 0, WithCount(x, s, count)));
  const size_t element = static_cast<size_t>(graph::DataTypeSize(x.dtype));
  const size_t run = static_cast<size_t>(s.inner) * element;
  const std::byte* in = args.inputs[0];
  std::byte* out = args.outputs[0];
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t j = 0; j < count; ++j) {
      std::memcpy(out + static_cast<size_t>(o * count + j) * run,
                  in + static_cast<size_t>(o * s.n + kept[j]) * run, run);
    }
  }
  return absl::OkStatus();
}

// ---- Unique ---------------------------------------------------------------------------------

// Unique(X) -> Y, indices, inverse_indices, counts (each after Y optional): the distinct
// elements (no `axis`: of X flattened) or slices along `axis`, ascending (`sorted` = 1, the
// default; slices compared element by element, lexicographically) or in order of first
// occurrence (0); the index of each one's first occurrence, each element's or slice's index into
// Y, and how often each occurs. As numpy.unique: NaNs are equal to each other and sort last.
absl::Status Unique(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 4));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  const TensorType& x = *args.input_types[0];
  MG_ASSIGN_OR_RETURN(const Slices s, SlicesOf(args, x));
  MG_ASSIGN_OR_RETURN(const int64_t sorted, IntAttr(args, "sorted", 1));
  const std::vector<int64_t> slots = OutputSlots(args);
  for (size_t k = 0; k < slots.size(); ++k) {
    if (slots[k] < 0 || slots[k] > 3) {
      return KernelError(args, absl::StrCat("has no output ", slots[k], " (Y, indices, "
                                            "inverse_indices, counts)"));
    }
    const DataType want = slots[k] == 0 ? x.dtype : DataType::kInt64;
    if (args.output_types[k]->dtype != want) {
      return KernelError(args, absl::StrCat("output ", slots[k], " must be ",
                                            graph::DataTypeName(want)));
    }
  }
  std::vector<int64_t> first;    // per distinct slice, its first occurrence, in Y's order
  std::vector<int64_t> inverse;  // per slice of X
  std::vector<int64_t> counts;
  MG_RETURN_IF_ERROR(DispatchAny(args, x.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* in = reinterpret_cast<const T*>(args.inputs[0]);
    // -1, 0, 1 as slice i orders before, with or after slice j; NaN after every number.
    auto compare = [&](int64_t i, int64_t j) {
      for (int64_t o = 0; o < s.outer; ++o) {
        for (int64_t e = 0; e < s.inner; ++e) {
          const auto a = Load(in[(o * s.n + i) * s.inner + e]);
          const auto b = Load(in[(o * s.n + j) * s.inner + e]);
          if constexpr (std::is_floating_point_v<decltype(a)>) {
            const bool a_nan = std::isnan(a), b_nan = std::isnan(b);
            if (a_nan || b_nan) {
              if (a_nan != b_nan) return a_nan ? 1 : -1;
              continue;
            }
          }
          if (a < b) return -1;
          if (b < a) return 1;
        }
      }
      return 0;
    };
    // Slices in order (stable: equal ones keep their order, the first occurrence first).
    std::vector<int64_t> order(static_cast<size_t>(s.n));
    for (int64_t i = 0; i < s.n; ++i) order[static_cast<size_t>(i)] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t i, int64_t j) { return compare(i, j) < 0; });
    std::vector<int64_t> group(static_cast<size_t>(s.n));  // distinct rank of each slice
    std::vector<int64_t> group_first;
    for (size_t r = 0; r < order.size(); ++r) {
      if (r == 0 || compare(order[r - 1], order[r]) != 0) group_first.push_back(order[r]);
      group[static_cast<size_t>(order[r])] = static_cast<int64_t>(group_first.size()) - 1;
    }
    // Y's order: by value, or by first occurrence.
    std::vector<int64_t> position(group_first.size());
    std::vector<int64_t> by_position(group_first.size());
    for (size_t g = 0; g < group_first.size(); ++g) by_position[g] = static_cast<int64_t>(g);
    if (sorted == 0) {
      std::sort(by_position.begin(), by_position.end(),
                [&](int64_t a, int64_t b) { return group_first[a] < group_first[b]; });
    }
    for (size_t p = 0; p < by_position.size(); ++p) {
      position[static_cast<size_t>(by_position[p])] = static_cast<int64_t>(p);
    }
    first.resize(group_first.size());
    counts.assign(group_first.size(), 0);
    for (size_t p = 0; p < by_position.size(); ++p) first[p] = group_first[by_position[p]];
    inverse.resize(static_cast<size_t>(s.n));
    for (int64_t i = 0; i < s.n; ++i) {
      const int64_t p = position[static_cast<size_t>(group[static_cast<size_t>(i)])];
      inverse[static_cast<size_t>(i)] = p;
      ++counts[static_cast<size_t>(p)];
    }
    return absl::OkStatus();
  }));
  const int64_t distinct = static_cast<int64_t>(first.size());
  for (size_t k = 0; k < slots.size(); ++k) {
    const Dims dims = slots[k] == 0 ? WithCount(x, s, distinct)
                                    : Dims{slots[k] == 2 ? s.n : distinct};
    MG_RETURN_IF_ERROR(Measured(args, static_cast<int>(k), dims));
  }
  for (size_t k = 0; k < slots.size(); ++k) {
    if (slots[k] == 0) {
      const size_t run = static_cast<size_t>(s.inner * graph::DataTypeSize(x.dtype));
      for (int64_t o = 0; o < s.outer; ++o) {
        for (int64_t u = 0; u < distinct; ++u) {
          std::memcpy(args.outputs[k] + static_cast<size_t>(o * distinct + u) * run,
                      args.inputs[0] + static_cast<size_t>(o * s.n + first[u]) * run, run);
        }
      }
      continue;
    }
    const std::vector<int64_t>& values =
        slots[k] == 1 ? first : slots[k] == 2 ? inverse : counts;
    std::copy(values.begin(), values.end(), reinterpret_cast<int64_t*>(args.outputs[k]));
  }
  return absl::OkStatus();
}

}  // namespace

void AddCpuSelectKernels(KernelMap& kernels) {
  kernels["NonZero"] = NonZero;
  kernels["NonMaxSuppression"] = NonMaxSuppression;
  kernels["Compress"] = Compress;
  kernels["Unique"] = Unique;
}

}  // namespace memonger::alloc
