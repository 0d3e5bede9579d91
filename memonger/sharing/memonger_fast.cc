#include "memonger/sharing/memonger_fast.h"

#include <algorithm>
#include <cstddef>
#include <string>
#include <unordered_set>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace memonger {

using graph::kNone;
using graph::OpId;
using graph::ValueId;

namespace {

// Pushes `freed` (the buffers one op frees, each once, in the order freed) onto `stack` as
// optimize_inference_net did: it inserted the name of each blob an op frees (the input's own,
// or that of the buffer it took), in input order, into a std::unordered_set<std::string>
// new_free_blobs, and pushed the set's elements in its iteration order. We fill a real
// std::unordered_set<std::string> in the same order and iterate it: the order is the standard
// library's, as it was Caffe2's. With libstdc++ it is the order of the set's node list: hash %
// bucket count, each new name first in its bucket or, in an empty bucket, at the head of the
// list; 13 buckets up to 13 names, then 29, 59, ... (a rehash re-inserts the list). So two
// names in two buckets come out in reverse order. tests/reference/memonger_ref.py
// (unordered_set_order) models the same order in Python for the parity test.
// Caffe2 had one blob per name; here two buffers may share a canonical name (versions of a
// name on two devices, or written out of order): they are pushed together at the name's
// place, in the order freed.
void PushInCaffe2Order(const graph::Graph& graph, const std::vector<ValueId>& freed,
                       std::vector<ValueId>* stack) {
  if (freed.size() < 2) {
    stack->insert(stack->end(), freed.begin(), freed.end());
    return;
  }
  std::unordered_set<std::string> new_free_blobs;
  absl::flat_hash_map<absl::string_view, std::vector<ValueId>> buffers_named;
  for (ValueId buffer : freed) {
    const std::string& name = graph.value(buffer).name;
    new_free_blobs.insert(name);
    buffers_named[name].push_back(buffer);
  }
  for (const std::string& name : new_free_blobs) {
    const std::vector<ValueId>& buffers = buffers_named[name];
    stack->insert(stack->end(), buffers.begin(), buffers.end());
  }
}

}  // namespace

absl::StatusOr<MemongerFastResult> PlanMemongerFast(const graph::Graph& graph,
                                                    const Liveness& liveness) {
  const int n = graph.num_values();
  auto root = [&](ValueId v) {
    const ValueId r = liveness.alias_root[v];
    return r == kNone ? v : r;
  };
  const std::vector<bool> is_static = StaticClasses(graph, liveness);
  // A class holding a graph input (recycled inputs, --recycle-inputs) is live from step 0: it
  // gets no range, as Caffe2's external inputs did not.
  auto planned_class = [&](ValueId c) {
    return liveness.planned[c] && !is_static[c] && graph.value(c).producer != kNone;
  };

  // 1. Ranges per class (in steps).
  std::vector<int> range_first(n, -1);
  std::vector<int> range_last(n, -1);
  const std::vector<OpId>& order = liveness.schedule.ops;
  for (int step = 0; step < static_cast<int>(order.size()); ++step) {
    const graph::Op& op = graph.op(order[step]);
    for (ValueId in : op.inputs) {
      const ValueId c = root(in);
      if (range_first[c] >= 0) range_last[c] = step;
    }
    for (ValueId out : op.outputs) {
      const ValueId c = root(out);
      if (!planned_class(c)) continue;
      if (range_first[c] >= 0) {
        // A later write of the name (not in Caffe2, which let it land in a buffer already
        // handed to another blob): the name stays live until then.
        range_last[c] = std::max(range_last[c], step);
        continue;
      }
      range_first[c] = step;
      range_last[c] = step;
    }
  }

  // 2. One pass with a LIFO stack of free buffers; a buffer is its canonical class.
  std::vector<ValueId> buffer_of(n, kNone);  // class -> canonical class of its buffer
  std::vector<int> buffer_number(n, -1);     // canonical class -> k of "__m<k>_shared"
  std::vector<ValueId> canonicals;           // in order of k
  std::vector<ValueId> stack;
  std::vector<int> freed_at(n, -1);  // canonical class -> the step that last freed its buffer
  for (int step = 0; step < static_cast<int>(order.size()); ++step) {
    const graph::Op& op = graph.op(order[step]);
    std::vector<ValueId> newly_free;  // in the order freed, each buffer once
    for (ValueId in : op.inputs) {
      const ValueId c = root(in);
      if (range_first[c] < 0 || range_last[c] != step) continue;
      if (buffer_of[c] == kNone) {
        buffer_of[c] = c;
        buffer_number[c] = static_cast<int>(canonicals.size());
        canonicals.push_back(c);
      }
      const ValueId buffer = buffer_of[c];
      if (freed_at[buffer] != step) {
        freed_at[buffer] = step;
        newly_free.push_back(buffer);
      }
    }
    for (ValueId out : op.outputs) {
      const ValueId c = root(out);
      if (range_first[c] != step || buffer_of[c] != kNone || stack.empty()) continue;
      // The top of the stack; with several devices, the nearest one on the output's device.
      for (size_t k = stack.size(); k-- > 0;) {
        if (liveness.device[stack[k]] != liveness.device[c]) continue;
        buffer_of[c] = stack[k];
        stack.erase(stack.begin() + static_cast<std::ptrdiff_t>(k));
        break;
      }
    }
    PushInCaffe2Order(graph, newly_free, &stack);
  }

  // Groups: one per buffer (canonical first, then the others in class order), then the
  // classes that never got a buffer, each alone under its own name.
  MemongerFastResult result;
  std::vector<std::vector<ValueId>> members(n);
  for (ValueId c = 0; c < n; ++c) {
    if (root(c) != c || !liveness.planned[c]) continue;
    if (buffer_of[c] != kNone && buffer_of[c] != c) members[buffer_of[c]].push_back(c);
  }
  for (ValueId canonical : canonicals) {
    std::vector<ValueId> group{canonical};
    group.insert(group.end(), members[canonical].begin(), members[canonical].end());
    result.groups.push_back(std::move(group));
    result.names.push_back(absl::StrCat("__m", buffer_number[canonical], "_shared"));
  }
  for (ValueId c = 0; c < n; ++c) {
    if (root(c) != c || !liveness.planned[c] || buffer_of[c] != kNone) continue;
    result.groups.push_back({c});
    result.names.emplace_back();
  }
  return result;
}

}  // namespace memonger
