#include "report/net_rewrite.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/in_place.h"
#include "graph/net_def.h"
#include "util/status_macros.h"

namespace memonger {
namespace {

using graph::kNone;
using graph::ValueId;

// The net `graph` describes, ops in `order`, every value named by `names`.
proto::NetDef NetWithNames(const graph::Graph& graph, const Plan& plan,
                           const std::vector<std::string>& names) {
  proto::NetDef original = graph::GraphToNetDef(graph);
  proto::NetDef net;
  net.set_name(original.name());
  for (ValueId id : graph.inputs()) net.add_external_input(names[id]);
  for (ValueId id : graph.outputs()) net.add_external_output(names[id]);
  for (const PlanStep& step : plan.steps) {
    const graph::Op& op = graph.op(step.op);
    proto::OperatorDef* def = net.add_op();
    *def = original.op(step.op);
    def->clear_input();
    def->clear_output();
    def->clear_control_input();
    for (ValueId in : op.inputs) def->add_input(names[in]);
    for (ValueId out : op.outputs) def->add_output(names[out]);
    for (ValueId c : op.control_inputs) def->add_control_input(names[c]);
  }
  // Declarations and roles stay with the names that kept them. A name's declaration holds for
  // every value bearing it (every version, as a net is read), so a declared type is dropped
  // where a value of another type took the name (a buffer named after the graph output it
  // holds): the net it was written into did not load back ("output 'output' is declared
  // float32[4,92] but the op produces float32[4,16]").
  absl::flat_hash_map<std::string, bool> kept;  // name -> every bearer has the name's type
  absl::flat_hash_map<std::string, ValueId> own;  // name -> its oldest version that kept it
  for (ValueId v = 0; v < graph.num_values(); ++v) {
    if (names[v] == graph.value(v).name && !own.contains(names[v])) own[names[v]] = v;
  }
  for (ValueId v = 0; v < graph.num_values(); ++v) {
    auto it = own.find(names[v]);
    if (it == own.end()) continue;
    const std::optional<graph::TensorType>& type = graph.value(v).type;
    const std::optional<graph::TensorType>& named = graph.value(it->second).type;
    const bool same = type.has_value() == named.has_value() && (!type || *type == *named);
    auto [entry, fresh] = kept.emplace(names[v], same);
    if (!fresh) entry->second = entry->second && same;
  }
  absl::flat_hash_set<std::string> declared;
  absl::flat_hash_map<std::string, const proto::ValueInfo*> info_of;
  for (const proto::ValueInfo& info : original.value_info()) {
    info_of.emplace(info.name(), &info);
    auto it = kept.find(info.name());
    if (it == kept.end()) continue;
    proto::ValueInfo& written = *net.add_value_info();
    written = info;
    declared.insert(info.name());
    if (!it->second) {
      written.clear_dtype();
      written.clear_has_shape();
      written.clear_dim();
    }
  }
  // A new name whose bearers all have one type, one of them declared under its old name,
  // carries that declaration: an op without a shape function (HardSwish) writing over the
  // input whose bytes it took is typed from it when the net is read. In value order.
  absl::flat_hash_map<std::string, bool> one_type;  // new name -> every bearer has one type
  absl::flat_hash_map<std::string, ValueId> first_bearer;
  for (ValueId v = 0; v < graph.num_values(); ++v) {
    if (declared.contains(names[v])) continue;
    auto [first, fresh] = first_bearer.emplace(names[v], v);
    const bool same = graph.value(v).type == graph.value(first->second).type;
    auto [entry, unused] = one_type.emplace(names[v], true);
    entry->second = entry->second && same && graph.value(v).type.has_value();
  }
  for (ValueId v = 0; v < graph.num_values(); ++v) {
    const std::string& name = names[v];
    if (declared.contains(name) || !one_type[name]) continue;
    auto info = info_of.find(graph.value(v).name);
    if (info == info_of.end() || !info->second->has_shape()) continue;
    proto::ValueInfo& written = *net.add_value_info();
    written = *info->second;
    written.set_name(name);
    written.clear_role();
    declared.insert(name);
  }
  for (ValueId id : graph.losses()) net.add_loss(names[id]);
  for (const auto& [param, grad] : graph.param_grads()) {
    proto::ParamGrad* pg = net.add_param_grad();
    pg->set_param(names[param]);
    pg->set_grad(names[grad]);
  }
  net.set_execution(original.execution());
  if (original.has_type()) net.set_type(original.type());
  return net;
}

// memonger's renaming inside subnets: a RecurrentNetwork* op's step nets (`n`/`nets`
// arguments, or text-format `step_net` / `backward_step_net` strings) get the renamed blobs'
// new names, and the op a `<blob>.rename` argument per renamed blob of the net; an AsyncIf's
// branch nets get the new names in their ops and external inputs and outputs.
void Rename(std::string* name, const std::map<std::string, std::string>& renamed) {
  auto it = renamed.find(*name);
  if (it != renamed.end()) *name = it->second;
}

// An op's inputs and outputs through `renamed`.
void RenameOpBlobs(proto::OperatorDef& op, const std::map<std::string, std::string>& renamed) {
  for (std::string& in : *op.mutable_input()) Rename(&in, renamed);
  for (std::string& out : *op.mutable_output()) Rename(&out, renamed);
}

void RenameInSubnets(proto::OperatorDef& def,
                     const std::map<std::string, std::string>& renamed) {
  const bool recurrent = absl::StartsWith(def.type(), "RecurrentNetwork");
  const bool async_if = def.type() == "AsyncIf";
  if ((!recurrent && !async_if) || renamed.empty()) return;
  auto rename = [&](std::string* name) { Rename(name, renamed); };
  auto rename_net = [&](proto::NetDef& net) {
    for (proto::OperatorDef& op : *net.mutable_op()) RenameOpBlobs(op, renamed);
    if (async_if) {
      for (std::string& in : *net.mutable_external_input()) rename(&in);
      for (std::string& out : *net.mutable_external_output()) rename(&out);
    }
  };
  for (proto::Argument& arg : *def.mutable_arg()) {
    if (arg.has_n()) rename_net(*arg.mutable_n());
    for (proto::NetDef& net : *arg.mutable_nets()) rename_net(net);
    if (recurrent && arg.has_s() &&
        (arg.name() == "step_net" || arg.name() == "backward_step_net")) {
      absl::StatusOr<proto::NetDef> net =
          graph::ParseNetDef(arg.s(), graph::NetFileFormat::kText, arg.name());
      if (!net.ok()) continue;  // not a text NetDef: left as it is
      rename_net(*net);
      absl::StatusOr<std::string> text =
          graph::SerializeNetDef(*net, graph::NetFileFormat::kText);
      if (text.ok()) arg.set_s(*text);
    }
  }
  if (recurrent) {
    for (const auto& [from, to] : renamed) {
      proto::Argument* arg = def.add_arg();
      arg->set_name(absl::StrCat(from, ".rename"));
      arg->set_s(to);
    }
  }
}

}  // namespace

void ApplyRenames(proto::NetDef& net, const std::map<std::string, std::string>& renames) {
  for (proto::OperatorDef& op : *net.mutable_op()) {
    RenameOpBlobs(op, renames);
    RenameInSubnets(op, renames);
  }
}

namespace {

// Per op: for each input, the index of the op that last wrote its name before (-1: none).
std::vector<std::vector<int>> LastWriters(const proto::NetDef& net) {
  std::vector<std::vector<int>> result;
  absl::flat_hash_map<std::string, int> last_writer;
  for (int i = 0; i < net.op_size(); ++i) {
    std::vector<int> writers;
    for (const std::string& in : net.op(i).input()) {
      auto it = last_writer.find(in);
      writers.push_back(it == last_writer.end() ? -1 : it->second);
    }
    result.push_back(std::move(writers));
    for (const std::string& out : net.op(i).output()) last_writer[out] = i;
  }
  return result;
}

std::vector<std::pair<int, int>> InplacePairs(const proto::OperatorDef& op) {
  std::vector<std::pair<int, int>> pairs;
  for (int i = 0; i < op.input_size(); ++i) {
    for (int o = 0; o < op.output_size(); ++o) {
      if (op.input(i) == op.output(o)) pairs.emplace_back(i, o);
    }
  }
  return pairs;
}

// The node position of `op`'s input or output `index` (`attr`: onnx_input_slots or
// onnx_output_slots, where the op carries it for `count` names; else the index).
int64_t NodePosition(const proto::OperatorDef& op, absl::string_view attr, int index, int count) {
  if (!graph::ReadsOperandsByNodePosition(op.type())) return index;
  for (const proto::Argument& arg : op.arg()) {
    if (arg.name() == attr && arg.ints_size() == count) return arg.ints(index);
  }
  return index;
}

std::string PairsToString(const std::vector<std::pair<int, int>>& pairs) {
  return absl::StrCat(
      "[", absl::StrJoin(pairs, ", ", [](std::string* out, const std::pair<int, int>& p) {
        absl::StrAppend(out, "(", p.first, ",", p.second, ")");
      }), "]");
}

}  // namespace

absl::StatusOr<RewrittenNames> RewriteNames(const graph::Graph& graph, const Plan& plan) {
  if (static_cast<int>(plan.buffer_of_value.size()) != graph.num_values()) {
    return absl::InvalidArgumentError("the plan does not belong to this graph");
  }
  const int num_buffers = static_cast<int>(plan.buffers.size());
  // An output that took a dying input's bytes is one blob with it, as an in-place write is.
  const std::vector<ValueId> in_place_roots = InPlaceRootsOfPlan(graph, plan);
  std::vector<std::vector<ValueId>> members(num_buffers);
  for (ValueId v = 0; v < graph.num_values(); ++v) {
    const int b = plan.buffer_of_value[v];
    if (b < 0) continue;
    if (b >= num_buffers) return absl::InvalidArgumentError("the plan names a missing buffer");
    members[b].push_back(v);
  }
  std::vector<bool> external(graph.num_values(), false);
  for (ValueId id : graph.inputs()) external[id] = true;
  for (ValueId id : graph.outputs()) external[id] = true;
  // --static names are the caller's too: the latest version keeps its name.
  for (const std::string& name : plan.liveness.static_names) {
    if (std::optional<ValueId> id = graph.FindValue(name)) external[*id] = true;
  }

  // With --views, a view's output shares its input's buffer while both live. A net could say
  // so only by naming the output as the input, which makes the view an in-place op (memonger's
  // VerifyInplaceBlobs refuses a rewrite that adds one) and hands the view's shape to any later
  // reader of the input (a Concat reading a Split's output that a Reshape had viewed). So a
  // view the plan keeps in its input's memory is named apart, with its in-place chain; the
  // plan's offsets still say the two share memory. (With the buffer's one name for both, the
  // checks below would refuse every such net.)
  std::vector<bool> named_apart(graph.num_values(), false);
  for (const graph::Op& op : graph.ops()) {
    if (ViewKeptInInputMemory(graph, plan, op)) named_apart[op.outputs[0]] = true;
  }

  RewrittenNames result;
  std::vector<std::string>& names = result.value_names;
  names.resize(graph.num_values());
  // Names claimed so far, by the buffer (or -1 for statics) that claimed them.
  absl::flat_hash_map<std::string, int> claimed;
  claimed.reserve(graph.num_values());
  for (ValueId v = 0; v < graph.num_values(); ++v) {
    if (plan.buffer_of_value[v] < 0) {
      names[v] = graph.value(v).name;
      claimed.emplace(names[v], -1);
    }
  }
  auto claim = [&](const std::string& wanted, int buffer) {
    auto [it, fresh] = claimed.emplace(wanted, buffer);
    if (fresh || it->second == buffer) return wanted;
    const std::string unique = absl::StrCat(wanted, "__mg", buffer);
    claimed.emplace(unique, buffer);
    return unique;
  };
  // Views named apart: a name of their own each (and their in-place chains the same).
  for (int b = 0; b < num_buffers; ++b) {
    for (ValueId v : members[b]) {
      if (!named_apart[v] || external[v]) continue;
      const graph::Value& value = graph.value(v);
      names[v] = claim(value.version == 0 ? value.name
                                          : absl::StrCat(value.name, "__v", value.version),
                       num_buffers + v);
    }
    for (ValueId v : members[b]) {
      if (names[v].empty() && named_apart[in_place_roots[v]]) names[v] = names[in_place_roots[v]];
    }
  }
  // Externals first, so they keep their names.
  std::vector<std::string> buffer_name(num_buffers);
  std::vector<ValueId> named_by_input(num_buffers, kNone);  // the graph input it is named after
  for (int b = 0; b < num_buffers; ++b) {
    for (ValueId v : members[b]) {
      if (!external[v]) continue;
      names[v] = claim(graph.value(v).name, b);
      // A view named apart (a graph output viewing its input) keeps its name alone: the
      // buffer's other values taking it would make the view in place.
      if (buffer_name[b].empty() && !named_apart[v]) {
        buffer_name[b] = names[v];
        if (graph.value(v).producer == kNone) named_by_input[b] = v;
      }
    }
  }
  // A graph input's declaration gives its shape, and holds for every value bearing its name:
  // members of another type (the input's memory recycled, --recycle-inputs) take a shared
  // name of their own instead, or the net would not load back ("output 'data@1' is declared
  // float32[4,16] but ...").
  for (int b = 0; b < num_buffers; ++b) {
    if (named_by_input[b] == kNone) continue;
    const std::optional<graph::TensorType>& input_type = graph.value(named_by_input[b]).type;
    std::string others;
    for (ValueId v : members[b]) {
      if (!names[v].empty() || graph.value(v).type == input_type) continue;
      if (others.empty()) {
        others = claim(absl::StrCat(kSharedBlobPrefix, result.shared_buffers++), b);
      }
      names[v] = others;
    }
  }
  for (int b = 0; b < num_buffers; ++b) {
    if (members[b].empty()) continue;
    if (buffer_name[b].empty() && !plan.buffers[b].blob_name.empty()) {
      buffer_name[b] = claim(plan.buffers[b].blob_name, b);  // the planner's (memonger's) name
    } else if (buffer_name[b].empty()) {
      // The buffer's blobs: its alias classes, or with one blob per name (the memonger
      // baselines) its names.
      std::vector<ValueId> roots;
      for (ValueId v : members[b]) {
        if (!names[v].empty()) continue;  // named apart above
        const ValueId r = in_place_roots[v];
        const bool seen = std::any_of(roots.begin(), roots.end(), [&](ValueId other) {
          return other == r ||
                 (plan.liveness.blob_per_name && graph.value(other).name == graph.value(r).name);
        });
        if (!seen) roots.push_back(r);
      }
      if (roots.empty()) {
        continue;  // every member named apart (not reached: a view's input stays)
      } else if (roots.size() >= 2) {
        buffer_name[b] = claim(absl::StrCat(kSharedBlobPrefix, result.shared_buffers++), b);
      } else {
        const graph::Value& root = graph.value(roots.front());
        buffer_name[b] = claim(root.version == 0 ? root.name
                                                 : absl::StrCat(root.name, "__v", root.version),
                               b);
      }
    }
    for (ValueId v : members[b]) {
      if (names[v].empty()) names[v] = buffer_name[b];
    }
  }
  return result;
}

absl::StatusOr<RewrittenNet> RewriteNet(const graph::Graph& graph, const Plan& plan) {
  MG_ASSIGN_OR_RETURN(RewrittenNames renamed_values, RewriteNames(graph, plan));
  std::vector<std::string> names = std::move(renamed_values.value_names);
  RewrittenNet result;
  result.shared_buffers = renamed_values.shared_buffers;
  result.net = NetWithNames(graph, plan, names);
  const bool has_subnets =
      std::any_of(result.net.op().begin(), result.net.op().end(), [](const proto::OperatorDef& d) {
        return absl::StartsWith(d.type(), "RecurrentNetwork") || d.type() == "AsyncIf";
      });
  if (!has_subnets) {  // nothing to rename inside (the map below costs a name per value)
    result.value_names = std::move(names);
    return result;
  }
  // Names whose versions all got one new name (a name whose versions were named apart is left
  // alone inside subnets: which version a step net means is not known).
  std::map<std::string, std::string> renamed;
  std::set<std::string> ambiguous;
  for (ValueId v = 0; v < graph.num_values(); ++v) {
    const std::string& name = graph.value(v).name;
    auto [it, fresh] = renamed.emplace(name, names[v]);
    if (!fresh && it->second != names[v]) ambiguous.insert(name);
  }
  for (auto it = renamed.begin(); it != renamed.end();) {
    it = (it->first == it->second || ambiguous.count(it->first) > 0) ? renamed.erase(it)
                                                                     : std::next(it);
  }
  for (proto::OperatorDef& def : *result.net.mutable_op()) RenameInSubnets(def, renamed);
  result.value_names = std::move(names);
  return result;
}

int CountBlobs(const proto::NetDef& net) {
  std::set<std::string> names;
  for (const proto::OperatorDef& op : net.op()) {
    names.insert(op.input().begin(), op.input().end());
    names.insert(op.output().begin(), op.output().end());
  }
  return static_cast<int>(names.size());
}

std::string SizeBlindPlanToText(const graph::Graph& graph, const Plan& plan,
                                const RewrittenNet& rewritten, const proto::NetDef& reference) {
  std::string text = absl::StrCat(
      "model           ", plan.model, "\n", "planner         ", plan.planner,
      ", size-blind (which values share a buffer, not how many bytes)\n",
      "execution       ", ExecutionName(plan.execution), "\n", "blobs           ",
      CountBlobs(reference), " names in the net, ", CountBlobs(rewritten.net),
      " after renaming (memonger's count_blobs)\n");
  // Each buffer holding several names: its name and the names it holds, in value order.
  std::map<int, std::vector<std::string>> held;
  for (ValueId v = 0; v < graph.num_values(); ++v) {
    const int b = plan.buffer_of_value[v];
    if (b < 0) continue;
    std::vector<std::string>& names = held[b];
    const std::string& name = graph.value(v).name;
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  std::vector<std::pair<std::string, const std::vector<std::string>*>> shared;
  int blobs = 0;
  for (const auto& [b, names] : held) {
    if (names.size() < 2) continue;
    std::string buffer_name;
    for (ValueId v = 0; v < graph.num_values(); ++v) {
      if (plan.buffer_of_value[v] == b) {
        buffer_name = rewritten.value_names[v];
        break;
      }
    }
    shared.emplace_back(buffer_name, &names);
    blobs += static_cast<int>(names.size());
  }
  absl::StrAppend(&text, "shared buffers  ", shared.size(), ", holding ", blobs, " names\n");
  constexpr size_t kListed = 50;
  for (size_t i = 0; i < shared.size() && i < kListed; ++i) {
    absl::StrAppend(&text, "  ", shared[i].first, ": ", absl::StrJoin(*shared[i].second, ", "),
                    "\n");
  }
  if (shared.size() > kListed) {
    absl::StrAppend(&text, "  ... ", shared.size() - kListed, " more\n");
  }
  return text;
}

proto::NetDef ReferenceNet(const graph::Graph& graph, const Plan& plan) {
  std::vector<std::string> names(graph.num_values());
  const std::vector<ValueId> roots = graph.InPlaceRoots();
  for (ValueId v = 0; v < graph.num_values(); ++v) {
    const graph::Value& root = graph.value(roots[v]);
    names[v] = root.version == 0 ? root.name : absl::StrCat(root.name, "__v", root.version);
  }
  return NetWithNames(graph, plan, names);
}

absl::Status VerifyGraphEquality(const proto::NetDef& a, const proto::NetDef& b) {
  if (a.op_size() != b.op_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the nets have ", a.op_size(), " and ", b.op_size(), " ops"));
  }
  for (int i = 0; i < a.op_size(); ++i) {
    const proto::OperatorDef& x = a.op(i);
    const proto::OperatorDef& y = b.op(i);
    if (x.type() != y.type() || x.engine() != y.engine() ||
        x.device_option().SerializeAsString() != y.device_option().SerializeAsString()) {
      return absl::InvalidArgumentError(absl::StrCat("op ", i, " differs: ", x.type(), " vs ",
                                                     y.type(), " (or its device or engine)"));
    }
  }
  const auto wa = LastWriters(a);
  const auto wb = LastWriters(b);
  for (int i = 0; i < a.op_size(); ++i) {
    if (wa[i] != wb[i]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "op ", i, " (", a.op(i).type(), ") reads from ops [", absl::StrJoin(wa[i], ","),
          "] in one net and [", absl::StrJoin(wb[i], ","), "] in the other"));
    }
  }
  return absl::OkStatus();
}

absl::Status VerifyInplaceBlobs(const proto::NetDef& a, const proto::NetDef& b,
                                bool in_place_reuse) {
  if (a.op_size() != b.op_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the nets have ", a.op_size(), " and ", b.op_size(), " ops"));
  }
  for (int i = 0; i < a.op_size(); ++i) {
    if (a.op(i).type() != b.op(i).type()) {
      return absl::InvalidArgumentError(
          absl::StrCat("op ", i, " differs: ", a.op(i).type(), " vs ", b.op(i).type()));
    }
    const auto pa = InplacePairs(a.op(i));
    auto pb = InplacePairs(b.op(i));
    if (in_place_reuse) {
      // Pairs of the reuse: an output over an input the table allows, not already in `a`.
      const proto::OperatorDef& op = b.op(i);
      pb.erase(std::remove_if(pb.begin(), pb.end(),
                              [&](const std::pair<int, int>& p) {
                                return graph::MayWriteOverInputAt(
                                           op.type(),
                                           NodePosition(op, "onnx_output_slots", p.second,
                                                        op.output_size()),
                                           NodePosition(op, "onnx_input_slots", p.first,
                                                        op.input_size())) &&
                                       std::find(pa.begin(), pa.end(), p) == pa.end();
                              }),
               pb.end());
    }
    if (pa != pb) {
      return absl::InvalidArgumentError(absl::StrCat(
          "op ", i, " (", a.op(i).type(), ") has in-place (input, output) pairs ",
          PairsToString(pa), " in one net and ", PairsToString(pb), " in the other"));
    }
  }
  return absl::OkStatus();
}

}  // namespace memonger
