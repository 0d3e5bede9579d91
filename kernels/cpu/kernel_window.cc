#include "kernels/cpu/kernel_window.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "util/status_macros.h"

namespace memonger::alloc::kernel_internal {
namespace {

// A per-spatial-dim attribute in any spelling (graph/schema_util.cc's SpatialAttr): a list
// (`list_name`), one value for all dims or a list (`single_name`), or Caffe2's 2-D pair.
absl::StatusOr<std::optional<Dims>> SpatialAttr(const KernelArgs& args, size_t spatial,
                                                const std::vector<const char*>& list_names,
                                                const char* single_name, const char* h_name,
                                                const char* w_name) {
  for (const char* name : list_names) {
    MG_ASSIGN_OR_RETURN(std::optional<Dims> list, IntsAttr(args, name));
    if (!list.has_value()) continue;
    if (list->size() != spatial) {
      return KernelError(args, absl::StrCat("attribute '", name, "' has ", list->size(),
                                            " entries for ", spatial, " spatial dims"));
    }
    return list;
  }
  MG_ASSIGN_OR_RETURN(std::optional<Dims> single, IntsAttr(args, single_name));
  if (single.has_value()) {
    if (single->size() == 1) return std::optional<Dims>(Dims(spatial, single->front()));
    if (single->size() == spatial) return single;
    return KernelError(args, absl::StrCat("attribute '", single_name, "' has ", single->size(),
                                          " entries for ", spatial, " spatial dims"));
  }
  MG_ASSIGN_OR_RETURN(std::optional<int64_t> h, OptionalIntAttr(args, h_name));
  MG_ASSIGN_OR_RETURN(std::optional<int64_t> w, OptionalIntAttr(args, w_name));
  if (h.has_value() || w.has_value()) {
    if (spatial != 2 || !h.has_value() || !w.has_value()) {
      return KernelError(args, absl::StrCat("attributes '", h_name, "' and '", w_name,
                                            "' need each other and 2 spatial dims"));
    }
    return std::optional<Dims>(Dims{*h, *w});
  }
  return std::optional<Dims>();
}

}  // namespace

absl::StatusOr<WindowGeometry> ReadWindowGeometry(const KernelArgs& args,
                                                  const graph::TensorType& x,
                                                  const std::optional<Dims>& kernel,
                                                  const Dims& y_dims) {
  MG_ASSIGN_OR_RETURN(std::optional<std::string> order, StringAttr(args, "order"));
  if (order.has_value() && absl::AsciiStrToUpper(*order) != "NCHW") {
    return KernelUnimplemented(args, absl::StrCat("order '", *order, "' (only NCHW is implemented)"));
  }
  if (x.dims.size() < 3 || x.dims.size() > 5) {
    return KernelUnimplemented(args, absl::StrCat("X ", graph::TensorTypeToString(x),
                                                  ": 1 to 3 spatial dims are implemented"));
  }
  const size_t spatial = x.dims.size() - 2;
  if (y_dims.size() != x.dims.size()) return KernelError(args, "the output must have X's rank");
  const Dims in(x.dims.begin() + 2, x.dims.end());
  Dims k;
  if (kernel.has_value()) {
    k = *kernel;
    MG_ASSIGN_OR_RETURN(std::optional<Dims> attr,
                        SpatialAttr(args, spatial, {"kernel_shape", "kernels"}, "kernel",
                                    "kernel_h", "kernel_w"));
    if (attr.has_value() && *attr != k) {
      return KernelError(args, "the kernel attribute does not match W's spatial dims");
    }
  } else {
    MG_ASSIGN_OR_RETURN(const int64_t global, IntAttr(args, "global_pooling", 0));
    if (global != 0) {
      k = in;
    } else {
      MG_ASSIGN_OR_RETURN(std::optional<Dims> attr,
                          SpatialAttr(args, spatial, {"kernel_shape", "kernels"}, "kernel",
                                      "kernel_h", "kernel_w"));
      if (!attr.has_value()) return KernelError(args, "no kernel size attribute");
      k = *attr;
    }
  }
  MG_ASSIGN_OR_RETURN(std::optional<Dims> strides,
                      SpatialAttr(args, spatial, {"strides"}, "stride", "stride_h", "stride_w"));
  MG_ASSIGN_OR_RETURN(std::optional<Dims> dilations,
                      SpatialAttr(args, spatial, {"dilations"}, "dilation", "dilation_h",
                                  "dilation_w"));
  const Dims s = strides.value_or(Dims(spatial, 1));
  const Dims dl = dilations.value_or(Dims(spatial, 1));
  Dims pad_begin(spatial, 0), pad_end(spatial, 0);
  MG_ASSIGN_OR_RETURN(std::optional<Dims> pads, IntsAttr(args, "pads"));
  MG_ASSIGN_OR_RETURN(std::optional<Dims> pad, IntsAttr(args, "pad"));
  if (pads.has_value()) {
    if (pads->size() != 2 * spatial) return KernelError(args, "attribute 'pads' has the wrong length");
    for (size_t i = 0; i < spatial; ++i) {
      pad_begin[i] = (*pads)[i];
      pad_end[i] = (*pads)[spatial + i];
    }
  } else if (pad.has_value()) {
    if (pad->size() != 1) return KernelError(args, "attribute 'pad' must be one int");
    pad_begin.assign(spatial, pad->front());
    pad_end.assign(spatial, pad->front());
  } else {
    MG_ASSIGN_OR_RETURN(std::optional<int64_t> t, OptionalIntAttr(args, "pad_t"));
    MG_ASSIGN_OR_RETURN(std::optional<int64_t> l, OptionalIntAttr(args, "pad_l"));
    MG_ASSIGN_OR_RETURN(std::optional<int64_t> b, OptionalIntAttr(args, "pad_b"));
    MG_ASSIGN_OR_RETURN(std::optional<int64_t> r, OptionalIntAttr(args, "pad_r"));
    if (t || l || b || r) {
      if (spatial != 2) return KernelError(args, "pad_t/pad_l/pad_b/pad_r need 2 spatial dims");
      pad_begin = {t.value_or(0), l.value_or(0)};
      pad_end = {b.value_or(0), r.value_or(0)};
    }
  }
  MG_ASSIGN_OR_RETURN(std::optional<std::string> auto_pad_attr, StringAttr(args, "auto_pad"));
  std::string auto_pad = auto_pad_attr.has_value() && !auto_pad_attr->empty()
                             ? absl::AsciiStrToUpper(*auto_pad_attr)
                             : "NOTSET";
  MG_ASSIGN_OR_RETURN(const int64_t ceil_attr, IntAttr(args, "ceil_mode", 0));
  bool ceil_mode = ceil_attr != 0;
  MG_ASSIGN_OR_RETURN(const int64_t legacy_pad, IntAttr(args, "legacy_pad", 0));
  if (legacy_pad == 1) auto_pad = "VALID";
  if (legacy_pad == 2) auto_pad = "SAME_UPPER";
  if (legacy_pad == 3) ceil_mode = true;
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" &&
      auto_pad != "SAME_LOWER") {
    return KernelError(args, absl::StrCat("auto_pad '", auto_pad, "' is not recognised"));
  }

  WindowGeometry g;
  g.batch = x.dims[0];
  g.channels = x.dims[1];
  const size_t lead = 3 - spatial;
  for (size_t i = 0; i < spatial; ++i) {
    if (k[i] <= 0 || s[i] <= 0 || dl[i] <= 0 || pad_begin[i] < 0 || pad_end[i] < 0) {
      return KernelError(args, "kernel, stride and dilation must be positive and pads >= 0");
    }
    const int64_t dilated = dl[i] * (k[i] - 1) + 1;
    int64_t out = 0;
    int64_t begin = pad_begin[i];
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      out = (in[i] + s[i] - 1) / s[i];
      const int64_t total = std::max<int64_t>(0, (out - 1) * s[i] + dilated - in[i]);
      begin = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    } else {
      if (auto_pad == "VALID") begin = 0;
      const int64_t end = auto_pad == "VALID" ? 0 : pad_end[i];
      const int64_t room = in[i] + begin + end - dilated;
      if (room < 0) return KernelError(args, "the kernel is larger than the padded input");
      int64_t steps = room / s[i];
      if (ceil_mode && room % s[i] != 0) {
        ++steps;
        if (steps * s[i] >= in[i] + begin) --steps;  // a window must start inside
      }
      out = steps + 1;
    }
    if (y_dims[2 + i] != out) {
      return KernelError(args, absl::StrCat("the window gives ", out, " outputs in spatial dim ", i,
                                            " but the output has ", y_dims[2 + i]));
    }
    g.in[lead + i] = in[i];
    g.out[lead + i] = out;
    g.kernel[lead + i] = k[i];
    g.stride[lead + i] = s[i];
    g.dilation[lead + i] = dl[i];
    g.pad[lead + i] = begin;
  }
  if (y_dims[0] != g.batch) return KernelError(args, "the output must have X's batch");
  return g;
}

}  // namespace memonger::alloc::kernel_internal
