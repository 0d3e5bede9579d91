#include "kernels/kernel_util.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/graph.h"
#include "util/status_macros.h"

namespace memonger::alloc::kernel_internal {

const graph::Attribute* FindAttr(const KernelArgs& args, absl::string_view name) {
  if (args.op == nullptr) return nullptr;
  for (const graph::Attribute& a : args.op->attrs) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

absl::Status UnsupportedDtype(const KernelArgs& args, graph::DataType dtype,
                              absl::string_view supported) {
  return absl::UnimplementedError(absl::StrCat(args.op->type, ": element type ",
                                               graph::DataTypeName(dtype),
                                               " is not supported (", supported, ")"));
}

absl::Status KernelError(const KernelArgs& args, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(args.op->type, ": ", message));
}

absl::Status KernelUnimplemented(const KernelArgs& args, absl::string_view message) {
  return absl::UnimplementedError(absl::StrCat(args.op->type, ": ", message));
}

absl::Status CheckArity(const KernelArgs& args, int min_inputs, int max_inputs, int min_outputs,
                        int max_outputs) {
  if (args.op == nullptr) return absl::InvalidArgumentError("kernel called without an op");
  const int n_in = static_cast<int>(args.inputs.size());
  const int n_out = static_cast<int>(args.outputs.size());
  if (args.input_types.size() != args.inputs.size() ||
      args.output_types.size() != args.outputs.size()) {
    return KernelError(args, "the kernel arguments have types for a different number of values");
  }
  auto range = [](int min, int max) {
    if (max < 0) return absl::StrCat("at least ", min);
    if (min == max) return absl::StrCat(min);
    return absl::StrCat(min, " to ", max);
  };
  if (n_in < min_inputs || (max_inputs >= 0 && n_in > max_inputs)) {
    return KernelError(args, absl::StrCat("takes ", range(min_inputs, max_inputs),
                                          " inputs, got ", n_in));
  }
  if (n_out < min_outputs || (max_outputs >= 0 && n_out > max_outputs)) {
    return KernelError(args, absl::StrCat("takes ", range(min_outputs, max_outputs),
                                          " outputs, got ", n_out));
  }
  for (const graph::TensorType* t : args.input_types) {
    if (t == nullptr) return KernelError(args, "an input has no type");
  }
  for (const graph::TensorType* t : args.output_types) {
    if (t == nullptr) return KernelError(args, "an output has no type");
  }
  return absl::OkStatus();
}

absl::Status CheckHost(const KernelArgs& args) {
  if (args.device != Device::kHost) {
    return absl::UnimplementedError(absl::StrCat(args.op->type, ": the CPU kernel cannot run on ",
                                                 DeviceName(args.device), " memory"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> IntAttr(const KernelArgs& args, absl::string_view name,
                                int64_t fallback) {
  MG_ASSIGN_OR_RETURN(std::optional<int64_t> v, OptionalIntAttr(args, name));
  return v.value_or(fallback);
}

absl::StatusOr<std::optional<int64_t>> OptionalIntAttr(const KernelArgs& args,
                                                       absl::string_view name) {
  const graph::Attribute* a = FindAttr(args, name);
  if (a == nullptr) return std::optional<int64_t>();
  if (const auto* i = std::get_if<int64_t>(&a->data)) return std::optional<int64_t>(*i);
  return KernelError(args, absl::StrCat("attribute '", name, "' must be an int"));
}

absl::StatusOr<double> FloatAttr(const KernelArgs& args, absl::string_view name,
                                 double fallback) {
  const graph::Attribute* a = FindAttr(args, name);
  if (a == nullptr) return fallback;
  if (const auto* f = std::get_if<double>(&a->data)) return *f;
  if (const auto* i = std::get_if<int64_t>(&a->data)) return static_cast<double>(*i);
  return KernelError(args, absl::StrCat("attribute '", name, "' must be a float"));
}

absl::StatusOr<std::optional<Dims>> IntsAttr(const KernelArgs& args, absl::string_view name) {
  const graph::Attribute* a = FindAttr(args, name);
  if (a == nullptr) return std::optional<Dims>();
  if (const auto* v = std::get_if<std::vector<int64_t>>(&a->data)) return std::optional<Dims>(*v);
  if (const auto* i = std::get_if<int64_t>(&a->data)) return std::optional<Dims>(Dims{*i});
  // A Caffe2 Argument with an empty `ints` list carries no field at all.
  if (std::holds_alternative<std::monostate>(a->data)) return std::optional<Dims>(Dims{});
  return KernelError(args, absl::StrCat("attribute '", name, "' must be a list of ints"));
}

absl::StatusOr<std::optional<std::string>> StringAttr(const KernelArgs& args,
                                                      absl::string_view name) {
  const graph::Attribute* a = FindAttr(args, name);
  if (a == nullptr) return std::optional<std::string>();
  if (const auto* s = std::get_if<std::string>(&a->data)) return std::optional<std::string>(*s);
  return KernelError(args, absl::StrCat("attribute '", name, "' must be a string"));
}

std::vector<int64_t> InputSlots(const KernelArgs& args) {
  const graph::Attribute* a = FindAttr(args, "onnx_input_slots");
  if (a != nullptr) {
    if (const auto* v = std::get_if<std::vector<int64_t>>(&a->data)) {
      if (v->size() == args.inputs.size()) return *v;
    }
  }
  std::vector<int64_t> slots(args.inputs.size());
  for (size_t i = 0; i < slots.size(); ++i) slots[i] = static_cast<int64_t>(i);
  return slots;
}

int FindInputSlot(const KernelArgs& args, int64_t slot) {
  const std::vector<int64_t> slots = InputSlots(args);
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i] == slot) return static_cast<int>(i);
  }
  return -1;
}

std::vector<int64_t> OutputSlots(const KernelArgs& args) {
  const graph::Attribute* a = FindAttr(args, "onnx_output_slots");
  if (a != nullptr) {
    if (const auto* v = std::get_if<std::vector<int64_t>>(&a->data)) {
      if (v->size() == args.outputs.size()) return *v;
    }
  }
  std::vector<int64_t> slots(args.outputs.size());
  for (size_t i = 0; i < slots.size(); ++i) slots[i] = static_cast<int64_t>(i);
  return slots;
}

int FindOutputSlot(const KernelArgs& args, int64_t slot) {
  const std::vector<int64_t> slots = OutputSlots(args);
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i] == slot) return static_cast<int>(i);
  }
  return -1;
}

int64_t NumElements(const Dims& dims) { return Product(dims, 0, dims.size()); }

int64_t Product(const Dims& dims, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= dims[i];
  return p;
}

int64_t Rank(const graph::TensorType& t) { return static_cast<int64_t>(t.dims.size()); }

absl::StatusOr<int64_t> NormalizeAxis(const KernelArgs& args, int64_t axis, int64_t rank,
                                      absl::string_view what, bool allow_end) {
  const int64_t limit = allow_end ? rank + 1 : rank;
  const int64_t a = axis < 0 ? axis + limit : axis;
  if (a < 0 || a >= limit) {
    return KernelError(args, absl::StrCat(what, " ", axis, " is out of range for rank ", rank));
  }
  return a;
}

Dims Strides(const Dims& dims) {
  Dims s(dims.size());
  int64_t stride = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    s[i] = stride;
    stride *= dims[i];
  }
  return s;
}

Dims BroadcastStrides(const Dims& in, const Dims& out) {
  Dims s(out.size(), 0);
  const Dims in_strides = Strides(in);
  const size_t offset = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    s[offset + i] = in[i] == 1 ? 0 : in_strides[i];
  }
  return s;
}

bool BroadcastsTo(const Dims& in, const Dims& out) {
  if (in.size() > out.size()) return false;
  const size_t offset = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != 1 && in[i] != out[offset + i]) return false;
  }
  return true;
}

absl::StatusOr<Dims> ReadInts(const KernelArgs& args, int input, absl::string_view what) {
  if (input < 0 || input >= static_cast<int>(args.inputs.size())) {
    return KernelError(args, absl::StrCat(what, " is missing"));
  }
  const graph::TensorType& t = *args.input_types[input];
  const int64_t n = NumElements(t.dims);
  Dims out(n);
  if (t.dtype == graph::DataType::kInt64) {
    if (n > 0) std::memcpy(out.data(), args.inputs[input], n * sizeof(int64_t));
  } else if (t.dtype == graph::DataType::kInt32) {
    for (int64_t i = 0; i < n; ++i) {
      int32_t v;
      std::memcpy(&v, args.inputs[input] + i * sizeof(int32_t), sizeof(v));
      out[i] = v;
    }
  } else {
    return KernelError(args, absl::StrCat(what, " must be int32 or int64, got ",
                                          graph::TensorTypeToString(t)));
  }
  return out;
}

int64_t ByteSizeOf(const graph::TensorType& t) {
  return NumElements(t.dims) * graph::DataTypeSize(t.dtype);
}

bool Overlaps(const std::byte* a, int64_t a_bytes, const std::byte* b, int64_t b_bytes) {
  if (a_bytes <= 0 || b_bytes <= 0) return false;
  return a < b + b_bytes && b < a + a_bytes;
}

absl::Status CheckNoOverlap(const KernelArgs& args, int in, int out) {
  if (!Overlaps(args.inputs[in], ByteSizeOf(*args.input_types[in]), args.outputs[out],
                ByteSizeOf(*args.output_types[out]))) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      args.op->type, ": output ", out, " shares memory with input ", in,
      ", which this kernel cannot compute in place (the plan must not alias them)"));
}

absl::Status CheckNoOverlapAll(const KernelArgs& args) {
  for (int in = 0; in < static_cast<int>(args.inputs.size()); ++in) {
    for (int out = 0; out < static_cast<int>(args.outputs.size()); ++out) {
      const absl::Status s = CheckNoOverlap(args, in, out);
      if (!s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

absl::Status CheckOutputsApart(const KernelArgs& args) {
  for (size_t i = 0; i < args.outputs.size(); ++i) {
    for (size_t j = i + 1; j < args.outputs.size(); ++j) {
      if (Overlaps(args.outputs[i], ByteSizeOf(*args.output_types[i]), args.outputs[j],
                   ByteSizeOf(*args.output_types[j]))) {
        return absl::FailedPreconditionError(
            absl::StrCat(args.op->type, ": outputs ", i, " and ", j, " share memory"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<MatMulGeometry> ResolveMatMulGeometry(const KernelArgs& args,
                                                     const graph::TensorType& ta,
                                                     const graph::TensorType& tb) {
  MatMulGeometry g;
  MG_ASSIGN_OR_RETURN(const int64_t trans_a, IntAttr(args, "trans_a", 0));
  MG_ASSIGN_OR_RETURN(const int64_t trans_b, IntAttr(args, "trans_b", 0));
  MG_ASSIGN_OR_RETURN(const std::optional<int64_t> axis_a, OptionalIntAttr(args, "axis_a"));
  MG_ASSIGN_OR_RETURN(const std::optional<int64_t> axis_b, OptionalIntAttr(args, "axis_b"));
  g.a = ta.dims;
  g.b = tb.dims;
  g.trans_a = trans_a != 0;
  g.trans_b = trans_b != 0;
  if (g.a.empty() || g.b.empty()) return KernelError(args, "operands must have rank >= 1");
  if (axis_a.has_value() || axis_b.has_value()) {
    // Caffe2 MatMul: each operand flattened into a matrix at its axis first.
    MG_ASSIGN_OR_RETURN(const int64_t ax_a,
                        NormalizeAxis(args, axis_a.value_or(1), Rank(ta), "axis_a"));
    MG_ASSIGN_OR_RETURN(const int64_t ax_b,
                        NormalizeAxis(args, axis_b.value_or(1), Rank(tb), "axis_b"));
    g.a = {Product(ta.dims, 0, ax_a), Product(ta.dims, ax_a, ta.dims.size())};
    g.b = {Product(tb.dims, 0, ax_b), Product(tb.dims, ax_b, tb.dims.size())};
  }
  if (g.a.size() == 1) {
    g.a.insert(g.a.begin(), 1);
    g.trans_a = false;
  }
  if (g.b.size() == 1) {
    g.b.push_back(1);
    g.trans_b = false;
  }
  g.m = g.trans_a ? g.cols_a() : g.rows_a();
  g.k = g.trans_a ? g.rows_a() : g.cols_a();
  g.n = g.trans_b ? g.rows_b() : g.cols_b();
  const int64_t k_b = g.trans_b ? g.cols_b() : g.rows_b();
  if (g.k != k_b) {
    return KernelError(args, absl::StrCat("inner dimensions differ: K=", g.k, " and K=", k_b));
  }
  const Dims batch_a(g.a.begin(), g.a.end() - 2), batch_b(g.b.begin(), g.b.end() - 2);
  const size_t rank = std::max(batch_a.size(), batch_b.size());
  g.batch.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i + batch_a.size() >= rank ? batch_a[i + batch_a.size() - rank] : 1;
    const int64_t db = i + batch_b.size() >= rank ? batch_b[i + batch_b.size() - rank] : 1;
    if (da != db && da != 1 && db != 1) {
      return KernelError(args, "the operands' batch dims do not broadcast");
    }
    g.batch[i] = da == 1 ? db : da;
  }
  g.stride_a = BroadcastStrides(batch_a, g.batch);
  g.stride_b = BroadcastStrides(batch_b, g.batch);
  return g;
}

absl::StatusOr<TransposeGeometry> ResolveTranspose(const KernelArgs& args,
                                                   const graph::TensorType& x) {
  const int64_t rank = Rank(x);
  MG_ASSIGN_OR_RETURN(std::optional<Dims> perm, IntsAttr(args, "perm"));
  if (!perm.has_value()) {
    MG_ASSIGN_OR_RETURN(perm, IntsAttr(args, "axes"));
  }
  Dims p(static_cast<size_t>(rank));
  if (!perm.has_value() || perm->empty()) {
    for (int64_t i = 0; i < rank; ++i) p[i] = rank - 1 - i;
  } else {
    if (static_cast<int64_t>(perm->size()) != rank) {
      return KernelError(args, "perm has the wrong length");
    }
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    for (int64_t i = 0; i < rank; ++i) {
      const int64_t v = (*perm)[i] < 0 ? (*perm)[i] + rank : (*perm)[i];
      if (v < 0 || v >= rank || seen[v]) return KernelError(args, "perm is not a permutation");
      seen[v] = true;
      p[i] = v;
    }
  }
  TransposeGeometry g;
  g.out_dims.resize(static_cast<size_t>(rank));
  g.in_strides.resize(static_cast<size_t>(rank));
  const Dims own = Strides(x.dims);
  for (int64_t i = 0; i < rank; ++i) {
    g.out_dims[i] = x.dims[p[i]];
    g.in_strides[i] = own[p[i]];
  }
  return g;
}

absl::StatusOr<AlibiGeometry> ResolveAlibi(const KernelArgs& args) {
  const graph::TensorType& coords = *args.input_types[0];
  const graph::TensorType& out = *args.output_types[0];
  MG_ASSIGN_OR_RETURN(const std::optional<int64_t> heads, OptionalIntAttr(args, "heads"));
  AlibiGeometry g;
  MG_ASSIGN_OR_RETURN(g.cls, IntAttr(args, "cls", 1));
  MG_ASSIGN_OR_RETURN(const int64_t pad, IntAttr(args, "pad", 0));
  if (!heads.has_value() || *heads <= 0) {
    return KernelError(args, "attribute 'heads' (a positive int) is required");
  }
  if (g.cls < 0 || pad < 0) return KernelError(args, "cls and pad must not be negative");
  if (coords.dims.size() != 2 || coords.dims[1] != 2) {
    return KernelError(args, absl::StrCat("coords must be [N, 2], got ",
                                          graph::TensorTypeToString(coords)));
  }
  if (coords.dtype != graph::DataType::kInt64 && coords.dtype != graph::DataType::kFloat32) {
    return UnsupportedDtype(args, coords.dtype, "coords: int64, float32");
  }
  g.heads = *heads;
  g.n = coords.dims[0];
  g.l = g.n + g.cls;
  g.lp = pad == 0 ? g.l : (g.l + pad - 1) / pad * pad;
  const Dims expected{1, g.heads, g.l, g.lp};
  if (out.dims != expected) {
    return KernelError(args, absl::StrCat("bias must be ", graph::DimsToString(expected),
                                          ", the output is ", graph::TensorTypeToString(out)));
  }
  return g;
}

absl::StatusOr<FcDims> ResolveFcDims(const KernelArgs& args, const graph::TensorType& x,
                                     const graph::TensorType& w, bool transposed) {
  MG_ASSIGN_OR_RETURN(const int64_t axis_attr, IntAttr(args, "axis", 1));
  MG_ASSIGN_OR_RETURN(const int64_t axis_w_attr, IntAttr(args, "axis_w", 1));
  MG_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(args, axis_attr, Rank(x), "axis"));
  MG_ASSIGN_OR_RETURN(const int64_t axis_w, NormalizeAxis(args, axis_w_attr, Rank(w), "axis_w"));
  FcDims dims;
  dims.m = Product(x.dims, 0, axis);
  dims.k = Product(x.dims, axis, x.dims.size());
  const int64_t w_front = Product(w.dims, 0, axis_w);
  const int64_t w_back = Product(w.dims, axis_w, w.dims.size());
  dims.n = transposed ? w_back : w_front;
  if ((transposed ? w_front : w_back) != dims.k) {
    return KernelError(args, absl::StrCat("X has K=", dims.k, " but W does not"));
  }
  return dims;
}

}  // namespace memonger::alloc::kernel_internal
