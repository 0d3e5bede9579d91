#include "graph/onnx/const_tensor.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "graph/onnx/fold_internal.h"

namespace memonger::graph::onnx_fold {

namespace {

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

}  // namespace

// Element types.

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

}  // namespace memonger::graph::onnx_fold
