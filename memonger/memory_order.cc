#include "memonger/memory_order.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/numeric/int128.h"
#include "absl/strings/str_cat.h"
#include "memonger/schedule.h"
#include "memonger/time_shares.h"
#include "util/checked_math.h"
#include "util/deadline.h"
#include "util/status_macros.h"

namespace memonger {
namespace {

using graph::Graph;
using graph::kNone;
using graph::OpId;
using graph::ValueId;
using Clock = std::chrono::steady_clock;

// One planned alias class, as the peak sees it.
struct ClassInfo {
  int64_t bytes = 0;        // aligned class bytes
  bool from_start = false;  // a member is a graph input or a planned static value: live at step 0
  bool to_end = false;      // a member is read after the net (output, parameter gradient, static)
  std::vector<OpId> touches;  // the ops writing or reading a member, ascending, no repeats
};

// The graph's dependencies and its classes, and the peak of any order (see the header).
class MemoryModel {
 public:
  static absl::StatusOr<MemoryModel> Build(const Graph& graph, const MemoryOrderOptions& options) {
    MemoryModel m;
    m.num_ops_ = graph.num_ops();
    m.successors_ = OpSuccessors(graph);
    m.predecessors_.assign(m.num_ops_, {});
    for (OpId op = 0; op < m.num_ops_; ++op) {
      for (OpId s : m.successors_[op]) m.predecessors_[s].push_back(op);
    }
    Schedule given;
    given.ops = graph.TopologicalOrder();
    MG_ASSIGN_OR_RETURN(Liveness live, ComputeLiveness(graph, given, options.liveness));
    std::vector<bool> read_after(graph.num_values(), false);
    for (ValueId id : graph.outputs()) read_after[id] = true;
    for (const auto& [param, grad] : graph.param_grads()) read_after[grad] = true;
    if (!options.liveness.recycle_inputs) {
      for (ValueId id : graph.inputs()) read_after[id] = true;  // kept for the whole run
    }
    for (const std::string& name : options.liveness.static_names) {
      if (std::optional<ValueId> id = graph.FindValue(name)) read_after[*id] = true;
    }
    m.classes_of_op_.assign(m.num_ops_, {});
    for (ValueId root = 0; root < graph.num_values(); ++root) {
      if (!live.planned[root] || live.alias_root[root] != root) continue;
      const std::optional<int64_t> bytes =
          util::CheckedAlignUp(live.class_bytes[root], options.alignment);
      if (!bytes.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "value '", graph.value(root).DisplayName(), "' is too large to align"));
      }
      ClassInfo c;
      c.bytes = *bytes;
      for (ValueId member : live.members[root]) {
        const graph::Value& v = graph.value(member);
        const bool is_static = graph::IsStatic(v.role);
        c.from_start = c.from_start || v.producer == kNone;
        c.to_end = c.to_end || read_after[member] || is_static;
        if (v.producer != kNone) c.touches.push_back(v.producer);
        const absl::Span<const OpId> readers = graph.consumers(member);
        c.touches.insert(c.touches.end(), readers.begin(), readers.end());
      }
      std::sort(c.touches.begin(), c.touches.end());
      c.touches.erase(std::unique(c.touches.begin(), c.touches.end()), c.touches.end());
      if (c.touches.empty() && !c.to_end) {
        // A graph input nobody reads: liveness gives it step 0 alone, whatever the order.
        m.step0_bytes_ += c.bytes;
        continue;
      }
      const int index = static_cast<int>(m.classes_.size());
      for (OpId op : c.touches) m.classes_of_op_[op].push_back(index);
      m.classes_.push_back(std::move(c));
    }
    return m;
  }

  int num_ops() const { return num_ops_; }
  const std::vector<std::vector<OpId>>& successors() const { return successors_; }
  const std::vector<std::vector<OpId>>& predecessors() const { return predecessors_; }
  const std::vector<ClassInfo>& classes() const { return classes_; }
  const std::vector<int>& classes_of(OpId op) const { return classes_of_op_[op]; }
  int64_t step0_bytes() const { return step0_bytes_; }

  // The live bytes of each step of `order` (a valid order of every op).
  std::vector<int64_t> LivePerStep(const std::vector<OpId>& order) const {
    const int n = num_ops_;
    std::vector<int64_t> live(n, 0);
    if (n == 0) return live;
    std::vector<int> pos(n);
    for (int i = 0; i < n; ++i) pos[order[i]] = i;
    std::vector<int64_t> delta(n + 1, 0);
    for (const ClassInfo& c : classes_) {
      int first = n;
      int last = -1;
      for (OpId op : c.touches) {
        first = std::min(first, pos[op]);
        last = std::max(last, pos[op]);
      }
      if (c.from_start) first = 0;
      if (c.to_end) last = n - 1;
      last = std::max(last, first);
      delta[first] += c.bytes;
      delta[last + 1] -= c.bytes;
    }
    delta[0] += step0_bytes_;
    delta[1] -= step0_bytes_;
    int64_t running = 0;
    for (int i = 0; i < n; ++i) {
      running += delta[i];
      live[i] = running;
    }
    return live;
  }

  // A bound no order beats: every op's step holds the classes it touches and every class live
  // from the first step to the last.
  int64_t TrivialLowerBound() const {
    int64_t everywhere = 0;
    for (const ClassInfo& c : classes_) {
      if (c.from_start && c.to_end) everywhere += c.bytes;
    }
    int64_t bound = num_ops_ > 0 ? everywhere + step0_bytes_ : 0;
    for (OpId op = 0; op < num_ops_; ++op) {
      int64_t at = everywhere;
      for (int c : classes_of_op_[op]) {
        if (!(classes_[c].from_start && classes_[c].to_end)) at += classes_[c].bytes;
      }
      bound = std::max(bound, at);
    }
    return bound;
  }

  int64_t Peak(const std::vector<OpId>& order) const {
    const std::vector<int64_t> live = LivePerStep(order);
    return live.empty() ? 0 : *std::max_element(live.begin(), live.end());
  }

 private:
  int num_ops_ = 0;
  std::vector<std::vector<OpId>> successors_;
  std::vector<std::vector<OpId>> predecessors_;
  std::vector<ClassInfo> classes_;
  std::vector<std::vector<int>> classes_of_op_;
  int64_t step0_bytes_ = 0;
};

// ---------------------------------------------------------------------------------------------
// List schedulers.

// Kahn's algorithm taking ready ops first in, first out (bfs) or last in, first out (dfs);
// ops that become ready together enter in ascending index.
std::vector<OpId> KahnQueueOrder(const MemoryModel& m, bool lifo) {
  const int n = m.num_ops();
  std::vector<int> waiting(n);
  std::deque<OpId> ready;
  for (OpId op = 0; op < n; ++op) {
    waiting[op] = static_cast<int>(m.predecessors()[op].size());
    if (waiting[op] == 0) ready.push_back(op);
  }
  if (lifo) std::reverse(ready.begin(), ready.end());
  std::vector<OpId> order;
  order.reserve(n);
  std::vector<OpId> released;
  while (!ready.empty()) {
    OpId op;
    if (lifo) {
      op = ready.back();
      ready.pop_back();
    } else {
      op = ready.front();
      ready.pop_front();
    }
    order.push_back(op);
    released.clear();
    for (OpId s : m.successors()[op]) {
      if (--waiting[s] == 0) released.push_back(s);
    }
    if (lifo) {
      for (auto it = released.rbegin(); it != released.rend(); ++it) ready.push_back(*it);
    } else {
      for (OpId s : released) ready.push_back(s);
    }
  }
  return order;
}

// When a search ends: its deadline, or the caller's stop (MemoryOrderOptions::stop).
struct Limit {
  Clock::time_point deadline;
  const std::atomic<bool>* stop = nullptr;
  bool Passed() const {
    return Clock::now() > deadline || (stop != nullptr && stop->load(std::memory_order_relaxed));
  }
};

// Least peak memory first: among the ready ops, the one whose step peaks lowest, then the one
// that frees the most bytes, then the lowest index. When the deadline passes, the rest of the
// order is first-in first-out.
std::vector<OpId> LpmfOrder(const MemoryModel& m, const Limit& limit) {
  const int n = m.num_ops();
  const std::vector<ClassInfo>& classes = m.classes();
  std::vector<int> waiting(n);
  std::vector<OpId> ready;
  for (OpId op = 0; op < n; ++op) {
    waiting[op] = static_cast<int>(m.predecessors()[op].size());
    if (waiting[op] == 0) ready.push_back(op);
  }
  std::vector<int> untouched(classes.size());  // touching ops not yet run
  std::vector<bool> started(classes.size());
  int64_t memory = m.step0_bytes();
  for (size_t c = 0; c < classes.size(); ++c) {
    untouched[c] = static_cast<int>(classes[c].touches.size());
    started[c] = classes[c].from_start;
    if (started[c]) memory += classes[c].bytes;
  }
  std::vector<OpId> order;
  order.reserve(n);
  bool fifo = false;
  size_t fifo_next = 0;
  while (order.size() < static_cast<size_t>(n)) {
    size_t pick = 0;
    if (fifo) {
      pick = std::min(fifo_next, ready.size() - 1);
    } else {
      int64_t best_peak = std::numeric_limits<int64_t>::max();
      int64_t best_freed = std::numeric_limits<int64_t>::min();
      for (size_t i = 0; i < ready.size(); ++i) {
        const OpId op = ready[i];
        int64_t starts = 0;
        int64_t ends = 0;
        for (int c : m.classes_of(op)) {
          if (!started[c]) starts += classes[c].bytes;
          if (untouched[c] == 1 && !classes[c].to_end) ends += classes[c].bytes;
        }
        const int64_t peak = memory + starts;
        const int64_t freed = ends - starts;
        if (peak < best_peak || (peak == best_peak && freed > best_freed) ||
            (peak == best_peak && freed == best_freed && op < ready[pick])) {
          best_peak = peak;
          best_freed = freed;
          pick = i;
        }
      }
      if ((order.size() & 255) == 255 && limit.Passed()) fifo = true;
    }
    const OpId op = ready[pick];
    ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(pick));
    order.push_back(op);
    if (order.size() == 1) memory -= m.step0_bytes();
    for (int c : m.classes_of(op)) {
      if (!started[c]) {
        started[c] = true;
        memory += classes[c].bytes;
      }
      if (--untouched[c] == 0 && !classes[c].to_end) memory -= classes[c].bytes;
    }
    for (OpId s : m.successors()[op]) {
      if (--waiting[s] == 0) ready.push_back(s);
    }
  }
  return order;
}

// ---------------------------------------------------------------------------------------------
// Local search.

// Hill climbing over valid orders (see the header): improves `order` in place; true when it
// changed.
bool LocalSearch(const MemoryModel& m, std::vector<OpId>& order, int max_moves,
                 const Limit& limit) {
  const int n = m.num_ops();
  if (n < 3) return false;
  // (peak, area): the area (live bytes summed over the steps) breaks ties on a plateau; a
  // double, since ops x bytes may pass int64.
  auto score = [&](const std::vector<OpId>& o) {
    const std::vector<int64_t> live = m.LivePerStep(o);
    double area = 0;
    int64_t peak = 0;
    for (int64_t b : live) {
      peak = std::max(peak, b);
      area += static_cast<double>(b);
    }
    return std::make_pair(peak, area);
  };
  std::vector<int> pos(n);
  auto positions = [&]() {
    for (int i = 0; i < n; ++i) pos[order[i]] = i;
  };
  positions();
  auto best = score(order);
  bool changed = false;
  int moves = 0;
  constexpr int kWindow = 8;   // ops on each side of the peak step tried
  constexpr int kTargets = 8;  // positions tried per op, spread over its window
  bool improved = true;
  std::vector<OpId> candidate;
  while (improved && moves < max_moves && !limit.Passed()) {
    improved = false;
    const std::vector<int64_t> live = m.LivePerStep(order);
    const int peak_step =
        static_cast<int>(std::max_element(live.begin(), live.end()) - live.begin());
    const int lo = std::max(0, peak_step - kWindow);
    const int hi = std::min(n - 1, peak_step + kWindow);
    for (int i = lo; i <= hi && !improved && moves < max_moves; ++i) {
      const OpId op = order[i];
      int earliest = 0;
      int latest = n - 1;
      for (OpId p : m.predecessors()[op]) earliest = std::max(earliest, pos[p] + 1);
      for (OpId s : m.successors()[op]) latest = std::min(latest, pos[s] - 1);
      if (earliest == latest) continue;
      const int span = latest - earliest;
      for (int t = 0; t <= kTargets && !improved && moves < max_moves; ++t) {
        const int target = earliest + static_cast<int>(int64_t{span} * t / kTargets);
        if (target == i) continue;
        ++moves;
        candidate = order;
        candidate.erase(candidate.begin() + i);
        candidate.insert(candidate.begin() + target, op);
        const auto s = score(candidate);
        if (s < best) {
          best = s;
          order.swap(candidate);
          positions();
          improved = true;
          changed = true;
        }
      }
      if ((moves & 63) == 0 && limit.Passed()) break;
    }
  }
  return changed;
}

// ---------------------------------------------------------------------------------------------
// Exact search.

// Which ops every valid order runs before or after each op: one bit per op for its ancestors
// and one for its descendants, O(ops^2 / 64) words, so only for graphs of at most
// kMaxExactGraphOps ops.
class Reachability {
 public:
  Reachability(const MemoryModel& m, const std::vector<OpId>& topo)
      : n_(m.num_ops()), words_((static_cast<size_t>(n_) + 63) / 64) {
    desc_ = Reach(m.successors(), topo, /*backwards=*/true);
    anc_ = Reach(m.predecessors(), topo, /*backwards=*/false);
  }

  // Cut ops: every other op is an ancestor or a descendant.
  std::vector<bool> CutOps() const {
    std::vector<bool> cut(n_, false);
    for (OpId op = 0; op < n_; ++op) {
      int64_t related = 0;
      const uint64_t* d = Row(desc_, op);
      const uint64_t* a = Row(anc_, op);
      for (size_t w = 0; w < words_; ++w) related += __builtin_popcountll(d[w] | a[w]);
      cut[op] = related == n_ - 1;
    }
    return cut;
  }

  // A bound no order beats, at least the trivial one: while op o runs, every class that o
  // touches is live, and so is every class with a toucher among o's ancestors and one among
  // its descendants (live from a step before o's to one after it in every order), a class live
  // from step 0 with a toucher among the descendants, and one read after the net with a
  // toucher among the ancestors. O(classes x touches x ops / 64 + the live pairs found).
  int64_t LowerBound(const MemoryModel& m) const {
    std::vector<int64_t> at(n_, 0);
    std::vector<uint64_t> after(words_);   // ops with a toucher among their ancestors
    std::vector<uint64_t> before(words_);  // ops with a toucher among their descendants
    for (const ClassInfo& c : m.classes()) {
      std::fill(after.begin(), after.end(), 0);
      std::fill(before.begin(), before.end(), 0);
      for (OpId t : c.touches) {
        const uint64_t* d = Row(desc_, t);
        const uint64_t* a = Row(anc_, t);
        for (size_t w = 0; w < words_; ++w) {
          after[w] |= d[w];
          before[w] |= a[w];
        }
      }
      for (size_t w = 0; w < words_; ++w) {
        uint64_t live = after[w] & before[w];
        if (c.from_start) live |= before[w];
        if (c.to_end) live |= after[w];
        if (c.from_start && c.to_end) live = ~uint64_t{0};
        for (; live != 0; live &= live - 1) {
          const size_t op = w * 64 + static_cast<size_t>(__builtin_ctzll(live));
          if (op < static_cast<size_t>(n_)) at[op] += c.bytes;
        }
      }
      // Its touchers themselves, where no bit above already counted them.
      for (OpId t : c.touches) {
        const bool counted = c.from_start && c.to_end;
        const bool in_after = (after[t / 64] >> (t % 64)) & 1;
        const bool in_before = (before[t / 64] >> (t % 64)) & 1;
        if (counted || (in_after && in_before) || (c.from_start && in_before) ||
            (c.to_end && in_after)) {
          continue;
        }
        at[t] += c.bytes;
      }
    }
    int64_t bound = m.TrivialLowerBound();
    for (int64_t bytes : at) bound = std::max(bound, bytes);
    return bound;
  }

 private:
  const uint64_t* Row(const std::vector<uint64_t>& bits, OpId op) const {
    return bits.data() + words_ * op;
  }
  // Bits of every op reachable through `next`, ops visited so that `next` ones come first.
  std::vector<uint64_t> Reach(const std::vector<std::vector<OpId>>& next,
                              const std::vector<OpId>& topo, bool backwards) const {
    std::vector<uint64_t> bits(words_ * n_, 0);
    for (int k = 0; k < n_; ++k) {
      const OpId op = topo[backwards ? n_ - 1 - k : k];
      uint64_t* r = bits.data() + words_ * op;
      for (OpId x : next[op]) {
        const uint64_t* rx = Row(bits, x);
        for (size_t w = 0; w < words_; ++w) r[w] |= rx[w];
        r[x / 64] |= uint64_t{1} << (x % 64);
      }
    }
    return bits;
  }

  int n_;
  size_t words_;
  std::vector<uint64_t> desc_;
  std::vector<uint64_t> anc_;
};

// One segment's search: the ops of order[begin, end) (a run every valid order keeps together)
// reordered for the lowest peak. nullopt when the search ran out of states or time; else the
// segment's optimal order (the given one when nothing beats it) and its peak.
// One bit per op of a segment.
using Mask = absl::uint128;
static_assert(kMaxExactSegmentOps <= 128);

struct SegmentResult {
  std::vector<OpId> ops;
  int64_t peak = 0;
};

std::optional<SegmentResult> SolveSegment(const MemoryModel& m, const std::vector<OpId>& order,
                                          int begin, int end, const Limit& limit) {
  const int k = end - begin;
  const int n = m.num_ops();
  const std::vector<ClassInfo>& classes = m.classes();
  std::vector<int> pos(n);
  for (int i = 0; i < n; ++i) pos[order[i]] = i;
  std::vector<int> local(n, -1);
  for (int i = 0; i < k; ++i) local[order[begin + i]] = i;

  // The segment's classes: touch masks, and whether they are live before and after it.
  struct Local {
    int64_t bytes;
    Mask touches;
    bool before;
    bool after;
  };
  std::vector<Local> locals;
  absl::flat_hash_map<int, int> local_of_class;
  std::vector<std::vector<int>> locals_of_op(k);
  int64_t constant = 0;  // classes live across the segment that no op of it touches
  for (int c = 0; c < static_cast<int>(classes.size()); ++c) {
    const ClassInfo& info = classes[c];
    bool before = info.from_start;
    bool after = info.to_end;
    Mask mask = 0;
    for (OpId op : info.touches) {
      if (pos[op] < begin) before = true;
      else if (pos[op] >= end) after = true;
      else mask |= Mask{1} << local[op];
    }
    if (mask == 0) {
      if (before && after) constant += info.bytes;
      continue;
    }
    const int index = static_cast<int>(locals.size());
    locals.push_back({info.bytes, mask, before, after});
    for (int i = 0; i < k; ++i) {
      if (((mask >> i) & 1) != 0) locals_of_op[i].push_back(index);
    }
    local_of_class[c] = index;
  }
  std::vector<Mask> pred_mask(k, 0);
  for (int i = 0; i < k; ++i) {
    for (OpId p : m.predecessors()[order[begin + i]]) {
      if (local[p] >= 0) pred_mask[i] |= Mask{1} << local[p];
    }
  }
  const int64_t first_step_extra = begin == 0 ? m.step0_bytes() : 0;
  const Mask all = k == kMaxExactSegmentOps ? ~Mask{0} : (Mask{1} << k) - 1;

  int64_t start_memory = constant;
  for (const Local& l : locals) {
    if (l.before) start_memory += l.bytes;  // live at the boundary: a touch inside follows
  }
  // The memory while op i runs after the set `done`, and the memory after it.
  auto step = [&](Mask done, int64_t memory, int i, int64_t* after) {
    int64_t during = memory + (done == 0 ? first_step_extra : 0);
    int64_t ends = 0;
    const Mask with = done | Mask{1} << i;
    for (int l : locals_of_op[i]) {
      const Local& c = locals[l];
      if (!c.before && (c.touches & done) == 0) during += c.bytes;
      if (!c.after && (c.touches & ~with) == 0) ends += c.bytes;
    }
    *after = during - (done == 0 ? first_step_extra : 0) - ends;
    return during;
  };

  // The given order's peak in the segment: the bound to beat.
  int64_t incumbent = 0;
  {
    Mask done = 0;
    int64_t memory = start_memory;
    for (int i = 0; i < k; ++i) {
      int64_t after = 0;
      incumbent = std::max(incumbent, step(done, memory, i, &after));
      memory = after;
      done |= Mask{1} << i;
    }
  }
  SegmentResult result;
  result.ops.assign(order.begin() + begin, order.begin() + end);
  result.peak = incumbent;
  if (k <= 1) return result;

  struct State {
    int64_t peak;    // the lowest peak of any order that runs exactly this set
    int64_t memory;  // live bytes after the set (a function of the set)
    uint8_t last;    // the op that ends such an order (local index)
  };
  std::vector<absl::flat_hash_map<Mask, State>> layers(k + 1);
  layers[0][0] = State{0, start_memory, 0};
  int64_t states = 1;
  for (int size = 0; size < k; ++size) {
    // The sets in ascending order, not the hash map's: its order changes from run to run (the
    // hash is seeded per process), and it decides which of two equally good orders is kept.
    std::vector<std::pair<Mask, State>> sets(layers[size].begin(), layers[size].end());
    std::sort(sets.begin(), sets.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [done, state] : sets) {
      for (int i = 0; i < k; ++i) {
        const Mask bit = Mask{1} << i;
        if ((done & bit) != 0 || (pred_mask[i] & ~done) != 0) continue;
        int64_t after = 0;
        const int64_t peak = std::max(state.peak, step(done, state.memory, i, &after));
        if (peak >= incumbent) continue;  // cannot beat the known order
        auto [it, inserted] = layers[size + 1].try_emplace(done | bit, State{peak, after,
                                                                             static_cast<uint8_t>(i)});
        if (!inserted && peak < it->second.peak) {
          it->second.peak = peak;
          it->second.last = static_cast<uint8_t>(i);
        }
        if (inserted && ++states > kMaxExactStates) return std::nullopt;
      }
      if ((states & 1023) == 0 && limit.Passed()) return std::nullopt;
    }
    if (limit.Passed()) return std::nullopt;
  }
  const auto final_state = layers[k].find(all);
  if (final_state == layers[k].end()) return result;  // nothing beats the given order
  result.peak = final_state->second.peak;
  std::vector<OpId> reversed;
  Mask done = all;
  for (int size = k; size > 0; --size) {
    const State& s = layers[size].at(done);
    reversed.push_back(order[begin + s.last]);
    done &= ~(Mask{1} << s.last);
  }
  result.ops.assign(reversed.rbegin(), reversed.rend());
  return result;
}

}  // namespace

absl::StatusOr<MemoryOrder> FindMemoryAwareOrder(const Graph& graph,
                                                 const MemoryOrderOptions& options) {
  const auto start = Clock::now();
  if (options.alignment < 1 || (options.alignment & (options.alignment - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("alignment must be a power of two, got ", options.alignment));
  }
  if (!(options.time_limit_seconds >= 0) || options.local_search_moves < 0) {
    return absl::InvalidArgumentError("the order search needs a time limit >= 0 and moves >= 0");
  }
  const auto deadline =
      start + std::chrono::duration_cast<Clock::duration>(
                  std::chrono::duration<double>(std::min(options.time_limit_seconds, 1e6)));
  MG_ASSIGN_OR_RETURN(MemoryModel model, MemoryModel::Build(graph, options));

  MemoryOrder best;
  auto consider = [&](const std::string& name, std::vector<OpId> ops) {
    const int64_t peak = model.Peak(ops);
    best.tried.emplace_back(name, peak);
    if (best.method.empty() || peak < best.peak_bytes) {
      best.ops = std::move(ops);
      best.peak_bytes = peak;
      best.method = name;
    }
  };
  // The given order always; every other member only while time is left (each is O(n log n):
  // on a 200,000-op net the six took 0.5 s, whatever the limit).
  const Limit limit{deadline, options.stop};
  auto time_left = [&] { return !limit.Passed(); };
  for (OrderKind kind : {OrderKind::kGiven, OrderKind::kTopological, OrderKind::kLongestPath}) {
    if (kind != OrderKind::kGiven && !time_left()) break;
    MG_ASSIGN_OR_RETURN(Schedule s, MakeSchedule(graph, kind));
    consider(std::string(OrderName(kind)), std::move(s.ops));
  }
  best.given_peak_bytes = best.tried.front().second;
  if (time_left()) consider("lpmf", LpmfOrder(model, limit));
  if (time_left()) consider("bfs", KahnQueueOrder(model, /*lifo=*/false));
  if (time_left()) consider("dfs", KahnQueueOrder(model, /*lifo=*/true));
  for (const std::vector<OpId>& seed : options.seeds) {
    if (CheckSchedule(graph, seed).ok()) consider("seed", seed);
  }

  // Local search gets its share of what is left, the exact search the rest.
  const auto now = Clock::now();
  const auto local_deadline =
      now + util::ShareOfTimeLeft(now, deadline, time_shares::kOrderLocalSearch);
  std::vector<OpId> searched = best.ops;
  if (LocalSearch(model, searched, options.local_search_moves,
                  Limit{local_deadline, options.stop})) {
    consider("local-search", std::move(searched));
  }

  const int n = model.num_ops();
  const bool have_cuts = n <= kMaxExactGraphOps;
  std::optional<Reachability> reach;
  if (have_cuts) reach.emplace(model, best.ops);
  const int64_t bound = reach.has_value() ? reach->LowerBound(model) : model.TrivialLowerBound();
  if (best.peak_bytes <= bound) {
    best.proven_optimal = true;  // every order needs this much at some step
  }
  if (!options.exact || n == 0 || best.proven_optimal) {
    best.proven_optimal = best.proven_optimal || n == 0;
    best.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return best;
  }
  // Segments between cut ops, each solved alone, spliced into the best order so far.
  const std::vector<bool> cut = have_cuts ? reach->CutOps() : std::vector<bool>(n, false);
  std::vector<OpId> spliced;
  spliced.reserve(n);
  std::vector<std::pair<int64_t, bool>> segment_peaks;  // (optimum or best found, proven)
  int begin = 0;
  while (begin < n) {
    int end = begin;
    if (have_cuts && cut[best.ops[begin]]) {
      end = begin + 1;
    } else {
      while (end < n && !(have_cuts && cut[best.ops[end]])) ++end;
    }
    std::optional<SegmentResult> solved;
    if (have_cuts && end - begin <= kMaxExactSegmentOps) {
      solved = SolveSegment(model, best.ops, begin, end, limit);
    }
    if (solved.has_value()) {
      spliced.insert(spliced.end(), solved->ops.begin(), solved->ops.end());
      segment_peaks.emplace_back(solved->peak, true);
    } else {
      spliced.insert(spliced.end(), best.ops.begin() + begin, best.ops.begin() + end);
      segment_peaks.emplace_back(0, false);
      if (have_cuts && end - begin <= kMaxExactSegmentOps) best.exact_cut_short = true;
    }
    begin = end;
  }
  const int64_t spliced_peak = model.Peak(spliced);
  best.tried.emplace_back("exact", spliced_peak);
  if (spliced_peak < best.peak_bytes) {
    best.ops = std::move(spliced);
    best.peak_bytes = spliced_peak;
    best.method = "exact";
  }
  // Proven when a segment searched to the end already needs the peak reached.
  for (const auto& [peak, proven] : segment_peaks) {
    if (proven && peak >= best.peak_bytes) best.proven_optimal = true;
  }
  best.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return best;
}

absl::StatusOr<int64_t> OrderPeakBytes(const Graph& graph, const std::vector<OpId>& ops,
                                       const MemoryOrderOptions& options) {
  MG_RETURN_IF_ERROR(CheckSchedule(graph, ops));
  MG_ASSIGN_OR_RETURN(MemoryModel model, MemoryModel::Build(graph, options));
  return model.Peak(ops);
}

}  // namespace memonger
