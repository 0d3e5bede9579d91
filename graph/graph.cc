#include "graph/graph.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/dependencies.h"
#include "util/check.h"
#include "util/limits.h"
#include "util/status_macros.h"

namespace memonger::graph {

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kInput: return "input";
    case Role::kOutput: return "output";
    case Role::kParam: return "param";
    case Role::kActivation: return "activation";
    case Role::kGradient: return "gradient";
    case Role::kWorkspace: return "workspace";
    case Role::kConstant: return "constant";
  }
  return "activation";
}

absl::StatusOr<Role> ParseRole(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  for (Role r : {Role::kInput, Role::kOutput, Role::kParam, Role::kActivation, Role::kGradient,
                 Role::kWorkspace, Role::kConstant}) {
    if (RoleName(r) == n) return r;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown role '", name,
      "' (expected input, output, param, activation, gradient, workspace, constant)"));
}

std::string DeviceToString(const Device& device) {
  switch (device.type) {
    case 0: return "cpu";
    case 1: return absl::StrCat("cuda:", device.id);
    case 6: return absl::StrCat("hip:", device.id);
    default: return absl::StrCat("device", device.type, ":", device.id);
  }
}

std::string Value::DisplayName() const {
  return version == 0 ? name : absl::StrCat(name, "@", version);
}

absl::StatusOr<int64_t> ValueByteSize(const Value& v) {
  absl::StatusOr<int64_t> bytes = ByteSize(*v.type, "");
  if (bytes.ok()) return bytes;
  return ByteSize(*v.type, absl::StrCat("value '", v.DisplayName(), "'"));
}

std::string Op::Label() const { return absl::StrCat(type, " op '", name, "'"); }

Graph::Graph(const Graph& other)
    : name_(other.name_),
      values_(other.values_),
      ops_(other.ops_),
      inputs_(other.inputs_),
      outputs_(other.outputs_),
      losses_(other.losses_),
      param_grads_(other.param_grads_),
      topological_order_(other.topological_order_),
      consumer_starts_(other.consumer_starts_),
      consumer_ops_(other.consumer_ops_),
      prefers_parallel_(other.prefers_parallel_),
      net_type_(other.net_type_),
      static_data_(other.static_data_),
      data_dependent_sizes_(other.data_dependent_sizes_) {
  // Every member but the index is copied above; the index reads this graph's own names.
  versions_ = NameIndex(values_.data(), values_.size());
  for (ValueId id = 0; id < num_values(); ++id) versions_.Add(id);
}

const std::vector<DataDependentSize>& Graph::data_dependent_sizes() const {
  static const std::vector<DataDependentSize>* const kNone = new std::vector<DataDependentSize>();
  return data_dependent_sizes_ ? data_dependent_sizes_->bounded : *kNone;
}

bool Graph::SizedFromBound(absl::string_view name) const {
  return data_dependent_sizes_ != nullptr && data_dependent_sizes_->derived.contains(name);
}

void Graph::set_data_dependent_sizes(DataDependentSizes sizes) {
  data_dependent_sizes_ =
      sizes.bounded.empty() && sizes.derived.empty()
          ? nullptr
          : std::make_shared<const DataDependentSizes>(std::move(sizes));
}

Graph& Graph::operator=(const Graph& other) {
  if (this != &other) *this = Graph(other);
  return *this;
}

void Graph::IndexConsumers() {
  // Two passes over the inputs, ops ascending: count each value's readers, then list them. An op
  // that reads a value twice is its last reader so far when it comes to the second read. The
  // reads fit int32 offsets: each is an input name of a file under the 2 GiB input limit (a
  // generated workload has a few per op, at most 2^22 ops).
  const size_t n = values_.size();
  std::vector<OpId> last_reader(n, kNone);
  consumer_starts_.assign(n + 1, 0);
  for (OpId i = 0; i < num_ops(); ++i) {
    for (ValueId in : ops_[i].inputs) {
      if (last_reader[in] == i) continue;
      last_reader[in] = i;
      ++consumer_starts_[in + 1];
    }
  }
  for (size_t v = 0; v < n; ++v) consumer_starts_[v + 1] += consumer_starts_[v];
  consumer_ops_.assign(consumer_starts_[n], kNone);
  std::vector<int32_t>& next = last_reader;  // reused: each value's next free slot
  std::copy(consumer_starts_.begin(), consumer_starts_.end() - 1, next.begin());
  for (OpId i = 0; i < num_ops(); ++i) {
    for (ValueId in : ops_[i].inputs) {
      if (next[in] > consumer_starts_[in] && consumer_ops_[next[in] - 1] == i) continue;
      consumer_ops_[next[in]++] = i;
    }
  }
}

std::optional<ValueId> Graph::FindValue(absl::string_view name) const {
  absl::Span<const ValueId> versions = versions_.Versions(name);
  if (versions.empty()) return std::nullopt;
  return versions.back();
}

absl::Span<const ValueId> Graph::Versions(absl::string_view name) const {
  return versions_.Versions(name);
}

std::vector<ValueId> Graph::FindVersions(absl::string_view name) const {
  absl::Span<const ValueId> versions = versions_.Versions(name);
  return std::vector<ValueId>(versions.begin(), versions.end());
}

std::vector<ValueId> Graph::InPlaceRoots() const {
  std::vector<ValueId> roots(values_.size());
  for (ValueId v = 0; v < num_values(); ++v) {
    const ValueId overwritten = values_[v].inplace_of;
    if (overwritten == kNone) {
      roots[v] = v;
    } else if (overwritten < v) {  // the builder creates an op's outputs after its inputs
      roots[v] = roots[overwritten];
    } else {  // a graph edited after Build(): walk the chain
      ValueId r = v;
      while (values_[r].inplace_of != kNone) r = values_[r].inplace_of;
      roots[v] = r;
    }
  }
  return roots;
}

bool Graph::AllTypesKnown() const {
  return std::all_of(values_.begin(), values_.end(),
                     [](const Value& v) { return v.type.has_value(); });
}

namespace {

bool IsGradientOp(const Op& op) {
  return op.is_gradient_op ||
         (op.type.size() > 8 && op.type.compare(op.type.size() - 8, 8, "Gradient") == 0);
}


}  // namespace

void GraphBuilder::AddOp(OpSpec spec) {
  Op& op = ops_.emplace_back();
  op.name = std::move(spec.name);
  op.type = std::move(spec.type);
  op.domain = std::move(spec.domain);
  op.attrs = std::move(spec.attrs);
  op.device = spec.device;
  op.engine = std::move(spec.engine);
  op.is_gradient_op = spec.is_gradient_op;
  op.view = spec.view;
  OpNameCounts& counts = op_name_counts_.emplace_back();
  counts.inputs = AddNames(spec.inputs);
  counts.outputs = AddNames(spec.outputs);
  counts.control_inputs = AddNames(spec.control_inputs);
}

uint32_t GraphBuilder::AddNames(const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    name_chars_.append(name);
    name_ends_.push_back(name_chars_.size());
  }
  return static_cast<uint32_t>(names.size());  // a vector of 2^32 strings does not fit memory
}

namespace {

// Ops have a handful of inputs and outputs: below this many, a linear scan beats a hash set
// (no allocation per op, which dominated building a graph of a million values).
constexpr size_t kLinearScan = 16;

}  // namespace

// Every op has a type and a name (a default one given), no empty input or output name, and no
// output written twice.
absl::Status GraphBuilder::CheckOpNames() {
  // Each op's names start where the previous op's end: inputs, outputs, control inputs.
  size_t first_name = 0;
  for (OpId i = 0; i < static_cast<OpId>(ops_.size()); ++i) {
    Op& op = ops_[i];
    const OpNameCounts& counts = op_name_counts_[i];
    const size_t first_output = first_name + counts.inputs;
    if (op.type.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("op #", i, " ('", op.name, "') has no type"));
    }
    if (op.name.empty()) op.name = absl::StrCat(op.type, "_", i);
    absl::flat_hash_set<absl::string_view> seen;
    for (size_t k = 0; k < counts.outputs; ++k) {
      const absl::string_view out = Name(first_output + k);
      if (out.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(op.type, " op '", op.name, "' has an output with an empty name"));
      }
      bool twice = false;
      if (counts.outputs <= kLinearScan) {
        for (size_t j = 0; j < k && !twice; ++j) twice = Name(first_output + j) == out;
      } else {
        twice = !seen.insert(out).second;
      }
      if (twice) {
        return absl::InvalidArgumentError(absl::StrCat(op.type, " op '", op.name,
                                                       "' writes output '", out, "' twice"));
      }
    }
    for (size_t s = 0; s < counts.inputs; ++s) {
      if (Name(first_name + s).empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(op.type, " op '", op.name, "' has an input with an empty name"));
      }
    }
    first_name = first_output + counts.outputs + counts.control_inputs;
  }
  return absl::OkStatus();
}

// A new version of `name`, with the declaration and alignment the file gave the name. `name`
// is taken by value and moved into the value (built from the builder's name buffer).
ValueId GraphBuilder::NewValue(Graph& g, std::string name, OpId producer) {
  const ValueId id = static_cast<ValueId>(g.values_.size());
  MG_CHECK(g.values_.size() < g.values_.capacity());  // the index reads names in place
  Value& v = g.values_.emplace_back();
  v.name = std::move(name);
  v.version = g.versions_.Add(id);
  v.producer = producer;
  if (v.version > 0) {
    // Every version, the same declaration.
    v.declared = g.values_[g.versions_.Versions(v.name).front()].declared;
  }
  if (!facts_.empty()) {
    if (auto it = facts_.find(v.name); it != facts_.end()) {
      NameFacts& facts = it->second;
      // Build() consumes the builder: the first version takes the declaration itself.
      if (v.version == 0 && facts.declared) v.declared = std::move(facts.declaration);
      v.alignment = facts.alignment;
    }
  }
  return id;
}

// The external inputs, then every op's inputs and outputs as values in program order.
absl::Status GraphBuilder::ResolveInProgramOrder(Graph& g, std::vector<PendingRead>& pending) {
  absl::flat_hash_set<absl::string_view> external_set;  // views of external_inputs_
  external_set.reserve(external_inputs_.size());
  for (const std::string& name : external_inputs_) {
    if (name.empty()) return absl::InvalidArgumentError("an external input has an empty name");
    if (!external_set.insert(name).second) continue;  // listed twice: one value
    g.inputs_.push_back(NewValue(g, name, kNone));
  }

  // Program order: inputs resolve to the latest version written so far; outputs become new
  // versions. Reads of names not yet written wait in `pending`.
  // The latest version of a name written so far is the last of its versions (values are
  // made in program order): the name index answers it, no second map.
  auto current = [&](absl::string_view name) -> ValueId {
    absl::Span<const ValueId> versions = g.versions_.Versions(name);
    return versions.empty() ? kNone : versions.back();
  };
  // Build() consumes the builder: its ops become the graph's, and its names are released once
  // resolved.
  g.ops_ = std::move(ops_);
  ops_ = std::vector<Op>();
  size_t first_name = 0;
  for (OpId i = 0; i < g.num_ops(); ++i) {
    const OpNameCounts& counts = op_name_counts_[i];
    const size_t first_output = first_name + counts.inputs;
    const size_t first_control = first_output + counts.outputs;
    Op& op = g.ops_[i];
    for (size_t s = 0; s < counts.inputs; ++s) {
      const absl::string_view name = Name(first_name + s);
      const ValueId in = current(name);
      op.inputs.push_back(in);
      if (in == kNone) pending.push_back({i, s, false, std::string(name)});
    }
    for (size_t s = 0; s < counts.control_inputs; ++s) {
      const absl::string_view name = Name(first_control + s);
      const ValueId in = current(name);
      op.control_inputs.push_back(in);
      if (in == kNone) pending.push_back({i, s, true, std::string(name)});
    }
    // The first input slot of each name, to find in-place writes in O(inputs + outputs) (a
    // linear scan for the usual few inputs).
    absl::flat_hash_map<absl::string_view, size_t> input_slot;
    const bool scan = counts.inputs <= kLinearScan;
    if (!scan) {
      for (size_t s = counts.inputs; s-- > 0;) input_slot[Name(first_name + s)] = s;
    }
    for (size_t k = 0; k < counts.outputs; ++k) {
      const absl::string_view out = Name(first_output + k);
      std::optional<size_t> slot;
      if (scan) {
        for (size_t s = 0; s < counts.inputs && !slot; ++s) {
          if (Name(first_name + s) == out) slot = s;
        }
      } else if (auto at = input_slot.find(out); at != input_slot.end()) {
        slot = at->second;
      }
      const bool in_place = slot.has_value();
      const ValueId overwritten = in_place ? op.inputs[*slot] : kNone;
      if (in_place && overwritten == kNone) {
        return absl::InvalidArgumentError(absl::StrCat(
            op.type, " op '", op.name, "' writes '", out,
            "' in place, but no earlier op produces it and it is not an external input"));
      }
      const ValueId id = NewValue(g, std::string(out), i);
      g.values_[id].inplace_of = overwritten;
      op.outputs.push_back(id);
    }
    first_name = first_control + counts.control_inputs;
  }
  // Released, not cleared (`= {}` would keep the capacity).
  op_name_counts_ = std::vector<OpNameCounts>();
  name_chars_ = std::string();
  name_ends_ = std::vector<size_t>();
  return absl::OkStatus();
}

// Reads of names written later in the list (nets not in dependency order), resolved by the
// writers of each name (built only for such nets).
absl::Status GraphBuilder::ResolveLaterWrites(Graph& g, const std::vector<PendingRead>& pending) {
  absl::flat_hash_map<std::string, std::vector<OpId>> writers;
  if (!pending.empty()) {
    for (OpId i = 0; i < g.num_ops(); ++i) {
      for (ValueId out : g.ops_[i].outputs) writers[g.values_[out].name].push_back(i);
    }
  }
  for (const PendingRead& read : pending) {
    const Op& reader = g.ops_[read.op];
    const std::string& name = read.name;
    auto w = writers.find(name);
    if (w == writers.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          reader.type, " op '", reader.name, "' reads '", name,
          "', which no op produces and which is not declared as an external input"));
    }
    if (w->second.size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          reader.type, " op '", reader.name, "' reads '", name, "' before any op writes it, and ",
          w->second.size(), " later ops write it: which one is meant is ambiguous"));
    }
    const ValueId id = g.versions_.Versions(name).front();  // a writer made it
    if (read.control) {
      g.ops_[read.op].control_inputs[read.slot] = id;
    } else {
      g.ops_[read.op].inputs[read.slot] = id;
    }
  }

  return absl::OkStatus();
}

// External outputs, losses and parameter gradients by name.
absl::Status GraphBuilder::ResolveNamedValues(Graph& g) const {
  absl::flat_hash_set<ValueId> output_set;
  for (const std::string& name : external_outputs_) {
    auto id = g.FindValue(name);
    if (!id) {
      return absl::InvalidArgumentError(absl::StrCat(
          "external output '", name, "' is neither produced by an op nor an external input"));
    }
    if (output_set.insert(*id).second) g.outputs_.push_back(*id);
  }
  for (const std::string& name : losses_) {
    auto id = g.FindValue(name);
    if (!id) return absl::InvalidArgumentError(absl::StrCat("loss '", name, "' is not in the net"));
    g.losses_.push_back(*id);
  }
  for (const auto& [param, grad] : param_grads_) {
    auto p = g.FindValue(param);
    auto d = g.FindValue(grad);
    if (!p || !d) {
      return absl::InvalidArgumentError(absl::StrCat("param_grad ", param, " -> ", grad, ": '",
                                                     !p ? param : grad, "' is not in the net"));
    }
    g.param_grads_.emplace_back(*p, *d);
  }

  return absl::OkStatus();
}

// Roles: declared > external output > (external: input) > gradient-op output > activation.
// A declaration of a name the net does not have, and a static value an op writes, are refused.
absl::Status GraphBuilder::AssignRoles(Graph& g) const {
  for (Value& v : g.values_) {
    if (v.producer == kNone) {
      v.role = Role::kInput;
    } else {
      v.role = IsGradientOp(g.ops_[v.producer]) ? Role::kGradient : Role::kActivation;
    }
  }
  for (const auto& [param, grad] : g.param_grads_) g.values_[grad].role = Role::kGradient;
  for (ValueId id : g.outputs_) {
    if (g.values_[id].producer != kNone) g.values_[id].role = Role::kOutput;
  }
  if (!facts_.empty()) {
    // A declaration of a name the net does not have (often a typo) would declare nothing and
    // say nothing: the value it meant goes undeclared.
    std::vector<absl::string_view> unknown;
    for (const auto& [name, facts] : facts_) {
      if (g.versions_.Versions(name).empty()) unknown.push_back(name);
    }
    if (!unknown.empty()) {
      std::sort(unknown.begin(), unknown.end());
      return absl::InvalidArgumentError(absl::StrCat(
          "a declaration (value_info) names '", unknown.front(),
          "', which is no value of the net: no op reads or writes it and it is not an external "
          "input or output"));
    }
    for (Value& v : g.values_) {
      if (auto it = facts_.find(v.name); it != facts_.end() && it->second.role.has_value()) {
        v.role = *it->second.role;
        v.role_declared = true;
      }
    }
  }
  for (const Value& v : g.values_) {
    if (!IsStatic(v.role) || v.producer == kNone) continue;
    // An op may write a static value only in place over an external input (an optimizer's
    // update of a param), which keeps that input's storage, outside the arena. (Roles are per
    // name, so the input has the same role.)
    ValueId base = v.inplace_of;
    while (base != kNone && g.values_[base].inplace_of != kNone) base = g.values_[base].inplace_of;
    if (base == kNone || g.values_[base].producer != kNone) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", v.DisplayName(), "' is declared ", RoleName(v.role), " but ",
          g.ops_[v.producer].type, " op '", g.ops_[v.producer].name,
          "' writes it; static values must be external inputs"));
    }
  }
  return absl::OkStatus();
}

// The topological order the graph keeps (Graph::TopologicalOrder): program order where it is
// valid, else the smallest-index order; a cycle is refused with a value on it.
absl::Status GraphBuilder::OrderOps(Graph& g) {
  // In program order already (every producer and every overwritten value's other readers come
  // before the op)? Then that is the topological order (Kahn's algorithm below, taking the ready
  // op listed first, gives exactly it), and no dependency graph need be built.
  bool program_order_is_topological = true;
  for (OpId i = 0; i < g.num_ops() && program_order_is_topological; ++i) {
    const Op& op = g.ops_[i];
    for (ValueId in : op.inputs) {
      if (g.values_[in].producer >= i) program_order_is_topological = false;
    }
    for (ValueId in : op.control_inputs) {
      if (g.values_[in].producer >= i) program_order_is_topological = false;
    }
  }
  for (const Value& v : g.values_) {
    if (v.inplace_of == kNone || !program_order_is_topological) continue;
    for (OpId reader : g.consumers(v.inplace_of)) {
      if (reader != v.producer && reader >= v.producer) program_order_is_topological = false;
    }
  }
  if (program_order_is_topological) {
    g.topological_order_.resize(g.num_ops());
    std::iota(g.topological_order_.begin(), g.topological_order_.end(), 0);
    return absl::OkStatus();
  }

  // The smallest-index topological order: program order where valid. Ops left out of it lie
  // on a cycle (or after one), which is reported with a value on it. An op that reads its own
  // output (a control input naming it) waits for itself: a cycle of one op, which the
  // dependency lists leave out (graph::ForEachPredecessor never names the op itself).
  std::optional<std::pair<OpId, OpId>> back_edge;
  for (OpId i = 0; i < g.num_ops() && !back_edge; ++i) {
    auto reads_own_output = [&](const auto& reads) {
      return std::any_of(reads.begin(), reads.end(),
                         [&](ValueId in) { return g.values_[in].producer == i; });
    };
    if (reads_own_output(g.ops_[i].inputs) || reads_own_output(g.ops_[i].control_inputs)) {
      back_edge = std::make_pair(i, i);
    }
  }
  if (!back_edge) {
    const std::vector<std::vector<OpId>> successors = OpSuccessors(g);
    g.topological_order_ = SmallestIndexOrder(successors);
    if (static_cast<int>(g.topological_order_.size()) != g.num_ops()) {
      back_edge = FindCycleEdge(successors);
      if (!back_edge) {
        return absl::InternalError("topological order incomplete although no cycle was found");
      }
    }
  }
  if (back_edge) {
    const auto [from, to] = *back_edge;
    // A data edge names the value read; an in-place ordering edge names the overwritten one.
    std::string value_name = "?";
    for (ValueId out : g.ops_[to].outputs) {
      const ValueId base = g.values_[out].inplace_of;
      if (base != kNone) value_name = g.values_[base].DisplayName();
    }
    for (ValueId out : g.ops_[from].outputs) {
      const auto& ins = g.ops_[to].inputs;
      const auto& ctl = g.ops_[to].control_inputs;
      if (std::find(ins.begin(), ins.end(), out) != ins.end() ||
          std::find(ctl.begin(), ctl.end(), out) != ctl.end()) {
        value_name = g.values_[out].DisplayName();
        break;
      }
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "the net has a cycle: value '", value_name, "' (written by ", g.ops_[from].Label(),
        ", read by ", g.ops_[to].Label(), ") lies on it"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Graph> GraphBuilder::Build() && {
  if (static_cast<int64_t>(ops_.size()) > util::kMaxOps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the net has ", ops_.size(), " ops, more than the limit of ", util::kMaxOps));
  }
  Graph g;
  g.name_ = name_;
  g.prefers_parallel_ = prefers_parallel_;
  g.net_type_ = net_type_;
  g.static_data_ = std::move(static_data_);
  g.data_dependent_sizes_ = std::move(data_dependent_sizes_);

  // Sized up front: a million values moved on every growth of these vectors, and a map rehashed
  // as it grows, were a large part of building a big graph.
  size_t value_count = external_inputs_.size();
  for (const OpNameCounts& counts : op_name_counts_) value_count += counts.outputs;
  g.values_.reserve(value_count);
  g.versions_ = NameIndex(g.values_.data(), value_count);
  MG_RETURN_IF_ERROR(CheckOpNames());
  std::vector<PendingRead> pending;
  MG_RETURN_IF_ERROR(ResolveInProgramOrder(g, pending));
  MG_RETURN_IF_ERROR(ResolveLaterWrites(g, pending));
  MG_RETURN_IF_ERROR(ResolveNamedValues(g));
  MG_RETURN_IF_ERROR(AssignRoles(g));
  // The builder's own storage is spent: released now, so that what follows (and shape
  // inference after Build()) reuses its memory. (Assigning `{}` would clear and keep the
  // capacity.)
  facts_ = decltype(facts_)();
  g.IndexConsumers();
  MG_RETURN_IF_ERROR(OrderOps(g));
  return g;
}

}  // namespace memonger::graph
