#include "graph/onnx/fold_internal.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace memonger::graph::onnx_fold {

namespace {

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

}  // namespace

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

Dims RowMajorStrides(const Dims& dims) {
  Dims strides(dims.size(), 1);
  for (size_t k = dims.size(); k-- > 1;) strides[k - 1] = strides[k] * dims[k];
  return strides;
}

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

}  // namespace memonger::graph::onnx_fold
