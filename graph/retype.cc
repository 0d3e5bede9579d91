#include "graph/retype.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "graph/op_schema.h"

#include "util/status_macros.h"

namespace memonger::graph {
namespace {

bool SameDeclaration(const Declaration& a, const Declaration& b) {
  if (a.dtype != b.dtype || a.dims.has_value() != b.dims.has_value()) return false;
  if (!a.dims.has_value()) return true;
  const DeclaredDims& x = *a.dims;
  const DeclaredDims& y = *b.dims;
  if (x.size() != y.size()) return false;
  for (size_t k = 0; k < x.size(); ++k) {
    if (x[k].size != y[k].size || x[k].symbol.str() != y[k].symbol.str()) return false;
  }
  return true;
}

bool HoldsBody(const Op& op) {
  return std::any_of(op.attrs.begin(), op.attrs.end(), [](const Attribute& a) {
    return std::holds_alternative<Subnets>(a.data);
  });
}

bool SameAttributes(const Op& a, const Op& b) {
  if (a.attrs.size() != b.attrs.size()) return false;
  for (size_t k = 0; k < a.attrs.size(); ++k) {
    if (a.attrs[k].name != b.attrs[k].name || !(a.attrs[k].data == b.attrs[k].data)) return false;
  }
  return true;
}

bool SameOp(const Op& a, const Op& b) {
  return a.type == b.type && a.name == b.name && a.domain.str() == b.domain.str() &&
         a.view == b.view && a.device == b.device && !HoldsBody(a) && !HoldsBody(b) &&
         std::equal(a.inputs.begin(), a.inputs.end(), b.inputs.begin(), b.inputs.end()) &&
         std::equal(a.outputs.begin(), a.outputs.end(), b.outputs.begin(), b.outputs.end()) &&
         a.control_inputs == b.control_inputs && SameAttributes(a, b);
}

bool SameValue(const Value& a, const Value& b) {
  return a.name == b.name && a.version == b.version && a.role == b.role &&
         a.role_declared == b.role_declared && a.producer == b.producer &&
         a.inplace_of == b.inplace_of && a.alignment == b.alignment &&
         SameDeclaration(a.declared, b.declared);
}

bool SameStaticData(const StaticData* a, const StaticData* b) {
  const size_t na = a == nullptr ? 0 : a->size();
  const size_t nb = b == nullptr ? 0 : b->size();
  if (na != nb) return false;
  if (na == 0) return true;
  for (const auto& [name, data] : *a) {
    auto it = b->find(name);
    if (it == b->end() || !(it->second.type == data.type) || it->second.bytes != data.bytes) {
      return false;
    }
  }
  return true;
}


// SameNetButTypes but for the static tensors.
bool SameStructure(const Graph& a, const Graph& b) {
  if (a.num_ops() != b.num_ops() || a.num_values() != b.num_values() ||
      a.inputs() != b.inputs() || a.outputs() != b.outputs() || a.losses() != b.losses() ||
      a.param_grads() != b.param_grads() || !a.data_dependent_sizes().empty() ||
      !b.data_dependent_sizes().empty()) {
    return false;
  }
  for (OpId i = 0; i < a.num_ops(); ++i) {
    if (!SameOp(a.op(i), b.op(i))) return false;
  }
  for (ValueId i = 0; i < a.num_values(); ++i) {
    if (!SameValue(a.value(i), b.value(i))) return false;
  }
  return true;
}

// The integers of an int64 or int32 tensor; nullopt for another dtype.
std::optional<std::vector<int64_t>> Integers(const TensorData& t) {
  const size_t width = t.type.dtype == DataType::kInt64   ? 8
                       : t.type.dtype == DataType::kInt32 ? 4
                                                          : 0;
  if (width == 0 || t.bytes.size() % width != 0) return std::nullopt;
  std::vector<int64_t> out(t.bytes.size() / width);
  for (size_t i = 0; i < out.size(); ++i) {
    if (width == 8) {
      std::memcpy(&out[i], t.bytes.data() + 8 * i, 8);
    } else {
      int32_t x;
      std::memcpy(&x, t.bytes.data() + 4 * i, 4);
      out[i] = x;
    }
  }
  return out;
}

std::string Bytes(const std::vector<int64_t>& values, DataType dtype) {
  std::string out;
  for (int64_t v : values) {
    if (dtype == DataType::kInt64) {
      out.append(reinterpret_cast<const char*>(&v), 8);
    } else {
      const int32_t x = static_cast<int32_t>(v);
      out.append(reinterpret_cast<const char*>(&x), 4);
    }
  }
  return out;
}

}  // namespace

bool SameNetButTypes(const Graph& a, const Graph& b) {
  return SameStructure(a, b) && SameStaticData(a.static_data(), b.static_data());
}

namespace {

// `x` at `v` on the line through (a, x_a) and (b, x_b); nullopt where that is not an integer
// or beyond int64. REQUIRES: a != b.
std::optional<int64_t> OnLine(int64_t x_a, int64_t x_b, int64_t a, int64_t b, int64_t v) {
  const __int128 rise = (static_cast<__int128>(x_b) - x_a) * (static_cast<__int128>(v) - a);
  const __int128 run = static_cast<__int128>(b) - a;
  if (rise % run != 0) return std::nullopt;
  const __int128 x = x_a + rise / run;
  if (x < std::numeric_limits<int64_t>::min() || x > std::numeric_limits<int64_t>::max()) {
    return std::nullopt;
  }
  return static_cast<int64_t>(x);
}

}  // namespace

absl::StatusOr<Retyper> Retyper::Make(Graph at_a, const Graph& at_b, const std::string& symbol,
                                      int64_t a, int64_t b, const ShapeBindings& bindings_b) {
  if (a == b || !SameStructure(at_a, at_b)) {
    return absl::InvalidArgumentError("the imports differ beyond their types");
  }
  // Static tensors that differ: integers (shape arithmetic an importer folded), each on a line.
  std::vector<ObservedData> observed_data;
  const size_t na = at_a.static_data() == nullptr ? 0 : at_a.static_data()->size();
  const size_t nb = at_b.static_data() == nullptr ? 0 : at_b.static_data()->size();
  if (na != nb) return absl::InvalidArgumentError("the imports hold other static tensors");
  if (na > 0) {
    for (const auto& [name, x] : *at_a.static_data()) {
      auto y = at_b.static_data()->find(name);
      if (y == at_b.static_data()->end() || !(y->second.type == x.type)) {
        return absl::InvalidArgumentError("the imports hold other static tensors");
      }
      if (y->second.bytes == x.bytes) continue;
      std::optional<std::vector<int64_t>> xs = Integers(x), ys = Integers(y->second);
      if (!xs.has_value() || !ys.has_value()) {
        return absl::InvalidArgumentError("a static tensor that is not integers differs");
      }
      observed_data.push_back({name, x.type, *std::move(xs), *std::move(ys)});
    }
  }
  Retyper r(std::move(at_a), symbol, a, b);
  r.observed_data_ = std::move(observed_data);
  const Graph& g = r.at_a_;
  const OpSchemaTable& schemas = OpSchemaTable::Builtin();
  for (const Op& op : g.ops()) {
    const OpSchema* schema = schemas.Find(op.type);
    bool observed = schema == nullptr;
    if (!observed) {
      std::vector<TensorType> inputs;
      for (ValueId in : op.inputs) {
        if (!g.value(in).type.has_value()) {
          return absl::InvalidArgumentError("an input without a type");
        }
        inputs.push_back(*g.value(in).type);
      }
      absl::StatusOr<std::vector<TensorType>> inferred =
          RunShapeFunction(g, op, *schema, std::move(inputs));
      observed = !inferred.ok() && absl::IsUnimplemented(inferred.status());
    }
    if (!observed) continue;
    for (ValueId out : op.outputs) {
      const std::optional<TensorType>& x = g.value(out).type;
      const std::optional<TensorType>& y = at_b.value(out).type;
      if (!x.has_value() || !y.has_value() || x->dtype != y->dtype ||
          x->dims.size() != y->dims.size()) {
        return absl::InvalidArgumentError("an observed value changes dtype or rank");
      }
      r.observed_.push_back({out, x->dtype, x->dims, y->dims});
    }
  }
  MG_ASSIGN_OR_RETURN(Graph retyped, r.At(bindings_b));
  for (ValueId id = 0; id < at_b.num_values(); ++id) {
    if (retyped.value(id).type != at_b.value(id).type) {
      return absl::InvalidArgumentError(
          absl::StrCat("retyping gives '", at_b.value(id).DisplayName(), "' another type"));
    }
  }
  return r;
}

absl::StatusOr<Graph> Retyper::At(const ShapeBindings& bindings) const {
  auto it = bindings.dims.find(symbol_);
  if (it == bindings.dims.end()) {
    return absl::InvalidArgumentError(absl::StrCat("retyping: '", symbol_, "' is not bound"));
  }
  const int64_t v = it->second;
  Graph g = at_a_;
  for (ValueId id = 0; id < g.num_values(); ++id) {
    Value& value = g.mutable_value(id);
    if (value.producer != kNone || !IsStatic(value.role)) value.type.reset();
  }
  for (const Observed& o : observed_) {
    TensorType type{o.dtype, {}};
    for (size_t k = 0; k < o.at_a.size(); ++k) {
      const std::optional<int64_t> d = OnLine(o.at_a[k], o.at_b[k], a_, b_, v);
      if (!d.has_value() || *d < 0) {
        return absl::InvalidArgumentError("an observed dim is not a size there");
      }
      type.dims.push_back(*d);
    }
    g.mutable_value(o.value).type = std::move(type);
  }
  if (!observed_data_.empty()) {
    auto data = std::make_shared<StaticData>(*at_a_.static_data());
    for (const ObservedData& o : observed_data_) {
      std::vector<int64_t> values(o.at_a.size());
      for (size_t k = 0; k < values.size(); ++k) {
        const std::optional<int64_t> x = OnLine(o.at_a[k], o.at_b[k], a_, b_, v);
        const bool fits_32 = x.has_value() && *x >= std::numeric_limits<int32_t>::min() &&
                             *x <= std::numeric_limits<int32_t>::max();
        if (!x.has_value() || (o.type.dtype == DataType::kInt32 && !fits_32)) {
          return absl::InvalidArgumentError("an observed static value is not an integer there");
        }
        values[k] = *x;
      }
      (*data)[o.name] = TensorData{o.type, Bytes(values, o.type.dtype)};
    }
    g.set_static_data(std::move(data));
  }
  MG_RETURN_IF_ERROR(InferShapes(g, bindings));
  return g;
}

}  // namespace memonger::graph
