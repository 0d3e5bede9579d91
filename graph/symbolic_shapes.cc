#include "graph/symbolic_shapes.h"

#include <algorithm>
#include <optional>
#include <random>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/schema_util.h"
#include "graph/tensor_type.h"
#include "util/status_macros.h"

namespace memonger::graph {

namespace {

using ExprDims = std::vector<DimExpr>;

// The most distinct dim expressions the observed rule matches data-carried dims against.
constexpr size_t kMaxDimPool = 1024;

std::string DimsText(const ExprDims& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ", ", [](std::string* out, const DimExpr& d) {
                        out->append(d.ToString());
                      }), "]");
}

bool AllConstant(const ExprDims& dims) {
  return std::all_of(dims.begin(), dims.end(), [](const DimExpr& d) { return d.IsConstant(); });
}

ExprDims ConstantDims(const std::vector<int64_t>& dims) {
  ExprDims out;
  out.reserve(dims.size());
  for (int64_t d : dims) out.push_back(DimExpr::Constant(d));
  return out;
}

absl::StatusOr<std::vector<int64_t>> EvaluateDims(const ExprDims& dims,
                                                  const SymbolBindings& at) {
  std::vector<int64_t> out;
  out.reserve(dims.size());
  for (const DimExpr& d : dims) {
    MG_ASSIGN_OR_RETURN(int64_t v, d.Evaluate(at));
    if (v < 0) {
      return absl::InvalidArgumentError(absl::StrCat(d.ToString(), " is negative (", v, ")"));
    }
    out.push_back(v);
  }
  return out;
}

absl::StatusOr<DimExpr> Product(const ExprDims& dims, size_t begin, size_t end) {
  DimExpr p = DimExpr::Constant(1);
  for (size_t i = begin; i < end; ++i) {
    MG_ASSIGN_OR_RETURN(p, Mul(p, dims[i]));
  }
  return p;
}

// One op's symbolic inputs, for the rules below.
struct OpInputs {
  const Graph& graph;
  const Op& op;
  std::vector<const ExprDims*> dims;  // per input
  const std::vector<ExprDims>& all;   // per value, for rules that look further back
};

absl::Status NotExpressible(absl::string_view why) { return absl::InvalidArgumentError(why); }

int64_t Rank(const OpInputs& in, int k) { return static_cast<int64_t>(in.dims[k]->size()); }

absl::StatusOr<int64_t> Axis(int64_t axis, int64_t rank) {
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return NotExpressible(absl::StrCat("axis out of range"));
  return axis;
}

int64_t Caffe2DefaultAxis(const AttributeView& attrs) {
  if (std::optional<int64_t> axis = attrs.GetInt("axis")) return *axis;
  return attrs.GetString("order").value_or("NCHW") == "NHWC" ? 3 : 1;
}

absl::StatusOr<std::vector<ExprDims>> ReshapeRule(const OpInputs& in) {
  const std::optional<std::vector<int64_t>> shape = in.op.attributes().GetInts("shape");
  if (!shape.has_value()) return NotExpressible("the target shape is not an attribute");
  const ExprDims& x = *in.dims[0];
  const bool allowzero = in.op.attributes().GetInt("allowzero", 0) != 0;
  ExprDims out(shape->size());
  std::optional<size_t> inferred;
  DimExpr known = DimExpr::Constant(1);
  for (size_t i = 0; i < shape->size(); ++i) {
    const int64_t d = (*shape)[i];
    if (d == -1) {
      inferred = i;
      continue;
    }
    out[i] = d == 0 && !allowzero && i < x.size() ? x[i] : DimExpr::Constant(d);
    MG_ASSIGN_OR_RETURN(known, Mul(known, out[i]));
  }
  MG_ASSIGN_OR_RETURN(DimExpr count, Product(x, 0, x.size()));
  if (inferred.has_value()) {
    MG_ASSIGN_OR_RETURN(out[*inferred], ExactDivide(count, known));
  } else if (known != count) {
    return NotExpressible(absl::StrCat("the target has ", known.ToString(),
                                       " elements and the input ", count.ToString()));
  }
  std::vector<ExprDims> result{out};
  if (in.op.outputs.size() == 2) result.push_back({DimExpr::Constant(Rank(in, 0))});
  return result;
}

absl::StatusOr<std::vector<ExprDims>> FlattenRule(const OpInputs& in) {
  const ExprDims& x = *in.dims[0];
  int64_t axis = in.op.attributes().GetInt("axis", 1);
  if (axis < 0) axis += Rank(in, 0);
  if (axis < 0 || axis > Rank(in, 0)) return NotExpressible("axis out of range");
  MG_ASSIGN_OR_RETURN(DimExpr outer, Product(x, 0, axis));
  MG_ASSIGN_OR_RETURN(DimExpr inner, Product(x, axis, x.size()));
  return std::vector<ExprDims>{{outer, inner}};
}

absl::StatusOr<std::vector<ExprDims>> FlattenToVecRule(const OpInputs& in) {
  MG_ASSIGN_OR_RETURN(DimExpr all, Product(*in.dims[0], 0, in.dims[0]->size()));
  return std::vector<ExprDims>{{all}};
}

absl::StatusOr<std::vector<ExprDims>> ConcatRule(const OpInputs& in) {
  const AttributeView attrs = in.op.attributes();
  const int64_t n = static_cast<int64_t>(in.dims.size());
  ExprDims y = *in.dims[0];
  if (attrs.GetInt("add_axis", 0) != 0) {
    MG_ASSIGN_OR_RETURN(int64_t axis, Axis(Caffe2DefaultAxis(attrs), Rank(in, 0) + 1));
    y.insert(y.begin() + axis, DimExpr::Constant(n));
  } else {
    MG_ASSIGN_OR_RETURN(int64_t axis, Axis(Caffe2DefaultAxis(attrs), Rank(in, 0)));
    for (int64_t i = 1; i < n; ++i) {
      if (Rank(in, i) != Rank(in, 0)) return NotExpressible("inputs of different ranks");
      MG_ASSIGN_OR_RETURN(y[axis], Add(y[axis], (*in.dims[i])[axis]));
    }
  }
  std::vector<ExprDims> result{y};
  if (in.op.outputs.size() == 2) result.push_back({DimExpr::Constant(n)});
  return result;
}

// The widths along the forward Concat's axis, when `op` is the Split of a Concat gradient
// (graph/shape_inference.cc gives the concrete Split the same sizes).
std::optional<ExprDims> SplitSizesFromConcat(const OpInputs& in) {
  const Op& op = in.op;
  if (op.inputs.size() < 2 || op.attributes().Has("split")) return std::nullopt;
  const Value& info = in.graph.value(op.inputs[1]);
  if (info.producer == kNone) return std::nullopt;
  const Op& concat = in.graph.op(info.producer);
  if (concat.type != "Concat" || concat.outputs.size() < 2 || concat.outputs[1] != op.inputs[1]) {
    return std::nullopt;
  }
  const AttributeView attrs = concat.attributes();
  ExprDims sizes;
  for (ValueId v : concat.inputs) {
    const ExprDims& dims = in.all[v];
    if (attrs.GetInt("add_axis", 0) != 0) {
      sizes.push_back(DimExpr::Constant(1));
      continue;
    }
    absl::StatusOr<int64_t> axis =
        Axis(Caffe2DefaultAxis(attrs), static_cast<int64_t>(dims.size()));
    if (!axis.ok() || dims.empty()) return std::nullopt;
    sizes.push_back(dims[*axis]);
  }
  return sizes;
}

absl::StatusOr<std::vector<ExprDims>> SplitRule(const OpInputs& in) {
  const AttributeView attrs = in.op.attributes();
  const ExprDims& x = *in.dims[0];
  const int64_t n = static_cast<int64_t>(in.op.outputs.size());
  MG_ASSIGN_OR_RETURN(int64_t axis, Axis(Caffe2DefaultAxis(attrs), Rank(in, 0)));
  ExprDims sizes;
  if (std::optional<ExprDims> from_concat = SplitSizesFromConcat(in)) {
    sizes = *std::move(from_concat);
  } else if (std::optional<std::vector<int64_t>> split = attrs.GetInts("split");
             split.has_value() && !split->empty()) {
    if (!x[axis].IsConstant()) {
      return NotExpressible("fixed split sizes of an axis whose size depends on a symbol");
    }
    sizes = ConstantDims(*split);
  } else if (in.op.inputs.size() > 1) {
    return NotExpressible("the split sizes are tensor data");
  } else if (attrs.Has("num_outputs") && !x[axis].IsConstant()) {
    return NotExpressible("chunks of a symbolic axis (the last chunk is a difference)");
  } else {
    MG_ASSIGN_OR_RETURN(DimExpr piece, ExactDivide(x[axis], DimExpr::Constant(n)));
    sizes.assign(n, piece);
  }
  if (static_cast<int64_t>(sizes.size()) != n) return NotExpressible("split count mismatch");
  std::vector<ExprDims> result;
  for (const DimExpr& s : sizes) {
    ExprDims t = x;
    if (attrs.GetInt("add_axis", 0) != 0) {
      t.erase(t.begin() + axis);
    } else {
      t[axis] = s;
    }
    result.push_back(std::move(t));
  }
  return result;
}

absl::StatusOr<DimExpr> RoundUpTo(const DimExpr& e, int64_t multiple) {
  if (multiple <= 1) return e;
  MG_ASSIGN_OR_RETURN(DimExpr chunks, CeilDiv(e, multiple));
  return Mul(chunks, DimExpr::Constant(multiple));
}

absl::StatusOr<std::vector<ExprDims>> AlibiBiasRule(const OpInputs& in) {
  const AttributeView attrs = in.op.attributes();
  if (Rank(in, 0) != 2) return NotExpressible("coords must have rank 2");
  MG_ASSIGN_OR_RETURN(DimExpr length,
                      Add((*in.dims[0])[0], DimExpr::Constant(attrs.GetInt("cls", 1))));
  MG_ASSIGN_OR_RETURN(DimExpr padded, RoundUpTo(length, attrs.GetInt("pad", 0)));
  return std::vector<ExprDims>{
      {DimExpr::Constant(1), DimExpr::Constant(attrs.GetInt("heads", 0)), length, padded}};
}

absl::StatusOr<std::vector<ExprDims>> PadLastDimRule(const OpInputs& in) {
  ExprDims y = *in.dims[0];
  if (y.empty()) return NotExpressible("a scalar has no last dim");
  MG_ASSIGN_OR_RETURN(y.back(), RoundUpTo(y.back(), in.op.attributes().GetInt("multiple", 0)));
  return std::vector<ExprDims>{y};
}

// Conv and pooling: each output spatial dim is cdiv(in + offset, stride), the window's closed
// form read from the op's attributes (and W) at the reference types.
absl::StatusOr<std::vector<ExprDims>> WindowRule(const OpInputs& in, bool conv) {
  std::vector<TensorType> reference;
  for (ValueId v : in.op.inputs) reference.push_back(*in.graph.value(v).type);
  const ShapeContext ctx{in.op.type, in.op.name, reference, static_cast<int>(in.op.outputs.size()),
                         in.op.attributes()};
  if (conv && !AllConstant(*in.dims[1])) return NotExpressible("W's dims depend on a symbol");
  absl::StatusOr<schema_internal::WindowMap> map =
      conv ? schema_internal::ConvWindowMap(ctx, reference[0], reference[1])
           : schema_internal::PoolWindowMap(ctx, reference[0]);
  if (!map.ok()) return NotExpressible(map.status().message());
  if (!map->exact) return NotExpressible("ceil_mode rounds the last window");
  const ExprDims& x = *in.dims[0];
  const size_t rank = x.size();
  if (rank < 3) return NotExpressible("X needs spatial dims");
  const size_t first = map->nchw ? 2 : 1;
  ExprDims y{x[0]};
  const DimExpr channels = conv ? DimExpr::Constant(map->maps) : (map->nchw ? x[1] : x[rank - 1]);
  if (map->nchw) y.push_back(channels);
  for (size_t i = 0; i < rank - 2; ++i) {
    if (map->global) {
      y.push_back(DimExpr::Constant(1));
      continue;
    }
    MG_ASSIGN_OR_RETURN(DimExpr shifted, Add(x[first + i], DimExpr::Constant(map->offsets[i])));
    MG_ASSIGN_OR_RETURN(DimExpr out, CeilDiv(shifted, map->strides[i]));
    y.push_back(std::move(out));
  }
  if (!map->nchw) y.push_back(channels);
  return std::vector<ExprDims>(in.op.outputs.size(), y);  // MaxPool's indices: the same dims
}

absl::StatusOr<std::vector<ExprDims>> ConvRule(const OpInputs& in) { return WindowRule(in, true); }
absl::StatusOr<std::vector<ExprDims>> PoolRule(const OpInputs& in) { return WindowRule(in, false); }

using Rule = absl::StatusOr<std::vector<ExprDims>> (*)(const OpInputs&);

Rule RuleFor(absl::string_view type) {
  if (type == "Reshape") return ReshapeRule;
  if (type == "Flatten") return FlattenRule;
  if (type == "FlattenToVec") return FlattenToVecRule;
  if (type == "Concat") return ConcatRule;
  if (type == "Split") return SplitRule;
  if (type == "AlibiBias") return AlibiBiasRule;
  if (type == "PadLastDim") return PadLastDimRule;
  if (type == "Conv" || type == "Conv1D" || type == "Conv2D" || type == "Conv3D") return ConvRule;
  for (absl::string_view pool : {"MaxPool", "AveragePool", "MaxPool1D", "MaxPool2D", "MaxPool3D",
                                 "AveragePool1D", "AveragePool2D", "AveragePool3D"}) {
    if (type == pool) return PoolRule;
  }
  return nullptr;
}

// The distinct input dim expressions of an op that depend on a symbol.
std::vector<DimExpr> DistinctInputDims(const OpInputs& in) {
  std::vector<DimExpr> exprs;
  for (const ExprDims* dims : in.dims) {
    for (const DimExpr& d : *dims) {
      if (!d.IsConstant() && std::find(exprs.begin(), exprs.end(), d) == exprs.end()) {
        exprs.push_back(d);
      }
    }
  }
  return exprs;
}

// One output dim of the probe and observed rules, from its values `seen` at `at` (the two
// telling bindings first, then the corners): a constant when the two agree, else the input
// expression with those two values (they tell the inputs apart), else the one expression of
// `pool` with them; kept only when it gives `seen` at every binding.
std::optional<DimExpr> MatchDim(const std::vector<int64_t>& seen,
                                const std::vector<SymbolBindings>& at,
                                const std::vector<DimExpr>& exprs,
                                const std::vector<DimExpr>& pool) {
  auto gives = [&](const DimExpr& e, size_t p) {
    absl::StatusOr<int64_t> v = e.Evaluate(at[p]);
    return v.ok() && *v == seen[p];
  };
  std::optional<DimExpr> match;
  if (seen[0] == seen[1]) {
    match = DimExpr::Constant(seen[0]);
  } else {
    for (const DimExpr& e : exprs) {
      if (gives(e, 0) && gives(e, 1)) match = e;
    }
    if (!match.has_value()) {
      int found = 0;
      for (const DimExpr& e : pool) {
        if (gives(e, 0) && gives(e, 1) && found++ == 0) match = e;
      }
      if (found > 1) match.reset();
    }
  }
  for (size_t p = 2; match.has_value() && p < at.size(); ++p) {
    if (!gives(*match, p)) match.reset();
  }
  return match;
}

// Two bindings drawn uniformly from the box, each symbol's first then second value in turn.
// `differ`: every symbol takes two different values (a symbol with a one-value range counts as
// differing when `fixed_differ`).
struct BindingPair {
  SymbolBindings first;
  SymbolBindings second;
  bool differ = true;
};
BindingPair DrawBindingPair(const SymbolBox& box, std::mt19937_64& rng, bool fixed_differ) {
  BindingPair pair;
  for (const SymbolRange& r : box.ranges) {
    std::uniform_int_distribution<int64_t> pick(r.lo, r.hi);
    const int64_t a = pick(rng);
    const int64_t b = pick(rng);
    pair.first[r.symbol] = a;
    pair.second[r.symbol] = b;
    pair.differ = pair.differ && ((fixed_differ && r.lo == r.hi) || a != b);
  }
  return pair;
}

// The probe rule (see the header): the op's shape function at two bindings that tell every
// distinct input expression apart, and at the box's corners.
absl::StatusOr<std::vector<ExprDims>> ProbeRule(const OpInputs& in, const OpSchema& schema,
                                                const std::vector<TensorType>& reference,
                                                const SymbolBox& box, uint64_t seed) {
  const std::vector<DimExpr> exprs = DistinctInputDims(in);
  // Two bindings where every expression changes value and no two share one.
  std::mt19937_64 rng(seed);
  std::vector<SymbolBindings> probes;
  for (int attempt = 0; attempt < 64 && probes.empty(); ++attempt) {
    auto [p1, p2, differ] = DrawBindingPair(box, rng, /*fixed_differ=*/true);
    if (!differ) continue;
    bool distinct = true;
    std::set<int64_t> seen1, seen2;
    for (const DimExpr& e : exprs) {
      absl::StatusOr<int64_t> v1 = e.Evaluate(p1), v2 = e.Evaluate(p2);
      if (!v1.ok() || !v2.ok()) return NotExpressible("an input dim overflows at a probe");
      distinct = distinct && *v1 != *v2 && seen1.insert(*v1).second && seen2.insert(*v2).second;
    }
    if (distinct) probes = {p1, p2};
  }
  if (probes.empty()) {
    return NotExpressible("no probe bindings tell its input dims apart (the box is too small)");
  }
  for (SymbolBindings& corner : box.Corners()) probes.push_back(std::move(corner));
  std::vector<std::vector<TensorType>> results;
  for (const SymbolBindings& at : probes) {
    std::vector<TensorType> inputs;
    for (size_t k = 0; k < in.dims.size(); ++k) {
      MG_ASSIGN_OR_RETURN(std::vector<int64_t> dims, EvaluateDims(*in.dims[k], at));
      inputs.push_back(TensorType{in.graph.value(in.op.inputs[k]).type->dtype, std::move(dims)});
    }
    absl::StatusOr<std::vector<TensorType>> out =
        RunShapeFunction(in.graph, in.op, schema, std::move(inputs));
    if (!out.ok()) {
      return NotExpressible(absl::StrCat("at a binding of the box the op fails: ",
                                         out.status().message()));
    }
    results.push_back(*std::move(out));
  }
  std::vector<ExprDims> outputs;
  for (size_t k = 0; k < reference.size(); ++k) {
    const size_t rank = reference[k].dims.size();
    for (const auto& r : results) {
      if (r[k].dims.size() != rank) return NotExpressible("its output rank changes with a symbol");
    }
    ExprDims dims;
    for (size_t j = 0; j < rank; ++j) {
      std::vector<int64_t> seen;
      for (const auto& r : results) seen.push_back(r[k].dims[j]);
      std::optional<DimExpr> match = MatchDim(seen, probes, exprs, /*pool=*/{});
      if (!match.has_value()) {
        return NotExpressible(absl::StrCat("output ", k, " dim ", j,
                                           " is computed from its inputs' dims, not one of them"));
      }
      dims.push_back(*std::move(match));
    }
    outputs.push_back(std::move(dims));
  }
  return outputs;
}

// The net typed at the observation bindings: two random bindings where every symbol differs,
// then every corner of the box. Built on first need (an import per binding).
class Observations {
 public:
  Observations(const SymbolicShapeOptions& options, const SymbolBox& box)
      : options_(options), box_(box) {}

  // InvalidArgument when a binding cannot be typed (the reason is the caller's fallback).
  absl::Status Build() {
    if (built_) return status_;
    built_ = true;
    std::mt19937_64 rng(0x5eed);
    for (int attempt = 0; attempt < 64 && at_.empty(); ++attempt) {
      BindingPair pair = DrawBindingPair(box_, rng, /*fixed_differ=*/false);
      if (pair.differ) at_ = {std::move(pair.first), std::move(pair.second)};
    }
    if (at_.empty()) {
      status_ = absl::InvalidArgumentError("no two bindings of the box differ in every symbol");
      return status_;
    }
    for (SymbolBindings& corner : box_.Corners()) at_.push_back(std::move(corner));
    for (const SymbolBindings& b : at_) {
      absl::StatusOr<Graph> g = options_.graph_at(b);
      if (!g.ok()) {
        status_ = absl::InvalidArgumentError(
            absl::StrCat("the net cannot be typed at another binding: ", g.status().message()));
        return status_;
      }
      graphs_.push_back(*std::move(g));
    }
    return status_;
  }
  const std::vector<SymbolBindings>& at() const { return at_; }
  const std::vector<Graph>& graphs() const { return graphs_; }

 private:
  const SymbolicShapeOptions& options_;
  const SymbolBox& box_;
  bool built_ = false;
  absl::Status status_;
  std::vector<SymbolBindings> at_;
  std::vector<Graph> graphs_;
};

// The dims of graph input `id` (a folded constant) as symbols of the box, matched across the
// observation bindings: each dim a constant or exactly one symbol.
absl::StatusOr<ExprDims> MatchSymbols(const Value& v, ValueId id, Observations& observations,
                                      const SymbolBox& box) {
  MG_RETURN_IF_ERROR(observations.Build());
  const std::vector<SymbolBindings>& at = observations.at();
  const std::vector<Graph>& graphs = observations.graphs();
  ExprDims dims;
  for (size_t j = 0; j < v.type->dims.size(); ++j) {
    std::vector<int64_t> seen;
    for (const Graph& g : graphs) {
      if (g.num_values() <= id || !g.value(id).type.has_value() ||
          g.value(id).type->dims.size() != v.type->dims.size()) {
        return NotExpressible("its rank changes with the binding");
      }
      seen.push_back(g.value(id).type->dims[j]);
    }
    std::optional<DimExpr> match;
    if (std::all_of(seen.begin(), seen.end(), [&](int64_t x) { return x == v.type->dims[j]; })) {
      match = DimExpr::Constant(v.type->dims[j]);
    } else {
      for (const SymbolRange& r : box.ranges) {
        bool all = true;
        for (size_t p = 0; p < at.size() && all; ++p) all = at[p].at(r.symbol) == seen[p];
        if (all && !match.has_value()) match = DimExpr::Symbol(r.symbol);
      }
    }
    if (!match.has_value()) return NotExpressible(absl::StrCat("dim ", j, " is no symbol"));
    dims.push_back(*std::move(match));
  }
  return dims;
}

int64_t Elements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;  // typed dims: their product fits (ByteSize checked it)
  return n;
}

// The observed rule (see the header): each output dim matched, across the net typed at the
// observation bindings, to a constant or one input dim expression; one dim left may be solved
// from an element count the op keeps.
absl::StatusOr<std::vector<ExprDims>> ObservedRule(const OpInputs& in,
                                                   const std::vector<TensorType>& reference,
                                                   Observations& observations,
                                                   const std::vector<DimExpr>& pool) {
  MG_RETURN_IF_ERROR(observations.Build());
  const std::vector<SymbolBindings>& at = observations.at();
  const std::vector<Graph>& graphs = observations.graphs();
  const std::vector<DimExpr> exprs = DistinctInputDims(in);
  std::set<int64_t> seen1, seen2;
  for (const DimExpr& e : exprs) {
    absl::StatusOr<int64_t> v1 = e.Evaluate(at[0]), v2 = e.Evaluate(at[1]);
    if (!v1.ok() || !v2.ok() || *v1 == *v2 || !seen1.insert(*v1).second ||
        !seen2.insert(*v2).second) {
      return NotExpressible("the observation bindings do not tell its input dims apart");
    }
  }
  std::vector<ExprDims> outputs;
  for (size_t k = 0; k < reference.size(); ++k) {
    const ValueId id = in.op.outputs[k];
    std::vector<const TensorType*> types;
    for (const Graph& g : graphs) {
      if (g.num_values() <= id || g.value(id).name != in.graph.value(id).name ||
          !g.value(id).type.has_value() ||
          g.value(id).type->dims.size() != reference[k].dims.size()) {
        return NotExpressible("the net typed at another binding differs here");
      }
      types.push_back(&*g.value(id).type);
    }
    const size_t rank = reference[k].dims.size();
    ExprDims dims(rank);
    std::vector<size_t> unmatched;
    for (size_t j = 0; j < rank; ++j) {
      // A dim carried by data (ConstantOfShape(Shape(x))) is one of the net's dims so far.
      std::vector<int64_t> seen;
      for (const TensorType* t : types) seen.push_back(t->dims[j]);
      std::optional<DimExpr> match = MatchDim(seen, at, exprs, pool);
      const bool holds = match.has_value();
      if (holds) {
        dims[j] = *std::move(match);
      } else {
        unmatched.push_back(j);
      }
    }
    if (unmatched.size() == 1 && !in.dims.empty()) {
      // A reshape's inferred dim: the input's element count over the other dims, where the op
      // keeps the count at every observed binding.
      MG_ASSIGN_OR_RETURN(DimExpr count, Product(*in.dims[0], 0, in.dims[0]->size()));
      DimExpr others = DimExpr::Constant(1);
      for (size_t j = 0; j < rank; ++j) {
        if (j != unmatched[0]) {
          MG_ASSIGN_OR_RETURN(others, Mul(others, dims[j]));
        }
      }
      absl::StatusOr<DimExpr> solved = ExactDivide(count, others);
      bool holds = solved.ok();
      for (size_t p = 0; holds && p < at.size(); ++p) {
        const Value& input = graphs[p].value(in.op.inputs[0]);
        absl::StatusOr<int64_t> v = solved->Evaluate(at[p]);
        holds = v.ok() && *v == types[p]->dims[unmatched[0]] && input.type.has_value() &&
                Elements(input.type->dims) == Elements(types[p]->dims);
      }
      if (holds) {
        dims[unmatched[0]] = *std::move(solved);
        unmatched.clear();
      }
    }
    if (!unmatched.empty()) {
      return NotExpressible(absl::StrCat("output ", k, " dim ", unmatched[0],
                                         " is computed from tensor data, not one input dim"));
    }
    outputs.push_back(std::move(dims));
  }
  return outputs;
}

}  // namespace

absl::StatusOr<DimExpr> SymbolicByteSize(const std::vector<DimExpr>& dims, DataType dtype,
                                         absl::string_view what) {
  absl::StatusOr<DimExpr> elements = Product(dims, 0, dims.size());
  absl::StatusOr<DimExpr> bytes =
      elements.ok() ? Mul(*elements, DimExpr::Constant(DataTypeSize(dtype))) : elements;
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": its byte size ", DimsText(dims), " has no expression: ",
                     bytes.status().message()));
  }
  return bytes;
}

absl::StatusOr<SymbolicShapes> InferSymbolicShapes(const Graph& graph,
                                                   const ShapeBindings& bindings,
                                                   const SymbolicShapeOptions& options,
                                                   const OpSchemaTable& schemas) {
  const int n = graph.num_values();
  MG_RETURN_IF_ERROR(options.box.CheckContains(options.reference));
  if (options.upper_bound != nullptr && options.upper_bound->num_values() != n) {
    return absl::InternalError("the upper-bound graph is not the same net");
  }
  // Symbols whose range is one value, and those bound by a plain --dim, are constants.
  SymbolBindings fixed = bindings.dims;
  SymbolBox box;
  for (const SymbolRange& r : options.box.ranges) {
    if (r.lo == r.hi) {
      fixed[r.symbol] = r.lo;
    } else {
      box.ranges.push_back(r);
    }
  }
  SymbolicShapes out;
  out.dims.resize(n);
  out.bytes.resize(n);
  out.fallback.resize(n);
  std::vector<bool> tainted(n, false);  // dims or data depend on a symbol
  std::vector<bool> known(n, false);    // dims expressed (not a fallback)

  auto fallback = [&](ValueId id, const std::string& why) -> absl::Status {
    const Value& v = graph.value(id);
    if (options.upper_bound == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "value '", v.DisplayName(), "': its size cannot be written in the symbols (", why,
          "); plan a range with the upper-bound fallback, or bind the symbols with --dim"));
    }
    const Value& high = options.upper_bound->value(id);
    if (!high.type.has_value()) return absl::InternalError("upper-bound graph not typed");
    MG_ASSIGN_OR_RETURN(int64_t bytes, ByteSize(*high.type, v.DisplayName()));
    out.bytes[id] = DimExpr::Constant(bytes);
    out.fallback[id] = why;
    tainted[id] = true;
    return absl::OkStatus();
  };
  // The distinct non-constant dims of the values expressed so far, for the observed rule.
  std::vector<DimExpr> pool;
  auto set_dims = [&](ValueId id, ExprDims dims) -> absl::Status {
    const Value& v = graph.value(id);
    for (const DimExpr& d : dims) {
      if (!d.IsConstant() && pool.size() < kMaxDimPool &&
          std::find(pool.begin(), pool.end(), d) == pool.end()) {
        pool.push_back(d);
      }
    }
    absl::StatusOr<DimExpr> bytes = SymbolicByteSize(dims, v.type->dtype, v.DisplayName());
    if (!bytes.ok()) return fallback(id, std::string(bytes.status().message()));
    out.bytes[id] = *std::move(bytes);
    tainted[id] = tainted[id] || !AllConstant(dims);
    out.dims[id] = std::move(dims);
    known[id] = true;
    return absl::OkStatus();
  };

  Observations observations(options, box);
  for (ValueId id = 0; id < n; ++id) {
    const Value& v = graph.value(id);
    if (v.producer != kNone) continue;
    if (!v.type.has_value()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "value '", v.DisplayName(), "' has no type: run shape inference first"));
    }
    ExprDims dims;
    if (bindings.inputs.count(v.name) == 0 && v.declared.dims.has_value()) {
      for (const DeclaredDim& d : *v.declared.dims) {
        if (d.symbol.empty()) {
          dims.push_back(DimExpr::Constant(d.size));
          continue;
        }
        const std::string& symbol = d.symbol;
        absl::StatusOr<DimExpr> e = IsSymbolName(symbol)
                                        ? absl::StatusOr<DimExpr>(DimExpr::Symbol(symbol))
                                        : ParseDimExpr(symbol);
        if (!e.ok()) {  // an opaque name: bound by a plain --dim, or an error already
          dims.push_back(DimExpr::Constant(v.type->dims[dims.size()]));
          continue;
        }
        MG_ASSIGN_OR_RETURN(DimExpr substituted, Substitute(*e, fixed));
        dims.push_back(std::move(substituted));
      }
    } else {
      dims = ConstantDims(v.type->dims);
    }
    MG_ASSIGN_OR_RETURN(std::vector<int64_t> at_reference, EvaluateDims(dims, options.reference));
    if (at_reference != v.type->dims) {
      return absl::InvalidArgumentError(absl::StrCat(
          "graph input '", v.DisplayName(), "' is declared ", DimsText(dims), ", which is ",
          DimsToString(at_reference), " at the reference binding, but it is typed ",
          DimsToString(v.type->dims)));
    }
    for (const DimExpr& d : dims) {
      for (const std::string& s : d.Symbols()) {
        if (box.Find(s) == nullptr) {
          return absl::InvalidArgumentError(absl::StrCat(
              "graph input '", v.DisplayName(), "': symbol ", s, " has no range or value"));
        }
      }
    }
    if (options.graph_at && v.role == Role::kConstant && !box.empty()) {
      // Data an importer folded at this binding (a Shape chain's result) may differ at
      // another, in its values (ops reading it are observed, never taken as constant) and in
      // its dims (matched to the symbols at the observation bindings).
      tainted[id] = true;
      bool same = observations.Build().ok();
      for (const Graph& g : observations.graphs()) {
        same = same && g.num_values() > id && g.value(id).type.has_value() &&
               g.value(id).type->dims == v.type->dims;
      }
      if (!same) {
        absl::StatusOr<ExprDims> matched = MatchSymbols(v, id, observations, box);
        if (!matched.ok()) {
          MG_RETURN_IF_ERROR(fallback(id, absl::StrCat("a folded constant whose dims change with "
                                                       "the binding: ", matched.status().message())));
          continue;
        }
        dims = *std::move(matched);
      }
    }
    MG_RETURN_IF_ERROR(set_dims(id, std::move(dims)));
  }

  for (OpId op_id : graph.TopologicalOrder()) {
    const Op& op = graph.op(op_id);
    bool any_tainted = false, all_known = true;
    for (ValueId in : op.inputs) {
      any_tainted = any_tainted || tainted[in];
      all_known = all_known && known[in];
    }
    if (!any_tainted) {
      for (ValueId o : op.outputs) MG_RETURN_IF_ERROR(set_dims(o, ConstantDims(graph.value(o).type->dims)));
      continue;
    }
    auto fail_all = [&](const std::string& why) -> absl::Status {
      for (ValueId o : op.outputs) {
        MG_RETURN_IF_ERROR(fallback(o, absl::StrCat(op.Label(), ": ", why)));
      }
      return absl::OkStatus();
    };
    if (!all_known) {
      MG_RETURN_IF_ERROR(fail_all("an input's size is itself a bound"));
      continue;
    }
    OpInputs in{graph, op, {}, out.dims};
    for (ValueId v : op.inputs) in.dims.push_back(&out.dims[v]);
    std::vector<TensorType> reference;
    for (ValueId o : op.outputs) reference.push_back(*graph.value(o).type);
    absl::StatusOr<std::vector<ExprDims>> result = NotExpressible("no shape function");
    if (Rule rule = RuleFor(op.type)) {
      result = rule(in);
    } else if (const OpSchema* schema = schemas.Find(op.type)) {
      result = ProbeRule(in, *schema, reference, box, 0x9e3779b97f4a7c15ULL ^ op_id);
    }
    if (!result.ok() && options.graph_at) {
      absl::StatusOr<std::vector<ExprDims>> observed =
          ObservedRule(in, reference, observations, pool);
      if (observed.ok()) {
        result = std::move(observed);
      } else {
        result = NotExpressible(absl::StrCat(result.status().message(), "; observed at other "
                                             "bindings: ", observed.status().message()));
      }
    }
    if (!result.ok()) {
      MG_RETURN_IF_ERROR(fail_all(std::string(result.status().message())));
      continue;
    }
    if (result->size() != op.outputs.size()) {
      return absl::InternalError(absl::StrCat(op.Label(), ": symbolic rule output count"));
    }
    for (size_t k = 0; k < op.outputs.size(); ++k) {
      absl::StatusOr<std::vector<int64_t>> at_reference =
          EvaluateDims((*result)[k], options.reference);
      if (!at_reference.ok() || *at_reference != reference[k].dims) {
        return absl::InternalError(absl::StrCat(
            op.Label(), ": the symbolic dims ", DimsText((*result)[k]), " of output '",
            graph.value(op.outputs[k]).DisplayName(), "' disagree with its type ",
            TensorTypeToString(reference[k]), " at the reference binding"));
      }
      tainted[op.outputs[k]] = true;  // its data may carry a symbol (a Shape's output)
      MG_RETURN_IF_ERROR(set_dims(op.outputs[k], std::move((*result)[k])));
    }
  }
  std::set<std::string> used;
  for (const DimExpr& b : out.bytes) {
    for (std::string& s : b.Symbols()) used.insert(std::move(s));
  }
  out.symbols.assign(used.begin(), used.end());
  return out;
}

}  // namespace memonger::graph
