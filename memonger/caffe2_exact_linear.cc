// Caffe2's linear-order planners (memonger.py's optimize_interference with greedy and DP chains,
// memonger.cc's optimize_inference_net), compute_interference_graph, and the serial replay that
// checks a renaming.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "graph/dependencies.h"
#include "memonger/caffe2_exact.h"
#include "util/limits.h"
#include "util/status_macros.h"

namespace memonger::caffe2 {
namespace {

// memonger.py's LiveRange after get_updated_ranges: every field set.
struct Range {
  std::string name;
  int64_t defined = -1;
  int64_t used = -1;
  int64_t size = 1;
};

// Chains of indices into the sorted ranges.
using Chain = std::vector<int>;
using Chains = std::vector<Chain>;

// is_compatible: only the chain's last member matters; strictly after its last use.
bool Compatible(const std::vector<Range>& ranges, int candidate, const Chain& chain) {
  return ranges[candidate].defined > ranges[chain.back()].used;
}

int64_t ChainMaxSize(const std::vector<Range>& ranges, const Chain& chain) {
  int64_t most = 0;
  bool first = true;
  for (int i : chain) {
    most = first ? ranges[i].size : std::max(most, ranges[i].size);
    first = false;
  }
  return most;
}

size_t Members(const Chains& chains) {
  size_t n = 0;
  for (const Chain& chain : chains) n += chain.size();
  return n;
}

int64_t MemoryUsage(const std::vector<Range>& ranges, const Chains& chains) {
  int64_t total = 0;
  for (const Chain& chain : chains) total += ChainMaxSize(ranges, chain);
  return total;
}

// compute_assignments_greedy: each blob joins the compatible chain whose largest member is
// nearest its size (the first such chain on a tie), else starts one. O(blobs x chains).
Chains Greedy(const std::vector<Range>& ranges, const std::vector<int>& order) {
  Chains chains;
  std::vector<int64_t> chain_max;  // per chain: its largest member, kept as members join
  for (int item : order) {
    std::optional<size_t> best;
    int64_t min_dist = std::numeric_limits<int64_t>::max();
    for (size_t c = 0; c < chains.size(); ++c) {
      if (!Compatible(ranges, item, chains[c])) continue;
      const int64_t dist = std::llabs(chain_max[c] - ranges[item].size);
      if (dist < min_dist) {
        min_dist = dist;
        best = c;
      }
    }
    if (best.has_value()) {
      chains[*best].push_back(item);
      chain_max[*best] = std::max(chain_max[*best], ranges[item].size);
    } else {
      chains.push_back({item});
      chain_max.push_back(ranges[item].size);
    }
  }
  return chains;
}

// compute_assignments_dp, recursion and all.
class Dp {
 public:
  Dp(const std::vector<Range>& ranges, absl::Time deadline)
      : ranges_(ranges), deadline_(deadline) {}

  absl::StatusOr<Chains> Assign(const std::vector<int>& items, const Chains& init) {
    std::vector<Chains> best;
    for (size_t ii = 0; ii < items.size(); ++ii) {
      if (absl::Now() > deadline_) {
        return absl::DeadlineExceededError(
            "--caffe2-bugs: Caffe2's DP assignment (exponential) ran past --time-limit");
      }
      const int prev = CompatiblePrev(items[ii], best, static_cast<int>(ii));
      const Chains& prev_best = prev < 0 ? init : best[prev];
      const std::vector<int> window(items.begin() + (prev + 1), items.begin() + ii + 1);
      MG_ASSIGN_OR_RETURN(Chains current,
                          FindBest(window, prev_best, best.empty() ? init : best.back()));
      // memonger.py asserts that the window's blobs were all placed, once.
      if (Members(current) != Members(prev_best) + window.size()) {
        return absl::FailedPreconditionError(
            "Caffe2's DP assignment fails on this net (memonger.py's assertion in "
            "compute_assignments_dp: a window's blobs were not each placed once)");
      }
      best.push_back(std::move(current));
    }
    return best.empty() ? Chains() : best.back();
  }

 private:
  int CompatiblePrev(int item, const std::vector<Chains>& best, int index) const {
    for (int k = index - 1; k >= 0; --k) {
      const bool all = std::all_of(best[k].begin(), best[k].end(), [&](const Chain& chain) {
        return Compatible(ranges_, item, chain);
      });
      if (all) return k;
    }
    return -1;
  }

  absl::StatusOr<Chains> FindBest(const std::vector<int>& window, const Chains& init,
                                  const Chains& prev_best) {
    const int target = window.back();
    // memonger.py asserts that nothing earlier in the window may follow the target.
    for (size_t i = 0; i + 1 < window.size(); ++i) {
      if (Compatible(ranges_, window[i], {target})) {
        return absl::FailedPreconditionError(absl::StrCat(
            "Caffe2's DP assignment fails on this net (memonger.py's assertion in find_best): '",
            util::Quote(ranges_[window[i]].name), "' could follow '",
            util::Quote(ranges_[target].name), "' in the same window"));
      }
    }
    std::vector<Chains> candidates;
    for (size_t ii = 0; ii < init.size(); ++ii) {
      if (!Compatible(ranges_, target, init[ii])) continue;
      Chains current = init;
      current[ii].push_back(target);
      if (window.size() > 1) {
        Chains others;
        for (size_t i = 0; i < current.size(); ++i) {
          if (i != ii) others.push_back(current[i]);
        }
        const std::vector<int> rest(window.begin(), window.end() - 1);
        MG_ASSIGN_OR_RETURN(Chains assigned, Assign(rest, others));
        assigned.push_back(current[ii]);
        current = std::move(assigned);
      }
      candidates.push_back(std::move(current));
    }
    Chains alone = prev_best;
    alone.push_back({target});
    candidates.push_back(std::move(alone));
    size_t chosen = 0;  // the first minimum, as Python's min()
    for (size_t i = 1; i < candidates.size(); ++i) {
      if (MemoryUsage(ranges_, candidates[i]) < MemoryUsage(ranges_, candidates[chosen])) {
        chosen = i;
      }
    }
    return std::move(candidates[chosen]);
  }

  const std::vector<Range>& ranges_;
  const absl::Time deadline_;
};

}  // namespace

absl::StatusOr<Renames> OptimizeInterference(const NameNet& net,
                                             const std::set<std::string>& static_blobs,
                                             const std::map<std::string, int64_t>& blob_sizes,
                                             bool dynamic_programming, absl::Time deadline) {
  // compute_ranges: blobs in order of first appearance (inputs before outputs).
  struct Raw {
    std::optional<int64_t> defined, used;
  };
  std::vector<std::string> order;
  absl::flat_hash_map<std::string, Raw> raw;
  for (int i = 0; i < static_cast<int>(net.ops.size()); ++i) {
    for (const std::string& b : net.ops[i].inputs) {
      auto [it, inserted] = raw.try_emplace(b);
      if (inserted) order.push_back(b);
      it->second.used = it->second.used.has_value() ? std::max<int64_t>(*it->second.used, i) : i;
    }
    for (const std::string& b : net.ops[i].outputs) {
      auto [it, inserted] = raw.try_emplace(b);
      if (inserted) order.push_back(b);
      it->second.defined =
          it->second.defined.has_value() ? std::min<int64_t>(*it->second.defined, i) : i;
    }
  }
  // compute_assignments: a stable sort on (used is None, used); get_updated_ranges.
  std::stable_sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) {
    const Raw& ra = raw.at(a);
    const Raw& rb = raw.at(b);
    const std::pair<bool, int64_t> ka{!ra.used.has_value(), ra.used.value_or(0)};
    const std::pair<bool, int64_t> kb{!rb.used.has_value(), rb.used.value_or(0)};
    return ka < kb;
  });
  std::optional<int64_t> max_used;
  for (const std::string& b : order) {
    const Raw& r = raw.at(b);
    if (r.used.has_value() && *r.used != 0) max_used = std::max(max_used.value_or(*r.used), *r.used);
  }
  if (!max_used.has_value()) {
    return absl::FailedPreconditionError(
        "Caffe2's optimize_interference fails on this net: no blob is read after the first op "
        "(max() of an empty sequence)");
  }
  std::vector<Range> ranges;
  for (const std::string& b : order) {
    const Raw& r = raw.at(b);
    Range range;
    range.name = b;
    range.defined = r.defined.value_or(-1);
    range.used = r.used.value_or(*max_used + 1);
    if (!blob_sizes.empty()) {
      auto size = blob_sizes.find(b);
      if (size == blob_sizes.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--caffe2-bugs: no size for blob '", util::Quote(b), "'"));
      }
      range.size = size->second;
    }
    ranges.push_back(std::move(range));
  }
  std::vector<int> sharable;
  for (int i = 0; i < static_cast<int>(ranges.size()); ++i) {
    if (static_blobs.count(ranges[i].name) == 0) sharable.push_back(i);
  }
  Chains chains;
  if (dynamic_programming) {
    Dp dp(ranges, deadline);
    MG_ASSIGN_OR_RETURN(chains, dp.Assign(sharable, {}));
  } else {
    chains = Greedy(ranges, sharable);
  }
  // compute_blob_assignments: every member of a chain of two or more takes the last one's name.
  Renames renames;
  for (const Chain& chain : chains) {
    if (chain.size() < 2) continue;
    const std::string& last = ranges[chain.back()].name;
    for (int i : chain) {
      if (ranges[i].name != last) renames[ranges[i].name] = last;
    }
  }
  return renames;
}

absl::StatusOr<Renames> OptimizeInferenceFast(const NameNet& net,
                                              const std::set<std::string>& static_blobs) {
  if (!net.type.empty() && net.type != "simple") return Renames();  // returned unchanged
  for (const NameOp& op : net.ops) {
    if (op.type == "RecurrentNetwork") return Renames();
  }
  std::set<std::string> all_blobs;
  std::map<std::string, std::pair<int, int>> ranges;
  for (int i = 0; i < static_cast<int>(net.ops.size()); ++i) {
    for (const std::string& in : net.ops[i].inputs) {
      auto it = ranges.find(in);
      if (it != ranges.end()) it->second.second = i;
      all_blobs.insert(in);
    }
    for (const std::string& out : net.ops[i].outputs) {
      all_blobs.insert(out);
      if (static_blobs.count(out) > 0) continue;
      ranges.try_emplace(out, i, i);
    }
  }
  std::vector<std::string> free;  // a LIFO stack
  std::map<std::string, std::string> renaming;  // canonical -> __m<k>_shared
  std::map<std::string, std::string> mapping;   // blob -> canonical
  for (int i = 0; i < static_cast<int>(net.ops.size()); ++i) {
    // Caffe2's new_free_blobs, pushed below in its iteration order: a real
    // std::unordered_set<std::string> filled in Caffe2's order, so the order is the standard
    // library's, as it was Caffe2's (tests/reference/memonger_ref.py, unordered_set_order).
    std::unordered_set<std::string> new_free;
    for (const std::string& in : net.ops[i].inputs) {
      auto range = ranges.find(in);
      if (range == ranges.end() || range->second.second != i) continue;
      std::string freed;
      auto mapped = mapping.find(in);
      if (mapped == mapping.end()) {
        freed = in;
        mapping[in] = in;
        const std::string shared = absl::StrCat("__m", renaming.size(), "_shared");
        if (all_blobs.count(shared) > 0) return Renames();  // already optimized
        renaming[in] = shared;
      } else {
        freed = mapped->second;
      }
      new_free.insert(freed);
    }
    for (const std::string& out : net.ops[i].outputs) {
      if (free.empty()) continue;
      auto range = ranges.find(out);
      if (range != ranges.end() && range->second.first == i) {
        mapping[out] = free.back();
        free.pop_back();
      }
    }
    free.insert(free.end(), new_free.begin(), new_free.end());
  }
  Renames renames;
  for (const auto& [blob, canonical] : mapping) {
    const std::string& name = renaming.at(canonical);
    if (name != blob) renames[blob] = name;
  }
  return renames;
}

std::vector<std::pair<int, int>> InterferenceEdges(const NameNet& net) {
  std::vector<std::pair<int, int>> edges;
  const int n = static_cast<int>(net.ops.size());
  for (int i = 0; i < n; ++i) {
    const std::set<std::string> outputs(net.ops[i].outputs.begin(), net.ops[i].outputs.end());
    for (int j = i + 1; j < n; ++j) {
      const std::vector<std::string>& inputs = net.ops[j].inputs;
      if (std::any_of(inputs.begin(), inputs.end(),
                      [&](const std::string& b) { return outputs.count(b) > 0; })) {
        edges.emplace_back(i, j);
      }
    }
  }
  return edges;
}

Hazards SimulateRenamedNet(const NameNet& net, const Renames& renames) {
  auto physical = [&](const std::string& name) -> const std::string& {
    auto it = renames.find(name);
    return it == renames.end() ? name : it->second;
  };
  struct Content {
    std::string name;
    int version = 0;
    int writer = -1;  // op index; -1: fed as an external input
  };
  absl::flat_hash_map<std::string, Content> holds;         // physical blob -> what it holds
  absl::flat_hash_map<std::string, int> version;           // name -> writes so far
  absl::flat_hash_map<std::string, graph::Device> device;  // physical blob -> last device
  std::set<std::string> cross_device;
  // External inputs are fed under their own names (renaming never touches external_input).
  const std::set<std::string> external_inputs(net.external_inputs.begin(),
                                              net.external_inputs.end());
  for (const std::string& in : net.external_inputs) holds[in] = Content{in, 0, -1};
  auto describe = [&](const Content& c) {
    return c.writer < 0 ? absl::StrCat("'", util::Quote(c.name), "' (fed)")
                        : absl::StrCat("'", util::Quote(c.name), "' (op ", c.writer, ", ",
                                       net.ops[c.writer].type, ")");
  };
  Hazards hazards;
  for (int j = 0; j < static_cast<int>(net.ops.size()); ++j) {
    const NameOp& op = net.ops[j];
    for (const std::string& in : op.inputs) {
      auto expected = version.find(in);
      const int want = expected == version.end() ? 0 : expected->second;
      // A name no op wrote yet and no one feeds is undefined in the original net too.
      if (want == 0 && external_inputs.count(in) == 0) continue;
      const std::string& blob = physical(in);
      auto held = holds.find(blob);
      if (held == holds.end()) {
        hazards.clobbered_reads.push_back(absl::StrCat(
            "op ", j, " (", op.type, ") reads '", util::Quote(in), "' from blob '",
            util::Quote(blob), "', which holds nothing yet"));
      } else if (held->second.name != in || held->second.version != want) {
        hazards.clobbered_reads.push_back(absl::StrCat(
            "op ", j, " (", op.type, ") reads '", util::Quote(in), "' from blob '",
            util::Quote(blob), "', which holds ", describe(held->second)));
      }
    }
    const graph::Device written_on = graph::OutputDevice(op.type, op.device);
    for (const std::string& out : op.outputs) {
      const int v = ++version[out];
      const std::string& blob = physical(out);
      holds[blob] = Content{out, v, j};
      auto [it, inserted] = device.try_emplace(blob, written_on);
      if (!inserted && it->second != written_on && cross_device.insert(blob).second) {
        hazards.cross_device.push_back(absl::StrCat(
            "blob '", util::Quote(blob), "' holds values on ", graph::DeviceToString(it->second),
            " and ", graph::DeviceToString(written_on), " (first at op ", j, ", ", op.type,
            "): Caffe2 reallocates it at each change, so nothing is shared there"));
      }
      it->second = written_on;
    }
  }
  // The caller reads the external outputs under their own names after the last op.
  for (const std::string& out : net.external_outputs) {
    auto written = version.find(out);
    if (written == version.end() && external_inputs.count(out) == 0) continue;
    const int want = written == version.end() ? 0 : written->second;
    auto held = holds.find(out);
    if (held == holds.end()) {
      hazards.clobbered_reads.push_back(absl::StrCat(
          "the net's output '", util::Quote(out), "' is in no blob of its name at the end"));
    } else if (held->second.name != out || held->second.version != want) {
      hazards.clobbered_reads.push_back(
          absl::StrCat("the net's output '", util::Quote(out), "' is overwritten by ",
                       describe(held->second), " at the end"));
    }
  }
  return hazards;
}

}  // namespace memonger::caffe2
