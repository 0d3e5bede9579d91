#include "graph/shape_inference.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "graph/dim_expr.h"
#include "util/limits.h"
#include "util/status_macros.h"

namespace memonger::graph {
namespace {

absl::StatusOr<std::pair<std::string, std::string>> SplitBinding(absl::string_view text,
                                                                  absl::string_view form) {
  const size_t eq = text.find('=');
  if (eq == absl::string_view::npos || eq == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed binding '", util::Quote(text), "': expected ", form));
  }
  return std::make_pair(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
}

absl::StatusOr<int64_t> ParseSize(absl::string_view number, absl::string_view text) {
  int64_t size = 0;
  if (!absl::SimpleAtoi(number, &size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed binding '", util::Quote(text), "': '", util::Quote(number),
                     "' is not an integer"));
  }
  if (size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed binding '", util::Quote(text), "': negative dimension ", size));
  }
  return size;
}

absl::Status CheckBytes(const Value& v) {
  return ValueByteSize(v).status();
}

// The type a value's declaration gives, when it declares both a dtype and dims that resolve.
// nullopt when the declaration is incomplete. `unified` sizes the symbols that only op outputs
// declare (DeclarationChecker::sizes).
absl::StatusOr<std::optional<TensorType>> DeclaredType(
    const Value& v, const ShapeBindings& bindings,
    const std::map<std::string, int64_t>& unified = {}) {
  if (!v.declared.dims.has_value() || v.declared.dtype == DataType::kUndefined) {
    return std::optional<TensorType>();
  }
  ShapeBindings with_unified;
  const ShapeBindings* resolve = &bindings;
  if (!unified.empty()) {
    with_unified = bindings;
    for (const auto& [symbol, size] : unified) with_unified.dims.emplace(symbol, size);
    resolve = &with_unified;
  }
  MG_ASSIGN_OR_RETURN(std::vector<int64_t> dims,
                      ResolveDims(*v.declared.dims, *resolve,
                                  absl::StrCat("value '", v.DisplayName(), "'")));
  return std::optional<TensorType>(TensorType{v.declared.dtype, std::move(dims)});
}

// What an op output's declaration says, checked against what the op computes. A declared
// number, or a symbol that --dim, --input-shape or a graph input's binding sized, must agree. A
// plain symbol nothing sized yet (an exporter's own name for an output dim, such as
// 'Gemmoutput_dim_0', or tf2onnx's 'unk__315') names whatever the op computes there: it is
// unified with that size, and a later value declaring the same symbol must then agree with it.
// A declared expression whose symbols are not all sized states nothing checkable and is
// skipped. InvalidArgument naming the op, the value, the dim and both sizes on a disagreement.
class DeclarationChecker {
 public:
  explicit DeclarationChecker(const ShapeBindings& bindings) : bindings_(bindings) {}

  absl::Status Check(const Op& op, const Value& v, const TensorType& computed) {
    if (!v.declared.dims.has_value() || v.declared.dtype == DataType::kUndefined) {
      return absl::OkStatus();
    }
    const DeclaredDims& declared = *v.declared.dims;
    auto contradiction = [&](std::string why) {
      return absl::InvalidArgumentError(absl::StrCat(
          op.Label(), ": output '", v.DisplayName(), "' is declared ", DeclaredText(v),
          " but the op produces ", TensorTypeToString(computed), why.empty() ? "" : " (",
          why, why.empty() ? "" : ")"));
    };
    if (v.declared.dtype != computed.dtype || declared.size() != computed.dims.size()) {
      return contradiction("");
    }
    for (size_t k = 0; k < declared.size(); ++k) {
      const DeclaredDim& d = declared[k];
      const int64_t size = computed.dims[k];
      if (d.symbol.empty()) {
        if (d.size != size) return contradiction(absl::StrCat("dim ", k));
        continue;
      }
      const std::string symbol = d.symbol.str();
      if (auto it = bindings_.dims.find(symbol); it != bindings_.dims.end()) {
        if (it->second != size) {
          return contradiction(absl::StrCat("dim ", k, " is '", symbol, "', bound to ",
                                            it->second));
        }
        continue;
      }
      if (!IsSymbolName(symbol)) {
        absl::StatusOr<DimExpr> expr = ParseDimExpr(symbol);
        if (expr.ok()) {
          std::map<std::string, int64_t> sizes = bindings_.dims;
          for (const auto& [s, u] : unified_) sizes.emplace(s, u.size);
          absl::StatusOr<int64_t> value = expr->Evaluate(sizes);
          if (value.ok() && *value != size) {
            return contradiction(absl::StrCat("dim ", k, " '", symbol, "' is ", *value));
          }
          continue;  // an expression of symbols nothing sized: nothing to check
        }
      }
      auto [it, inserted] = unified_.emplace(symbol, Unified{size, v.DisplayName()});
      if (!inserted && it->second.size != size) {
        return contradiction(absl::StrCat("dim ", k, " is '", symbol, "', which '",
                                          it->second.value, "' declares too and where ",
                                          it->second.size, " was computed"));
      }
    }
    return absl::OkStatus();
  }

  std::map<std::string, int64_t> sizes() const {
    std::map<std::string, int64_t> out;
    for (const auto& [symbol, u] : unified_) out.emplace(symbol, u.size);
    return out;
  }

 private:
  static std::string DeclaredText(const Value& v) {
    std::vector<std::string> dims;
    for (const DeclaredDim& d : *v.declared.dims) {
      dims.push_back(d.symbol.empty() ? absl::StrCat(d.size) : d.symbol.str());
    }
    return absl::StrCat(DataTypeName(v.declared.dtype), "[", absl::StrJoin(dims, ","), "]");
  }

  struct Unified {
    int64_t size;
    std::string value;  // the first value that declared the symbol
  };
  const ShapeBindings& bindings_;
  std::map<std::string, Unified> unified_;
};

// Caffe2's Concat gradient: Split(dY, split_info) where split_info is output 1 of the forward
// Concat, the widths of its inputs along its axis. Those widths are known from the Concat's
// input types, so the Split gets them as its 'split' attribute (memonger, without them,
// counted the pieces as size 0). nullopt when the op is not such a Split.
std::optional<std::vector<int64_t>> SplitSizesFromSplitInfo(const Graph& graph, const Op& op) {
  if (op.type != "Split" || op.inputs.size() < 2 || op.attributes().Has("split")) return {};
  const Value& info = graph.value(op.inputs[1]);
  if (info.producer == kNone) return {};
  const Op& concat = graph.op(info.producer);
  if (concat.type != "Concat" || concat.outputs.size() < 2 || concat.outputs[1] != op.inputs[1]) {
    return {};
  }
  std::vector<int64_t> sizes;
  const AttributeView attrs = concat.attributes();
  const bool add_axis = attrs.GetInt("add_axis").value_or(0) != 0;
  for (ValueId in : concat.inputs) {
    const Value& v = graph.value(in);
    if (!v.type.has_value()) return {};
    const int64_t rank = static_cast<int64_t>(v.type->dims.size());
    if (add_axis) {
      sizes.push_back(1);
      continue;
    }
    int64_t axis = attrs.GetInt("axis").value_or(
        attrs.GetString("order").value_or("NCHW") == "NHWC" ? rank - 1 : 1);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return {};
    sizes.push_back(v.type->dims[axis]);
  }
  return sizes;
}

absl::Status TypeGraphInput(Value& v, DataType dtype, const ShapeBindings& bindings) {
  const std::string what = absl::StrCat("graph input '", v.name, "'");
  if (auto it = bindings.inputs.find(v.name); it != bindings.inputs.end()) {
    v.type = TensorType{dtype, it->second};
  } else if (v.declared.dims.has_value()) {
    MG_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ResolveDims(*v.declared.dims, bindings, what));
    v.type = TensorType{dtype, std::move(dims)};
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " has no shape: declare it in the net (value_info) or pass --input-shape ", v.name,
        "=D0,D1,..."));
  }
  return CheckBytes(v);
}

}  // namespace

absl::Status SymbolSizes::Bind(const std::string& input, size_t k, const std::string& symbol,
                               int64_t size) {
  auto it = sizes_.find(symbol);
  if (it != sizes_.end() && it->second != size) {
    auto source = source_.find(symbol);
    const std::string other = source != source_.end()
                                  ? absl::StrCat("--input-shape ", source->second)
                                  : absl::StrCat("--dim ", symbol, "=", it->second);
    return absl::InvalidArgumentError(absl::StrCat(
        "--input-shape ", input, " gives symbolic dimension '", symbol, "' (dim ", k,
        " of graph input '", input, "') the size ", size, ", but ", other, " gives ",
        it->second));
  }
  sizes_[symbol] = size;
  source_[symbol] = input;
  return absl::OkStatus();
}

absl::Status ParseDimBinding(absl::string_view text, ShapeBindings& bindings) {
  MG_ASSIGN_OR_RETURN(auto parts, SplitBinding(text, "SYMBOL=VALUE, e.g. N=18001"));
  MG_ASSIGN_OR_RETURN(int64_t size, ParseSize(parts.second, text));
  if (auto it = bindings.dims.find(parts.first); it != bindings.dims.end()) {
    return absl::InvalidArgumentError(absl::StrCat("--dim ", util::Quote(parts.first),
                                                   " is given twice (", it->second, " and ",
                                                   size, ")"));
  }
  bindings.dims[parts.first] = size;
  return absl::OkStatus();
}

absl::Status ParseInputShapeBinding(absl::string_view text, ShapeBindings& bindings) {
  MG_ASSIGN_OR_RETURN(auto parts, SplitBinding(text, "NAME=D0,D1,..., e.g. x=1,3,224,224"));
  std::vector<int64_t> dims;
  if (!parts.second.empty()) {
    for (absl::string_view d : absl::StrSplit(parts.second, ',')) {
      MG_ASSIGN_OR_RETURN(int64_t size, ParseSize(absl::StripAsciiWhitespace(d), text));
      dims.push_back(size);
    }
  }
  if (bindings.inputs.count(parts.first) > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--input-shape ", util::Quote(parts.first), " is given twice"));
  }
  bindings.inputs[parts.first] = std::move(dims);
  return absl::OkStatus();
}

absl::Status ParseInputTypeBinding(absl::string_view text, ShapeBindings& bindings) {
  MG_ASSIGN_OR_RETURN(auto parts, SplitBinding(text, "NAME=DTYPE, e.g. label=int32"));
  absl::StatusOr<DataType> dtype = ParseDataType(parts.second);
  if (!dtype.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("malformed binding '", util::Quote(text),
                                                   "': ", dtype.status().message()));
  }
  if (bindings.input_types.count(parts.first) > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--input-type ", util::Quote(parts.first), " is given twice"));
  }
  bindings.input_types[parts.first] = *dtype;
  return absl::OkStatus();
}

absl::StatusOr<DataType> GraphInputDtype(const Graph& graph, ValueId input,
                                         const ShapeBindings& bindings,
                                         const OpSchemaTable& schemas) {
  const Value& v = graph.value(input);
  if (auto it = bindings.input_types.find(v.name); it != bindings.input_types.end()) {
    return it->second;
  }
  if (v.declared.dtype != DataType::kUndefined) return v.declared.dtype;
  // The types every reader allows, in the first constraining reader's order of preference.
  std::optional<std::vector<DataType>> allowed;
  const Op* first_reader = nullptr;
  int first_slot = 0;
  for (OpId reader : graph.consumers(input)) {
    const Op& op = graph.op(reader);
    const OpSchema* schema = schemas.Find(op.type);
    // Only the few schemas that fix an input's type are scanned (a Sum over thousands of
    // inputs is not).
    if (schema == nullptr || schema->typed_inputs.empty()) continue;
    for (size_t slot = 0; slot < op.inputs.size(); ++slot) {
      if (op.inputs[slot] != input) continue;
      const std::vector<DataType>* types =
          schema->AllowedInputTypes(static_cast<int>(slot), op.attributes());
      if (types == nullptr) continue;
      if (!allowed.has_value()) {
        allowed = *types;
        first_reader = &op;
        first_slot = static_cast<int>(slot);
        continue;
      }
      std::vector<DataType> common;
      for (DataType t : *allowed) {
        if (std::find(types->begin(), types->end(), t) != types->end()) common.push_back(t);
      }
      if (common.empty()) {
        auto names = [](const std::vector<DataType>& list) {
          std::vector<std::string> out;
          for (DataType t : list) out.emplace_back(DataTypeName(t));
          return absl::StrJoin(out, " or ");
        };
        return absl::InvalidArgumentError(absl::StrCat(
            "graph input '", util::Quote(v.name), "' declares no type, and its readers disagree: ",
            first_reader->Label(), " takes ", names(*allowed), " as input ", first_slot, ", ",
            op.Label(), " takes ", names(*types), " as input ", slot,
            " (declare it with --input-type ", util::Quote(v.name), "=DTYPE)"));
      }
      allowed = std::move(common);
    }
  }
  return allowed.has_value() ? allowed->front() : DataType::kFloat32;
}

std::vector<std::string> InputsWithoutShape(const Graph& graph, const ShapeBindings& bindings) {
  std::vector<std::string> names;
  for (ValueId id : graph.inputs()) {
    const Value& v = graph.value(id);
    if (v.type.has_value() || v.declared.dims.has_value() || bindings.inputs.count(v.name) > 0) {
      continue;
    }
    names.push_back(v.name);
  }
  return names;
}

absl::Status CheckDimsUsed(const std::set<std::string>& symbols, const ShapeBindings& bindings) {
  for (const auto& [symbol, size] : bindings.dims) {
    if (symbols.count(symbol) > 0) continue;
    // Named without a size: --fit binds its symbol at trial sizes and --dim LO..HI at its
    // bounds, so "--dim Q=1" would name a flag the user did not give.
    return absl::InvalidArgumentError(absl::StrCat(
        "symbol '", util::Quote(symbol),
        "' (--dim or --fit): the model has no symbolic dimension '", util::Quote(symbol),
        "' (its symbols: ",
        symbols.empty() ? "none" : util::Quote(absl::StrJoin(symbols, ", ")), ")"));
  }
  return absl::OkStatus();
}

std::set<std::string> DeclaredSymbols(const Graph& graph) {
  std::set<std::string> symbols;
  for (ValueId id = 0; id < graph.num_values(); ++id) {
    const Value& v = graph.value(id);
    if (!v.declared.dims.has_value()) continue;
    for (const DeclaredDim& d : *v.declared.dims) {
      if (d.symbol.empty()) continue;
      const std::string& symbol = d.symbol;
      // A dim may be declared as an expression of symbols ("n + 1"); its symbols are the
      // model's. Text that is no expression is one opaque symbol (an ONNX dim_param "?").
      absl::StatusOr<DimExpr> expr = ParseDimExpr(symbol);
      if (!expr.ok() || IsSymbolName(symbol)) {
        symbols.insert(symbol);
        continue;
      }
      for (std::string& s : expr->Symbols()) symbols.insert(std::move(s));
    }
  }
  return symbols;
}

absl::StatusOr<std::vector<int64_t>> ResolveDims(absl::Span<const DeclaredDim> dims,
                                                 const ShapeBindings& bindings,
                                                 absl::string_view what) {
  std::vector<int64_t> out;
  out.reserve(dims.size());
  for (const DeclaredDim& d : dims) {
    if (d.symbol.empty()) {
      if (d.size < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": negative dimension ", d.size, " in its declared shape"));
      }
      out.push_back(d.size);
      continue;
    }
    const std::string& symbol = d.symbol;
    auto it = bindings.dims.find(symbol);
    if (it == bindings.dims.end() && !IsSymbolName(symbol)) {
      if (absl::StatusOr<DimExpr> expr = ParseDimExpr(symbol); expr.ok()) {
        absl::StatusOr<int64_t> size = expr->Evaluate(bindings.dims);
        if (!size.ok()) {
          return absl::InvalidArgumentError(absl::StrCat(what, ": declared dimension '", symbol,
                                                         "': ", size.status().message()));
        }
        if (*size < 0) {
          return absl::InvalidArgumentError(absl::StrCat(what, ": declared dimension '", symbol,
                                                         "' is ", *size, ", negative"));
        }
        out.push_back(*size);
        continue;
      }
    }
    if (it == bindings.dims.end()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": symbolic dimension '", symbol,
                                                     "' is unbound; pass --dim ", symbol,
                                                     "=VALUE"));
    }
    out.push_back(it->second);
  }
  return out;
}

absl::StatusOr<std::vector<TensorType>> RunShapeFunction(const Graph& graph, const Op& op,
                                                         const OpSchema& schema,
                                                         std::vector<TensorType> inputs) {
  const int n_in = static_cast<int>(op.inputs.size());
  const int n_out = static_cast<int>(op.outputs.size());
  if (n_in < schema.min_inputs || (schema.max_inputs >= 0 && n_in > schema.max_inputs) ||
      n_out < schema.min_outputs || (schema.max_outputs >= 0 && n_out > schema.max_outputs)) {
    return absl::InvalidArgumentError(absl::StrCat(
        op.Label(), " has ", n_in, " inputs and ", n_out, " outputs; ", op.type, " takes ",
        schema.min_inputs, "..", schema.max_inputs < 0 ? "n" : absl::StrCat(schema.max_inputs),
        " inputs and ", schema.min_outputs, "..",
        schema.max_outputs < 0 ? "n" : absl::StrCat(schema.max_outputs), " outputs"));
  }
  // A Concat gradient's Split learns its sizes from the forward Concat's inputs.
  std::vector<Attribute> with_split;
  if (std::optional<std::vector<int64_t>> sizes = SplitSizesFromSplitInfo(graph, op)) {
    with_split = op.attrs;
    with_split.push_back(Attribute{"split", *std::move(sizes)});
  }
  ShapeContext context{op.type, op.name, std::move(inputs), n_out,
                       with_split.empty() ? op.attributes() : AttributeView(with_split)};
  MG_ASSIGN_OR_RETURN(std::vector<TensorType> inferred, schema.infer(context));
  if (static_cast<int>(inferred.size()) != n_out) {
    return absl::InternalError(absl::StrCat(op.Label(), ": shape function returned ",
                                            inferred.size(), " types for ", n_out, " outputs"));
  }
  return inferred;
}

absl::Status InferShapes(Graph& graph, const ShapeBindings& bindings,
                         const OpSchemaTable& schemas) {
  // An --input-shape replaces the input's declared dims (a fixed batch of 1 may be planned at
  // 64), but must keep its rank, and a symbolic dim it sizes must agree with --dim and with
  // the other --input-shape bindings, as for ONNX models (onnx_import.cc).
  SymbolSizes symbols(bindings);
  for (const auto& [name, dims] : bindings.inputs) {
    auto id = graph.FindVersions(name);
    if (id.empty() || graph.value(id.front()).producer != kNone) {
      return absl::InvalidArgumentError(
          absl::StrCat("--input-shape names '", name, "', which is not a graph input"));
    }
    const Value& v = graph.value(id.front());
    if (!v.declared.dims.has_value()) continue;
    const DeclaredDims& declared = *v.declared.dims;
    if (declared.size() != dims.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--input-shape ", name, "=", absl::StrJoin(dims, ","), " has rank ", dims.size(),
          " but graph input '", name, "' is declared with rank ", declared.size()));
    }
    for (size_t k = 0; k < declared.size(); ++k) {
      if (declared[k].symbol.empty()) continue;
      MG_RETURN_IF_ERROR(symbols.Bind(name, k, declared[k].symbol.str(), dims[k]));
    }
  }
  for (const auto& [name, dtype] : bindings.input_types) {
    auto id = graph.FindVersions(name);
    if (id.empty() || graph.value(id.front()).producer != kNone) {
      return absl::InvalidArgumentError(absl::StrCat("--input-type names '", util::Quote(name),
                                                     "', which is not a graph input"));
    }
  }
  for (ValueId id : graph.inputs()) {
    if (graph.value(id).type.has_value()) continue;
    MG_ASSIGN_OR_RETURN(DataType dtype, GraphInputDtype(graph, id, bindings, schemas));
    MG_RETURN_IF_ERROR(TypeGraphInput(graph.mutable_value(id), dtype, bindings));
  }

  DeclarationChecker declarations(bindings);
  for (OpId op_id : graph.TopologicalOrder()) {
    const Op& op = graph.op(op_id);
    // Outputs typed already (by an importer, from the file) are inferred again where a shape
    // function exists: a type the file states is never trusted over the op's own rule.
    const OpSchema* schema = schemas.Find(op.type);
    bool all_typed = true;
    for (ValueId out : op.outputs) all_typed = all_typed && graph.value(out).type.has_value();
    if (all_typed && schema == nullptr) continue;
    std::vector<TensorType> inferred;
    if (schema != nullptr) {
      std::vector<TensorType> inputs;
      inputs.reserve(op.inputs.size());
      for (ValueId in : op.inputs) {
        const Value& v = graph.value(in);
        if (!v.type.has_value()) {
          return absl::InternalError(absl::StrCat(op.Label(), ": input '", v.DisplayName(),
                                                  "' has no type before the op is inferred"));
        }
        inputs.push_back(*v.type);
      }
      absl::StatusOr<std::vector<TensorType>> result =
          RunShapeFunction(graph, op, *schema, std::move(inputs));
      if (!result.ok() && result.status().code() == absl::StatusCode::kUnimplemented) {
        // The shape depends on tensor values the function cannot see (a Reshape fed by a
        // tensor, ...): the outputs' declarations decide, as for an op without a schema.
        schema = nullptr;
      } else {
        MG_ASSIGN_OR_RETURN(inferred, std::move(result));
      }
    }

    for (size_t k = 0; k < op.outputs.size(); ++k) {
      Value& v = graph.mutable_value(op.outputs[k]);
      if (schema == nullptr) {
        if (v.type.has_value()) {
          MG_RETURN_IF_ERROR(declarations.Check(op, v, *v.type));
          continue;
        }
        MG_ASSIGN_OR_RETURN(std::optional<TensorType> declared,
                            DeclaredType(v, bindings, declarations.sizes()));
        if (!declared.has_value()) {
          const bool has_schema = schemas.Find(op.type) != nullptr;
          return absl::UnimplementedError(absl::StrCat(
              op.Label(), ": ",
              has_schema ? "the output shapes of this op depend on tensor values, and"
                         : absl::StrCat("op type '", op.type, "' has no shape function and"),
              " its output '", v.DisplayName(),
              "' declares no dtype and shape (add a value_info for it)"));
        }
        v.type = *declared;
      } else {
        MG_RETURN_IF_ERROR(declarations.Check(op, v, inferred[k]));
        if (v.type.has_value() && *v.type != inferred[k]) {
          return absl::InvalidArgumentError(absl::StrCat(
              op.Label(), ": output '", v.DisplayName(), "' has type ",
              TensorTypeToString(*v.type), " but the op produces ",
              TensorTypeToString(inferred[k])));
        }
        v.type = inferred[k];
      }
      MG_RETURN_IF_ERROR(CheckBytes(v));
      if (v.inplace_of != kNone) {
        const Value& base = graph.value(v.inplace_of);
        const int64_t base_bytes = *ByteSize(*base.type, "");
        const int64_t bytes = *ByteSize(*v.type, "");
        if (bytes != base_bytes) {
          return absl::InvalidArgumentError(absl::StrCat(
              op.Label(), " writes '", v.name, "' in place, but its result ",
              TensorTypeToString(*v.type), " does not have the size of the input ",
              TensorTypeToString(*base.type)));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace memonger::graph
