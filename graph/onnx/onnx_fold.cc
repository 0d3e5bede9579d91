#include "graph/onnx/onnx_fold.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <numeric>
#include <unordered_map>

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "onnx/defs/schema.h"
#include "onnx/shape_inference/implementation.h"

namespace memonger::graph::onnx_fold {
namespace {

using Dims = std::vector<int64_t>;
using onnx::TensorProto;

// ---------------------------------------------------------------------------------------------
// Element types.

int64_t ElementBytes(int32_t dtype) {
  switch (dtype) {
    case TensorProto::BOOL:
    case TensorProto::INT8:
    case TensorProto::UINT8: return 1;
    case TensorProto::INT16:
    case TensorProto::UINT16: return 2;
    case TensorProto::FLOAT:
    case TensorProto::INT32:
    case TensorProto::UINT32: return 4;
    case TensorProto::DOUBLE:
    case TensorProto::INT64:
    case TensorProto::UINT64: return 8;
    default: return 0;
  }
}

bool IsRealType(int32_t dtype) {
  return dtype == TensorProto::FLOAT || dtype == TensorProto::DOUBLE;
}

// Wraps an integer to the range of `dtype` as a C cast would; bool becomes 0/1.
int64_t WrapInt(int32_t dtype, int64_t v) {
  switch (dtype) {
    case TensorProto::BOOL: return v != 0 ? 1 : 0;
    case TensorProto::INT8: return static_cast<int8_t>(v);
    case TensorProto::UINT8: return static_cast<uint8_t>(v);
    case TensorProto::INT16: return static_cast<int16_t>(v);
    case TensorProto::UINT16: return static_cast<uint16_t>(v);
    case TensorProto::INT32: return static_cast<int32_t>(v);
    case TensorProto::UINT32: return static_cast<uint32_t>(v);
    default: return v;
  }
}

// Number of elements of `dims`; nullopt for a negative dim or more than `max` elements.
std::optional<int64_t> CountElements(const Dims& dims, int64_t max) {
  int64_t n = 1;
  bool zero = false;
  for (int64_t d : dims) {
    if (d < 0) return std::nullopt;
    if (d == 0) zero = true;
  }
  if (zero) return 0;
  for (int64_t d : dims) {
    if (n > max / d) return std::nullopt;
    n *= d;
  }
  if (n > max) return std::nullopt;
  return n;
}

int64_t Product(const Dims& dims, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= dims[i];
  return n;
}

ConstTensor MakeTensor(int32_t dtype, Dims dims, int64_t n) {
  ConstTensor t;
  t.dtype = dtype;
  t.dims = std::move(dims);
  if (IsRealType(dtype)) {
    t.reals.assign(n, 0.0);
  } else {
    t.ints.assign(n, 0);
  }
  return t;
}

double RealAt(const ConstTensor& t, int64_t i) {
  return t.is_real() ? t.reals[i] : static_cast<double>(t.ints[i]);
}

// Copies element `from` of `src` to element `to` of `dst` (same dtype).
void CopyElement(const ConstTensor& src, int64_t from, ConstTensor& dst, int64_t to) {
  if (dst.is_real()) {
    dst.reals[to] = src.reals[from];
  } else {
    dst.ints[to] = src.ints[from];
  }
}

// Converts a real to an integer of `dtype`; nullopt when it does not fit int64 or is not finite.
std::optional<int64_t> RealToInt(int32_t dtype, double v) {
  if (!std::isfinite(v) || std::fabs(v) >= 9.2e18) return std::nullopt;
  return WrapInt(dtype, static_cast<int64_t>(v));
}

// ---------------------------------------------------------------------------------------------
// Node access.

const onnx::AttributeProto* FindAttr(const onnx::NodeProto& node, absl::string_view name) {
  for (const onnx::AttributeProto& a : node.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

std::optional<int64_t> AttrInt(const onnx::NodeProto& node, absl::string_view name) {
  const onnx::AttributeProto* a = FindAttr(node, name);
  if (a == nullptr || (a->type() != onnx::AttributeProto::INT && !a->has_i())) return std::nullopt;
  return a->i();
}

std::optional<Dims> AttrInts(const onnx::NodeProto& node, absl::string_view name) {
  const onnx::AttributeProto* a = FindAttr(node, name);
  if (a == nullptr) return std::nullopt;
  return Dims(a->ints().begin(), a->ints().end());
}

const ConstTensor* ValueOf(const std::vector<FoldInput>& inputs, size_t i) {
  return i < inputs.size() && inputs[i].present ? inputs[i].value : nullptr;
}

bool Present(const std::vector<FoldInput>& inputs, size_t i) {
  return i < inputs.size() && inputs[i].present;
}

// The elements of an integer tensor of rank 0 or 1.
std::optional<Dims> IntList(const ConstTensor* t) {
  if (t == nullptr || t->is_real() || t->dims.size() > 1) return std::nullopt;
  return t->ints;
}

// Normalizes a possibly negative axis against `rank`; nullopt when out of [-rank, rank).
std::optional<int64_t> NormalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

using Result = std::optional<std::vector<ConstTensor>>;

Result One(ConstTensor t) {
  std::vector<ConstTensor> out;
  out.push_back(std::move(t));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Broadcasting (numpy rules).

std::optional<Dims> BroadcastShapes(const std::vector<const Dims*>& shapes) {
  size_t rank = 0;
  for (const Dims* s : shapes) rank = std::max(rank, s->size());
  Dims out(rank, 1);
  for (const Dims* s : shapes) {
    for (size_t i = 0; i < s->size(); ++i) {
      const size_t o = rank - s->size() + i;
      const int64_t d = (*s)[i];
      if (d == 1) continue;
      if (out[o] == 1) {
        out[o] = d;
      } else if (out[o] != d) {
        return std::nullopt;
      }
    }
  }
  return out;
}

// For each element of `out` (row-major), the index of the element of `in` broadcast to it.
std::vector<int64_t> BroadcastIndex(const Dims& in, const Dims& out, int64_t n) {
  const size_t rank = out.size();
  Dims strides(rank, 0);
  int64_t stride = 1;
  for (size_t k = in.size(); k-- > 0;) {
    const size_t o = rank - in.size() + k;
    strides[o] = in[k] == 1 ? 0 : stride;
    stride *= in[k];
  }
  std::vector<int64_t> index(n, 0);
  Dims counter(rank, 0);
  int64_t pos = 0;
  for (int64_t e = 0; e < n; ++e) {
    index[e] = pos;
    for (size_t k = rank; k-- > 0;) {
      if (++counter[k] < out[k]) {
        pos += strides[k];
        break;
      }
      pos -= strides[k] * (counter[k] - 1);
      counter[k] = 0;
    }
  }
  return index;
}

// Visits every element of a row-major tensor of `dims`, passing its multi-index.
template <typename F>
void ForEachIndex(const Dims& dims, int64_t n, F&& f) {
  Dims idx(dims.size(), 0);
  for (int64_t e = 0; e < n; ++e) {
    f(e, idx);
    for (size_t k = dims.size(); k-- > 0;) {
      if (++idx[k] < dims[k]) break;
      idx[k] = 0;
    }
  }
}

Dims RowMajorStrides(const Dims& dims) {
  Dims strides(dims.size(), 1);
  for (size_t k = dims.size(); k-- > 1;) strides[k - 1] = strides[k] * dims[k];
  return strides;
}

// ---------------------------------------------------------------------------------------------
// Elementwise ops.

bool IsComparison(const std::string& op) {
  return op == "Equal" || op == "Less" || op == "Greater" || op == "LessOrEqual" ||
         op == "GreaterOrEqual";
}

bool IsLogical(const std::string& op) { return op == "And" || op == "Or" || op == "Xor"; }

bool IsArithmetic(const std::string& op) {
  return op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Mod" ||
         op == "Pow" || op == "Min" || op == "Max" || op == "Sum" || op == "BitShift";
}

std::optional<int64_t> IntPow(int64_t base, int64_t exp) {
  if (exp < 0) return std::nullopt;
  int64_t r = 1;
  for (int64_t i = 0; i < exp; ++i) {
    if (__builtin_mul_overflow(r, base, &r)) return std::nullopt;
    if (r == 0 || r == 1) break;
  }
  return r;
}

std::optional<int64_t> IntBinary(const std::string& op, int64_t a, int64_t b, bool fmod) {
  int64_t r = 0;
  if (op == "Add" || op == "Sum") {
    if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  } else if (op == "Sub") {
    if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
  } else if (op == "Mul") {
    if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  } else if (op == "Div") {
    if (b == 0 || (a == std::numeric_limits<int64_t>::min() && b == -1)) return std::nullopt;
    r = a / b;
  } else if (op == "Mod") {
    if (b == 0 || (a == std::numeric_limits<int64_t>::min() && b == -1)) return std::nullopt;
    r = a % b;
    if (!fmod && r != 0 && ((r < 0) != (b < 0))) r += b;  // sign of the divisor
  } else if (op == "Pow") {
    return IntPow(a, b);
  } else if (op == "Min") {
    r = std::min(a, b);
  } else if (op == "Max") {
    r = std::max(a, b);
  } else {
    return std::nullopt;
  }
  return r;
}

std::optional<double> RealBinary(const std::string& op, double a, double b, bool fmod) {
  if (op == "Add" || op == "Sum") return a + b;
  if (op == "Sub") return a - b;
  if (op == "Mul") return a * b;
  if (op == "Div") return a / b;
  if (op == "Mod") {
    if (!fmod) return std::nullopt;
    return std::fmod(a, b);
  }
  if (op == "Pow") return std::pow(a, b);
  if (op == "Min") return std::min(a, b);
  if (op == "Max") return std::max(a, b);
  return std::nullopt;
}

bool Compare(const std::string& op, double a, double b) {
  if (op == "Equal") return a == b;
  if (op == "Less") return a < b;
  if (op == "Greater") return a > b;
  if (op == "LessOrEqual") return a <= b;
  return a >= b;  // GreaterOrEqual
}

bool CompareInt(const std::string& op, int64_t a, int64_t b) {
  if (op == "Equal") return a == b;
  if (op == "Less") return a < b;
  if (op == "Greater") return a > b;
  if (op == "LessOrEqual") return a <= b;
  return a >= b;
}

std::optional<ConstTensor> Binary(const onnx::NodeProto& node, const ConstTensor& a,
                                  const ConstTensor& b, int64_t max) {
  const std::string& op = node.op_type();
  if (op == "BitShift") return std::nullopt;
  const auto out_dims = BroadcastShapes({&a.dims, &b.dims});
  if (!out_dims) return std::nullopt;
  const auto n = CountElements(*out_dims, max);
  if (!n) return std::nullopt;
  const std::vector<int64_t> ia = BroadcastIndex(a.dims, *out_dims, *n);
  const std::vector<int64_t> ib = BroadcastIndex(b.dims, *out_dims, *n);
  const bool fmod = AttrInt(node, "fmod").value_or(0) != 0;

  if (IsComparison(op)) {
    if (a.dtype != b.dtype) return std::nullopt;
    ConstTensor out = MakeTensor(TensorProto::BOOL, *out_dims, *n);
    for (int64_t e = 0; e < *n; ++e) {
      out.ints[e] = a.is_real() ? Compare(op, a.reals[ia[e]], b.reals[ib[e]])
                                : CompareInt(op, a.ints[ia[e]], b.ints[ib[e]]);
    }
    return out;
  }
  if (IsLogical(op)) {
    if (a.dtype != TensorProto::BOOL || b.dtype != TensorProto::BOOL) return std::nullopt;
    ConstTensor out = MakeTensor(TensorProto::BOOL, *out_dims, *n);
    for (int64_t e = 0; e < *n; ++e) {
      const bool x = a.ints[ia[e]] != 0;
      const bool y = b.ints[ib[e]] != 0;
      out.ints[e] = op == "And" ? (x && y) : op == "Or" ? (x || y) : (x != y);
    }
    return out;
  }
  if (!IsArithmetic(op)) return std::nullopt;
  // Pow may mix types (the result has the base's type); the others may not.
  if (op != "Pow" && a.dtype != b.dtype) return std::nullopt;
  if (a.dtype == TensorProto::BOOL) return std::nullopt;
  ConstTensor out = MakeTensor(a.dtype, *out_dims, *n);
  for (int64_t e = 0; e < *n; ++e) {
    if (out.is_real()) {
      const auto r = RealBinary(op, a.reals[ia[e]], RealAt(b, ib[e]), fmod);
      if (!r) return std::nullopt;
      out.reals[e] = a.dtype == TensorProto::FLOAT ? static_cast<float>(*r) : *r;
    } else {
      std::optional<int64_t> r;
      if (b.is_real()) {
        r = RealToInt(a.dtype, std::pow(static_cast<double>(a.ints[ia[e]]), b.reals[ib[e]]));
      } else {
        r = IntBinary(op, a.ints[ia[e]], b.ints[ib[e]], fmod);
      }
      if (!r) return std::nullopt;
      out.ints[e] = WrapInt(a.dtype, *r);
    }
  }
  return out;
}

std::optional<ConstTensor> Unary(const std::string& op, const ConstTensor& x) {
  ConstTensor out = x;
  if (op == "Identity") return out;
  if (op == "Not") {
    if (x.dtype != TensorProto::BOOL) return std::nullopt;
    for (int64_t& v : out.ints) v = v == 0 ? 1 : 0;
    return out;
  }
  if (x.dtype == TensorProto::BOOL) return std::nullopt;
  if (x.is_real()) {
    for (double& v : out.reals) {
      if (op == "Neg") v = -v;
      else if (op == "Abs") v = std::fabs(v);
      else if (op == "Floor") v = std::floor(v);
      else if (op == "Ceil") v = std::ceil(v);
      else if (op == "Sqrt") v = std::sqrt(v);
      else if (op == "Reciprocal") v = 1.0 / v;
      else if (op == "Sign") v = v > 0 ? 1.0 : v < 0 ? -1.0 : 0.0;
      else return std::nullopt;
      if (x.dtype == TensorProto::FLOAT) v = static_cast<float>(v);
    }
    return out;
  }
  for (int64_t& v : out.ints) {
    if (op == "Neg") {
      if (v == std::numeric_limits<int64_t>::min()) return std::nullopt;
      v = WrapInt(x.dtype, -v);
    } else if (op == "Abs") {
      if (v == std::numeric_limits<int64_t>::min()) return std::nullopt;
      v = WrapInt(x.dtype, v < 0 ? -v : v);
    } else if (op == "Sign") {
      v = v > 0 ? 1 : v < 0 ? WrapInt(x.dtype, -1) : 0;
    } else if (op != "Floor" && op != "Ceil") {
      return std::nullopt;
    }
  }
  return out;
}

std::optional<ConstTensor> CastTo(const ConstTensor& x, int32_t to) {
  if (!IsFoldableType(to)) return std::nullopt;
  ConstTensor out;
  out.dtype = to;
  out.dims = x.dims;
  const int64_t n = x.size();
  if (IsRealType(to)) {
    out.reals.resize(n);
    for (int64_t e = 0; e < n; ++e) {
      const double v = RealAt(x, e);
      out.reals[e] = to == TensorProto::FLOAT ? static_cast<float>(v) : v;
    }
  } else {
    out.ints.resize(n);
    for (int64_t e = 0; e < n; ++e) {
      if (x.is_real()) {
        if (to == TensorProto::BOOL) {
          out.ints[e] = x.reals[e] != 0.0;
          continue;
        }
        const auto v = RealToInt(to, x.reals[e]);
        if (!v) return std::nullopt;
        out.ints[e] = *v;
      } else {
        out.ints[e] = WrapInt(to, x.ints[e]);
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
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

// ---------------------------------------------------------------------------------------------
// The driver.

bool IsDefaultDomain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

bool FullyTyped(const onnx::TypeProto& type) {
  return type.has_tensor_type() && type.tensor_type().elem_type() != 0 &&
         StaticDims(type).has_value();
}

// Types libonnx knows after a run: graph inputs, value_info, outputs, initializers.
class TypeTable {
 public:
  explicit TypeTable(const onnx::GraphProto& graph) {
    for (const onnx::TensorProto& t : graph.initializer()) {
      onnx::TypeProto& type = initializer_types_[t.name()];
      type.mutable_tensor_type()->set_elem_type(t.data_type());
      onnx::TensorShapeProto* shape = type.mutable_tensor_type()->mutable_shape();
      for (int64_t d : t.dims()) shape->add_dim()->set_dim_value(d);
    }
    // Only complete types are remembered. A name may be listed more than once (a graph output
    // keeps a value_info entry from an earlier run): any complete entry counts.
    for (const auto& [name, type] : initializer_types_) {
      if (auto dims = StaticDims(type)) static_dims_[name] = std::move(*dims);
    }
    for (const auto* list : {&graph.input(), &graph.value_info(), &graph.output()}) {
      for (const onnx::ValueInfoProto& vi : *list) {
        if (static_dims_.contains(vi.name()) || !FullyTyped(vi.type())) continue;
        static_dims_[vi.name()] = *StaticDims(vi.type());
      }
    }
  }

  // nullptr unless `name` has a complete tensor type.
  const Dims* StaticShape(const std::string& name) const {
    auto it = static_dims_.find(name);
    return it == static_dims_.end() ? nullptr : &it->second;
  }

 private:
  absl::flat_hash_map<std::string, onnx::TypeProto> initializer_types_;
  absl::flat_hash_map<std::string, Dims> static_dims_;
};

}  // namespace

// ---------------------------------------------------------------------------------------------

bool ConstTensor::is_real() const { return IsRealType(dtype); }

int64_t ConstTensor::size() const {
  return is_real() ? static_cast<int64_t>(reals.size()) : static_cast<int64_t>(ints.size());
}

bool IsFoldableType(int32_t dtype) { return ElementBytes(dtype) > 0; }

std::optional<ConstTensor> TensorFromProto(const onnx::TensorProto& proto, int64_t max_elements) {
  const int32_t dtype = proto.data_type();
  if (!IsFoldableType(dtype)) return std::nullopt;
  if (proto.data_location() == TensorProto::EXTERNAL || proto.has_segment()) return std::nullopt;
  Dims dims(proto.dims().begin(), proto.dims().end());
  const auto n = CountElements(dims, max_elements);
  if (!n) return std::nullopt;
  ConstTensor t = MakeTensor(dtype, std::move(dims), *n);
  const int64_t bytes = ElementBytes(dtype);
  if (!proto.raw_data().empty()) {
    const std::string& raw = proto.raw_data();
    if (static_cast<int64_t>(raw.size()) != *n * bytes) return std::nullopt;
    for (int64_t e = 0; e < *n; ++e) {
      const char* p = raw.data() + e * bytes;
      switch (dtype) {
        case TensorProto::FLOAT: { float v; std::memcpy(&v, p, 4); t.reals[e] = v; break; }
        case TensorProto::DOUBLE: { double v; std::memcpy(&v, p, 8); t.reals[e] = v; break; }
        case TensorProto::BOOL: t.ints[e] = *p != 0; break;
        case TensorProto::INT8: { int8_t v; std::memcpy(&v, p, 1); t.ints[e] = v; break; }
        case TensorProto::UINT8: { uint8_t v; std::memcpy(&v, p, 1); t.ints[e] = v; break; }
        case TensorProto::INT16: { int16_t v; std::memcpy(&v, p, 2); t.ints[e] = v; break; }
        case TensorProto::UINT16: { uint16_t v; std::memcpy(&v, p, 2); t.ints[e] = v; break; }
        case TensorProto::INT32: { int32_t v; std::memcpy(&v, p, 4); t.ints[e] = v; break; }
        case TensorProto::UINT32: { uint32_t v; std::memcpy(&v, p, 4); t.ints[e] = v; break; }
        case TensorProto::INT64: { int64_t v; std::memcpy(&v, p, 8); t.ints[e] = v; break; }
        case TensorProto::UINT64: {
          uint64_t v;
          std::memcpy(&v, p, 8);
          if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
          t.ints[e] = static_cast<int64_t>(v);
          break;
        }
        default: return std::nullopt;
      }
    }
    return t;
  }
  auto take = [&](const auto& field, auto convert) -> bool {
    if (field.size() != *n) return false;
    for (int64_t e = 0; e < *n; ++e) {
      if (!convert(field.Get(static_cast<int>(e)), e)) return false;
    }
    return true;
  };
  bool ok = false;
  switch (dtype) {
    case TensorProto::FLOAT:
      ok = take(proto.float_data(), [&](float v, int64_t e) { t.reals[e] = v; return true; });
      break;
    case TensorProto::DOUBLE:
      ok = take(proto.double_data(), [&](double v, int64_t e) { t.reals[e] = v; return true; });
      break;
    case TensorProto::INT64:
      ok = take(proto.int64_data(), [&](int64_t v, int64_t e) { t.ints[e] = v; return true; });
      break;
    case TensorProto::UINT32:
    case TensorProto::UINT64:
      ok = take(proto.uint64_data(), [&](uint64_t v, int64_t e) {
        if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
        t.ints[e] = WrapInt(dtype, static_cast<int64_t>(v));
        return true;
      });
      break;
    default:  // int32_data holds the narrower integers and bool
      ok = take(proto.int32_data(), [&](int32_t v, int64_t e) {
        t.ints[e] = WrapInt(dtype, v);
        return true;
      });
      break;
  }
  if (!ok) return std::nullopt;
  return t;
}

onnx::TensorProto TensorToProto(const ConstTensor& tensor, const std::string& name) {
  onnx::TensorProto proto;
  proto.set_name(name);
  proto.set_data_type(tensor.dtype);
  for (int64_t d : tensor.dims) proto.add_dims(d);
  switch (tensor.dtype) {
    case TensorProto::FLOAT:
      for (double v : tensor.reals) proto.add_float_data(static_cast<float>(v));
      break;
    case TensorProto::DOUBLE:
      for (double v : tensor.reals) proto.add_double_data(v);
      break;
    case TensorProto::INT64:
      for (int64_t v : tensor.ints) proto.add_int64_data(v);
      break;
    case TensorProto::UINT32:
    case TensorProto::UINT64:
      for (int64_t v : tensor.ints) proto.add_uint64_data(static_cast<uint64_t>(v));
      break;
    default:
      for (int64_t v : tensor.ints) proto.add_int32_data(static_cast<int32_t>(v));
      break;
  }
  return proto;
}

bool IsFoldableOp(const onnx::NodeProto& node) {
  static const absl::flat_hash_set<std::string>* const kOps = new absl::flat_hash_set<std::string>{
      "Constant", "Shape", "Size", "Identity", "Cast", "Gather", "Slice", "Concat", "Unsqueeze",
      "Squeeze", "Reshape", "Flatten", "Expand", "Tile", "Transpose", "ConstantOfShape", "Range",
      "Where", "Add", "Sub", "Mul", "Div", "Mod", "Pow", "Min", "Max", "Sum", "Equal", "Less",
      "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Not", "Neg", "Abs",
      "Floor", "Ceil", "Sqrt", "Reciprocal", "Sign", "ReduceProd", "ReduceSum", "ReduceMin",
      "ReduceMax", "ReduceMean"};
  return IsDefaultDomain(node.domain()) && kOps->contains(node.op_type());
}

std::optional<std::vector<ConstTensor>> EvaluateNode(const onnx::NodeProto& node,
                                                     const std::vector<FoldInput>& inputs,
                                                     int64_t max_elements) {
  if (!IsFoldableOp(node)) return std::nullopt;
  const std::string& op = node.op_type();
  const int64_t max = max_elements;
  if (op == "Constant") return EvalConstant(node, max);
  if (node.output_size() != 1) return std::nullopt;  // every op below has one output
  if (op == "Shape" || op == "Size") return EvalShape(node, inputs);

  const ConstTensor* x = ValueOf(inputs, 0);
  if (op == "ConstantOfShape") return EvalConstantOfShape(node, x, max);
  if (op == "Range") return EvalRange(x, ValueOf(inputs, 1), ValueOf(inputs, 2), max);
  if (op == "Concat") return EvalConcat(node, inputs, max);
  if (x == nullptr) return std::nullopt;
  if (op == "Identity" || op == "Not" || op == "Neg" || op == "Abs" || op == "Floor" ||
      op == "Ceil" || op == "Sqrt" || op == "Reciprocal" || op == "Sign") {
    auto r = Unary(op, *x);
    if (!r) return std::nullopt;
    return One(std::move(*r));
  }
  if (op == "Cast") {
    const auto to = AttrInt(node, "to");
    if (!to) return std::nullopt;
    auto r = CastTo(*x, static_cast<int32_t>(*to));
    if (!r) return std::nullopt;
    return One(std::move(*r));
  }
  if (op == "Gather") {
    const ConstTensor* indices = ValueOf(inputs, 1);
    if (indices == nullptr) return std::nullopt;
    return EvalGather(node, *x, *indices, max);
  }
  if (op == "Slice") return EvalSlice(node, inputs, *x, max);
  if (op == "Unsqueeze") return EvalUnsqueeze(node, inputs, *x);
  if (op == "Squeeze") return EvalSqueeze(node, inputs, *x);
  if (op == "Reshape") return EvalReshape(node, *x, ValueOf(inputs, 1));
  if (op == "Flatten") return EvalFlatten(node, *x);
  if (op == "Expand") return EvalExpand(*x, ValueOf(inputs, 1), max);
  if (op == "Tile") return EvalTile(*x, ValueOf(inputs, 1), max);
  if (op == "Transpose") return EvalTranspose(node, *x);
  if (op == "Where") {
    const ConstTensor* a = ValueOf(inputs, 1);
    const ConstTensor* b = ValueOf(inputs, 2);
    if (a == nullptr || b == nullptr) return std::nullopt;
    return EvalWhere(*x, *a, *b, max);
  }
  if (op == "ReduceProd" || op == "ReduceSum" || op == "ReduceMin" || op == "ReduceMax" ||
      op == "ReduceMean") {
    return EvalReduce(node, inputs, *x);
  }
  if (IsComparison(op) || IsLogical(op) || IsArithmetic(op)) {
    // Variadic Min, Max, Sum fold pairwise; the binary ops take exactly two inputs.
    std::optional<ConstTensor> acc = *x;
    size_t count = 1;
    for (size_t i = 1; i < inputs.size(); ++i) {
      const ConstTensor* next = ValueOf(inputs, i);
      if (next == nullptr) return std::nullopt;
      acc = Binary(node, *acc, *next, max);
      if (!acc) return std::nullopt;
      ++count;
    }
    const bool variadic = op == "Min" || op == "Max" || op == "Sum";
    if (count < (variadic ? 1u : 2u) || (!variadic && count != 2)) return std::nullopt;
    return One(std::move(*acc));
  }
  return std::nullopt;
}

std::optional<std::vector<int64_t>> StaticDims(const onnx::TypeProto& type) {
  if (!type.has_tensor_type() || !type.tensor_type().has_shape()) return std::nullopt;
  Dims dims;
  for (const onnx::TensorShapeProto::Dimension& d : type.tensor_type().shape().dim()) {
    if (!d.has_dim_value() || d.dim_value() < 0) return std::nullopt;
    dims.push_back(d.dim_value());
  }
  return dims;
}

namespace {

absl::Status InferInProcess(onnx::ModelProto& model, bool strict) {
  const onnx::ShapeInferenceOptions options(/*check_type_val=*/false,
                                            /*strict_mode_val=*/strict ? 1 : 0,
                                            /*data_prop_val=*/true);
  std::unordered_map<std::string, onnx::TensorShapeProto> generated_shape_data;
  try {
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), options,
                                       &generated_shape_data);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("ONNX shape inference failed: ", e.what()));
  } catch (...) {
    return absl::InvalidArgumentError("ONNX shape inference failed (unknown exception)");
  }
  return absl::OkStatus();
}

bool WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::string ReadAll(int fd) {
  std::string data;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    data.append(buffer, static_cast<size_t>(n));
  }
  return data;
}

}  // namespace

absl::Status RunOnnxShapeInference(onnx::ModelProto& model, bool strict) {
  // Initialised here, so that the child never runs (or waits on) the registry's set-up.
  onnx::OpSchemaRegistry::Instance();
  int fds[2];
  if (pipe(fds) != 0) return InferInProcess(model, strict);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return InferInProcess(model, strict);
  }
  if (pid == 0) {
    // The child: infer, send back 'O' + the inferred types (graph.value_info and graph.output,
    // all libonnx writes) or 'E' + the error message, and leave without running destructors.
    close(fds[0]);
    const absl::Status status = InferInProcess(model, strict);
    std::string reply;
    if (status.ok()) {
      onnx::GraphProto types;
      *types.mutable_value_info() = model.graph().value_info();
      *types.mutable_output() = model.graph().output();
      reply = "O" + types.SerializeAsString();
    } else {
      reply = absl::StrCat("E", status.message());
    }
    _exit(WriteAll(fds[1], reply) ? 0 : 1);
  }
  close(fds[1]);
  const std::string reply = ReadAll(fds[0]);
  close(fds[0]);
  int wait_status = 0;
  while (waitpid(pid, &wait_status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError("waitpid failed for libonnx's shape inference");
  }
  if (WIFSIGNALED(wait_status)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ONNX shape inference crashed (signal ", WTERMSIG(wait_status),
        "): the model is malformed in a way libonnx does not check (a rank, axis or equation "
        "that its shape functions take on trust)"));
  }
  if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0 || reply.empty()) {
    return absl::InternalError("libonnx's shape inference process failed to report");
  }
  if (reply[0] == 'E') return absl::InvalidArgumentError(reply.substr(1));
  onnx::GraphProto types;
  if (reply[0] != 'O' || !types.ParseFromArray(reply.data() + 1, static_cast<int>(reply.size() - 1))) {
    return absl::InternalError("libonnx's shape inference process sent an unreadable reply");
  }
  model.mutable_graph()->mutable_value_info()->Swap(types.mutable_value_info());
  model.mutable_graph()->mutable_output()->Swap(types.mutable_output());
  return absl::OkStatus();
}

namespace {

bool NeedsOnlyShape(const onnx::NodeProto& node) {
  return node.op_type() == "Shape" || node.op_type() == "Size";
}

// Nodes whose inputs all have static shapes while some output has not.
std::vector<int> FindFrontier(const onnx::GraphProto& graph, const TypeTable& types) {
  std::vector<int> frontier;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    bool inputs_static = true;
    for (const std::string& in : node.input()) {
      if (!in.empty() && types.StaticShape(in) == nullptr) inputs_static = false;
    }
    bool outputs_static = true;
    for (const std::string& out : node.output()) {
      if (!out.empty() && types.StaticShape(out) == nullptr) outputs_static = false;
    }
    if (inputs_static && !outputs_static) frontier.push_back(i);
  }
  return frontier;
}

absl::flat_hash_map<std::string, int> Producers(const onnx::GraphProto& graph) {
  absl::flat_hash_map<std::string, int> producer;
  for (int i = 0; i < graph.node_size(); ++i) {
    for (const std::string& out : graph.node(i).output()) {
      if (!out.empty()) producer[out] = i;
    }
  }
  return producer;
}

// The frontier and, backwards through foldable ops, what feeds it (Shape and Size need no
// input value, so the walk stops there).
std::vector<bool> NodesWorthEvaluating(const onnx::GraphProto& graph,
                                       const std::vector<int>& frontier,
                                       const absl::flat_hash_map<std::string, int>& producer) {
  std::vector<bool> needed(graph.node_size(), false);
  std::vector<int> stack(frontier.begin(), frontier.end());
  for (int f : frontier) needed[f] = true;
  while (!stack.empty()) {
    const onnx::NodeProto& node = graph.node(stack.back());
    stack.pop_back();
    if (NeedsOnlyShape(node)) continue;
    for (const std::string& in : node.input()) {
      auto it = producer.find(in);
      if (in.empty() || it == producer.end() || needed[it->second]) continue;
      if (!IsFoldableOp(graph.node(it->second))) continue;
      needed[it->second] = true;
      stack.push_back(it->second);
    }
  }
  return needed;
}

struct Evaluation {
  absl::flat_hash_map<std::string, ConstTensor> values;  // by value name
  std::vector<bool> folded;                               // by node
};

// Evaluates the needed nodes in node order. Initializers are decoded only for a node whose
// every input may be known, so that weights feeding activations are never read.
Evaluation EvaluateNodes(const onnx::GraphProto& graph, const std::vector<bool>& needed,
                         const TypeTable& types, int64_t max_elements) {
  absl::flat_hash_map<std::string, const onnx::TensorProto*> initializers;
  for (const onnx::TensorProto& t : graph.initializer()) initializers[t.name()] = &t;
  absl::flat_hash_set<std::string> undecodable;
  Evaluation e;
  e.folded.assign(graph.node_size(), false);
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    if (!needed[i] || !IsFoldableOp(node)) continue;
    bool may_fold = true;
    for (int k = 0; k < node.input_size() && may_fold && !NeedsOnlyShape(node); ++k) {
      const std::string& name = node.input(k);
      if (name.empty() || e.values.contains(name)) continue;
      auto init = initializers.find(name);
      std::optional<ConstTensor> v;
      if (init != initializers.end() && !undecodable.contains(name)) {
        v = TensorFromProto(*init->second, max_elements);
        if (!v) undecodable.insert(name);
      }
      if (v) {
        e.values[name] = std::move(*v);
      } else {
        may_fold = false;
      }
    }
    if (!may_fold) continue;
    std::vector<FoldInput> inputs(node.input_size());
    for (int k = 0; k < node.input_size(); ++k) {
      const std::string& name = node.input(k);
      if (name.empty()) continue;
      inputs[k].present = true;
      if (auto it = e.values.find(name); it != e.values.end()) inputs[k].value = &it->second;
      inputs[k].dims = types.StaticShape(name);
    }
    auto result = EvaluateNode(node, inputs, max_elements);
    if (!result || static_cast<int>(result->size()) != node.output_size()) continue;
    e.folded[i] = true;
    for (int k = 0; k < node.output_size(); ++k) {
      if (!node.output(k).empty()) e.values[node.output(k)] = std::move((*result)[k]);
    }
  }
  return e;
}

// The nodes to turn into initializers: the folded (non-Constant: libonnx reads those already)
// producers feeding the frontier; a frontier node fed by none of them, when it folds itself.
std::vector<bool> ChooseMaterialised(const onnx::GraphProto& graph,
                                     const std::vector<int>& frontier,
                                     const absl::flat_hash_map<std::string, int>& producer,
                                     const std::vector<bool>& folded) {
  std::vector<bool> materialise(graph.node_size(), false);
  for (int f : frontier) {
    bool fed = false;
    for (const std::string& in : graph.node(f).input()) {
      auto it = producer.find(in);
      if (in.empty() || it == producer.end()) continue;
      if (folded[it->second] && graph.node(it->second).op_type() != "Constant") {
        fed = true;
        materialise[it->second] = true;
      }
    }
    if (!fed && folded[f]) materialise[f] = true;
  }
  return materialise;
}

// Replaces the chosen nodes by initializers, removes the folded nodes left without readers,
// and drops the value_info of every removed name (a partial type there would shadow the
// initializer's); graph outputs that became initializers get the initializer's type.
void Materialise(onnx::GraphProto& graph, const std::vector<bool>& materialise,
                 const Evaluation& e, FoldReport& report) {
  const int num_nodes = graph.node_size();
  absl::flat_hash_map<std::string, int> readers;
  absl::flat_hash_set<std::string> graph_outputs;
  for (const onnx::ValueInfoProto& vi : graph.output()) graph_outputs.insert(vi.name());
  for (const onnx::NodeProto& node : graph.node()) {
    for (const std::string& in : node.input()) {
      if (!in.empty()) ++readers[in];
    }
  }
  auto live = [&](int i) {
    for (const std::string& out : graph.node(i).output()) {
      if (!out.empty() && (readers[out] > 0 || graph_outputs.contains(out))) return true;
    }
    return false;
  };
  // Only nodes that had a reader can lose it: unused nodes of the file stay as they are.
  std::vector<bool> was_live(num_nodes, false);
  for (int i = 0; i < num_nodes; ++i) was_live[i] = live(i);

  std::vector<bool> removed(num_nodes, false);
  absl::flat_hash_set<std::string> dropped;
  auto remove = [&](int i) {
    removed[i] = true;
    ++report.removed_nodes;
    for (const std::string& in : graph.node(i).input()) {
      if (!in.empty()) --readers[in];
    }
    for (const std::string& out : graph.node(i).output()) {
      if (!out.empty()) dropped.insert(out);
    }
  };
  for (int i = 0; i < num_nodes; ++i) {
    if (!materialise[i]) continue;
    for (const std::string& out : graph.node(i).output()) {
      if (out.empty()) continue;
      *graph.add_initializer() = TensorToProto(e.values.at(out), out);
      report.folded_values.push_back(out);
    }
    remove(i);
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (int i = num_nodes - 1; i >= 0; --i) {
      if (removed[i] || !e.folded[i] || !was_live[i] || live(i)) continue;
      remove(i);
      changed = true;
    }
  }

  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  for (int i = 0; i < num_nodes; ++i) {
    if (!removed[i]) kept.Add()->Swap(graph.mutable_node(i));
  }
  graph.mutable_node()->Swap(&kept);
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> infos;
  for (onnx::ValueInfoProto& vi : *graph.mutable_value_info()) {
    if (!dropped.contains(vi.name())) infos.Add()->Swap(&vi);
  }
  graph.mutable_value_info()->Swap(&infos);
  for (onnx::ValueInfoProto& vi : *graph.mutable_output()) {
    auto it = e.values.find(vi.name());
    if (!dropped.contains(vi.name()) || it == e.values.end()) continue;
    onnx::TypeProto_Tensor* t = vi.mutable_type()->mutable_tensor_type();
    t->set_elem_type(it->second.dtype);
    t->clear_shape();
    onnx::TensorShapeProto* shape = t->mutable_shape();
    for (int64_t d : it->second.dims) shape->add_dim()->set_dim_value(d);
  }
}

}  // namespace

absl::StatusOr<FoldReport> InferAndFold(onnx::ModelProto& model, const FoldOptions& options) {
  FoldReport report;
  onnx::GraphProto& graph = *model.mutable_graph();
  for (int round = 0;; ++round) {
    if (absl::Status s = RunOnnxShapeInference(model, /*strict=*/false); !s.ok()) return s;
    ++report.inference_runs;
    const TypeTable types(graph);
    const std::vector<int> frontier = FindFrontier(graph, types);
    if (frontier.empty() || round >= options.max_rounds) return report;

    const absl::flat_hash_map<std::string, int> producer = Producers(graph);
    const Evaluation e = EvaluateNodes(graph, NodesWorthEvaluating(graph, frontier, producer),
                                       types, options.max_elements);
    const std::vector<bool> materialise = ChooseMaterialised(graph, frontier, producer, e.folded);
    if (std::none_of(materialise.begin(), materialise.end(), [](bool b) { return b; })) {
      return report;
    }
    Materialise(graph, materialise, e, report);
  }
}

}  // namespace memonger::graph::onnx_fold
