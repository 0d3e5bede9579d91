#include "memonger/liveness.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "graph/dependencies.h"
#include "graph/in_place.h"
#include "graph/op_schema.h"
#include "util/check.h"
#include "util/checked_math.h"
#include "util/limits.h"
#include "util/status_macros.h"

namespace memonger {
namespace {

using graph::Graph;
using graph::kNone;
using graph::OpId;
using graph::ValueId;

// Union-find over values, path halving; the class representative is chosen afterwards.
class UnionFind {
 public:
  explicit UnionFind(int n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }
  int Find(int x) {
    while (parent_[x] != x) {
      parent_[x] = parent_[parent_[x]];
      x = parent_[x];
    }
    return x;
  }
  void Union(int a, int b) {
    a = Find(a);
    b = Find(b);
    if (a != b) parent_[std::max(a, b)] = std::min(a, b);
  }

 private:
  std::vector<int> parent_;
};

// LivenessOptions::in_place: joins each output of an op to the class of an input dying there,
// walking the schedule so that a chain (Conv -> Relu -> Add) becomes one class step by step.
// Each union-find set's lifetime, bytes and pinning (it holds a value live to the end) are
// kept at its representative and merged with it. O(ops + edges) besides the union-find.
void MergeDyingInputs(const Graph& graph, Liveness& live, const std::vector<Lifetime>& own,
                      const std::vector<bool>& pinned_value, UnionFind& classes) {
  const int n = graph.num_values();
  std::vector<Lifetime> span(n);
  std::vector<int64_t> bytes(n, 0);
  std::vector<bool> pinned(n, false);
  // Holds a value no op writes (a graph input, a param): such a class starts before step 0,
  // not at it, so no output starts it.
  std::vector<bool> fed(n, false);
  for (ValueId id = 0; id < n; ++id) {
    const int set = classes.Find(id);
    if (set == id) span[set] = own[id];
    span[set].first_step = std::min(span[set].first_step, own[id].first_step);
    span[set].last_step = std::max(span[set].last_step, own[id].last_step);
    bytes[set] = std::max(bytes[set], live.bytes[id]);
    if (pinned_value[id]) pinned[set] = true;
    if (graph.value(id).producer == kNone) fed[set] = true;
  }
  // (UnionFind keeps the smallest id as a set's representative, so each set's entry above was
  // started by the representative itself before its other members were folded in.)
  // Output k of the op at `step` over an input dying there, if the table and the types allow.
  const auto join = [&](const graph::Op& op, int k, int step) {
    const ValueId out = op.outputs[k];
    const int out_set = classes.Find(out);
    if (!live.planned[out] || span[out_set].first_step != step || fed[out_set]) return;
    const graph::Value& out_value = graph.value(out);
    // Sized from a data-dependent bound, a broadcasting op may broadcast at the sizes a run
    // measures though its output and input have one shape at the bounds: it would read an
    // element it already wrote (allocator/executor.h, RunMeasuring, refuses such a pair).
    if (graph::BroadcastsInputs(op.type) && graph.SizedFromBound(out_value.name)) return;
    for (int slot = 0; slot < static_cast<int>(op.inputs.size()); ++slot) {
      const ValueId in = op.inputs[slot];
      if (!graph::MayWriteOverInput(op, k, slot)) continue;
      const int in_set = classes.Find(in);
      const graph::Value& in_value = graph.value(in);
      if (in_set == out_set || !live.planned[in] || pinned[in_set] ||
          span[in_set].last_step != step || live.device[in] != live.device[out] ||
          live.bytes[in] != live.bytes[out] || bytes[in_set] != bytes[out_set] ||
          in_value.alignment != out_value.alignment || !in_value.type.has_value() ||
          !out_value.type.has_value() ||
          !graph::InPlaceTypesMatch(*in_value.type, *out_value.type)) {
        continue;
      }
      // Read beside it (a view of it; the same value at another slot unless the table lets
      // this output take it there too: Add(a, a) over a, not an LSTM reading one tensor as W
      // and R), or written by this op too (another output named like it, or one that took it).
      bool read_beside = false;
      for (int j = 0; j < static_cast<int>(op.inputs.size()); ++j) {
        if (j == slot || classes.Find(op.inputs[j]) != in_set) continue;
        if (op.inputs[j] != in || !graph::MayWriteOverInput(op, k, j)) read_beside = true;
      }
      bool written_beside = false;
      for (int j = 0; j < static_cast<int>(op.outputs.size()); ++j) {
        if (j != k && classes.Find(op.outputs[j]) == in_set) written_beside = true;
      }
      if (read_beside || written_beside) continue;
      const Lifetime merged{std::min(span[in_set].first_step, span[out_set].first_step),
                            std::max(span[in_set].last_step, span[out_set].last_step)};
      const bool out_pinned = pinned[out_set];  // a graph output may take a dying input
      const bool in_fed = fed[in_set];          // a recycled graph input may be taken
      classes.Union(in, out);
      live.in_place_pairs.emplace_back(in, out);
      const int set = classes.Find(in);
      span[set] = merged;
      bytes[set] = bytes[in_set];
      pinned[set] = out_pinned;
      fed[set] = in_fed;
      return;
    }
  };
  for (int step = 0; step < live.num_steps; ++step) {
    const graph::Op& op = graph.op(live.schedule.ops[step]);
    if (op.outputs.empty() || op.inputs.empty()) continue;
    for (int k = 0; k < static_cast<int>(op.outputs.size()); ++k) join(op, k, step);
  }
}

int64_t AlignUp(int64_t bytes, int64_t alignment) {
  const auto aligned = util::CheckedAlignUp(bytes, alignment);
  MG_CHECK(aligned.has_value());
  return *aligned;
}

}  // namespace

absl::StatusOr<Liveness> ComputeLiveness(const Graph& graph, const Schedule& schedule,
                                         const LivenessOptions& options) {
  Schedule copy;
  copy.order = schedule.order;
  copy.ops = schedule.ops;
  return ComputeLiveness(graph, std::move(copy), options);
}

absl::StatusOr<Liveness> ComputeLiveness(const Graph& graph, Schedule&& schedule,
                                         const LivenessOptions& options) {
  MG_RETURN_IF_ERROR(CheckSchedule(graph, schedule.ops));
  const int n = graph.num_values();
  Liveness live;
  live.options = options;
  live.schedule.order = schedule.order;
  live.schedule.ops = std::move(schedule.ops);
  schedule = Schedule();  // the caller's step_of_op too: made again below
  live.schedule.step_of_op.assign(graph.num_ops(), 0);
  for (int step = 0; step < graph.num_ops(); ++step) {
    live.schedule.step_of_op[live.schedule.ops[step]] = step;
  }
  const std::vector<int>& step_of = live.schedule.step_of_op;
  live.num_steps = graph.num_ops();
  const int last = std::max(live.num_steps - 1, 0);

  live.planned.assign(n, false);
  live.bytes.assign(n, 0);
  live.device.assign(n, graph::Device{});
  live.alias_root.assign(n, kNone);
  live.lifetime.assign(n, Lifetime{});
  live.class_bytes.assign(n, 0);

  // Bytes, devices, and each value's own lifetime. The own lifetimes are held in live.lifetime
  // until the classes' are merged at the end (a class's members are only its own, so merging in
  // place reads no merged value): no second array, 8 bytes a value, at the peak of a big run.
  int64_t total_bytes = 0;
  std::vector<Lifetime>& own = live.lifetime;
  // Graph outputs and declared parameter gradients are read after the net (the optimizer reads
  // the gradients): both live to the last step.
  std::vector<bool> is_output(n, false);
  for (ValueId id : graph.outputs()) is_output[id] = true;
  for (const auto& [param, grad] : graph.param_grads()) is_output[grad] = true;
  if (!options.recycle_inputs) {
    for (ValueId id : graph.inputs()) is_output[id] = true;
  }
  // A static name, like an output, is its latest version: the value the caller reads after
  // the net (an earlier version overwritten by a later write is an ordinary value).
  for (const std::string& name : options.static_names) {
    const std::optional<ValueId> latest = graph.FindValue(name);
    if (!latest.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--static names '", util::Quote(name), "', which is not in the net"));
    }
    is_output[*latest] = true;
  }
  for (ValueId id = 0; id < n; ++id) {
    const graph::Value& v = graph.value(id);
    if (options.size_blind) {
      live.bytes[id] = 1;
    } else if (!v.type.has_value()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "value '", v.DisplayName(), "' has no type: run shape inference first"));
    } else {
      MG_ASSIGN_OR_RETURN(live.bytes[id], graph::ValueByteSize(v));
    }
    // Every sum a plan makes (naive bytes, static bytes, aligned offsets) stays in int64 when
    // all the values together stay under util::kMaxTotalBytes and alignments under
    // util::kMaxAlignment.
    const std::optional<int64_t> sum = util::CheckedAdd(total_bytes, live.bytes[id]);
    if (!sum.has_value() || *sum > util::kMaxTotalBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the values need more than 2^60 bytes (1 EiB) in all (value '", v.DisplayName(),
          "' alone has ", live.bytes[id], " bytes): no plan can hold them"));
    }
    total_bytes = *sum;
    const bool is_static = graph::IsStatic(v.role);
    live.planned[id] = !is_static || options.plan_static;

    int last_read = -1;
    const absl::Span<const OpId> readers = graph.consumers(id);
    for (OpId reader : readers) last_read = std::max(last_read, step_of[reader]);
    if (v.producer != kNone) {
      const graph::Op& producer = graph.op(v.producer);
      live.device[id] = graph::OutputDevice(producer.type, producer.device);
    } else if (!readers.empty()) {
      // The first reader in the net's own order, not the schedule's: a value's device (and
      // so its alias classes) must not depend on the order the ops run in.
      live.device[id] = graph.op(readers.front()).device;
    }
    if (is_static) {
      own[id] = Lifetime{0, last};
      continue;
    }
    const int first = v.producer == kNone ? 0 : step_of[v.producer];
    own[id] = Lifetime{first, std::max(first, last_read)};
    if (is_output[id]) own[id].last_step = last;
  }

  // Alias classes: in-place outputs with what they overwrite; views (when enabled) with their
  // input 0 where that is safe (see LivenessOptions::views).
  UnionFind classes(n);
  std::vector<bool> overwritten(n, false);
  for (ValueId id = 0; id < n; ++id) {
    const graph::Value& v = graph.value(id);
    if (v.inplace_of == kNone) continue;
    const ValueId base = v.inplace_of;
    overwritten[base] = true;
    const graph::Op& writer = graph.op(v.producer);
    if (live.planned[id] != live.planned[base]) {
      return absl::InvalidArgumentError(absl::StrCat(
          writer.Label(), " writes ", graph::RoleName(graph.value(base).role), " '",
          graph.value(base).DisplayName(), "' in place as ", graph::RoleName(v.role), " '",
          v.DisplayName(), "': a static value and a planned one cannot share memory"));
    }
    if (live.device[id] != live.device[base]) {
      return absl::InvalidArgumentError(absl::StrCat(
          writer.Label(), " runs on ", graph::DeviceToString(live.device[id]), " and writes '",
          graph.value(base).DisplayName(), "' in place, but that value lives on ",
          graph::DeviceToString(live.device[base])));
    }
    classes.Union(id, base);
  }
  if (options.blob_per_name) {
    // One class per name and device: each version joins the class of the version before it
    // (for a parallel executor, only when ordered after everything touching that class).
    std::optional<HappensBefore> order;
    if (options.names_need_order) order.emplace(graph);
    struct Joined {
      ValueId last = kNone;         // the newest version in the class
      int last_step = -1;           // the latest step any joined version is live at
      std::vector<OpId> touchers;   // the ops touching the newest version
    };
    // Per device, for the name being joined (every version of a name is met in its own pass
    // below, so the map holds one name at a time).
    absl::flat_hash_map<std::pair<int, int>, Joined> by_device;
    auto touchers_of = [&](ValueId id) {
      const absl::Span<const OpId> readers = graph.consumers(id);
      std::vector<OpId> ops(readers.begin(), readers.end());
      if (graph.value(id).producer != kNone) ops.push_back(graph.value(id).producer);
      return ops;
    };
    // Versions oldest first (Graph::Versions), names in value order.
    for (ValueId id = 0; id < n; ++id) {
      const graph::Value& v = graph.value(id);
      if (v.version != 0) continue;
      by_device.clear();
      for (ValueId version : graph.Versions(v.name)) {
        if (!live.planned[version]) continue;
        const graph::Device& d = live.device[version];
        Joined& joined = by_device[std::make_pair(d.type, d.id)];
        const OpId writer = graph.value(version).producer;
        const bool in_place = graph.value(version).inplace_of != kNone;
        // A rewrite joins only when the earlier versions are dead by its write (a reordered
        // schedule or a version kept to the end could overlap it) and, for a parallel
        // executor, when every op touching the newest version happens before its writer
        // (which orders the older ones too: their touchers happen before that version's
        // writer, one of its touchers).
        bool join = joined.last != kNone &&
                    (in_place || own[version].first_step > joined.last_step);
        if (join && order.has_value() && !in_place) {
          for (OpId op : joined.touchers) {
            if (op != writer && (writer == kNone || !order->Before(op, writer))) {
              join = false;
              break;
            }
          }
        }
        if (join) {
          classes.Union(version, joined.last);
          joined.last_step = std::max(joined.last_step, own[version].last_step);
        } else {
          joined.last_step = own[version].last_step;
        }
        joined.last = version;
        if (order.has_value()) joined.touchers = touchers_of(version);
      }
    }
  }
  if (options.views) {
    const graph::OpSchemaTable& schemas = graph::OpSchemaTable::Builtin();
    for (const graph::Op& op : graph.ops()) {
      if (!op.view || op.inputs.empty() || op.outputs.empty()) continue;
      const graph::OpSchema* schema = schemas.Find(op.type);
      if (schema == nullptr || !schema->view_capable) continue;
      const ValueId in = op.inputs[0];
      const ValueId out = op.outputs[0];
      if (graph.value(out).inplace_of != kNone || !live.planned[in] || !live.planned[out] ||
          live.device[in] != live.device[out] || live.bytes[out] > live.bytes[in] ||
          overwritten[in] || overwritten[out]) {
        continue;
      }
      classes.Union(out, in);
    }
  }
  if (options.in_place) {
    // Pinned: live to the end because someone reads it after the net, or static (weights and
    // constants are read by the next run, planned in the arena or not).
    std::vector<bool> pinned(n, false);
    for (ValueId id = 0; id < n; ++id) {
      pinned[id] = is_output[id] || !live.planned[id] || graph::IsStatic(graph.value(id).role);
    }
    MergeDyingInputs(graph, live, own, pinned, classes);
  }

  // Members oldest first: by producer step (graph inputs before every op), then id; a
  // counting sort over the steps (graph inputs in bucket 0, step s in bucket s + 1).
  std::vector<int> bucket_start(static_cast<size_t>(live.num_steps) + 2, 0);
  auto bucket = [&](ValueId id) {
    const OpId p = graph.value(id).producer;
    return p == kNone ? 0 : step_of[p] + 1;
  };
  for (ValueId id = 0; id < n; ++id) ++bucket_start[bucket(id) + 1];
  for (size_t b = 1; b < bucket_start.size(); ++b) bucket_start[b] += bucket_start[b - 1];
  std::vector<ValueId> order(n);
  for (ValueId id = 0; id < n; ++id) order[bucket_start[bucket(id)]++] = id;
  std::vector<int>().swap(bucket_start);
  {
    std::vector<ValueId> root_of_set(n, kNone);
    for (ValueId id : order) {
      const int set = classes.Find(id);
      if (root_of_set[set] == kNone) root_of_set[set] = id;
      const ValueId root = root_of_set[set];
      live.alias_root[id] = root;
    }
  }
  classes = UnionFind(0);  // spent: released before the member lists are made
  live.members = ClassMembers(live.alias_root, order);
  for (ValueId root = 0; root < n; ++root) {
    if (live.members[root].empty()) continue;
    Lifetime merged = own[root];
    int64_t bytes = 0;
    for (ValueId m : live.members[root]) {
      merged.first_step = std::min(merged.first_step, own[m].first_step);
      merged.last_step = std::max(merged.last_step, own[m].last_step);
      bytes = std::max(bytes, live.bytes[m]);
    }
    live.class_bytes[root] = bytes;
    for (ValueId m : live.members[root]) live.lifetime[m] = merged;
  }
  return live;
}

ClassMembers::ClassMembers(const std::vector<ValueId>& root_of,
                           const std::vector<ValueId>& oldest_first)
    : start_(root_of.size() + 1, 0) {
  // A counting sort by root, stable: each list keeps the order of `oldest_first`.
  for (ValueId root : root_of) {
    if (root != kNone) ++start_[root + 1];
  }
  for (size_t i = 1; i < start_.size(); ++i) start_[i] += start_[i - 1];
  ids_.resize(static_cast<size_t>(start_.back()));
  // Filled from the back, each list's end moving down to its start: start_[root + 1] ends as
  // root's start, and the entries shift down by one. No array of cursors (4 bytes a value).
  for (auto it = oldest_first.rbegin(); it != oldest_first.rend(); ++it) {
    const ValueId root = root_of[*it];
    if (root != kNone) ids_[--start_[root + 1]] = *it;
  }
  for (size_t i = 0; i + 1 < start_.size(); ++i) start_[i] = start_[i + 1];
  start_.back() = static_cast<int32_t>(ids_.size());
}

std::vector<int64_t> LiveBytesPerStep(const Liveness& liveness, int64_t alignment) {
  std::vector<int64_t> delta(liveness.num_steps + 1, 0);
  for (ValueId id = 0; id < static_cast<ValueId>(liveness.alias_root.size()); ++id) {
    if (!liveness.planned[id] || liveness.alias_root[id] != id) continue;
    const Lifetime& l = liveness.lifetime[id];
    if (l.first_step >= liveness.num_steps) continue;  // a net without ops
    const int64_t bytes = AlignUp(liveness.class_bytes[id], alignment);
    delta[l.first_step] += bytes;
    delta[std::min(l.last_step + 1, liveness.num_steps)] -= bytes;
  }
  std::vector<int64_t> live(liveness.num_steps, 0);
  int64_t running = 0;
  for (int step = 0; step < liveness.num_steps; ++step) {
    running += delta[step];
    live[step] = running;
  }
  return live;
}

HappensBefore::HappensBefore(const Graph& graph)
    : successors_(OpSuccessors(graph)),
      topo_position_(graph.num_ops(), 0),
      visit_mark_(graph.num_ops(), 0) {
  const std::vector<OpId>& topo = graph.TopologicalOrder();
  for (int i = 0; i < static_cast<int>(topo.size()); ++i) topo_position_[topo[i]] = i;
}

bool HappensBefore::Before(OpId a, OpId b) const {
  if (a == b) return false;
  const int bound = topo_position_[b];
  if (topo_position_[a] >= bound) return false;
  if (source_ != a) {
    if (visit_epoch_ == std::numeric_limits<int>::max()) {
      std::fill(visit_mark_.begin(), visit_mark_.end(), 0);
      visit_epoch_ = 0;
    }
    ++visit_epoch_;
    source_ = a;
    bound_ = topo_position_[a];
    deferred_.assign(1, a);
    visit_mark_[a] = visit_epoch_;
  }
  if (bound > bound_) {
    // Resume: expand every reached op up to the new bound; defer the ones beyond it.
    bound_ = bound;
    std::vector<OpId> stack;
    std::vector<OpId> still_deferred;
    for (OpId op : deferred_) {
      (topo_position_[op] <= bound_ ? stack : still_deferred).push_back(op);
    }
    while (!stack.empty()) {
      const OpId u = stack.back();
      stack.pop_back();
      for (OpId w : successors_[u]) {
        if (visit_mark_[w] == visit_epoch_) continue;
        visit_mark_[w] = visit_epoch_;
        (topo_position_[w] <= bound_ ? stack : still_deferred).push_back(w);
      }
    }
    deferred_ = std::move(still_deferred);
  }
  return visit_mark_[b] == visit_epoch_;
}

}  // namespace memonger
