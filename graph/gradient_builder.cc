#include "graph/gradient_builder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <tuple>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "graph/attribute.h"
#include "graph/batch_normalization_mode.h"
#include "graph/control_regions.h"
#include "graph/op_schema.h"
#include "graph/rebuild.h"
#include "graph/slice_bounds.h"
#include "graph/tensor_data.h"
#include "graph/shape_inference.h"
#include "util/status_macros.h"

namespace memonger::graph {
namespace {

bool IsGradientOp(const Op& op) {
  return op.is_gradient_op || absl::EndsWith(op.type, "Gradient");
}

// The attributes of the Reshape that takes a gradient of shape `from` back to `to`. Leading
// dims the forward reshape kept are written 0 ("copy the input's dim") and the largest other
// one -1 ("what the element count leaves"), so that the op says the same at other bindings of
// a symbolic dim (a symbolic plan reads the net typed at one binding); every form gives `to`
// here. A net with a zero-sized dim keeps the literal dims (allowzero=1).
std::vector<Attribute> ReshapeBackAttrs(const std::vector<int64_t>& to,
                                        const std::vector<int64_t>& from) {
  if (std::find(to.begin(), to.end(), 0) != to.end()) {
    return {Attribute{"shape", to}, Attribute{"allowzero", int64_t{1}}};
  }
  std::vector<int64_t> shape = to;
  size_t kept = 0;
  for (; kept < shape.size() && kept < from.size() && shape[kept] == from[kept]; ++kept) {
    shape[kept] = 0;
  }
  // The largest of the other dims is left to the element count (-1): a sequence length, where
  // the net has one, is what a symbolic plan needs free.
  if (kept < shape.size()) {
    const auto largest = std::max_element(shape.begin() + kept, shape.end());
    if (*largest > 1) *largest = -1;
  }
  return {Attribute{"shape", shape}};
}

class Builder {
 public:
  explicit Builder(const Graph& forward) : fwd_(forward), out_(forward.name() + "_training") {
    for (const Value& v : fwd_.values()) used_names_.insert(v.name);
    specs_.reserve(fwd_.num_ops());
    for (const Op& op : fwd_.ops()) specs_.push_back(SpecOf(fwd_, op));
    contributions_.resize(fwd_.num_values());
    first_piece_.resize(fwd_.num_values());
    autosplits_.assign(fwd_.num_values(), 0);
  }

  absl::StatusOr<Graph> Build(const std::vector<ValueId>& losses) {
    MarkNeeds(losses);
    MarkFixed();
    for (ValueId loss : losses) {
      if (!needs_[loss]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "loss '", fwd_.value(loss).DisplayName(), "' does not depend on any parameter"));
      }
      // Caffe2's AddGradientOperators seeds a loss X with ConstantFill(X) -> "X_autogen_grad".
      const OpId producer = fwd_.value(loss).producer;
      device_ = producer == kNone ? Device{} : fwd_.op(producer).device;
      const std::string grad = NewName(fwd_.value(loss), "autogen_grad");
      Emit("ConstantFill", grad, {fwd_.value(loss).name}, {grad},
           {Attribute{"value", 1.0},
            Attribute{"dtype", std::string(DataTypeName(fwd_.value(loss).type->dtype))}});
      contributions_[loss].push_back(grad);
    }
    for (OpId id = fwd_.num_ops() - 1; id >= 0; --id) {
      device_ = fwd_.op(id).device;
      MG_RETURN_IF_ERROR(Backward(id));
      // A parameter's pieces are summed as soon as the last is made (at its first reader),
      // not after the whole backward pass: until then every piece is live.
      for (ValueId in : fwd_.op(id).inputs) {
        if (fwd_.value(in).role != Role::kParam || fwd_.value(in).producer != kNone) continue;
        const absl::Span<const OpId> readers = fwd_.consumers(in);
        if (*std::min_element(readers.begin(), readers.end()) != id) continue;
        MG_RETURN_IF_ERROR(GradientOf(in).status());
      }
    }
    if (!missing_rules_.empty()) {
      return absl::UnimplementedError(absl::StrCat(
          "no gradient rule for ", missing_rules_.size() == 1 ? "op type " : "op types ",
          absl::StrJoin(missing_rules_, ", "), " (first: ", missing_example_,
          "; graph/gradient_builder.h lists the rules)"));
    }
    // Parameters (no producer): their gradients, declared.
    for (ValueId v = 0; v < fwd_.num_values(); ++v) {
      const Value& value = fwd_.value(v);
      if (value.role != Role::kParam || contributions_[v].empty()) continue;
      device_ = fwd_.op(fwd_.consumers(v).front()).device;
      MG_ASSIGN_OR_RETURN(std::optional<std::string> grad, GradientOf(v));
      out_.AddParamGrad(value.name, *grad);
      // An output of the net (the optimizer reads it after the backward pass), still a gradient.
      out_.AddExternalOutput(*grad);
      out_.DeclareRole(*grad, Role::kGradient);
    }
    return Finish();
  }

 private:
  // needs_[v]: v is a floating-point parameter, or a floating-point output of an op reading a
  // value that needs a gradient, and some loss depends on v.
  void MarkNeeds(const std::vector<ValueId>& losses) {
    const int n = fwd_.num_values();
    std::vector<bool> from_param(n, false);
    auto is_float = [&](ValueId v) { return IsFloatingPoint(fwd_.value(v).type->dtype); };
    for (ValueId v = 0; v < n; ++v) {
      from_param[v] = fwd_.value(v).role == Role::kParam && is_float(v);
    }
    for (OpId id : fwd_.TopologicalOrder()) {
      const Op& op = fwd_.op(id);
      bool any = false;
      for (ValueId in : op.inputs) any = any || from_param[in];
      for (ValueId out : op.outputs) from_param[out] = any && is_float(out);
    }
    std::vector<bool> to_loss(n, false);
    for (ValueId loss : losses) to_loss[loss] = true;
    const std::vector<OpId>& order = fwd_.TopologicalOrder();
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const Op& op = fwd_.op(*it);
      bool any = false;
      for (ValueId out : op.outputs) any = any || to_loss[out];
      if (!any) continue;
      // (An in-place output's previous version is one of the op's inputs.)
      for (ValueId in : op.inputs) to_loss[in] = true;
    }
    needs_.assign(n, false);
    for (ValueId v = 0; v < n; ++v) needs_[v] = from_param[v] && to_loss[v];
  }

  // fixed_[v]: v is computed from params alone, so its dims are the same at every binding of
  // the model's symbols. (Not constants: an importer folds what a Shape computed into constants
  // that differ between bindings, such as an Expand's target shape.)
  void MarkFixed() {
    const int n = fwd_.num_values();
    fixed_.assign(n, false);
    for (ValueId v = 0; v < n; ++v) {
      fixed_[v] = fwd_.value(v).producer == kNone && fwd_.value(v).role == Role::kParam;
    }
    for (OpId id : fwd_.TopologicalOrder()) {
      const Op& op = fwd_.op(id);
      bool all = true;
      for (ValueId in : op.inputs) all = all && fixed_[in];
      for (ValueId out : op.outputs) fixed_[out] = all;
    }
  }

  // A fresh blob name "<value>_<suffix>" ('@' of later versions spelled "_v").
  std::string NewName(const Value& value, absl::string_view suffix) {
    return FreshName(
        absl::StrCat(absl::StrReplaceAll(value.DisplayName(), {{"@", "_v"}}), "_", suffix));
  }

  // `base`, or "<base>_<k>" for the first k that no value of either net has.
  std::string FreshName(const std::string& base) {
    std::string name = base;
    for (int k = 1; !used_names_.insert(name).second; ++k) name = absl::StrCat(base, "_", k);
    return name;
  }

  void Emit(const std::string& type, const std::string& name, std::vector<std::string> inputs,
            std::vector<std::string> outputs, std::vector<Attribute> attrs = {}) {
    OpSpec spec;
    spec.type = type;
    spec.name = name;
    spec.inputs = std::move(inputs);
    spec.outputs = std::move(outputs);
    spec.attrs = std::move(attrs);
    spec.is_gradient_op = true;
    // On the device of the forward op being differentiated, as Caffe2's AddGradientOperators
    // copies its device_option: a GPU net's backward pass runs where its forward pass ran.
    spec.device = device_;
    // A reshape of a gradient is a view of it, as autograd's view backward returns one, and as
    // the importer marks the forward's (LivenessOptions::views decides where it aliases).
    const OpSchema* schema = OpSchemaTable::Builtin().Find(spec.type);
    spec.view = schema != nullptr && schema->view_capable;
    backward_.push_back(std::move(spec));
  }

  // The blob name of forward value `v` for a backward op to read: only its latest version is
  // still there when the backward pass runs. A Rearranged value is made again at the reader
  // instead of kept from the forward pass.
  absl::StatusOr<std::string> Read(ValueId v, const Op& op) {
    const Value& value = fwd_.value(v);
    const std::optional<ValueId> latest = fwd_.FindValue(value.name);
    if (latest != v) {
      return absl::UnimplementedError(absl::StrCat(
          "gradient of ", op.Label(), " needs '", value.DisplayName(),
          "', which a later op overwrites in place ('", fwd_.value(*latest).DisplayName(),
          "'): it no longer exists when the backward pass runs"));
    }
    if (value.producer != kNone && Rearranged(v)) return Remake(v);
    return value.name;
  }

  // True when `v` is static data (params, constants) rearranged by ops that only move elements
  // (Slice, Concat, Transpose, the Reshape family), each with one output, written once, at most
  // kRemakeOps of them: how exporters write a weight reordered for its op (torch.onnx.export's
  // LSTM and GRU weights without constant folding). Such a value costs its bytes from the
  // forward pass to the backward pass when kept, and moves alone when made again.
  bool Rearranged(ValueId v) {
    static constexpr int kRemakeOps = 64;
    const auto known = rearranged_.find(v);
    if (known != rearranged_.end()) return known->second;
    bool& result = rearranged_[v];
    const Value& value = fwd_.value(v);
    if (value.producer == kNone) {  // static data, never overwritten
      result = (value.role == Role::kParam || value.role == Role::kConstant) &&
               fwd_.Versions(value.name).size() == 1;
      return result;
    }
    const Op& op = fwd_.op(value.producer);
    static const std::set<std::string> kMoves = {"Slice",   "Concat",  "Transpose", "Reshape",
                                                 "Squeeze", "Unsqueeze", "Flatten", "Identity"};
    if (kMoves.count(op.type) == 0 || op.outputs.size() != 1 || value.inplace_of != kNone ||
        fwd_.Versions(value.name).size() != 1) {
      return result = false;
    }
    int ops = 1;
    for (ValueId in : op.inputs) {
      if (!Rearranged(in)) return result = false;
      ops += remake_ops_[in];
    }
    remake_ops_[v] = ops;
    return result = ops <= kRemakeOps;
  }

  // A backward copy of Rearranged value `v`: its producers emitted again (once per value).
  std::string Remake(ValueId v) {
    const Value& value = fwd_.value(v);
    if (value.producer == kNone) return value.name;
    const auto made = remade_.find(v);
    if (made != remade_.end()) return made->second;
    const Op& op = fwd_.op(value.producer);
    std::vector<std::string> inputs;
    for (ValueId in : op.inputs) inputs.push_back(Remake(in));
    const std::string name = NewName(value, "remade");
    out_.Declare(name, DeclarationOf(*value.type));
    Emit(op.type, name, std::move(inputs), {name}, op.attrs);
    remade_[v] = name;
    return name;
  }

  // The gradient of `v`: its one contribution, or the Sum of several; nullopt when none. As
  // Caffe2's gradient builder does, the Sum writes in place into the first piece when that one
  // is v's own "X_grad" (a piece passed through from another gradient is never overwritten).
  absl::StatusOr<std::optional<std::string>> GradientOf(ValueId v) {
    MG_RETURN_IF_ERROR(JoinTiles(v));
    std::vector<std::string>& parts = contributions_[v];
    if (parts.empty()) return std::optional<std::string>();
    if (parts.size() > 1) {
      const std::string sum =
          parts[0] == first_piece_[v] ? parts[0] : NewName(fwd_.value(v), "grad");
      Emit("Sum", NewName(fwd_.value(v), "grad_sum"), parts, {sum});
      parts = {sum};
    }
    return std::optional<std::string>(parts[0]);
  }

  void Contribute(ValueId v, const std::string& grad) {
    if (needs_[v]) contributions_[v].push_back(grad);
  }

  // The slices of `x` when its readers are all unit-step Slices of it with static bounds that
  // cut it along one axis into pieces covering every index once (how exporters write a weight
  // split into gates, torch.onnx.export's LSTM and GRU weights without constant folding):
  // (axis, reader op per piece, in index order). nullopt otherwise, or for a single reader.
  std::optional<std::pair<int64_t, std::vector<OpId>>> TilingSlices(ValueId x) {
    const auto cached = tilings_.find(x);
    if (cached != tilings_.end()) return cached->second;
    std::optional<std::pair<int64_t, std::vector<OpId>>>& result = tilings_[x];
    const absl::Span<const OpId> readers = fwd_.consumers(x);
    if (readers.size() < 2) return result;
    const std::vector<int64_t>& dims = fwd_.value(x).type->dims;
    int64_t axis = -1;
    std::vector<std::pair<int64_t, OpId>> pieces;  // (first index, reader)
    for (const OpId reader : readers) {
      const Op& slice = fwd_.op(reader);
      if (slice.type != "Slice" || slice.inputs.empty() || slice.inputs[0] != x) return result;
      if (std::count(slice.inputs.begin(), slice.inputs.end(), x) != 1) return result;
      absl::StatusOr<std::optional<SliceBounds>> bounds = StaticSliceBounds(slice);
      if (!bounds.ok() || !bounds->has_value()) return result;
      const SliceBounds& b = **bounds;
      for (size_t a = 0; a < dims.size(); ++a) {
        if (b.step[a] != 1) return result;
        if (b.count[a] == dims[a]) continue;
        if (axis != -1 && axis != static_cast<int64_t>(a)) return result;
        axis = static_cast<int64_t>(a);
      }
      if (axis == -1) return result;  // a full copy: no tiling
      pieces.push_back({b.first[axis], reader});
    }
    std::sort(pieces.begin(), pieces.end());
    int64_t next = 0;
    for (const auto& [first, reader] : pieces) {
      if (first != next) return result;  // a gap or an overlap
      next += fwd_.value(fwd_.op(reader).outputs[0]).type->dims[axis];
    }
    if (next != dims[axis]) return result;
    std::vector<OpId> order;
    for (const auto& piece : pieces) order.push_back(piece.second);
    result = std::make_pair(axis, std::move(order));
    return result;
  }

  // Where `x`'s readers tile it (TilingSlices) and some piece has a gradient: the pieces'
  // gradients joined by one Concat (zeros for a piece without one) become x's contribution,
  // instead of a Pad of each to x's full size and their Sum.
  absl::Status JoinTiles(ValueId x) {
    const auto it = tile_grads_.find(x);
    if (it == tile_grads_.end()) return absl::OkStatus();
    const std::map<OpId, std::string> grads = std::move(it->second);
    tile_grads_.erase(it);
    const std::optional<std::pair<int64_t, std::vector<OpId>>> tiling = TilingSlices(x);
    std::vector<std::string> pieces;
    for (const OpId reader : tiling->second) {
      const auto grad = grads.find(reader);
      if (grad != grads.end()) {
        pieces.push_back(grad->second);
        continue;
      }
      const TensorType& piece = *fwd_.value(fwd_.op(reader).outputs[0]).type;
      pieces.push_back(Apply(fwd_.op(reader), "zeros", "ConstantFill", {},
                             {Attribute{"shape", piece.dims}, Attribute{"value", 0.0},
                              Attribute{"dtype", std::string(DataTypeName(piece.dtype))}}));
    }
    const std::string g = GradOutput(x);
    Emit("Concat", g, std::move(pieces), {g}, {Attribute{"axis", tiling->first}});
    return absl::OkStatus();
  }

  // A gradient output name for input `v` of a gradient op that computes it whether or not it
  // is needed (the value then dies at once). Named as Caffe2's gradient builder names them: the
  // first piece "X_grad", the later ones "_X_grad_autosplit_<k>" (k from 0), summed into X_grad.
  std::string GradOutput(ValueId v) {
    std::string name;
    if (!needs_[v]) {
      name = NewName(fwd_.value(v), "grad_unused");
    } else if (contributions_[v].empty()) {
      name = NewName(fwd_.value(v), "grad");
      first_piece_[v] = name;
    } else {
      const std::string base =
          absl::StrCat("_", absl::StrReplaceAll(fwd_.value(v).DisplayName(), {{"@", "_v"}}),
                       "_grad_autosplit_", autosplits_[v]++);
      name = base;
      for (int k = 1; !used_names_.insert(name).second; ++k) name = absl::StrCat(base, "_", k);
    }
    Contribute(v, name);
    return name;
  }

  // Adds output `suffix` to forward op `id` unless it has at least `index` + 1 outputs; returns
  // the blob name at `index`.
  std::string EnsureOutput(OpId id, size_t index, absl::string_view suffix) {
    OpSpec& spec = specs_[id];
    while (spec.outputs.size() <= index) {
      const Value& first = fwd_.value(fwd_.op(id).outputs[0]);
      spec.outputs.push_back(NewName(first, suffix));
    }
    return spec.outputs[index];
  }

  // W when input `slot` of MatMul `op` is Transpose(W) swapping W's last two dims (a 2-D
  // weight, perm [1, 0] or none; or the keys of attention heads, perm [0, 2, 1]) and W needs a
  // gradient and the MatMul has no attributes of its own (no trans_a/trans_b, axes); nullopt
  // otherwise.
  std::optional<ValueId> TransposedMatrix(const Op& op, size_t slot) const {
    if (!op.attrs.empty() || slot >= op.inputs.size()) return std::nullopt;
    const Value& b = fwd_.value(op.inputs[slot]);
    if (b.producer == kNone) return std::nullopt;
    const Op& transpose = fwd_.op(b.producer);
    if (transpose.type != "Transpose" || transpose.inputs.size() != 1 ||
        transpose.outputs.size() != 1) {
      return std::nullopt;
    }
    const ValueId w = transpose.inputs[0];
    const size_t rank = fwd_.value(w).type->dims.size();
    if (rank < 2 || !needs_[w]) return std::nullopt;
    // The last two dims swapped, the batch dims kept (no perm: all reversed, the same for 2-D).
    std::vector<int64_t> swap(rank);
    for (size_t k = 0; k < rank; ++k) swap[k] = static_cast<int64_t>(k);
    std::swap(swap[rank - 1], swap[rank - 2]);
    const std::optional<std::vector<int64_t>> perm = transpose.attributes().GetInts("perm");
    if (perm.has_value() ? *perm != swap : rank != 2) return std::nullopt;
    return w;
  }

  // x when `op` ends the GELU torch.onnx.export writes for F.gelu (erf form):
  //   d = Div(x, sqrt 2) (or Mul by 1/sqrt 2); e = Erf(d); a = Add(e, 1); p = Mul(x, a);
  //   y = Mul(p, 0.5)   (operands of Add and Mul in either order)
  // where d, e, a and p have no other reader and the constants are the model's static scalars
  // (within float32 rounding); nullopt otherwise.
  std::optional<ValueId> ErfGeluInput(const Op& op) const {
    auto scalar_is = [&](ValueId v, double want) {
      std::optional<std::vector<double>> got = StaticValues(v);
      return got.has_value() && got->size() == 1 && std::abs((*got)[0] - want) <= 1e-6 * want;
    };
    // The op producing `v` when it has this type and `v` is read once; else nullptr.
    auto single_use = [&](ValueId v, absl::string_view type) -> const Op* {
      const Value& value = fwd_.value(v);
      if (value.producer == kNone || fwd_.consumers(v).size() != 1) return nullptr;
      const Op& producer = fwd_.op(value.producer);
      return producer.type == type && producer.outputs.size() == 1 ? &producer : nullptr;
    };
    // The operand of binary `o` that is not the scalar `want` (nullopt when neither is).
    auto other_than = [&](const Op& o, double want) -> std::optional<ValueId> {
      if (o.inputs.size() != 2) return std::nullopt;
      if (scalar_is(o.inputs[1], want)) return o.inputs[0];
      if (scalar_is(o.inputs[0], want)) return o.inputs[1];
      return std::nullopt;
    };
    if (op.type != "Mul" || op.outputs.size() != 1) return std::nullopt;
    const std::optional<ValueId> p_value = other_than(op, 0.5);
    if (!p_value.has_value()) return std::nullopt;
    const Op* p = single_use(*p_value, "Mul");
    if (p == nullptr || p->inputs.size() != 2) return std::nullopt;
    for (size_t k = 0; k < 2; ++k) {
      const ValueId x = p->inputs[k];
      const Op* a = single_use(p->inputs[1 - k], "Add");
      if (a == nullptr) continue;
      const std::optional<ValueId> e_value = other_than(*a, 1.0);
      if (!e_value.has_value()) continue;
      const Op* e = single_use(*e_value, "Erf");
      if (e == nullptr || e->inputs.size() != 1) continue;
      const Op* d = single_use(e->inputs[0], "Div");
      bool scaled = d != nullptr && d->inputs.size() == 2 && d->inputs[0] == x &&
                    scalar_is(d->inputs[1], std::sqrt(2.0));
      if (!scaled) {
        d = single_use(e->inputs[0], "Mul");
        scaled = d != nullptr && other_than(*d, std::sqrt(0.5)) == x;
      }
      if (scaled && needs_[x]) return x;
    }
    return std::nullopt;
  }

  // Rules that differentiate output 0 alone (the other outputs are statistics or scratch saved
  // for the backward pass) must not drop a gradient that reached another output: Unimplemented
  // naming the op and the output.
  absl::Status CheckOnlyOutput0HasGradient(const Op& op,
                                           const std::vector<std::optional<std::string>>& dy) {
    if (!dy[0].has_value()) {
      return absl::UnimplementedError(absl::StrCat("gradient of ", op.Label(),
                                                   ": output 0 has no gradient (not supported)"));
    }
    for (size_t i = 1; i < dy.size(); ++i) {
      if (!dy[i].has_value()) continue;
      return absl::UnimplementedError(absl::StrCat(
          "gradient of ", op.Label(), ": a loss depends on output ", i, " ('",
          fwd_.value(op.outputs[i]).DisplayName(),
          "'), which the rule does not differentiate (not supported)"));
    }
    return absl::OkStatus();
  }

  absl::Status Backward(OpId id) {
    const Op& op = fwd_.op(id);
    bool input_needs = false;
    for (ValueId in : op.inputs) input_needs = input_needs || needs_[in];
    if (!input_needs) return absl::OkStatus();
    std::vector<std::optional<std::string>> dy;
    bool any = false;
    for (ValueId out : op.outputs) {
      MG_ASSIGN_OR_RETURN(std::optional<std::string> g, GradientOf(out));
      any = any || g.has_value();
      dy.push_back(std::move(g));
    }
    if (!any) return absl::OkStatus();
    auto in = [&](size_t i) { return op.inputs[i]; };
    auto read = [&](size_t i) { return Read(op.inputs[i], op); };
    auto read_out = [&](size_t i) { return Read(op.outputs[i], op); };
    const std::string& t = op.type;
    const std::string name = op.name + "_grad";
    auto missing = [&](size_t i) {
      return absl::UnimplementedError(absl::StrCat("gradient of ", op.Label(), ": output ", i,
                                                   " has no gradient (not supported)"));
    };
    if (t == "FC") {
      MG_ASSIGN_OR_RETURN(std::string x, read(0));
      MG_ASSIGN_OR_RETURN(std::string w, read(1));
      std::vector<std::string> outs = {GradOutput(in(1)), GradOutput(in(2))};
      if (needs_[in(0)]) outs.push_back(GradOutput(in(0)));
      Emit("FCGradient", name, {x, w, *dy[0]}, outs, op.attrs);
    } else if (t == "MatMul") {
      MG_ASSIGN_OR_RETURN(std::string a, read(0));
      if (std::optional<ValueId> w = TransposedMatrix(op, 1)) {
        // B = Transpose(W) of a matrix (how exporters write x @ W.T for a Linear on 3-D x, and
        // q @ k^T of attention heads): the gradient reads W with trans_b, so the transposed
        // copy dies after the forward MatMul instead of living until the backward pass, and W
        // receives dW itself.
        MG_ASSIGN_OR_RETURN(std::string w_name, Read(*w, op));
        Emit("MatMulGradient", name, {*dy[0], a, w_name}, {GradOutput(in(0)), GradOutput(*w)},
             {Attribute{"trans_b", int64_t{1}}});
        return absl::OkStatus();
      }
      MG_ASSIGN_OR_RETURN(std::string b, read(1));
      Emit("MatMulGradient", name, {*dy[0], a, b}, {GradOutput(in(0)), GradOutput(in(1))},
           op.attrs);
    } else if (t == "Relu" || t == "Softmax" || t == "Sigmoid" || t == "Tanh") {
      MG_ASSIGN_OR_RETURN(std::string y, read_out(0));
      Emit(t + "Gradient", name, {y, *dy[0]}, {GradOutput(in(0))}, op.attrs);
    } else if (t == "Gelu") {
      MG_ASSIGN_OR_RETURN(std::string x, read(0));
      Emit("GeluGradient", name, {*dy[0], x}, {GradOutput(in(0))}, op.attrs);
    } else if (t == "LabelCrossEntropy") {
      MG_ASSIGN_OR_RETURN(std::string x, read(0));
      MG_ASSIGN_OR_RETURN(std::string label, read(1));
      Emit("LabelCrossEntropyGradient", name, {x, label, *dy[0]}, {GradOutput(in(0))});
    } else if (t == "AveragedLoss") {
      MG_ASSIGN_OR_RETURN(std::string x, read(0));
      Emit("AveragedLossGradient", name, {x, *dy[0]}, {GradOutput(in(0))});
    } else if (t == "LayerNormalization") {
      MG_RETURN_IF_ERROR(CheckOnlyOutput0HasGradient(op, dy));
      // An ONNX node that omits Mean but keeps InvStdDev has InvStdDev at position 1: the rule
      // below would read it as the mean. Refused rather than differentiated wrongly.
      if (op.attributes().Has("onnx_output_slots")) {
        return absl::UnimplementedError(absl::StrCat(
            "gradient of ", op.Label(),
            ": an omitted optional output before a present one (not supported)"));
      }
      MG_ASSIGN_OR_RETURN(std::string x, read(0));
      MG_ASSIGN_OR_RETURN(std::string scale, read(1));
      const std::string mean = EnsureOutput(id, 1, "mean");
      const std::string inv_std = EnsureOutput(id, 2, "inv_std_dev");
      std::vector<std::string> outs = {GradOutput(in(0)), GradOutput(in(1))};
      if (op.inputs.size() > 2) outs.push_back(GradOutput(in(2)));
      Emit("LayerNormalizationGradient", name, {*dy[0], x, scale, mean, inv_std}, outs,
           op.attrs);
    } else if (t == "EfficientAttention") {
      MG_RETURN_IF_ERROR(CheckOnlyOutput0HasGradient(op, dy));
      std::vector<std::string> inputs = {*dy[0]};
      for (size_t i = 0; i < 3; ++i) {
        MG_ASSIGN_OR_RETURN(std::string v, read(i));
        inputs.push_back(v);
      }
      MG_ASSIGN_OR_RETURN(std::string o, read_out(0));
      inputs.push_back(o);
      inputs.push_back(EnsureOutput(id, 2, "lse"));
      if (op.inputs.size() > 3) {
        if (needs_[in(3)]) {
          return absl::UnimplementedError(absl::StrCat(
              "gradient of ", op.Label(), ": a bias that needs a gradient is not supported"));
        }
        MG_ASSIGN_OR_RETURN(std::string bias, read(3));
        inputs.push_back(bias);
      }
      Emit("EfficientAttentionGradient", name, inputs,
           {GradOutput(in(0)), GradOutput(in(1)), GradOutput(in(2)), op.name + "_grad_workspace"},
           op.attrs);
    } else if (t == "Transpose") {
      std::optional<std::vector<int64_t>> perm = op.attributes().GetInts("perm");
      const size_t rank = fwd_.value(in(0)).type->dims.size();
      std::vector<int64_t> inverse(rank);
      for (size_t i = 0; i < rank; ++i) {
        const int64_t p = perm.has_value() ? (*perm)[i] : static_cast<int64_t>(rank - 1 - i);
        inverse[p] = static_cast<int64_t>(i);
      }
      const std::string g = GradOutput(in(0));
      Emit("Transpose", g, {*dy[0]}, {g}, {Attribute{"perm", inverse}});
    } else if ((t == "Squeeze" || t == "Unsqueeze") && op.inputs.size() == 1 &&
               (op.attributes().GetInts("axes").has_value() ||
                op.attributes().GetInts("dims").has_value())) {
      // The inverse op on the same axes (Squeeze's axes index its input, Unsqueeze's its
      // output: the forward input's rank either way), which says the same at every binding of
      // a symbolic dim where a Reshape to literal dims would not.
      std::vector<int64_t> axes = op.attributes().GetInts("axes").value_or(
          op.attributes().GetInts("dims").value_or(std::vector<int64_t>{}));
      const std::string g = GradOutput(in(0));
      Emit(t == "Squeeze" ? "Unsqueeze" : "Squeeze", g, {*dy[0]}, {g},
           {Attribute{"axes", std::move(axes)}});
    } else if (t == "Reshape" || t == "Squeeze" || t == "Unsqueeze" || t == "Flatten") {
      const std::string g = GradOutput(in(0));
      Emit("Reshape", g, {*dy[0]}, {g},
           ReshapeBackAttrs(fwd_.value(in(0)).type->dims, fwd_.value(op.outputs[0]).type->dims));
    } else if (t == "Split") {
      std::vector<std::string> parts;
      for (size_t i = 0; i < dy.size(); ++i) {
        if (!dy[i].has_value()) return missing(i);
        parts.push_back(*dy[i]);
      }
      const std::string g = GradOutput(in(0));
      Emit("Concat", g, parts, {g}, {Attribute{"axis", op.attributes().GetInt("axis", 1)}});
    } else if (t == "Concat") {
      MG_RETURN_IF_ERROR(ConcatBackward(op, dy));
    } else if (t == "Cast") {
      const std::string g = GradOutput(in(0));
      Emit("Cast", g, {*dy[0]}, {g},
           {Attribute{"to", std::string(DataTypeName(fwd_.value(in(0)).type->dtype))}});
    } else if (t == "Conv") {
      MG_ASSIGN_OR_RETURN(std::string x, read(0));
      MG_ASSIGN_OR_RETURN(std::string w, read(1));
      const bool has_bias = op.inputs.size() > 2;
      std::vector<std::string> outs = {GradOutput(in(1))};
      if (has_bias) outs.push_back(GradOutput(in(2)));
      if (needs_[in(0)]) outs.push_back(GradOutput(in(0)));
      std::vector<Attribute> attrs = op.attrs;
      if (!has_bias) attrs.push_back(Attribute{"no_bias", int64_t{1}});
      Emit("ConvGradient", name, {x, w, *dy[0]}, outs, attrs);
    } else if (t == "ConvTranspose") {
      MG_RETURN_IF_ERROR(ConvTransposeRule(op, *dy[0], name));
    } else if (t == "SpatialBN") {
      MG_RETURN_IF_ERROR(CheckOnlyOutput0HasGradient(op, dy));
      if (op.outputs.size() != 5) {
        return absl::UnimplementedError(absl::StrCat(
            "gradient of ", op.Label(), ": needs training mode (is_test=0) with saved_mean and "
            "saved_var outputs"));
      }
      MG_ASSIGN_OR_RETURN(std::string x, read(0));
      MG_ASSIGN_OR_RETURN(std::string scale, read(1));
      MG_ASSIGN_OR_RETURN(std::string saved_mean, read_out(3));
      MG_ASSIGN_OR_RETURN(std::string saved_var, read_out(4));
      Emit("SpatialBNGradient", name, {x, scale, *dy[0], saved_mean, saved_var},
           {GradOutput(in(0)), GradOutput(in(1)), GradOutput(in(2))}, op.attrs);
    } else if (t == "Gemm") {
      MG_RETURN_IF_ERROR(GemmRule(op, *dy[0]));
    } else if (t == "BatchNormalization") {
      MG_RETURN_IF_ERROR(BatchNormalizationRule(id, op, dy));
    } else if (t == "MaxPool" || t == "AveragePool") {
      MG_ASSIGN_OR_RETURN(std::string x, read(0));
      MG_ASSIGN_OR_RETURN(std::string y, read_out(0));
      Emit(t + "Gradient", name, {x, y, *dy[0]}, {GradOutput(in(0))}, op.attrs);
    } else if (t == "Sum") {
      for (ValueId v : op.inputs) {
        if (*fwd_.value(v).type != *fwd_.value(op.outputs[0]).type) {
          return absl::UnimplementedError(absl::StrCat(
              "gradient of ", op.Label(), ": inputs that broadcast are not supported"));
        }
        Contribute(v, *dy[0]);
      }
    } else if (t == "Identity" || t == "Copy" || t == "AddAttentionBias") {
      if (t == "AddAttentionBias" && needs_[in(1)]) {
        return absl::UnimplementedError(absl::StrCat(
            "gradient of ", op.Label(), ": a bias that needs a gradient is not supported"));
      }
      Contribute(in(0), *dy[0]);
    } else if (absl::Status s = ExporterRule(id, op, dy, name); !absl::IsNotFound(s)) {
      return s;
    } else {
      // Every op type without a rule is named at once (Build reports them together); the
      // op's inputs get no gradient from it, so the pass goes on only to find the others.
      missing_rules_.insert(t);
      if (missing_example_.empty()) missing_example_ = op.Label();
      // The result is that error, never a graph: the output's gradient is passed to the inputs
      // as a stand-in, so that the ops before this one are reached and named too.
      const auto given = std::find_if(dy.begin(), dy.end(),
                                      [](const std::optional<std::string>& g) { return g.has_value(); });
      const std::string stand_in = **given;
      for (ValueId v : op.inputs) Contribute(v, stand_in);
    }
    return absl::OkStatus();
  }

  // ---- The ops exporters write (torch.onnx.export, opsets 13-17) -------------------------
  // Each rule is built from ops that have kernels (and schemas, or a declared output type), so
  // every intermediate is a value the planners see and the memory is what the composition
  // really holds. NotFound: no rule for the op's type.

  // A fresh blob name "<op's output 0>_grad_<what>" for an intermediate of op's gradient.
  std::string Temp(const Op& op, absl::string_view what) {
    return NewName(fwd_.value(op.outputs[0]), absl::StrCat("grad_", what));
  }

  // Emits `type`(inputs) into a fresh intermediate; returns its name.
  std::string Apply(const Op& op, absl::string_view what, const std::string& type,
                    std::vector<std::string> inputs, std::vector<Attribute> attrs = {}) {
    const std::string out = Temp(op, what);
    Emit(type, out, std::move(inputs), {out}, std::move(attrs));
    return out;
  }

  // A scalar constant of `dtype` (ConstantFill without inputs), made once per value, type and
  // device.
  std::string Scalar(double value, DataType dtype) {
    auto [it, inserted] =
        scalars_.try_emplace(std::make_tuple(value, dtype, device_.type, device_.id));
    if (inserted) {
      it->second = FreshName(absl::StrCat("grad_scalar_", DataTypeName(dtype)));
      Emit("ConstantFill", it->second, {}, {it->second},
           {Attribute{"value", value}, Attribute{"dtype", std::string(DataTypeName(dtype))}});
    }
    return it->second;
  }

  // The numbers a static input holds (an ONNX initializer or Constant): nullopt when the graph
  // has no data for it or its element type is not one read here.
  // The model's data for `v`; nullptr when it has none.
  const TensorData* StaticTensor(ValueId v) const {
    const StaticData* data = fwd_.static_data();
    if (data == nullptr) return nullptr;
    const auto it = data->find(fwd_.value(v).name);
    return it == data->end() ? nullptr : &it->second;
  }

  std::optional<std::vector<double>> StaticValues(ValueId v) const {
    const TensorData* found = StaticTensor(v);
    if (found == nullptr) return std::nullopt;
    const TensorData& t = *found;
    std::vector<double> values;
    auto read = [&](auto tag) {
      using T = decltype(tag);
      const size_t n = t.bytes.size() / sizeof(T);
      for (size_t i = 0; i < n; ++i) {
        T x;
        std::memcpy(&x, t.bytes.data() + i * sizeof(T), sizeof(T));
        values.push_back(static_cast<double>(x));
      }
    };
    switch (t.type.dtype) {
      case DataType::kFloat32: read(float{}); break;
      case DataType::kFloat64: read(double{}); break;
      case DataType::kInt64: read(int64_t{}); break;
      case DataType::kInt32: read(int32_t{}); break;
      case DataType::kBool: read(uint8_t{}); break;
      default: return std::nullopt;
    }
    return values;
  }

  // Integers an op takes from an attribute or, in later opsets, from a static input: the
  // attribute `attr` when present, else the data of input `slot` (absent: nullopt with ok).
  // The elements Slice `op` reads (the kernel's own normalisation) when its bounds are
  // attributes or the model's static data; nullopt when they are computed or starts and ends
  // are missing or of different lengths; InvalidArgument for bounds NormalizeSlice refuses.
  absl::StatusOr<std::optional<SliceBounds>> StaticSliceBounds(const Op& op) const {
    MG_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> starts, StaticInts(op, 1, "starts"));
    MG_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> ends, StaticInts(op, 2, "ends"));
    MG_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, StaticInts(op, 3, "axes"));
    MG_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> steps, StaticInts(op, 4, "steps"));
    if (!starts.has_value() || !ends.has_value() || starts->size() != ends->size()) {
      return std::optional<SliceBounds>();
    }
    MG_ASSIGN_OR_RETURN(SliceBounds bounds,
                        NormalizeSlice(fwd_.value(op.inputs[0]).type->dims, *starts, *ends,
                                       axes.value_or(std::vector<int64_t>{}),
                                       steps.value_or(std::vector<int64_t>{})));
    return std::optional<SliceBounds>(std::move(bounds));
  }

  absl::StatusOr<std::optional<std::vector<int64_t>>> StaticInts(const Op& op, size_t slot,
                                                                 absl::string_view attr) const {
    if (std::optional<std::vector<int64_t>> a = op.attributes().GetInts(attr)) return a;
    if (slot >= op.inputs.size()) return std::optional<std::vector<int64_t>>();
    // int64 data read exactly: exporters write an open end as INT64_MAX, which a double
    // rounds to 2^63, out of int64's range.
    if (const TensorData* t = StaticTensor(op.inputs[slot]);
        t != nullptr && t->type.dtype == DataType::kInt64) {
      std::vector<int64_t> ints(t->bytes.size() / sizeof(int64_t));
      std::memcpy(ints.data(), t->bytes.data(), ints.size() * sizeof(int64_t));
      return std::optional<std::vector<int64_t>>(std::move(ints));
    }
    std::optional<std::vector<double>> values = StaticValues(op.inputs[slot]);
    if (!values.has_value()) {
      return absl::UnimplementedError(absl::StrCat(
          "gradient of ", op.Label(), ": its ", attr, " (input ", slot,
          ") are computed, not constants of the model (not supported)"));
    }
    std::vector<int64_t> ints;
    for (double d : *values) ints.push_back(static_cast<int64_t>(d));
    return std::optional<std::vector<int64_t>>(std::move(ints));
  }

  // Contributes `g`, of the op output's dims `g_dims`, to `target`, which broadcast to them
  // (numpy's right-aligned rules): summed over the axes target broadcast along (ReduceSum,
  // keepdims), then reshaped where target has fewer dims. A target of fixed dims (a bias, a
  // class token: computed from params alone) is summed over every axis where it has none or
  // 1, even where the output's dim is 1 too at this binding (a batch of 1): the net then has the
  // same ops at every binding, as a plan over a range of a symbol needs.
  absl::Status SumTo(const Op& op, ValueId target, const std::string& g,
                     const std::vector<int64_t>& g_dims) {
    if (!needs_[target]) return absl::OkStatus();
    const std::vector<int64_t>& dims = fwd_.value(target).type->dims;
    const bool fixed = SumsOverItsOnes(op, target);
    if (!NeedsSumming(op, target, g_dims)) {
      Contribute(target, g);
      return absl::OkStatus();
    }
    auto not_broadcast = [&]() {
      return absl::InternalError(absl::StrCat(
          "gradient of ", op.Label(), ": '", fwd_.value(target).DisplayName(), "' ",
          DimsToString(dims), " does not broadcast to the output's ", DimsToString(g_dims)));
    };
    if (dims.size() > g_dims.size()) return not_broadcast();
    const size_t lead = g_dims.size() - dims.size();
    std::vector<int64_t> axes;
    std::vector<int64_t> kept = g_dims;
    for (size_t a = 0; a < g_dims.size(); ++a) {
      const int64_t d = a < lead ? 1 : dims[a - lead];
      if (d == g_dims[a] && !(fixed && d == 1)) continue;
      if (d != 1) return not_broadcast();
      axes.push_back(static_cast<int64_t>(a));
      kept[a] = 1;
    }
    const bool reshape = kept != dims;
    std::string current = g;
    if (!axes.empty()) {
      const std::string out = reshape ? Temp(op, "sum") : GradOutput(target);
      Emit("ReduceSum", out, {current}, {out},
           {Attribute{"axes", axes}, Attribute{"keepdims", int64_t{1}}});
      current = out;
    }
    if (reshape) {
      const std::string out = GradOutput(target);
      Emit("Reshape", out, {current}, {out}, ReshapeBackAttrs(dims, kept));
    }
    return absl::OkStatus();
  }

  // A target of fixed dims read by an op whose output's dims vary (SumTo).
  bool SumsOverItsOnes(const Op& op, ValueId target) const {
    return fixed_[target] && !fixed_[op.outputs[0]];
  }

  // Whether a gradient of dims `g_dims` must be summed (or reshaped) to reach `target`: its dims
  // differ, or it is a fixed-dims target with a dim of 1 (SumTo).
  bool NeedsSumming(const Op& op, ValueId target, const std::vector<int64_t>& g_dims) const {
    const std::vector<int64_t>& dims = fwd_.value(target).type->dims;
    return dims != g_dims ||
           (SumsOverItsOnes(op, target) && std::find(dims.begin(), dims.end(), 1) != dims.end());
  }

  // `type`(inputs), of the op output's dims, as target's gradient: written straight into it
  // when it needs no summing, else into an intermediate that SumTo reduces.
  absl::Status EmitFor(const Op& op, ValueId target, const std::string& type,
                       std::vector<std::string> inputs, std::vector<Attribute> attrs = {}) {
    if (!needs_[target]) return absl::OkStatus();
    const std::vector<int64_t>& y_dims = fwd_.value(op.outputs[0]).type->dims;
    if (!NeedsSumming(op, target, y_dims)) {
      const std::string g = GradOutput(target);
      Emit(type, g, std::move(inputs), {g}, std::move(attrs));
      return absl::OkStatus();
    }
    return SumTo(op, target, Apply(op, "full", type, std::move(inputs), std::move(attrs)),
                 y_dims);
  }

  // Y = ConvTranspose(X, W, [b]) is the adjoint of the Conv from Y's space to X's with W's
  // layout ([C_in, C_out / group, k...] is such a Conv's [M, C / group, k...]), so: dX =
  // Conv(dY, W) with the same strides, pads, dilations and group (output_padding adds rows no
  // X element reaches); dW = ConvGradient(dY, W, X)'s dW (that Conv's weight gradient, dY as
  // its input and X as its output's gradient); db = dY summed over all but the channels.
  // auto_pad and output_shape (pads decided from sizes) are refused.
  absl::Status ConvTransposeRule(const Op& op, const std::string& dy, const std::string& name) {
    auto unsupported = [&](absl::string_view what) {
      return absl::UnimplementedError(
          absl::StrCat("gradient of ", op.Label(), ": ", what, " (not supported)"));
    };
    const AttributeView a = op.attributes();
    if (a.GetString("auto_pad").value_or("NOTSET") != "NOTSET" || a.Has("output_shape")) {
      return unsupported("auto_pad or output_shape");
    }
    std::vector<Attribute> conv;
    for (const Attribute& attr : op.attrs) {
      if (attr.name == "strides" || attr.name == "pads" || attr.name == "dilations" ||
          attr.name == "group" || attr.name == "kernel_shape") {
        conv.push_back(attr);
      }
    }
    const ValueId x = op.inputs[0], w = op.inputs[1];
    MG_ASSIGN_OR_RETURN(std::string w_read, Read(w, op));
    if (needs_[x]) Emit("Conv", absl::StrCat(name, "_dx"), {dy, w_read}, {GradOutput(x)}, conv);
    if (needs_[w]) {
      MG_ASSIGN_OR_RETURN(std::string x_read, Read(x, op));
      std::vector<Attribute> grad = conv;
      grad.push_back(Attribute{"no_bias", int64_t{1}});
      Emit("ConvGradient", absl::StrCat(name, "_dw"), {dy, w_read, x_read}, {GradOutput(w)},
           std::move(grad));
    }
    if (op.inputs.size() > 2 && needs_[op.inputs[2]]) {
      const int64_t rank = static_cast<int64_t>(fwd_.value(op.outputs[0]).type->dims.size());
      std::vector<int64_t> axes = {0};
      for (int64_t k = 2; k < rank; ++k) axes.push_back(k);
      Emit("ReduceSum", absl::StrCat(name, "_db"), {dy}, {GradOutput(op.inputs[2])},
           {Attribute{"axes", axes}, Attribute{"keepdims", int64_t{0}}});
    }
    return absl::OkStatus();
  }

  // Emits an op that has no schema (Pad, ScatterND) into `target`'s gradient, declaring its
  // output's type (target's).
  void EmitDeclared(ValueId target, const std::string& type, std::vector<std::string> inputs,
                    std::vector<Attribute> attrs) {
    const std::string g = GradOutput(target);
    out_.Declare(g, DeclarationOf(*fwd_.value(target).type));
    Emit(type, g, std::move(inputs), {g}, std::move(attrs));
  }

  absl::Status ExporterRule(OpId id, const Op& op,
                            const std::vector<std::optional<std::string>>& dy,
                            const std::string& name) {
    const std::string& t = op.type;
    auto in = [&](size_t i) { return op.inputs[i]; };
    auto needs = [&](size_t i) { return i < op.inputs.size() && needs_[op.inputs[i]]; };
    auto read = [&](size_t i) { return Read(op.inputs[i], op); };
    auto unsupported = [&](absl::string_view what) {
      return absl::UnimplementedError(
          absl::StrCat("gradient of ", op.Label(), ": ", what, " (not supported)"));
    };
    const TensorType& y_type = *fwd_.value(op.outputs[0]).type;
    const std::vector<int64_t>& y_dims = y_type.dims;
    const DataType dtype = y_type.dtype;
    auto output0 = [&]() { return CheckOnlyOutput0HasGradient(op, dy); };

    if (t == "Mul") {
      if (std::optional<ValueId> x = ErfGeluInput(op)) {
        // The exporter's GELU, x * (1 + erf(x / sqrt 2)) * 0.5: one GeluGradient from x, so
        // that its four intermediates die in the forward pass (PyTorch's GELU saves x alone).
        MG_ASSIGN_OR_RETURN(std::string x_name, Read(*x, op));
        const std::string g = GradOutput(*x);
        Emit("GeluGradient", g, {*dy[0], x_name}, {g});
        return absl::OkStatus();
      }
    }
    if (t == "Add" || t == "Sub") {
      MG_RETURN_IF_ERROR(SumTo(op, in(0), *dy[0], y_dims));
      if (needs(1)) {
        if (t == "Add") return SumTo(op, in(1), *dy[0], y_dims);
        return EmitFor(op, in(1), "Neg", {*dy[0]});
      }
      return absl::OkStatus();
    }
    if (t == "Mul") {  // dA = dC B, dB = dC A
      for (size_t i = 0; i < 2; ++i) {
        if (!needs(i)) continue;
        MG_ASSIGN_OR_RETURN(std::string other, read(1 - i));
        MG_RETURN_IF_ERROR(EmitFor(op, in(i), "Mul", {*dy[0], other}));
      }
      return absl::OkStatus();
    }
    if (t == "Div") {  // dA = dC / B, dB = -(dC / B) C
      MG_ASSIGN_OR_RETURN(std::string b, read(1));
      const std::string over_b = Apply(op, "over_b", "Div", {*dy[0], b});
      MG_RETURN_IF_ERROR(SumTo(op, in(0), over_b, y_dims));
      if (!needs(1)) return absl::OkStatus();
      MG_ASSIGN_OR_RETURN(std::string c, Read(op.outputs[0], op));
      return EmitFor(op, in(1), "Neg", {Apply(op, "times_c", "Mul", {over_b, c})});
    }
    if (t == "Pow") {  // dX = dY e X^(e-1)
      if (needs(1)) return unsupported("a gradient for the exponent");
      MG_ASSIGN_OR_RETURN(std::string x, read(0));
      const DataType x_type = fwd_.value(in(0)).type->dtype;
      std::optional<std::vector<double>> e = StaticValues(in(1));
      if (e.has_value() && e->size() == 1) {
        const double p = (*e)[0];
        if (p == 1) return SumTo(op, in(0), *dy[0], y_dims);
        const std::string power =
            p == 2 ? x : Apply(op, "power", "Pow", {x, Scalar(p - 1, x_type)});
        return EmitFor(op, in(0), "Mul",
                       {Apply(op, "scaled", "Mul", {*dy[0], power}), Scalar(p, x_type)});
      }
      MG_ASSIGN_OR_RETURN(std::string exponent, read(1));
      if (fwd_.value(in(1)).type->dtype != x_type) {
        exponent = Apply(op, "exponent", "Cast", {exponent},
                         {Attribute{"to", std::string(DataTypeName(x_type))}});
      }
      const std::string minus_one = Apply(op, "exponent_minus_1", "Sub",
                                          {exponent, Scalar(1, x_type)});
      const std::string power = Apply(op, "power", "Pow", {x, minus_one});
      return EmitFor(op, in(0), "Mul",
                     {Apply(op, "scaled", "Mul", {*dy[0], power}), exponent});
    }
    if (t == "Sqrt") {  // dX = dY / (2 Y)
      MG_ASSIGN_OR_RETURN(std::string y, Read(op.outputs[0], op));
      return EmitFor(op, in(0), "Div", {*dy[0], Apply(op, "twice", "Mul", {y, Scalar(2, dtype)})});
    }
    if (t == "Exp") {
      MG_ASSIGN_OR_RETURN(std::string y, Read(op.outputs[0], op));
      return EmitFor(op, in(0), "Mul", {*dy[0], y});
    }
    if (t == "Log") {
      MG_ASSIGN_OR_RETURN(std::string x, read(0));
      return EmitFor(op, in(0), "Div", {*dy[0], x});
    }
    if (t == "Neg") return EmitFor(op, in(0), "Neg", {*dy[0]});
    if (t == "Reciprocal") {  // dX = -dY Y^2
      MG_ASSIGN_OR_RETURN(std::string y, Read(op.outputs[0], op));
      const std::string scaled =
          Apply(op, "scaled", "Mul", {*dy[0], Apply(op, "square", "Mul", {y, y})});
      return EmitFor(op, in(0), "Neg", {scaled});
    }
    if (t == "Erf") {  // dX = dY 2/sqrt(pi) exp(-X^2)
      MG_ASSIGN_OR_RETURN(std::string x, read(0));
      const std::string gauss = Apply(
          op, "gauss", "Exp", {Apply(op, "neg_square", "Neg", {Apply(op, "square", "Mul", {x, x})})});
      return EmitFor(op, in(0), "Mul",
                     {Apply(op, "scaled", "Mul", {*dy[0], gauss}),
                      Scalar(2.0 / std::sqrt(std::acos(-1.0)), dtype)});
    }
    if (t == "LogSoftmax") {  // dX = dY - exp(Y) sum(dY) along the axis
      MG_ASSIGN_OR_RETURN(std::string y, Read(op.outputs[0], op));
      const int64_t axis = op.attributes().GetInt("axis", -1);
      const std::string sum = Apply(op, "sum", "ReduceSum", {*dy[0]},
                                    {Attribute{"axes", std::vector<int64_t>{axis}},
                                     Attribute{"keepdims", int64_t{1}}});
      const std::string probs = Apply(op, "probs", "Exp", {y});
      return EmitFor(op, in(0), "Sub", {*dy[0], Apply(op, "scaled", "Mul", {probs, sum})});
    }
    if (t == "Where") {  // each branch receives dY where it was chosen, 0 elsewhere
      MG_ASSIGN_OR_RETURN(std::string condition, read(0));
      const std::string zero = Scalar(0, dtype);
      MG_RETURN_IF_ERROR(EmitFor(op, in(1), "Where", {condition, *dy[0], zero}));
      return EmitFor(op, in(2), "Where", {condition, zero, *dy[0]});
    }
    if (t == "SoftmaxCrossEntropyLoss") {  // (softmax - one-hot) scaled, from the scores
      MG_RETURN_IF_ERROR(output0());
      if (needs(2)) return unsupported("a gradient for the weights");
      std::vector<std::string> inputs = {*dy[0]};
      for (size_t i = 0; i < op.inputs.size(); ++i) {
        MG_ASSIGN_OR_RETURN(std::string v, read(i));
        inputs.push_back(v);
      }
      Emit("SoftmaxCrossEntropyLossGradient", name, inputs, {GradOutput(in(0))}, op.attrs);
      return absl::OkStatus();
    }
    if (t == "Expand") return SumTo(op, in(0), *dy[0], y_dims);
    if (t == "Clip") {  // dX = dY where min < X < max (PyTorch's hardtanh; clamp counts the ends)
      if (op.attributes().Has("onnx_input_slots")) return unsupported("an omitted min or max");
      MG_ASSIGN_OR_RETURN(std::string x, read(0));
      std::vector<std::string> masks;
      for (size_t i = 1; i < 3; ++i) {
        std::string bound;
        if (i < op.inputs.size()) {
          if (needs(i)) return unsupported("a gradient for the bounds");
          MG_ASSIGN_OR_RETURN(bound, read(i));
        } else if (std::optional<double> a = op.attributes().GetFloat(i == 1 ? "min" : "max")) {
          bound = Scalar(*a, dtype);
        } else {
          continue;
        }
        masks.push_back(Apply(op, i == 1 ? "above_min" : "below_max",
                              i == 1 ? "Greater" : "Less", {x, bound}));
      }
      if (masks.empty()) return SumTo(op, in(0), *dy[0], y_dims);
      const std::string mask =
          masks.size() == 1 ? masks[0] : Apply(op, "inside", "And", {masks[0], masks[1]});
      return EmitFor(op, in(0), "Where", {mask, *dy[0], Scalar(0, dtype)});
    }
    if (t == "HardSigmoid" || t == "HardSwish") {
      // HardSigmoid: Y = clip(alpha X + beta, 0, 1), dX = alpha dY inside (0, 1).
      // HardSwish: Y = X HardSigmoid(X) (alpha 1/6, beta 1/2), dX = dY (X / 3 + 1/2) for
      // -3 <= X <= 3, dY above, 0 below (PyTorch's hardswish_backward).
      MG_ASSIGN_OR_RETURN(std::string x, read(0));
      const bool swish = t == "HardSwish";
      const double alpha = swish ? 1.0 / 6 : op.attributes().GetFloat("alpha").value_or(0.2);
      const double beta = swish ? 0.5 : op.attributes().GetFloat("beta").value_or(0.5);
      const double low = -beta / alpha, high = (1 - beta) / alpha;  // where the clip starts
      const std::string below = Apply(op, "below", swish ? "Less" : "LessOrEqual",
                                      {x, Scalar(low, dtype)});
      const std::string above = Apply(op, "above", swish ? "Greater" : "GreaterOrEqual",
                                      {x, Scalar(high, dtype)});
      std::string slope;
      if (swish) {
        const std::string inner = Apply(
            op, "slope", "Add", {Apply(op, "third", "Mul", {x, Scalar(1.0 / 3, dtype)}),
                                 Scalar(0.5, dtype)});
        slope = Apply(op, "slope_high", "Where", {above, Scalar(1, dtype), inner});
      } else {
        slope = Apply(op, "slope_high", "Where", {above, Scalar(0, dtype), Scalar(alpha, dtype)});
      }
      slope = Apply(op, "slope_low", "Where", {below, Scalar(0, dtype), slope});
      return EmitFor(op, in(0), "Mul", {*dy[0], slope});
    }
    if (t == "Dropout") {
      MG_RETURN_IF_ERROR(output0());
      // Caffe2's Dropout (ratio, is_test attributes): DropoutGrad(dY, mask) while training.
      if (op.attributes().Has("ratio") || op.attributes().Has("is_test")) {
        if (op.attributes().GetInt("is_test", 0) != 0) return SumTo(op, in(0), *dy[0], y_dims);
        const std::string mask = EnsureOutput(id, 1, "mask");
        Emit("DropoutGrad", name, {*dy[0], mask}, {GradOutput(in(0))}, op.attrs);
        return absl::OkStatus();
      }
      // ONNX: the identity unless training_mode is true and the ratio is not 0; then
      // dX = dY mask / (1 - ratio).
      bool training = false;
      if (op.inputs.size() > 2) {
        std::optional<std::vector<double>> mode = StaticValues(in(2));
        if (!mode.has_value() || mode->size() != 1) return unsupported("a computed training_mode");
        training = (*mode)[0] != 0;
      }
      double ratio = 0.5;
      if (op.inputs.size() > 1) {
        std::optional<std::vector<double>> r = StaticValues(in(1));
        if (!r.has_value() || r->size() != 1) return unsupported("a computed ratio");
        ratio = (*r)[0];
      }
      if (!training || ratio == 0) return SumTo(op, in(0), *dy[0], y_dims);
      if (op.attributes().Has("onnx_output_slots")) return unsupported("an omitted output");
      const std::string mask = Apply(op, "mask", "Cast", {EnsureOutput(id, 1, "mask")},
                                     {Attribute{"to", std::string(DataTypeName(dtype))}});
      return EmitFor(op, in(0), "Mul",
                     {Apply(op, "masked", "Mul", {*dy[0], mask}), Scalar(1 / (1 - ratio), dtype)});
    }
    if (t == "ReduceSum" || t == "ReduceMean" || t == "GlobalAveragePool") {
      // dX = dY (times 1/count for a mean) expanded back over the reduced axes.
      MG_RETURN_IF_ERROR(output0());
      const std::vector<int64_t>& x_dims = fwd_.value(in(0)).type->dims;
      const int64_t rank = static_cast<int64_t>(x_dims.size());
      std::vector<int64_t> axes;
      bool keepdims = true;
      if (t == "GlobalAveragePool") {
        for (int64_t a = 2; a < rank; ++a) axes.push_back(a);
      } else {
        MG_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> given, StaticInts(op, 1, "axes"));
        keepdims = op.attributes().GetInt("keepdims", 1) != 0;
        if (given.has_value() && !given->empty()) {
          for (int64_t a : *given) axes.push_back(a < 0 ? a + rank : a);
          std::sort(axes.begin(), axes.end());
        } else if (op.attributes().GetInt("noop_with_empty_axes", 0) != 0) {
          return SumTo(op, in(0), *dy[0], y_dims);
        } else {
          for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
        }
      }
      std::string g = *dy[0];
      if (t != "ReduceSum") {
        int64_t count = 1;
        for (int64_t a : axes) count *= x_dims[a];
        g = Apply(op, "mean", "Div", {g, Scalar(static_cast<double>(count), dtype)});
      }
      if (!keepdims && !y_dims.empty()) {
        g = Apply(op, "kept", "Unsqueeze", {g}, {Attribute{"axes", axes}});
      }
      std::vector<int64_t> shape(x_dims.size(), 1);  // 1: keep dY's dim
      for (int64_t a : axes) shape[a] = x_dims[a];
      const std::string dx = GradOutput(in(0));
      Emit("Expand", dx, {g}, {dx}, {Attribute{"shape", shape}});
      return absl::OkStatus();
    }
    if (t == "Resize") {  // ResizeGradient: Resize's maps transposed (kernels_cpu_resize.cc)
      MG_RETURN_IF_ERROR(output0());
      for (size_t k = 1; k < op.inputs.size(); ++k) {
        if (needs(k)) return unsupported("a gradient for roi, scales or sizes");
      }
      std::vector<std::string> inputs = {*dy[0]};
      for (size_t k = 1; k < op.inputs.size(); ++k) {
        MG_ASSIGN_OR_RETURN(std::string v, read(k));
        inputs.push_back(std::move(v));
      }
      EmitDeclared(in(0), "ResizeGradient", std::move(inputs), op.attrs);
      return absl::OkStatus();
    }
    if (t == "Pad") {  // constant mode: dX is dY's middle, a Slice from the leading pads
      MG_RETURN_IF_ERROR(output0());
      if (needs(2)) return unsupported("a gradient for the padding value");
      if (op.inputs.size() > 3) return unsupported("an axes input (opset 18)");
      const std::string mode = op.attributes().GetString("mode").value_or("constant");
      if (mode != "constant") return unsupported(absl::StrCat("mode '", mode, "'"));
      const std::vector<int64_t>& x_dims = fwd_.value(in(0)).type->dims;
      const size_t rank = x_dims.size();
      MG_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> pads, StaticInts(op, 1, "pads"));
      if (!pads.has_value() || pads->size() != 2 * rank) {
        return unsupported("pads missing or not two per axis");
      }
      std::vector<int64_t> starts(rank), ends(rank), axes(rank);
      for (size_t k = 0; k < rank; ++k) {
        if ((*pads)[k] < 0 || (*pads)[k + rank] < 0) return unsupported("negative pads (a crop)");
        starts[k] = (*pads)[k];
        ends[k] = (*pads)[k] + x_dims[k];
        axes[k] = static_cast<int64_t>(k);
      }
      EmitDeclared(in(0), "Slice", {*dy[0]},
                   {Attribute{"starts", starts}, Attribute{"ends", ends}, Attribute{"axes", axes}});
      return absl::OkStatus();
    }
    if (t == "Slice") {  // unit steps: dY padded back to X's dims; else SliceGradient
      MG_RETURN_IF_ERROR(output0());
      const std::vector<int64_t>& x_dims = fwd_.value(in(0)).type->dims;
      const int64_t rank = static_cast<int64_t>(x_dims.size());
      if (TilingSlices(in(0)).has_value()) {  // one piece of a tiling: joined by JoinTiles
        if (needs(0)) tile_grads_[in(0)][id] = *dy[0];
        return absl::OkStatus();
      }
      absl::StatusOr<std::optional<SliceBounds>> read_bounds = StaticSliceBounds(op);
      if (!read_bounds.ok()) return unsupported(read_bounds.status().message());
      if (!read_bounds->has_value()) {
        return unsupported("starts and ends missing or of different lengths");
      }
      const std::optional<SliceBounds>& bounds = *read_bounds;
      const std::vector<int64_t>& first = bounds->first;
      const std::vector<int64_t>& step = bounds->step;
      const std::vector<int64_t>& count = bounds->count;
      const bool unit = std::all_of(step.begin(), step.end(), [](int64_t s) { return s == 1; });
      if (count != y_dims) return unsupported("bounds that do not give its output");
      if (!unit) {
        // dX zeros, dY written at the elements the slice read (kernels_cpu_tensor.cc).
        EmitDeclared(in(0), "SliceGradient", {*dy[0]},
                     {Attribute{"starts", first}, Attribute{"steps", step}});
        return absl::OkStatus();
      }
      std::vector<int64_t> pads(2 * x_dims.size(), 0);
      for (int64_t a = 0; a < rank; ++a) {
        pads[a] = first[a];
        pads[a + rank] = x_dims[a] - first[a] - count[a];
      }
      EmitDeclared(in(0), "Pad", {*dy[0]},
                   {Attribute{"pads", pads}, Attribute{"mode", std::string("constant")}});
      return absl::OkStatus();
    }
    if (t == "Gather") {  // a scatter-add of dY into zeros of the data's dims
      if (needs(1)) return unsupported("a gradient for the indices");
      const TensorType& data = *fwd_.value(in(0)).type;
      const int64_t rank = static_cast<int64_t>(data.dims.size());
      int64_t axis = op.attributes().GetInt("axis", 0);
      if (axis < 0) axis += rank;
      const std::vector<int64_t>& index_dims = fwd_.value(in(1)).type->dims;
      std::optional<std::vector<double>> index = StaticValues(in(1));
      if (index_dims.empty() && index.has_value() && index->size() == 1) {
        // One static index (x[:, k]): dY, given back its axis, padded to the data's dims.
        int64_t k = static_cast<int64_t>((*index)[0]);
        if (k < 0) k += data.dims[axis];
        std::vector<int64_t> pads(2 * data.dims.size(), 0);
        pads[axis] = k;
        pads[axis + rank] = data.dims[axis] - k - 1;
        const std::string row = Apply(op, "row", "Unsqueeze", {*dy[0]},
                                      {Attribute{"axes", std::vector<int64_t>{axis}}});
        EmitDeclared(in(0), "Pad", {row},
                     {Attribute{"pads", pads}, Attribute{"mode", std::string("constant")}});
        return absl::OkStatus();
      }
      if (axis != 0) return unsupported("indices along an axis other than 0");
      MG_ASSIGN_OR_RETURN(std::string indices, read(1));
      const std::string zeros =
          Apply(op, "zeros", "ConstantFill", {},
                {Attribute{"shape", data.dims}, Attribute{"value", 0.0},
                 Attribute{"dtype", std::string(DataTypeName(data.dtype))}});
      const std::string rows =
          Apply(op, "rows", "Unsqueeze", {indices},
                {Attribute{"axes", std::vector<int64_t>{static_cast<int64_t>(index_dims.size())}}});
      EmitDeclared(in(0), "ScatterND", {zeros, rows, *dy[0]},
                   {Attribute{"reduction", std::string("add")}});
      return absl::OkStatus();
    }
    if (t == "RNN" || t == "GRU" || t == "LSTM") return RecurrentRule(id, op, dy, name);
    return absl::NotFoundError(t);
  }

  // RNN, GRU, LSTM -> <Op>Gradient (kernels/cpu/rnn_cell.h has the node positions): the forward
  // inputs at their ONNX positions, Y at 8 (added to the forward op when it omits it: the
  // backward pass recomputes the gates from every step's state), then the output gradients
  // present; a gradient out for each input that needs one.
  absl::Status RecurrentRule(OpId id, const Op& op,
                             const std::vector<std::optional<std::string>>& dy,
                             const std::string& name) {
    const std::vector<int64_t> in_slots = Slots(op, "onnx_input_slots", op.inputs.size());
    const std::vector<int64_t> out_slots = Slots(op, "onnx_output_slots", op.outputs.size());
    std::vector<std::string> inputs;
    std::vector<int64_t> input_slots;
    for (size_t k = 0; k < op.inputs.size(); ++k) {
      MG_ASSIGN_OR_RETURN(std::string v, Read(op.inputs[k], op));
      inputs.push_back(std::move(v));
      input_slots.push_back(in_slots[k]);
    }
    const auto y_at = std::find(out_slots.begin(), out_slots.end(), 0);
    if (y_at != out_slots.end()) {
      MG_ASSIGN_OR_RETURN(std::string y, Read(op.outputs[y_at - out_slots.begin()], op));
      inputs.push_back(std::move(y));
    } else {
      // Y [seq, dirs, batch, hidden] (layout 1: [batch, seq, dirs, hidden]) from X and R.
      const TensorType& x = *fwd_.value(op.inputs[0]).type;
      const TensorType& r = *fwd_.value(op.inputs[2]).type;
      if (x.dims.size() != 3 || r.dims.size() != 3) {
        return absl::InvalidArgumentError(
            absl::StrCat("gradient of ", op.Label(), ": X and R must have rank 3"));
      }
      const bool batch_major = op.attributes().GetInt("layout").value_or(0) == 1;
      const std::vector<int64_t> dims =
          batch_major ? std::vector<int64_t>{x.dims[0], x.dims[1], r.dims[0], r.dims[2]}
                      : std::vector<int64_t>{x.dims[0], r.dims[0], x.dims[1], r.dims[2]};
      const std::string y = EnsureOutputSlot(id, out_slots, 0, "all_steps");
      out_.Declare(y, DeclarationOf(TensorType{fwd_.value(op.outputs[0]).type->dtype, dims}));
      inputs.push_back(y);
    }
    input_slots.push_back(8);
    for (size_t k = 0; k < op.outputs.size(); ++k) {
      if (!dy[k].has_value()) continue;
      inputs.push_back(*dy[k]);
      input_slots.push_back(9 + out_slots[k]);
    }
    std::vector<std::string> outputs;
    std::vector<int64_t> output_slots;
    for (size_t k = 0; k < op.inputs.size(); ++k) {
      const int64_t slot = in_slots[k];
      if (slot == 4 || !needs_[op.inputs[k]]) continue;  // sequence_lens: integers
      const std::string g = GradOutput(op.inputs[k]);
      out_.Declare(g, DeclarationOf(*fwd_.value(op.inputs[k]).type));
      outputs.push_back(g);
      output_slots.push_back(slot < 4 ? slot : slot - 1);  // initial_h 5 -> 4, ...
    }
    std::vector<Attribute> attrs;
    for (const Attribute& a : op.attrs) {
      if (a.name != "onnx_input_slots" && a.name != "onnx_output_slots") attrs.push_back(a);
    }
    attrs.push_back(Attribute{"onnx_input_slots", input_slots});
    attrs.push_back(Attribute{"onnx_output_slots", output_slots});
    Emit(op.type + "Gradient", name, std::move(inputs), std::move(outputs), std::move(attrs));
    return absl::OkStatus();
  }

  // The ONNX node positions of an op's inputs or outputs: `attr` where the importer recorded
  // one (a gap before a present one), else 0, 1, ...
  static std::vector<int64_t> Slots(const Op& op, absl::string_view attr, size_t count) {
    std::optional<std::vector<int64_t>> slots = op.attributes().GetInts(attr);
    if (slots.has_value() && slots->size() == count) return *slots;
    std::vector<int64_t> all(count);
    for (size_t k = 0; k < count; ++k) all[k] = static_cast<int64_t>(k);
    return all;
  }

  // Adds output `slot` (an ONNX node position the forward op omitted; `slots`: its present
  // outputs' positions) to forward op `id` as "<first output>_<suffix>"; returns its name. The
  // op's `onnx_output_slots` then names the new position, or goes when no gap is left.
  std::string EnsureOutputSlot(OpId id, const std::vector<int64_t>& slots, int64_t slot,
                               absl::string_view suffix) {
    OpSpec& spec = specs_[id];
    const std::string added = NewName(fwd_.value(fwd_.op(id).outputs[0]), suffix);
    const size_t at = static_cast<size_t>(
        std::lower_bound(slots.begin(), slots.end(), slot) - slots.begin());
    spec.outputs.insert(spec.outputs.begin() + static_cast<long>(at), added);
    std::vector<int64_t> now = slots;
    now.insert(now.begin() + static_cast<long>(at), slot);
    spec.attrs.erase(std::remove_if(spec.attrs.begin(), spec.attrs.end(),
                                    [](const Attribute& a) { return a.name == "onnx_output_slots"; }),
                     spec.attrs.end());
    bool contiguous = true;
    for (size_t k = 0; k < now.size(); ++k) contiguous = contiguous && now[k] == static_cast<int64_t>(k);
    if (!contiguous) spec.attrs.push_back(Attribute{"onnx_output_slots", now});
    return added;
  }

  // ONNX Gemm: Y = alpha op(A) op(B) + beta C, op() transposing when transA/transB say so.
  // Each gradient is emitted only when its input needs one, as ops that already have kernels,
  // so every intermediate is a value the planners see:
  //   dA = alpha dY op(B)^T (transA=1: its transpose, A's layout): one Gemm of dY and B;
  //   dB = alpha op(A)^T dY (transB=1: transposed): one Gemm of A and dY;
  //   dC = beta dY summed over the dims along which C broadcast (GemmBiasRule).
  absl::Status GemmRule(const Op& op, const std::string& dy) {
    const AttributeView attrs = op.attributes();
    const bool trans_a = attrs.GetInt("transA", 0) != 0;
    const bool trans_b = attrs.GetInt("transB", 0) != 0;
    const double alpha = attrs.GetFloat("alpha").value_or(1.0);
    auto gemm = [&](ValueId target, const std::string& a, bool ta, const std::string& b, bool tb) {
      const std::string g = GradOutput(target);
      Emit("Gemm", g, {a, b}, {g},
           {Attribute{"transA", int64_t{ta}}, Attribute{"transB", int64_t{tb}},
            Attribute{"alpha", alpha}});
    };
    if (needs_[op.inputs[0]]) {
      MG_ASSIGN_OR_RETURN(std::string b, Read(op.inputs[1], op));
      if (!trans_a) {
        gemm(op.inputs[0], dy, false, b, !trans_b);  // [M, K] = dY op(B)^T
      } else {
        gemm(op.inputs[0], b, trans_b, dy, true);  // [K, M] = op(B) dY^T
      }
    }
    if (needs_[op.inputs[1]]) {
      MG_ASSIGN_OR_RETURN(std::string a, Read(op.inputs[0], op));
      if (!trans_b) {
        gemm(op.inputs[1], a, !trans_a, dy, false);  // [K, N] = op(A)^T dY
      } else {
        gemm(op.inputs[1], dy, true, a, trans_a);  // [N, K] = dY^T op(A)
      }
    }
    if (op.inputs.size() > 2 && needs_[op.inputs[2]]) return GemmBiasRule(op, dy);
    return absl::OkStatus();
  }

  // dC of Gemm: C broadcasts one way to Y's [M, N] (right-aligned: [], [1], [N], [1, N],
  // [M, 1], [M, N], ...). dY is summed over the axes where C's dim is 1 or missing and Y's is
  // not (ReduceSum, keepdims), reshaped to C's dims when they differ (C of rank < 2), and
  // multiplied by a scalar beta (ConstantFill + Mul) unless beta = 1; only the steps needed,
  // so a full [M, N] C with beta = 1 receives dY itself. beta = 0: dC is zeros (a Fill, not
  // 0 * dY, which would turn an infinite dY into NaN).
  absl::Status GemmBiasRule(const Op& op, const std::string& dy) {
    const ValueId c = op.inputs[2];
    const Value& cv = fwd_.value(c);
    const std::string dtype(DataTypeName(cv.type->dtype));
    const double beta = op.attributes().GetFloat("beta").value_or(1.0);
    if (beta == 0.0) {
      MG_ASSIGN_OR_RETURN(std::string c_name, Read(c, op));
      const std::string g = GradOutput(c);
      Emit("ConstantFill", g, {c_name}, {g},
           {Attribute{"value", 0.0}, Attribute{"dtype", dtype}});
      return absl::OkStatus();
    }
    const std::vector<int64_t>& y_dims = fwd_.value(op.outputs[0]).type->dims;
    const std::vector<int64_t>& c_dims = cv.type->dims;
    std::vector<int64_t> c_as_2d(2, 1);  // C's dims right-aligned against [M, N]
    std::vector<int64_t> axes;
    // A C of fixed dims (a bias) is summed over its 1s even where Y's dim is 1 at this binding:
    // the same ops at every binding of a batch symbol (as SumTo).
    const bool fixed = SumsOverItsOnes(op, c);
    for (size_t i = 0; i < 2; ++i) {
      if (i + c_dims.size() >= 2) c_as_2d[i] = c_dims[i + c_dims.size() - 2];
      if (c_as_2d[i] != y_dims[i] || (fixed && c_as_2d[i] == 1)) {
        axes.push_back(static_cast<int64_t>(i));
      }
    }
    const bool reduce = !axes.empty();
    const bool reshape = c_as_2d != c_dims;
    const bool scale = beta != 1.0;
    if (!reduce && !reshape && !scale) {
      Contribute(c, dy);
      return absl::OkStatus();
    }
    // Each step reads the previous step's output; the last one writes C's gradient.
    int steps_left = int{reduce} + int{reshape} + int{scale};
    auto step_output = [&]() {
      return --steps_left == 0 ? GradOutput(c) : NewName(cv, "grad_partial");
    };
    std::string g = dy;
    if (reduce) {
      const std::string out = step_output();
      Emit("ReduceSum", out, {g}, {out},
           {Attribute{"axes", axes}, Attribute{"keepdims", int64_t{1}}});
      g = out;
    }
    if (reshape) {
      const std::string out = step_output();
      Emit("Reshape", out, {g}, {out},
           {Attribute{"shape", c_dims}, Attribute{"allowzero", int64_t{1}}});
      g = out;
    }
    if (scale) {
      const std::string beta_name = Scalar(beta, cv.type->dtype);
      const std::string out = step_output();
      Emit("Mul", out, {g, beta_name}, {out});
    }
    return absl::OkStatus();
  }

  // ONNX BatchNormalization -> BatchNormalizationGradient(dY, X, scale, mean, var), in the mode
  // graph/batch_normalization_mode.h gives the forward op:
  //   training: Y normalises with the batch's statistics, a function of X; the gradient reads
  //     them from the forward op's saved_mean and saved_var outputs (opset 9's outputs 3 and 4,
  //     added when missing, with running_mean/running_var before them if those are missing
  //     too). Y does not depend on input_mean and input_var: they get no gradient.
  //   inference: the statistics are input_mean and input_var; when they need gradients the op
  //     also computes dmean and dvar.
  // Gradients arriving at the running or saved statistics are refused, as are ONNX nodes that
  // omit an optional output before a present one (their outputs are not at their positions).
  absl::Status BatchNormalizationRule(OpId id, const Op& op,
                                      const std::vector<std::optional<std::string>>& dy) {
    auto unsupported = [&](absl::string_view what) {
      return absl::UnimplementedError(
          absl::StrCat("gradient of ", op.Label(), ": ", what, " (not supported)"));
    };
    MG_RETURN_IF_ERROR(CheckOnlyOutput0HasGradient(op, dy));
    const AttributeView attrs = op.attributes();
    if (attrs.Has("onnx_output_slots")) {
      return unsupported("an omitted optional output before a present one");
    }
    if (attrs.GetInt("spatial", 1) == 0) return unsupported("spatial=0");
    absl::StatusOr<bool> training =
        BatchNormalizationTrains(attrs.GetInt("training_mode"), attrs.GetInt("is_test"),
                                 static_cast<int>(op.outputs.size()));
    if (!training.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(op.Label(), ": ", training.status().message()));
    }
    MG_ASSIGN_OR_RETURN(std::string x, Read(op.inputs[0], op));
    MG_ASSIGN_OR_RETURN(std::string scale, Read(op.inputs[1], op));
    std::string stats[2];  // mean, var
    if (*training) {
      EnsureOutput(id, 1, "running_mean");  // (nothing to do when the op has them)
      EnsureOutput(id, 2, "running_var");
      for (size_t i = 3; i < 5; ++i) {
        if (i < op.outputs.size()) {
          MG_ASSIGN_OR_RETURN(stats[i - 3], Read(op.outputs[i], op));
        } else {
          stats[i - 3] = EnsureOutput(id, i, i == 3 ? "saved_mean" : "saved_var");
        }
      }
    } else {
      MG_ASSIGN_OR_RETURN(stats[0], Read(op.inputs[3], op));
      MG_ASSIGN_OR_RETURN(stats[1], Read(op.inputs[4], op));
    }
    std::vector<std::string> outs = {GradOutput(op.inputs[0]), GradOutput(op.inputs[1]),
                                     GradOutput(op.inputs[2])};
    if (!*training && (needs_[op.inputs[3]] || needs_[op.inputs[4]])) {
      outs.push_back(GradOutput(op.inputs[3]));
      outs.push_back(GradOutput(op.inputs[4]));
    }
    Emit("BatchNormalizationGradient", op.name + "_grad", {*dy[0], x, scale, stats[0], stats[1]},
         outs,
         {Attribute{"epsilon", attrs.GetFloat("epsilon").value_or(1e-5)},
          Attribute{"training_mode", int64_t{*training}}});
    return absl::OkStatus();
  }

  // Concat -> Split of dY along the same axis into the inputs' sizes (Caffe2's rule). The axis
  // is written normalised, so the Split reads it exactly as the Concat did (`order` included).
  absl::Status ConcatBackward(const Op& op, const std::vector<std::optional<std::string>>& dy) {
    MG_RETURN_IF_ERROR(CheckOnlyOutput0HasGradient(op, dy));  // Caffe2's split_info: int32
    const AttributeView attrs = op.attributes();
    if (attrs.GetInt("add_axis", 0) != 0) {
      return absl::UnimplementedError(
          absl::StrCat("gradient of ", op.Label(), ": add_axis is not supported"));
    }
    const int64_t rank = static_cast<int64_t>(fwd_.value(op.outputs[0]).type->dims.size());
    const std::optional<std::string> order = attrs.GetString("order");
    int64_t axis = attrs.GetInt("axis", order.has_value() && *order == "NHWC" ? 3 : 1);
    if (axis < 0) axis += rank;
    std::vector<int64_t> sizes;
    std::vector<std::string> outs;
    for (ValueId v : op.inputs) {
      sizes.push_back(fwd_.value(v).type->dims[axis]);
      outs.push_back(GradOutput(v));
    }
    Emit("Split", op.name + "_grad", {*dy[0]}, outs,
         {Attribute{"axis", axis}, Attribute{"split", sizes}});
    return absl::OkStatus();
  }

  absl::StatusOr<Graph> Finish() {
    CopyInterface(fwd_, out_);
    for (OpSpec& spec : specs_) out_.AddOp(std::move(spec));
    for (OpSpec& spec : backward_) out_.AddOp(std::move(spec));
    MG_ASSIGN_OR_RETURN(Graph graph, std::move(out_).Build());
    MG_RETURN_IF_ERROR(InferShapes(graph, ShapeBindings{}));
    // The interface was declared at the forward net's types: its inputs' symbols go back.
    RestoreSymbolicInputs(fwd_, graph);
    return graph;
  }

  const Graph& fwd_;
  GraphBuilder out_;
  std::vector<OpSpec> specs_;     // the forward ops, possibly with saved outputs added
  std::vector<OpSpec> backward_;  // in emission order
  std::vector<std::vector<std::string>> contributions_;  // per forward value
  std::vector<std::string> first_piece_;  // per forward value: its own "X_grad" piece, if any
  std::vector<int> autosplits_;           // per forward value: "_X_grad_autosplit_<k>" made
  // Values whose readers tile them (TilingSlices; nullopt: they do not), and the gradients
  // of the pieces seen so far, joined by JoinTiles when the value's gradient is asked for.
  std::map<ValueId, std::optional<std::pair<int64_t, std::vector<OpId>>>> tilings_;
  std::map<ValueId, std::map<OpId, std::string>> tile_grads_;
  // Rearranged (memo), the ops a value's remaking takes, and the copies made (Remake).
  std::map<ValueId, bool> rearranged_;
  std::map<ValueId, int> remake_ops_;
  std::map<ValueId, std::string> remade_;
  std::vector<bool> needs_;
  std::vector<bool> fixed_;  // dims independent of the model's symbols (see MarkNeeds)
  absl::flat_hash_set<std::string> used_names_;
  std::set<std::string> missing_rules_;  // op types without a rule on the path to a loss
  std::string missing_example_;          // the first such op, for the message
  // ConstantFill scalars made, by value, type and device.
  std::map<std::tuple<double, DataType, int16_t, int16_t>, std::string> scalars_;
  Device device_;  // the device of the forward op whose gradient ops are being emitted
};

}  // namespace

bool HasGradientOps(const Graph& graph) {
  for (const Op& op : graph.ops()) {
    if (IsGradientOp(op)) return true;
  }
  return false;
}

std::vector<ValueId> TrainableParams(const Graph& graph) {
  std::vector<bool> trainable(graph.num_values(), false);
  for (const auto& [param, grad] : graph.param_grads()) {
    if (graph.value(param).role == Role::kParam) trainable[param] = true;
  }
  if (graph.param_grads().empty()) {
    for (ValueId id = 0; id < graph.num_values(); ++id) {
      const Value& v = graph.value(id);
      if (v.role == Role::kParam && OwnsStaticStorage(v) &&
          graph.FindValue(absl::StrCat(v.name, "_grad")).has_value()) {
        trainable[id] = true;
      }
    }
  }
  std::vector<ValueId> params;
  for (ValueId id = 0; id < graph.num_values(); ++id) {
    if (trainable[id]) params.push_back(id);
  }
  return params;
}

absl::StatusOr<Graph> AddGradientOps(const Graph& forward,
                                     const std::vector<std::string>& losses) {
  if (!forward.AllTypesKnown()) {
    return absl::FailedPreconditionError(
        "the gradient builder needs a typed graph: run shape inference first");
  }
  MG_RETURN_IF_ERROR(RefuseControlRegions(forward, "training (the gradient builder)"));
  std::vector<ValueId> loss_ids;
  if (losses.empty()) {
    loss_ids = forward.losses();
  } else {
    for (const std::string& name : losses) {
      const std::optional<ValueId> id = forward.FindValue(name);
      if (!id.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat("loss '", name, "' is not a value"));
      }
      loss_ids.push_back(*id);
    }
  }
  if (loss_ids.empty()) {
    return absl::InvalidArgumentError(
        "no loss to differentiate: declare one in the net or name it with --loss");
  }
  for (ValueId id : loss_ids) {
    if (!IsFloatingPoint(forward.value(id).type->dtype)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "loss '", forward.value(id).DisplayName(), "' is not floating-point"));
    }
  }
  return Builder(forward).Build(loss_ids);
}

}  // namespace memonger::graph
