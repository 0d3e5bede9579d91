#include "graph/onnx/fold_internal.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace memonger::graph::onnx_fold {

namespace {

// The axes of Unsqueeze/Squeeze/Reduce*: the attribute (older opsets) or input 1 (newer).
// `absent` is true when neither gives any.
std::optional<Dims> AxesOf(const onnx::NodeProto& node, const std::vector<FoldInput>& inputs,
                           bool* absent) {
  *absent = false;
  if (auto attr = AttrInts(node, "axes")) return attr;
  if (Present(inputs, 1)) return IntList(ValueOf(inputs, 1));
  *absent = true;
  return Dims{};
}

}  // namespace

// Shape and data movement ops.

Result EvalConstant(const onnx::NodeProto& node, int64_t max) {
  if (node.output_size() != 1) return std::nullopt;
  for (const onnx::AttributeProto& a : node.attribute()) {
    if (a.name() == "value" && a.has_t()) {
      auto t = TensorFromProto(a.t(), max);
      if (!t) return std::nullopt;
      return One(std::move(*t));
    }
    ConstTensor t;
    if (a.name() == "value_int") {
      t.dtype = TensorProto::INT64;
      t.ints = {a.i()};
    } else if (a.name() == "value_ints") {
      t.dtype = TensorProto::INT64;
      t.ints.assign(a.ints().begin(), a.ints().end());
      t.dims = {static_cast<int64_t>(t.ints.size())};
    } else if (a.name() == "value_float") {
      t.dtype = TensorProto::FLOAT;
      t.reals = {a.f()};
    } else if (a.name() == "value_floats") {
      t.dtype = TensorProto::FLOAT;
      t.reals.assign(a.floats().begin(), a.floats().end());
      t.dims = {static_cast<int64_t>(t.reals.size())};
    } else {
      continue;
    }
    return One(std::move(t));
  }
  return std::nullopt;
}

Result EvalShape(const onnx::NodeProto& node, const std::vector<FoldInput>& inputs) {
  if (!Present(inputs, 0) || inputs[0].dims == nullptr) return std::nullopt;
  const Dims& dims = *inputs[0].dims;
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (node.op_type() == "Size") {
    const auto n = CountElements(dims, std::numeric_limits<int64_t>::max());
    if (!n) return std::nullopt;
    ConstTensor t;
    t.dtype = TensorProto::INT64;
    t.ints = {*n};
    return One(std::move(t));
  }
  int64_t start = AttrInt(node, "start").value_or(0);
  int64_t end = AttrInt(node, "end").value_or(rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  ConstTensor t;
  t.dtype = TensorProto::INT64;
  if (end > start) t.ints.assign(dims.begin() + start, dims.begin() + end);
  t.dims = {static_cast<int64_t>(t.ints.size())};
  return One(std::move(t));
}

Result EvalGather(const onnx::NodeProto& node, const ConstTensor& data, const ConstTensor& indices,
                  int64_t max) {
  if (indices.is_real() || data.dims.empty()) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(data.dims.size());
  const auto axis = NormalizeAxis(AttrInt(node, "axis").value_or(0), rank);
  if (!axis) return std::nullopt;
  Dims out_dims(data.dims.begin(), data.dims.begin() + *axis);
  out_dims.insert(out_dims.end(), indices.dims.begin(), indices.dims.end());
  out_dims.insert(out_dims.end(), data.dims.begin() + *axis + 1, data.dims.end());
  const auto n = CountElements(out_dims, max);
  if (!n) return std::nullopt;
  const int64_t outer = Product(data.dims, 0, *axis);
  const int64_t inner = Product(data.dims, *axis + 1, data.dims.size());
  const int64_t k = data.dims[*axis];
  const int64_t count = indices.size();
  ConstTensor out = MakeTensor(data.dtype, out_dims, *n);
  int64_t e = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < count; ++j) {
      int64_t idx = indices.ints[j];
      if (idx < 0) idx += k;
      if (idx < 0 || idx >= k) return std::nullopt;
      for (int64_t i = 0; i < inner; ++i) CopyElement(data, (o * k + idx) * inner + i, out, e++);
    }
  }
  return One(std::move(out));
}

Result EvalSlice(const onnx::NodeProto& node, const std::vector<FoldInput>& inputs,
                 const ConstTensor& data, int64_t max) {
  std::optional<Dims> starts, ends, axes, steps;
  if (Present(inputs, 1)) {  // opset 10+: starts, ends, axes, steps are inputs
    starts = IntList(ValueOf(inputs, 1));
    ends = IntList(ValueOf(inputs, 2));
    if (!starts || !ends) return std::nullopt;
    if (Present(inputs, 3)) {
      axes = IntList(ValueOf(inputs, 3));
      if (!axes) return std::nullopt;
    }
    if (Present(inputs, 4)) {
      steps = IntList(ValueOf(inputs, 4));
      if (!steps) return std::nullopt;
    }
  } else {  // opset 1: attributes
    starts = AttrInts(node, "starts");
    ends = AttrInts(node, "ends");
    axes = AttrInts(node, "axes");
    if (!starts || !ends) return std::nullopt;
  }
  const int64_t rank = static_cast<int64_t>(data.dims.size());
  const size_t count = starts->size();
  if (ends->size() != count) return std::nullopt;
  if (!axes) {
    axes.emplace(count);
    std::iota(axes->begin(), axes->end(), 0);
  }
  if (!steps) steps.emplace(count, 1);
  if (axes->size() != count || steps->size() != count) return std::nullopt;

  Dims begin(rank, 0), step(rank, 1), out_dims = data.dims;
  std::vector<bool> seen(rank, false);
  for (size_t k = 0; k < count; ++k) {
    const auto axis = NormalizeAxis((*axes)[k], rank);
    if (!axis || seen[*axis] || (*steps)[k] == 0) return std::nullopt;
    seen[*axis] = true;
    const int64_t dim = data.dims[*axis];
    const int64_t st = (*steps)[k];
    int64_t s = (*starts)[k];
    int64_t e = (*ends)[k];
    if (s < 0) s += dim;  // still negative when below -dim: clamped below
    if (e < 0) e += dim;
    int64_t len = 0;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      len = e > s ? (e - s + st - 1) / st : 0;
    } else {
      // max(lo, min(v, hi)): defined for an empty dim (dim - 1 < 0), where nothing is taken.
      s = std::max<int64_t>(0, std::min<int64_t>(s, dim - 1));
      e = std::max<int64_t>(-1, std::min<int64_t>(e, dim - 1));
      len = s > e ? (s - e + (-st) - 1) / (-st) : 0;
    }
    begin[*axis] = s;
    step[*axis] = st;
    out_dims[*axis] = len;
  }
  const auto n = CountElements(out_dims, max);
  if (!n) return std::nullopt;
  ConstTensor out = MakeTensor(data.dtype, out_dims, *n);
  const Dims strides = RowMajorStrides(data.dims);
  ForEachIndex(out_dims, *n, [&](int64_t e, const Dims& idx) {
    int64_t from = 0;
    for (int64_t k = 0; k < rank; ++k) from += (begin[k] + idx[k] * step[k]) * strides[k];
    CopyElement(data, from, out, e);
  });
  return One(std::move(out));
}

Result EvalConcat(const onnx::NodeProto& node, const std::vector<FoldInput>& inputs,
                  int64_t max) {
  std::vector<const ConstTensor*> parts;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].present) continue;
    if (inputs[i].value == nullptr) return std::nullopt;
    parts.push_back(inputs[i].value);
  }
  if (parts.empty()) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(parts[0]->dims.size());
  const auto attr = AttrInt(node, "axis");
  if (!attr) return std::nullopt;
  const auto axis = NormalizeAxis(*attr, rank);
  if (!axis) return std::nullopt;
  Dims out_dims = parts[0]->dims;
  out_dims[*axis] = 0;
  for (const ConstTensor* p : parts) {
    if (p->dtype != parts[0]->dtype || static_cast<int64_t>(p->dims.size()) != rank) {
      return std::nullopt;
    }
    for (int64_t k = 0; k < rank; ++k) {
      if (k != *axis && p->dims[k] != parts[0]->dims[k]) return std::nullopt;
    }
    out_dims[*axis] += p->dims[*axis];
  }
  const auto n = CountElements(out_dims, max);
  if (!n) return std::nullopt;
  ConstTensor out = MakeTensor(parts[0]->dtype, out_dims, *n);
  const int64_t outer = Product(out_dims, 0, *axis);
  int64_t e = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (const ConstTensor* p : parts) {
      const int64_t chunk = Product(p->dims, *axis, p->dims.size());
      for (int64_t i = 0; i < chunk; ++i) CopyElement(*p, o * chunk + i, out, e++);
    }
  }
  return One(std::move(out));
}

Result EvalUnsqueeze(const onnx::NodeProto& node, const std::vector<FoldInput>& inputs,
                     const ConstTensor& data) {
  bool absent = false;
  const auto axes = AxesOf(node, inputs, &absent);
  if (!axes || absent) return std::nullopt;
  const int64_t out_rank = static_cast<int64_t>(data.dims.size() + axes->size());
  std::vector<bool> inserted(out_rank, false);
  for (int64_t a : *axes) {
    const auto axis = NormalizeAxis(a, out_rank);
    if (!axis || inserted[*axis]) return std::nullopt;
    inserted[*axis] = true;
  }
  ConstTensor out = data;
  out.dims.clear();
  size_t next = 0;
  for (int64_t k = 0; k < out_rank; ++k) out.dims.push_back(inserted[k] ? 1 : data.dims[next++]);
  return One(std::move(out));
}

Result EvalSqueeze(const onnx::NodeProto& node, const std::vector<FoldInput>& inputs,
                   const ConstTensor& data) {
  bool absent = false;
  const auto axes = AxesOf(node, inputs, &absent);
  if (!axes) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(data.dims.size());
  std::vector<bool> removed(rank, false);
  if (absent) {
    for (int64_t k = 0; k < rank; ++k) removed[k] = data.dims[k] == 1;
  }
  for (int64_t a : *axes) {
    const auto axis = NormalizeAxis(a, rank);
    if (!axis || data.dims[*axis] != 1) return std::nullopt;
    removed[*axis] = true;
  }
  ConstTensor out = data;
  out.dims.clear();
  for (int64_t k = 0; k < rank; ++k) {
    if (!removed[k]) out.dims.push_back(data.dims[k]);
  }
  return One(std::move(out));
}

Result EvalReshape(const onnx::NodeProto& node, const ConstTensor& data, const ConstTensor* shape) {
  const auto target = IntList(shape);
  if (!target) return std::nullopt;
  const bool allow_zero = AttrInt(node, "allowzero").value_or(0) != 0;
  Dims out_dims;
  int infer_at = -1;
  int64_t known = 1;
  for (size_t k = 0; k < target->size(); ++k) {
    int64_t d = (*target)[k];
    if (d == 0 && !allow_zero) {
      if (k >= data.dims.size()) return std::nullopt;
      d = data.dims[k];
    }
    if (d == -1) {
      if (infer_at >= 0) return std::nullopt;
      infer_at = static_cast<int>(k);
      out_dims.push_back(1);
      continue;
    }
    if (d < 0) return std::nullopt;
    out_dims.push_back(d);
    known *= d;
  }
  const int64_t n = data.size();
  if (infer_at >= 0) {
    if (known == 0 || n % known != 0) return std::nullopt;
    out_dims[infer_at] = n / known;
  }
  if (CountElements(out_dims, n) != n) return std::nullopt;
  ConstTensor out = data;
  out.dims = std::move(out_dims);
  return One(std::move(out));
}

Result EvalFlatten(const onnx::NodeProto& node, const ConstTensor& data) {
  const int64_t rank = static_cast<int64_t>(data.dims.size());
  int64_t axis = AttrInt(node, "axis").value_or(1);
  if (axis < -rank || axis > rank) return std::nullopt;
  if (axis < 0) axis += rank;
  ConstTensor out = data;
  out.dims = {Product(data.dims, 0, axis), Product(data.dims, axis, rank)};
  return One(std::move(out));
}

Result EvalExpand(const ConstTensor& data, const ConstTensor* shape, int64_t max) {
  const auto target = IntList(shape);
  if (!target) return std::nullopt;
  const auto out_dims = BroadcastShapes({&data.dims, &*target});
  if (!out_dims) return std::nullopt;
  const auto n = CountElements(*out_dims, max);
  if (!n) return std::nullopt;
  const std::vector<int64_t> index = BroadcastIndex(data.dims, *out_dims, *n);
  ConstTensor out = MakeTensor(data.dtype, *out_dims, *n);
  for (int64_t e = 0; e < *n; ++e) CopyElement(data, index[e], out, e);
  return One(std::move(out));
}

Result EvalTile(const ConstTensor& data, const ConstTensor* repeats, int64_t max) {
  const auto reps = IntList(repeats);
  if (!reps || reps->size() != data.dims.size()) return std::nullopt;
  Dims out_dims = data.dims;
  for (size_t k = 0; k < reps->size(); ++k) {
    if ((*reps)[k] < 0) return std::nullopt;
    if (__builtin_mul_overflow(out_dims[k], (*reps)[k], &out_dims[k])) return std::nullopt;
  }
  const auto n = CountElements(out_dims, max);
  if (!n) return std::nullopt;
  ConstTensor out = MakeTensor(data.dtype, out_dims, *n);
  const Dims strides = RowMajorStrides(data.dims);
  ForEachIndex(out_dims, *n, [&](int64_t e, const Dims& idx) {
    int64_t from = 0;
    for (size_t k = 0; k < idx.size(); ++k) from += (idx[k] % data.dims[k]) * strides[k];
    CopyElement(data, from, out, e);
  });
  return One(std::move(out));
}

Result EvalTranspose(const onnx::NodeProto& node, const ConstTensor& data) {
  const size_t rank = data.dims.size();
  Dims perm(rank);
  if (auto attr = AttrInts(node, "perm"); attr && !attr->empty()) {
    perm = *attr;
  } else {
    for (size_t k = 0; k < rank; ++k) perm[k] = static_cast<int64_t>(rank - 1 - k);
  }
  if (perm.size() != rank) return std::nullopt;
  std::vector<bool> seen(rank, false);
  Dims out_dims(rank);
  for (size_t k = 0; k < rank; ++k) {
    if (perm[k] < 0 || perm[k] >= static_cast<int64_t>(rank) || seen[perm[k]]) {
      return std::nullopt;
    }
    seen[perm[k]] = true;
    out_dims[k] = data.dims[perm[k]];
  }
  ConstTensor out = MakeTensor(data.dtype, out_dims, data.size());
  const Dims strides = RowMajorStrides(data.dims);
  ForEachIndex(out_dims, data.size(), [&](int64_t e, const Dims& idx) {
    int64_t from = 0;
    for (size_t k = 0; k < rank; ++k) from += idx[k] * strides[perm[k]];
    CopyElement(data, from, out, e);
  });
  return One(std::move(out));
}

Result EvalConstantOfShape(const onnx::NodeProto& node, const ConstTensor* shape, int64_t max) {
  const auto dims = IntList(shape);
  if (!dims) return std::nullopt;
  ConstTensor fill;
  fill.dtype = TensorProto::FLOAT;
  fill.reals = {0.0};
  if (const onnx::AttributeProto* a = FindAttr(node, "value"); a != nullptr && a->has_t()) {
    auto t = TensorFromProto(a->t(), 1);
    if (!t || t->size() != 1) return std::nullopt;
    fill = std::move(*t);
  }
  const auto n = CountElements(*dims, max);
  if (!n) return std::nullopt;
  ConstTensor out = MakeTensor(fill.dtype, *dims, *n);
  for (int64_t e = 0; e < *n; ++e) CopyElement(fill, 0, out, e);
  return One(std::move(out));
}

Result EvalRange(const ConstTensor* start, const ConstTensor* limit, const ConstTensor* delta,
                 int64_t max) {
  if (start == nullptr || limit == nullptr || delta == nullptr) return std::nullopt;
  if (start->size() != 1 || limit->size() != 1 || delta->size() != 1) return std::nullopt;
  if (start->dtype != limit->dtype || start->dtype != delta->dtype) return std::nullopt;
  int64_t n = 0;
  if (start->is_real()) {
    const double s = start->reals[0], l = limit->reals[0], d = delta->reals[0];
    if (d == 0.0) return std::nullopt;
    const double count = std::ceil((l - s) / d);
    if (!std::isfinite(count)) return std::nullopt;
    if (count > static_cast<double>(max)) return std::nullopt;
    n = count > 0 ? static_cast<int64_t>(count) : 0;
    ConstTensor out = MakeTensor(start->dtype, {n}, n);
    for (int64_t e = 0; e < n; ++e) out.reals[e] = s + static_cast<double>(e) * d;
    return One(std::move(out));
  }
  const int64_t s = start->ints[0], l = limit->ints[0], d = delta->ints[0];
  if (d == 0) return std::nullopt;
  int64_t span = 0;
  if (__builtin_sub_overflow(l, s, &span)) return std::nullopt;
  // ceil(span / d) for either sign of d.
  int64_t q = span / d;
  if (span % d != 0 && ((span < 0) == (d < 0))) ++q;
  n = std::max<int64_t>(q, 0);
  if (n > max) return std::nullopt;
  ConstTensor out = MakeTensor(start->dtype, {n}, n);
  for (int64_t e = 0; e < n; ++e) out.ints[e] = s + e * d;
  return One(std::move(out));
}

Result EvalWhere(const ConstTensor& cond, const ConstTensor& x, const ConstTensor& y,
                 int64_t max) {
  if (cond.dtype != TensorProto::BOOL || x.dtype != y.dtype) return std::nullopt;
  const auto out_dims = BroadcastShapes({&cond.dims, &x.dims, &y.dims});
  if (!out_dims) return std::nullopt;
  const auto n = CountElements(*out_dims, max);
  if (!n) return std::nullopt;
  const auto ic = BroadcastIndex(cond.dims, *out_dims, *n);
  const auto ix = BroadcastIndex(x.dims, *out_dims, *n);
  const auto iy = BroadcastIndex(y.dims, *out_dims, *n);
  ConstTensor out = MakeTensor(x.dtype, *out_dims, *n);
  for (int64_t e = 0; e < *n; ++e) {
    if (cond.ints[ic[e]] != 0) {
      CopyElement(x, ix[e], out, e);
    } else {
      CopyElement(y, iy[e], out, e);
    }
  }
  return One(std::move(out));
}

Result EvalReduce(const onnx::NodeProto& node, const std::vector<FoldInput>& inputs,
                  const ConstTensor& data) {
  const std::string& op = node.op_type();
  if (data.dtype == TensorProto::BOOL) return std::nullopt;
  if (op == "ReduceMean" && !data.is_real()) return std::nullopt;
  bool absent = false;
  const auto axes = AxesOf(node, inputs, &absent);
  if (!axes) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(data.dims.size());
  const bool keep = AttrInt(node, "keepdims").value_or(1) != 0;
  const bool noop = AttrInt(node, "noop_with_empty_axes").value_or(0) != 0;
  if (axes->empty() && noop) return One(data);
  std::vector<bool> reduced(rank, axes->empty());
  for (int64_t a : *axes) {
    const auto axis = NormalizeAxis(a, rank);
    if (!axis) return std::nullopt;
    reduced[*axis] = true;
  }
  Dims out_dims, kept_dims;
  for (int64_t k = 0; k < rank; ++k) {
    if (!reduced[k]) {
      out_dims.push_back(data.dims[k]);
      kept_dims.push_back(data.dims[k]);
    } else if (keep) {
      out_dims.push_back(1);
    }
  }
  const int64_t out_n = Product(kept_dims, 0, kept_dims.size());
  if ((op == "ReduceMin" || op == "ReduceMax") && data.size() == 0) return std::nullopt;
  ConstTensor out = MakeTensor(data.dtype, out_dims, out_n);
  std::vector<bool> started(out_n, false);
  const Dims kept_strides = RowMajorStrides(kept_dims);
  bool ok = true;
  ForEachIndex(data.dims, data.size(), [&](int64_t e, const Dims& idx) {
    int64_t to = 0;
    for (int64_t k = 0, j = 0; k < rank; ++k) {
      if (!reduced[k]) to += idx[k] * kept_strides[j++];
    }
    if (out.is_real()) {
      double& acc = out.reals[to];
      const double v = data.reals[e];
      if (!started[to]) acc = op == "ReduceProd" ? 1.0 : op == "ReduceMin" || op == "ReduceMax" ? v : 0.0;
      if (op == "ReduceProd") acc *= v;
      else if (op == "ReduceSum" || op == "ReduceMean") acc += v;
      else if (op == "ReduceMin") acc = std::min(acc, v);
      else acc = std::max(acc, v);
    } else {
      int64_t& acc = out.ints[to];
      const int64_t v = data.ints[e];
      if (!started[to]) acc = op == "ReduceProd" ? 1 : op == "ReduceMin" || op == "ReduceMax" ? v : 0;
      if (op == "ReduceProd") ok = ok && !__builtin_mul_overflow(acc, v, &acc);
      else if (op == "ReduceSum") ok = ok && !__builtin_add_overflow(acc, v, &acc);
      else if (op == "ReduceMin") acc = std::min(acc, v);
      else acc = std::max(acc, v);
    }
    started[to] = true;
  });
  if (!ok) return std::nullopt;
  for (int64_t e = 0; e < out_n; ++e) {
    if (!started[e]) {  // reduced over an empty range
      if (op == "ReduceProd") {
        if (out.is_real()) out.reals[e] = 1.0; else out.ints[e] = 1;
      } else if (op != "ReduceSum") {
        return std::nullopt;
      }
    }
  }
  if (op == "ReduceMean") {
    const int64_t count = out_n == 0 ? 0 : data.size() / out_n;
    if (count == 0) return std::nullopt;
    for (double& v : out.reals) v /= static_cast<double>(count);
  }
  for (int64_t& v : out.ints) v = WrapInt(out.dtype, v);
  if (out.dtype == TensorProto::FLOAT) {
    for (double& v : out.reals) v = static_cast<float>(v);
  }
  return One(std::move(out));
}

}  // namespace memonger::graph::onnx_fold
