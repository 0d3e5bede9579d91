#include "memonger/recompute.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "graph/control_regions.h"
#include "graph/rebuild.h"
#include "graph/shape_inference.h"
#include "memonger/op_flops.h"
#include "memonger/schedule.h"
#include "memonger/time_shares.h"
#include "util/checked_math.h"
#include "util/limits.h"
#include "util/status_macros.h"

namespace memonger {
namespace {

using graph::Graph;
using graph::kNone;
using graph::OpId;
using graph::ValueId;
using Clock = std::chrono::steady_clock;

bool IsBackward(const graph::Op& op) {
  return op.is_gradient_op || absl::EndsWith(op.type, "Gradient");
}

bool WrittenOnce(const Graph& g, ValueId id) {
  return g.Versions(g.value(id).name).size() == 1;
}

// A rerun would draw other numbers than the forward pass did (a Dropout's mask, which its
// gradient reads), unless the runtime replayed its generator.
bool IsRandom(absl::string_view type) {
  return type == "Dropout" || absl::StartsWith(type, "Random") || type == "Bernoulli" ||
         type == "Multinomial";
}

// For b >= 0.
int64_t SaturatingAdd(int64_t a, int64_t b) {
  return a > std::numeric_limits<int64_t>::max() - b ? std::numeric_limits<int64_t>::max()
                                                      : a + b;
}

// Everything the evaluation of a choice needs, computed once from the given order.
class RecomputeModel {
 public:
  static absl::StatusOr<RecomputeModel> Build(const Graph& g, const RecomputeOptions& options) {
    RecomputeModel m;
    m.g_ = &g;
    m.n_ = g.num_ops();
    Schedule given;
    given.ops = g.TopologicalOrder();
    MG_ASSIGN_OR_RETURN(m.live_, ComputeLiveness(g, given, options.liveness));
    m.pos_ = m.live_.schedule.step_of_op;
    m.backward_.assign(m.n_, false);
    for (OpId op = 0; op < m.n_; ++op) m.backward_[op] = IsBackward(g.op(op));
    m.class_bytes_.assign(g.num_values(), 0);
    for (ValueId root = 0; root < g.num_values(); ++root) {
      if (!m.live_.planned[root] || m.live_.alias_root[root] != root) continue;
      const std::optional<int64_t> b =
          util::CheckedAlignUp(m.live_.class_bytes[root], options.alignment);
      if (!b.has_value()) return absl::InvalidArgumentError("a value is too large to align");
      m.class_bytes_[root] = *b;
      m.roots_.push_back(root);
    }
    m.candidates_ = RecomputeCandidates(g, options.liveness);
    m.is_candidate_.assign(m.n_, false);
    for (OpId op : m.candidates_) m.is_candidate_[op] = true;
    m.by_position_ = m.candidates_;
    std::sort(m.by_position_.begin(), m.by_position_.end(),
              [&](OpId a, OpId b) { return m.pos_[a] < m.pos_[b]; });
    // A clone reads its inputs by name, so it must run before any op that overwrites one of its
    // static inputs in place (a param's update, graph/update_in_backward.h): after it, the name
    // is the new version. (Other inputs of a candidate are never overwritten.)
    std::vector<int> overwritten_at(g.num_values(), m.n_);
    for (const graph::Value& v : g.values()) {
      if (v.inplace_of != kNone && v.producer != kNone) {
        overwritten_at[v.inplace_of] = std::min(overwritten_at[v.inplace_of], m.pos_[v.producer]);
      }
    }
    m.latest_step_.assign(m.n_, m.n_);
    for (OpId op : m.candidates_) {
      for (ValueId x : g.op(op).inputs) {
        m.latest_step_[op] = std::min(m.latest_step_[op], overwritten_at[x]);
      }
    }
    return m;
  }

  const std::vector<OpId>& candidates() const { return candidates_; }
  bool is_candidate(OpId op) const { return is_candidate_[op]; }
  const Graph& graph() const { return *g_; }
  const Liveness& liveness() const { return live_; }
  int position(OpId op) const { return pos_[op]; }
  bool backward(OpId op) const { return backward_[op]; }

  // Where each chosen op's clone runs: right before the first step (in the given order) that
  // reads one of its outputs, a backward op or the clone of a chosen op. -1 for the others.
  std::vector<int> CloneSteps(const std::vector<bool>& chosen) const {
    std::vector<int> step(n_, -1);
    FillCloneSteps(chosen, step);
    return step;
  }

  // CloneSteps into `step` (n_ entries; only the chosen ones are written).
  void FillCloneSteps(const std::vector<bool>& chosen, std::vector<int>& step) const {
    // Reverse forward order: a chosen reader's clone step is known before its producer's.
    for (auto it = by_position_.rbegin(); it != by_position_.rend(); ++it) {
      const OpId p = *it;
      if (!chosen[p]) continue;
      int t = std::numeric_limits<int>::max();
      for (ValueId v : g_->op(p).outputs) {
        for (OpId r : g_->consumers(v)) {
          if (backward_[r]) t = std::min(t, pos_[r]);
          else if (chosen[r]) t = std::min(t, step[r]);
        }
      }
      step[p] = std::min(t == std::numeric_limits<int>::max() ? n_ : t, latest_step_[p]);
    }
  }

  // The lower bound of the rewritten net: the most live bytes at one of its ops. With
  // `above`, also the bytes above `budget` summed over the ops.
  int64_t Peak(const std::vector<bool>& chosen, int64_t* above = nullptr,
               int64_t budget = 0) const {
    // The buffers of one evaluation, kept between calls: the greedy evaluates thousands of
    // choices, and their allocation was a fifth of the time.
    Scratch& x = scratch_;
    x.clone_step.resize(n_);
    FillCloneSteps(chosen, x.clone_step);
    const std::vector<int>& clone_step = x.clone_step;
    // The rewritten order: before original step s, the clones placed there in forward order.
    // index_of_step[s]: where original step s lands; clone_index[p]: where p's clone lands.
    std::vector<int>& clones_before = x.clones_before;
    clones_before.assign(n_ + 1, 0);
    std::vector<OpId>& clones = x.clones;  // in forward order
    clones.clear();
    for (OpId p : by_position_) {
      if (chosen[p]) {
        ++clones_before[clone_step[p]];
        clones.push_back(p);
      }
    }
    std::vector<int>& index_of_step = x.index_of_step;
    std::vector<int>& next_clone = x.next_clone;
    index_of_step.resize(n_ + 1);
    next_clone.resize(n_ + 1);
    int total = 0;
    for (int s = 0; s <= n_; ++s) {
      next_clone[s] = total;
      total += clones_before[s];
      index_of_step[s] = total;
      if (s < n_) ++total;
    }
    std::vector<int>& clone_index = x.clone_index;
    clone_index.resize(n_);
    for (OpId p : clones) clone_index[p] = next_clone[clone_step[p]]++;

    std::vector<int64_t>& delta = x.delta;
    delta.assign(total + 1, 0);
    auto add = [&](int a, int b, int64_t bytes) {
      delta[a] += bytes;
      delta[b + 1] -= bytes;
    };
    // Original classes: their own steps, changed below for chosen outputs and clone inputs.
    // Only the roots' entries are read, each written first.
    std::vector<int>& first = x.first;
    std::vector<int>& last = x.last;
    first.resize(g_->num_values());
    last.resize(g_->num_values());
    for (ValueId root : roots_) {
      first[root] = index_of_step[live_.lifetime[root].first_step];
      last[root] = index_of_step[live_.lifetime[root].last_step];
    }
    for (OpId p : clones) {
      const graph::Op& op = g_->op(p);
      for (ValueId v : op.outputs) {
        // The original dies after its last forward reader; the copy lives from the clone to
        // its last backward (or clone) reader.
        int forward_last = pos_[p];
        int copy_last = clone_index[p];
        for (OpId r : g_->consumers(v)) {
          if (backward_[r]) {
            copy_last = std::max(copy_last, index_of_step[pos_[r]]);
          } else {
            forward_last = std::max(forward_last, pos_[r]);
            if (chosen[r]) copy_last = std::max(copy_last, clone_index[r]);
          }
        }
        last[v] = index_of_step[forward_last];
        add(clone_index[p], copy_last, class_bytes_[v]);
      }
      for (ValueId x : op.inputs) {
        const OpId producer = g_->value(x).producer;
        if (producer != kNone && chosen[producer]) continue;  // reads the copy
        if (!live_.planned[x]) continue;
        const ValueId root = live_.alias_root[x];
        last[root] = std::max(last[root], clone_index[p]);
      }
    }
    for (ValueId root : roots_) add(first[root], last[root], class_bytes_[root]);
    // The excess saturates: with budget 0 (Lowest's climb) it is every live byte of every step.
    int64_t live = 0, peak = 0, excess = 0;
    for (int i = 0; i < total; ++i) {
      live += delta[i];
      peak = std::max(peak, live);
      if (above != nullptr && live > budget) excess = SaturatingAdd(excess, live - budget);
    }
    if (above != nullptr) *above = excess;
    return peak;
  }

  // Unchooses the ops whose clone nothing would read (no backward reader, no chosen reader):
  // they would cost FLOPs and hold their inputs to the end for nothing.
  void DropUnneeded(std::vector<bool>& chosen) const {
    for (auto it = by_position_.rbegin(); it != by_position_.rend(); ++it) {
      const OpId p = *it;
      if (!chosen[p]) continue;
      bool needed = false;
      for (ValueId v : g_->op(p).outputs) {
        for (OpId r : g_->consumers(v)) {
          needed = needed || backward_[r] || chosen[r];
        }
      }
      if (!needed) chosen[p] = false;
    }
  }

 private:
  const Graph* g_ = nullptr;
  int n_ = 0;
  Liveness live_;
  std::vector<int> pos_;
  std::vector<bool> backward_;
  std::vector<int64_t> class_bytes_;
  std::vector<ValueId> roots_;
  std::vector<OpId> candidates_;
  std::vector<bool> is_candidate_;
  std::vector<OpId> by_position_;  // the candidates in the given order
  std::vector<int> latest_step_;   // per candidate: its clone goes before this step at the latest
  struct Scratch {
    std::vector<int> clone_step, clones_before, index_of_step, next_clone, clone_index, first,
        last;
    std::vector<OpId> clones;
    std::vector<int64_t> delta;
  };
  mutable Scratch scratch_;  // Peak's buffers: a model is evaluated on one thread
};

// One choice under evaluation.
struct Candidate {
  std::vector<bool> chosen;
  int64_t peak = 0;
  int64_t flops = 0;
};

// Whether `a` is the better choice for `budget`: one that fits beats one that does not; of two
// that fit, the fewer FLOPs (or, with `fewest_flops` false, the lower peak); of two that do not,
// the lower peak, then the fewer FLOPs (a choice that lowers nothing is not worth its reruns).
bool Better(const Candidate& a, const Candidate& b, int64_t budget, bool fewest_flops) {
  const bool a_fits = a.peak <= budget, b_fits = b.peak <= budget;
  if (a_fits != b_fits) return a_fits;
  if (a_fits && fewest_flops) return a.flops < b.flops;
  return a.peak != b.peak ? a.peak < b.peak : a.flops < b.flops;
}

class Chooser {
 public:
  static constexpr int kMoveDepth = 3;

  Chooser(const RecomputeModel& model, Clock::time_point deadline)
      : m_(model), deadline_(deadline) {
    const Graph& g = model.graph();
    for (OpId op : model.candidates()) flops_[op] = OpFlops(g, g.op(op));
  }

  // The greedy's moves take only the candidates `allowed` marks (indexed by op; empty: all).
  void Restrict(std::vector<bool> allowed) { allowed_ = std::move(allowed); }

  int64_t Flops(const std::vector<bool>& chosen) const {
    int64_t total = 0;
    for (OpId op : m_.candidates()) {
      if (chosen[op]) total = SaturatingAdd(total, flops_.at(op));
    }
    return total;
  }

  Candidate Evaluate(std::vector<bool> chosen) const {
    m_.DropUnneeded(chosen);
    Candidate c;
    c.peak = m_.Peak(chosen);
    c.flops = Flops(chosen);
    c.chosen = std::move(chosen);
    return c;
  }

  // Chen's segmenting with segments of `k` candidates: the last of each segment kept.
  Candidate Segments(int k) const {
    std::vector<bool> chosen(m_.graph().num_ops(), false);
    const std::vector<OpId>& cands = m_.candidates();
    for (size_t i = 0; i < cands.size(); ++i) {
      if ((i + 1) % static_cast<size_t>(k) != 0 && i + 1 != cands.size()) chosen[cands[i]] = true;
    }
    return Evaluate(std::move(chosen));
  }

  // Greedy towards the budget, then the chosen ops the budget does not need dropped. Each
  // round takes the move that lowers the peak most per FLOP (or, when none lowers it, the bytes
  // above the budget summed over the steps); a move is an op with its unchosen candidate
  // producers up to kMoveDepth levels up, since a chain is worth recomputing only whole (a
  // clone holds what it reads: recomputing a Relu alone keeps its FC's output instead).
  // Stops at `deadline` (read before each move is weighed: a round weighs every candidate, and
  // on 40,000 of them one round took minutes), keeping the moves made.
  // With `rungs`, the climb of ClimbRecomputation: on past the budget while a move lowers the
  // peak, each choice recorded, nothing dropped.
  Candidate Greedy(int64_t budget, Clock::time_point deadline,
                   std::vector<std::vector<OpId>>* rungs = nullptr,
                   std::vector<bool> start = {}) const {
    std::vector<bool> chosen =
        start.empty() ? std::vector<bool>(m_.graph().num_ops(), false) : std::move(start);
    int64_t above = 0;
    int64_t peak = m_.Peak(chosen, &above, budget);
    // One op's best move (over the depths) against the current choice; !valid where none
    // lowers the peak or the bytes above the budget.
    struct Weight {
      bool valid = false;
      bool lowers_peak = false;
      double score = 0;
      OpId op = kNone;
      std::vector<OpId> move;
    };
    // a before b: a move that lowers the peak first, then the higher score, then the lower op.
    auto ahead = [](const Weight& a, const Weight& b) {
      if (a.lowers_peak != b.lowers_peak) return a.lowers_peak;
      if (a.score != b.score) return a.score > b.score;
      return a.op < b.op;
    };
    auto weigh = [&](OpId op) {
      Weight best;
      size_t previous_size = 0;
      for (int depth = 0; depth <= kMoveDepth; ++depth) {
        std::vector<OpId> move = Move(op, depth, chosen);
        if (move.size() == previous_size) break;  // no more producers up there
        previous_size = move.size();
        int64_t move_flops = 0;
        for (OpId x : move) {
          chosen[x] = true;
          move_flops = SaturatingAdd(move_flops, flops_.at(x));
        }
        int64_t move_above = 0;
        const int64_t move_peak = m_.Peak(chosen, &move_above, budget);
        for (OpId x : move) chosen[x] = false;
        const double cost = static_cast<double>(std::max<int64_t>(move_flops, 1));
        Weight w;
        w.lowers_peak = move_peak < peak;
        if (!w.lowers_peak && move_above >= above) continue;
        w.valid = true;
        w.score = w.lowers_peak ? static_cast<double>(peak - move_peak) / cost
                                : static_cast<double>(above - move_above) / cost;
        w.op = op;
        if (!best.valid || ahead(w, best)) {
          w.move = std::move(move);
          best = std::move(w);
        }
      }
      return best;
    };
    // Full rounds while the time left affords one per unchosen candidate (each move adds at
    // least one), else lazy rounds (as lazy greedy for submodular gains): the weights of the
    // last full round are kept in a heap, and a round re-weighs only its top until the fresh
    // weight stays ahead of the next stale one. Where the heap runs dry a full round weighs
    // every candidate again, and the climb ends only where a full round finds no move. Lazy
    // rounds can miss the best move (a weight that grew since it was taken, an op without a
    // move then: unet's auto choices cost up to 47% more FLOPs lazily), so they are only for
    // the climbs the clock would otherwise cut (densenet121's: 372 candidates).
    auto behind = [&](const Weight& a, const Weight& b) { return ahead(b, a); };
    std::vector<Weight> heap;
    bool full_round = true;
    Clock::duration full_round_time{0};
    bool out_of_time = false;
    while ((peak > budget || rungs != nullptr) && !out_of_time) {
      if (!full_round) {
        int64_t unchosen = 0;
        for (OpId op : m_.candidates()) unchosen += !chosen[op] && Allowed(op) ? 1 : 0;
        full_round = full_round_time * unchosen <= deadline - Clock::now();
      }
      Weight best;
      if (full_round) {
        const Clock::time_point round_start = Clock::now();
        heap.clear();
        for (OpId op : m_.candidates()) {
          if (chosen[op] || !Allowed(op)) continue;
          if (Clock::now() >= deadline) {
            out_of_time = true;
            break;
          }
          Weight w = weigh(op);
          if (!w.valid) continue;
          if (!best.valid || ahead(w, best)) best = w;
          w.move.clear();
          heap.push_back(std::move(w));
        }
        std::make_heap(heap.begin(), heap.end(), behind);
        if (!best.valid) break;
        full_round = false;
        full_round_time = Clock::now() - round_start;
      } else {
        while (!heap.empty()) {
          if (Clock::now() >= deadline) {
            out_of_time = true;
            break;
          }
          std::pop_heap(heap.begin(), heap.end(), behind);
          const OpId op = heap.back().op;
          heap.pop_back();
          if (chosen[op]) continue;
          Weight w = weigh(op);
          if (!w.valid) continue;  // until the next full round
          if (heap.empty() || !ahead(heap.front(), w)) {
            best = std::move(w);
            break;
          }
          w.move.clear();
          heap.push_back(std::move(w));
          std::push_heap(heap.begin(), heap.end(), behind);
        }
        if (!best.valid) {
          full_round = true;
          continue;
        }
      }
      for (OpId x : best.move) chosen[x] = true;
      peak = m_.Peak(chosen, &above, budget);
      if (rungs != nullptr) {
        rungs->emplace_back();
        for (OpId op : m_.candidates()) {
          if (chosen[op]) rungs->back().push_back(op);
        }
      }
    }
    if (peak <= budget && rungs == nullptr) Prune(chosen, budget, deadline);
    return Evaluate(std::move(chosen));
  }

  // The lowest peak the greedy reaches with the allowed candidates (Restrict): its climb past
  // any budget while a move lowers the peak or the live bytes summed over the steps, the rung
  // with the lowest peak (then the fewest FLOPs), the ops that peak does not need dropped.
  // The climb gets three quarters of the time: on a large net it would take it all, and the
  // drop keeps what the peak does not need from being rerun.
  Candidate Lowest(Clock::time_point deadline) const {
    const std::vector<bool> none(m_.graph().num_ops(), false);
    Candidate best = Evaluate(none);
    std::vector<std::vector<OpId>> rungs;
    const Clock::time_point now = Clock::now();
    Greedy(/*budget=*/0, now + (std::max(deadline, now) - now) * 3 / 4, &rungs);
    for (const std::vector<OpId>& rung : rungs) {
      std::vector<bool> chosen = none;
      for (OpId op : rung) chosen[op] = true;
      Candidate c = Evaluate(std::move(chosen));
      if (c.peak < best.peak || (c.peak == best.peak && c.flops < best.flops)) best = std::move(c);
    }
    Prune(best.chosen, best.peak, deadline);
    return Evaluate(std::move(best.chosen));
  }

  // `op` and the unchosen candidates producing its inputs, up to `depth` levels up.
  std::vector<OpId> Move(OpId op, int depth, const std::vector<bool>& chosen) const {
    std::vector<OpId> move = {op};
    std::vector<OpId> frontier = {op};
    for (int level = 0; level < depth; ++level) {
      std::vector<OpId> next;
      for (OpId f : frontier) {
        for (ValueId x : m_.graph().op(f).inputs) {
          const OpId p = m_.graph().value(x).producer;
          if (p == kNone || chosen[p] || !m_.is_candidate(p) || !Allowed(p) ||
              std::find(move.begin(), move.end(), p) != move.end()) {
            continue;
          }
          move.push_back(p);
          next.push_back(p);
        }
      }
      frontier = std::move(next);
    }
    return move;
  }

  // Drops chosen ops, most expensive first, while the budget holds, until `deadline`.
  void Prune(std::vector<bool>& chosen, int64_t budget, Clock::time_point deadline) const {
    std::vector<OpId> ops;
    for (OpId op : m_.candidates()) {
      if (chosen[op]) ops.push_back(op);
    }
    std::stable_sort(ops.begin(), ops.end(),
                     [&](OpId a, OpId b) { return flops_.at(a) > flops_.at(b); });
    for (OpId op : ops) {
      if (Clock::now() >= deadline) break;
      chosen[op] = false;
      if (m_.Peak(chosen) > budget) chosen[op] = true;
    }
  }

  // The least FLOPs that fit: depth first over the candidates (most expensive first), each
  // taken before it is left out, cut where the FLOPs reach the best found. False when the
  // deadline stopped it.
  bool Exact(int64_t budget, Candidate& best) const {
    std::vector<OpId> ops = m_.candidates();
    std::stable_sort(ops.begin(), ops.end(),
                     [&](OpId a, OpId b) { return flops_.at(a) > flops_.at(b); });
    std::vector<bool> chosen(m_.graph().num_ops(), false);
    bool finished = true;
    int64_t visited = 0;
    std::function<void(size_t, int64_t)> search = [&](size_t i, int64_t flops) {
      if (!finished || i == ops.size()) return;
      if ((++visited & 255) == 0 && Clock::now() > deadline_) {
        finished = false;
        return;
      }
      const OpId op = ops[i];
      const int64_t with = SaturatingAdd(flops, flops_.at(op));
      if (with < best.flops) {
        chosen[op] = true;
        const int64_t peak = m_.Peak(chosen);
        if (peak <= budget) {
          best = Candidate{chosen, peak, with};  // cheaper and fits: nothing to add below
        } else {
          search(i + 1, with);
        }
        chosen[op] = false;
      }
      search(i + 1, flops);
    };
    search(0, 0);
    return finished;
  }

 private:
  bool Allowed(OpId op) const { return allowed_.empty() || allowed_[op]; }

  const RecomputeModel& m_;
  Clock::time_point deadline_;
  absl::flat_hash_map<OpId, int64_t> flops_;
  std::vector<bool> allowed_;
};

// The candidates cheap to rerun (IsCheapToRecompute), indexed by op.
std::vector<bool> CheapMask(const RecomputeModel& m) {
  std::vector<bool> cheap(m.graph().num_ops(), false);
  for (OpId op : m.candidates()) cheap[op] = IsCheapToRecompute(m.graph(), m.graph().op(op));
  return cheap;
}

absl::Status CheckChosen(const RecomputeModel& m, const std::vector<OpId>& ops) {
  for (OpId op : ops) {
    if (op < 0 || op >= m.graph().num_ops() || !m.is_candidate(op)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "op #", op, op >= 0 && op < m.graph().num_ops() ? " " + m.graph().op(op).Label() : "",
          " cannot be recomputed (see memonger/recompute.h for which ops can)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::string_view RecomputeName(RecomputeKind kind) {
  switch (kind) {
    case RecomputeKind::kNone: return "none";
    case RecomputeKind::kSqrt: return "sqrt";
    case RecomputeKind::kAuto: return "auto";
    case RecomputeKind::kCheap: return "cheap";
  }
  return "none";
}

absl::StatusOr<RecomputeKind> ParseRecompute(absl::string_view name) {
  for (RecomputeKind k : {RecomputeKind::kNone, RecomputeKind::kSqrt, RecomputeKind::kAuto,
                          RecomputeKind::kCheap}) {
    if (RecomputeName(k) == name) return k;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown recomputation '", util::Quote(name),
                                                 "' (expected none, sqrt, cheap, auto)"));
}

namespace {

// The op types whose cost is their bytes, not their arithmetic: elementwise, normalisation,
// pooling, reduction and data-movement ops, as Caffe2 and ONNX name them. A type not listed
// (a product, a convolution, attention, a recurrent op, anything new) is not cheap.
bool IsMemoryBoundType(absl::string_view t) {
  static constexpr absl::string_view kTypes[] = {
      // Elementwise.
      "Abs", "Acos", "Acosh", "Add", "And", "Asin", "Asinh", "Atan", "Atanh", "Cast", "Ceil",
      "Celu", "Clip", "Copy", "Cos", "Cosh", "Div", "EQ", "Elu", "Equal", "Erf", "Exp",
      "FloatToHalf", "Floor", "GE", "GT", "Gelu", "Greater", "GreaterOrEqual", "HalfToFloat",
      "HardSigmoid", "HardSwish", "Identity", "IsInf", "IsNaN", "LE", "LT", "LeakyRelu", "Less",
      "LessOrEqual", "Log", "Max", "Mean", "Min", "Mish", "Mod", "Mul", "NE", "Neg", "Negative",
      "Not", "Or", "PRelu", "Pow", "Reciprocal", "Relu", "ReluN", "Round", "Rsqrt", "Scale",
      "Selu", "Sigmoid", "Sign", "Sin", "Sinh", "Softplus", "Softsign", "Sqr", "Sqrt", "Sub",
      "Sum", "Swish", "Tan", "Tanh", "ThresholdedRelu", "Where", "Xor",
      // Normalisation.
      "BatchNormalization", "GroupNorm", "GroupNormalization", "InstanceNorm",
      "InstanceNormalization", "LayerNorm", "LayerNormalization", "LogSoftmax", "LpNormalization",
      "MeanVarianceNormalization", "Softmax", "SpatialBN",
      // Pooling and reductions.
      "ArgMax", "ArgMin", "AveragePool", "AveragePool1D", "AveragePool2D", "AveragePool3D",
      "AveragedLoss", "GlobalAveragePool", "GlobalLpPool", "GlobalMaxPool", "LpPool", "MaxPool",
      "MaxPool1D", "MaxPool2D", "MaxPool3D", "SumElements",
      // Data movement.
      "AddAttentionBias", "AlibiBias", "ChannelShuffle", "Concat", "DepthToSpace", "Expand",
      "ExpandDims", "Flatten", "FlattenToVec", "Gather", "GatherElements", "GatherND",
      "NCHW2NHWC", "NHWC2NCHW", "OneHot", "Pad", "PadLastDim", "Reshape", "Resize",
      "ResizeNearest", "Shape", "Size", "Slice", "SpaceToDepth", "Split", "Squeeze", "Tile",
      "Transpose", "Trilu", "Unsqueeze", "Upsample",
  };
  if (absl::StartsWith(t, "Reduce")) return true;  // ONNX's Reduce*, Caffe2's Reduce{Front,Back}*
  return std::find(std::begin(kTypes), std::end(kTypes), t) != std::end(kTypes);
}

}  // namespace

bool IsCheapToRecompute(const Graph& g, const graph::Op& op) {
  if (!IsMemoryBoundType(op.type)) return false;
  // Per element it writes, or of its largest input where that is more: a pooling window or a
  // reduction is paid once per input element, a pointwise op once per output.
  int64_t written = 0, largest_input = 0;
  for (const graph::ValueIdList* list : {&op.outputs, &op.inputs}) {
    for (ValueId v : *list) {
      const graph::Value& value = g.value(v);
      if (!value.type.has_value()) return false;
      const absl::StatusOr<int64_t> n = graph::NumElements(value.type->dims, value.name);
      if (!n.ok()) return false;
      if (list == &op.outputs) {
        written = SaturatingAdd(written, *n);
      } else {
        largest_input = std::max(largest_input, *n);
      }
    }
  }
  const int64_t elements = std::max<int64_t>({written, largest_input, 1});
  return elements > std::numeric_limits<int64_t>::max() / kCheapFlopsPerElement ||
         OpFlops(g, op) <= kCheapFlopsPerElement * elements;
}

std::vector<OpId> RecomputeCandidates(const Graph& g, const LivenessOptions& liveness) {
  // Values overwritten in place, and values in an alias class with another (views).
  std::vector<bool> overwritten(g.num_values(), false);
  for (const graph::Value& v : g.values()) {
    if (v.inplace_of != kNone) overwritten[v.inplace_of] = true;
  }
  std::vector<bool> aliased(g.num_values(), false);
  if (liveness.views) {
    for (const graph::Op& op : g.ops()) {
      if (!op.view || op.inputs.empty() || op.outputs.empty()) continue;
      aliased[op.inputs[0]] = true;
      aliased[op.outputs[0]] = true;
    }
  }
  absl::flat_hash_set<ValueId> read_after;
  for (ValueId id : g.outputs()) read_after.insert(id);
  for (const auto& [param, grad] : g.param_grads()) read_after.insert(grad);
  std::vector<OpId> out;
  for (OpId id = 0; id < g.num_ops(); ++id) {
    const graph::Op& op = g.op(id);
    if (IsBackward(op) || !op.control_inputs.empty() || op.outputs.empty() ||
        IsRandom(op.type)) {
      continue;
    }
    bool ok = true;
    for (ValueId v : op.outputs) {
      const graph::Value& value = g.value(v);
      ok = ok && value.role == graph::Role::kActivation && !read_after.contains(v) &&
           value.inplace_of == kNone && !overwritten[v] && !aliased[v] && WrittenOnce(g, v);
    }
    for (ValueId x : op.inputs) {
      const graph::Value& value = g.value(x);
      if (graph::IsStatic(value.role)) continue;
      ok = ok && !overwritten[x] && WrittenOnce(g, x);
    }
    if (ok) out.push_back(id);
  }
  return out;
}

absl::StatusOr<int64_t> RecomputedLowerBound(const Graph& graph, const std::vector<OpId>& ops,
                                             const RecomputeOptions& options) {
  MG_ASSIGN_OR_RETURN(RecomputeModel model, RecomputeModel::Build(graph, options));
  MG_RETURN_IF_ERROR(CheckChosen(model, ops));
  std::vector<bool> chosen(graph.num_ops(), false);
  for (OpId op : ops) chosen[op] = true;
  model.DropUnneeded(chosen);
  return model.Peak(chosen);
}

absl::StatusOr<RecomputeChoice> ChooseRecomputation(const Graph& graph,
                                                    const RecomputeOptions& options) {
  MG_RETURN_IF_ERROR(graph::RefuseControlRegions(graph, "recomputation"));
  const auto start = Clock::now();
  const auto deadline =
      start + std::chrono::duration_cast<Clock::duration>(
                  std::chrono::duration<double>(std::clamp(options.time_limit_seconds, 0.0, 1e6)));
  bool any_backward = false;
  for (const graph::Op& op : graph.ops()) any_backward = any_backward || IsBackward(op);
  if (!any_backward) {
    return absl::FailedPreconditionError(
        "recomputation is for training nets: this net has no backward ops (use --mode training)");
  }
  if (options.kind == RecomputeKind::kAuto && options.budget_bytes < 0) {
    return absl::InvalidArgumentError("--recompute auto needs --budget: the bytes to fit");
  }
  MG_ASSIGN_OR_RETURN(RecomputeModel model, RecomputeModel::Build(graph, options));
  Chooser chooser(model, deadline);
  RecomputeChoice choice;
  choice.candidates = static_cast<int>(model.candidates().size());
  for (const graph::Op& op : graph.ops()) {
    if (!IsBackward(op)) choice.forward_flops = SaturatingAdd(choice.forward_flops, OpFlops(graph, op));
  }
  const Candidate none = chooser.Evaluate(std::vector<bool>(graph.num_ops(), false));
  choice.original_lower_bound_bytes = none.peak;
  Candidate best = none;
  choice.method = "none";
  const int n = choice.candidates;
  if (options.kind == RecomputeKind::kSqrt && n > 0) {
    // Where the segments would raise the peak (their checkpoints and clones' inputs held longer
    // than what they free), nothing is rerun.
    Candidate sqrt =
        chooser.Segments(static_cast<int>(std::ceil(std::sqrt(static_cast<double>(n)))));
    if (sqrt.peak < best.peak) {
      best = std::move(sqrt);
      choice.method = "sqrt";
    }
  } else if (options.kind == RecomputeKind::kCheap && n > 0) {
    chooser.Restrict(CheapMask(model));
    Candidate cheap = chooser.Lowest(deadline);
    if (cheap.peak < best.peak) {
      best = std::move(cheap);
      choice.method = "cheap";
    }
  } else if (options.kind == RecomputeKind::kAuto && none.peak <= options.budget_bytes) {
    choice.proven_optimal = true;  // nothing to recompute: no FLOPs at all
  } else if (options.kind == RecomputeKind::kAuto && n > 0) {
    const int64_t budget = options.budget_bytes;
    // The portfolio: greedy and Chen's segmenting at every length; the cheapest that fits,
    // else the lowest peak.
    auto better = [&](const Candidate& a, const Candidate& b) {
      return Better(a, b, budget, /*fewest_flops=*/true);
    };
    // Chen's segments of sqrt(n) first, whatever the time: auto never reaches less than
    // `sqrt` does. Then greedy with half of the time left (its rounds weigh every candidate:
    // on a large net it would take all of it), then the other segment lengths.
    const int sqrt_length = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(n))));
    Candidate sqrt_segments = chooser.Segments(sqrt_length);
    if (better(sqrt_segments, best)) {
      best = std::move(sqrt_segments);
      choice.method = "segments";
    }
    auto settled = [&] { return options.first_fit && best.peak <= budget; };
    // The other segment lengths: one evaluation each.
    auto segments = [&] {
      for (int k = 1; k <= n && Clock::now() < deadline && !settled(); ++k) {
        if (k == sqrt_length) continue;
        Candidate c = chooser.Segments(k);
        if (better(c, best)) {
          best = std::move(c);
          choice.method = "segments";
        }
      }
    };
    // first_fit: the cheap evaluations before the climbs over every candidate.
    if (options.first_fit) segments();
    // The cheap ops' lowest peak next (a quarter of the time left): where it fits, no more
    // than pointwise FLOPs; where not, the greedy goes on from it.
    Candidate cheap{{}, INT64_MAX, 0};
    if (!settled()) {
      chooser.Restrict(CheapMask(model));
      cheap = chooser.Lowest(Clock::now() + (std::max(deadline, Clock::now()) - Clock::now()) / 4);
      chooser.Restrict({});
      if (better(cheap, best)) {
        best = cheap;
        choice.method = "cheap";
      }
    }
    const Clock::time_point greedy_deadline = Clock::now() + (deadline - Clock::now()) / 2;
    if (!settled()) {
      Candidate greedy = chooser.Greedy(budget, greedy_deadline);
      if (better(greedy, best)) {
        best = std::move(greedy);
        choice.method = "greedy";
      }
      if (cheap.peak > budget && cheap.peak < none.peak && Clock::now() < greedy_deadline) {
        Candidate on = chooser.Greedy(budget, greedy_deadline, nullptr, std::move(cheap.chosen));
        if (better(on, best)) {
          best = std::move(on);
          choice.method = "greedy";
        }
      }
    }
    if (!options.first_fit) segments();
    if (n <= options.max_exact_candidates && !settled()) {
      Candidate exact = best.peak <= budget ? best : Candidate{{}, 0, INT64_MAX};
      const bool finished = chooser.Exact(budget, exact);
      if (exact.flops < best.flops || best.peak > budget) {
        if (exact.flops != INT64_MAX) {
          best = std::move(exact);
          choice.method = "exact";
        }
      }
      choice.proven_optimal = finished;
    }
  }
  for (OpId op : model.candidates()) {
    if (!best.chosen.empty() && best.chosen[op]) choice.ops.push_back(op);
  }
  choice.lower_bound_bytes = best.peak;
  choice.extra_flops = best.flops;
  choice.fits = options.kind != RecomputeKind::kAuto || best.peak <= options.budget_bytes;
  if (choice.ops.empty()) choice.method = "none";
  return choice;
}

namespace {

Clock::time_point DeadlineOf(const RecomputeOptions& options) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                            std::clamp(options.time_limit_seconds, 0.0, 1e6)));
}

absl::Status CheckTraining(const Graph& graph) {
  for (const graph::Op& op : graph.ops()) {
    if (IsBackward(op)) return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      "recomputation is for training nets: this net has no backward ops (use --mode training)");
}

}  // namespace

absl::StatusOr<RecomputeLadder> ClimbRecomputation(const Graph& graph,
                                                   const RecomputeOptions& options) {
  MG_RETURN_IF_ERROR(CheckTraining(graph));
  MG_ASSIGN_OR_RETURN(RecomputeModel model, RecomputeModel::Build(graph, options));
  const Clock::time_point deadline = DeadlineOf(options);
  Chooser chooser(model, deadline);
  RecomputeLadder ladder;
  ladder.num_ops = graph.num_ops();
  ladder.candidates = model.candidates();
  chooser.Greedy(std::max<int64_t>(options.budget_bytes, 0), deadline, &ladder.rungs);
  return ladder;
}

absl::StatusOr<RecomputeChoice> ChooseFromLadder(const Graph& graph,
                                                 const RecomputeLadder& ladder,
                                                 const RecomputeOptions& options,
                                                 LadderPick pick) {
  MG_RETURN_IF_ERROR(CheckTraining(graph));
  MG_ASSIGN_OR_RETURN(RecomputeModel model, RecomputeModel::Build(graph, options));
  if (graph.num_ops() != ladder.num_ops || model.candidates() != ladder.candidates) {
    return absl::FailedPreconditionError(
        "the ladder was climbed on another net (other ops or candidates)");
  }
  const Clock::time_point deadline = DeadlineOf(options);
  Chooser chooser(model, deadline);
  const int64_t budget = options.budget_bytes;
  RecomputeChoice choice;
  choice.candidates = static_cast<int>(model.candidates().size());
  for (const graph::Op& op : graph.ops()) {
    if (!IsBackward(op)) choice.forward_flops = SaturatingAdd(choice.forward_flops, OpFlops(graph, op));
  }
  Candidate best = chooser.Evaluate(std::vector<bool>(graph.num_ops(), false));
  choice.original_lower_bound_bytes = best.peak;
  choice.method = "none";
  auto better = [&](const Candidate& a, const Candidate& b) {
    return Better(a, b, budget, pick == LadderPick::kFewestFlops);
  };
  if (best.peak > budget) {
    for (const std::vector<OpId>& rung : ladder.rungs) {
      std::vector<bool> chosen(graph.num_ops(), false);
      for (OpId op : rung) chosen[op] = true;
      Candidate c = chooser.Evaluate(std::move(chosen));
      if (better(c, best)) {
        best = std::move(c);
        choice.method = "greedy";
      }
    }
    const int n = choice.candidates;
    for (int k = 1; k <= n && Clock::now() < deadline; ++k) {
      Candidate c = chooser.Segments(k);
      if (better(c, best)) {
        best = std::move(c);
        choice.method = "segments";
      }
    }
    if (best.peak <= budget && choice.method != "none" && pick == LadderPick::kFewestFlops) {
      chooser.Prune(best.chosen, budget, deadline);
      best = chooser.Evaluate(std::move(best.chosen));
    }
  }
  for (OpId op : model.candidates()) {
    if (!best.chosen.empty() && best.chosen[op]) choice.ops.push_back(op);
  }
  choice.lower_bound_bytes = best.peak;
  choice.extra_flops = best.flops;
  choice.fits = best.peak <= budget;
  choice.proven_optimal = choice.ops.empty() && choice.fits;
  if (choice.ops.empty()) choice.method = "none";
  return choice;
}

absl::StatusOr<Graph> ApplyRecomputation(const Graph& graph, const std::vector<OpId>& ops) {
  MG_RETURN_IF_ERROR(graph::RefuseControlRegions(graph, "recomputation"));
  RecomputeOptions options;
  MG_ASSIGN_OR_RETURN(RecomputeModel model, RecomputeModel::Build(graph, options));
  MG_RETURN_IF_ERROR(CheckChosen(model, ops));
  if (ops.empty()) return graph;
  std::vector<bool> chosen(graph.num_ops(), false);
  for (OpId op : ops) chosen[op] = true;
  model.DropUnneeded(chosen);
  std::vector<OpId> kept;
  for (OpId op : ops) {
    if (chosen[op]) kept.push_back(op);
  }
  if (kept.empty()) return graph;
  const std::vector<int> clone_step = model.CloneSteps(chosen);

  absl::flat_hash_set<std::string> used;
  for (const graph::Value& v : graph.values()) used.insert(v.name);
  for (const graph::Op& op : graph.ops()) used.insert(op.name);
  auto fresh = [&](const std::string& base) {
    std::string name = base;
    for (int k = 1; !used.insert(name).second; ++k) name = absl::StrCat(base, "_", k);
    return name;
  };
  // The copy of each output of a chosen op.
  absl::flat_hash_map<ValueId, std::string> copy;
  std::vector<OpId> chosen_ops = kept;
  std::sort(chosen_ops.begin(), chosen_ops.end(),
            [&](OpId a, OpId b) { return model.position(a) < model.position(b); });
  for (OpId p : chosen_ops) {
    for (ValueId v : graph.op(p).outputs) copy[v] = fresh(graph.value(v).name + "_recompute");
  }
  auto read_copies = [&](const graph::Op& op, graph::OpSpec& spec) {
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      auto it = copy.find(op.inputs[i]);
      if (it != copy.end()) spec.inputs[i] = it->second;
    }
  };

  graph::GraphBuilder out(graph.name());
  graph::CopyInterface(graph, out);
  for (OpId p : chosen_ops) {
    for (ValueId v : graph.op(p).outputs) {
      out.Declare(copy[v], graph::DeclarationOf(*graph.value(v).type));
    }
  }
  const std::vector<OpId>& order = model.liveness().schedule.ops;
  size_t next_clone = 0;
  std::vector<OpId> by_step = chosen_ops;
  std::stable_sort(by_step.begin(), by_step.end(),
                   [&](OpId a, OpId b) { return clone_step[a] < clone_step[b]; });
  for (int step = 0; step <= static_cast<int>(order.size()); ++step) {
    while (next_clone < by_step.size() && clone_step[by_step[next_clone]] == step) {
      const OpId p = by_step[next_clone++];
      const graph::Op& op = graph.op(p);
      graph::OpSpec spec = graph::SpecOf(graph, op);
      if (!spec.name.empty()) spec.name = fresh(spec.name + "_recompute");
      for (size_t i = 0; i < op.outputs.size(); ++i) spec.outputs[i] = copy[op.outputs[i]];
      read_copies(op, spec);
      out.AddOp(std::move(spec));
    }
    if (step == static_cast<int>(order.size())) break;
    const graph::Op& op = graph.op(order[step]);
    graph::OpSpec spec = graph::SpecOf(graph, op);
    if (model.backward(order[step])) read_copies(op, spec);
    out.AddOp(std::move(spec));
  }
  MG_ASSIGN_OR_RETURN(Graph result, std::move(out).Build());
  MG_RETURN_IF_ERROR(graph::InferShapes(result, graph::ShapeBindings{}));
  return result;
}

RecomputeOptions RecomputeOptionsFor(const PlanOptions& options, RecomputeKind kind,
                                     int64_t budget_bytes) {
  RecomputeOptions recompute;
  recompute.kind = kind;
  recompute.budget_bytes = budget_bytes;
  recompute.alignment = options.alignment;
  recompute.liveness = options.liveness.CallerChosen();
  recompute.liveness.in_place = false;
  recompute.time_limit_seconds = options.time_limit_seconds * time_shares::kRecomputeChoice;
  return recompute;
}

absl::StatusOr<RecomputedPlan> PlanWithRecomputation(const Graph& graph,
                                                     const PlanOptions& options,
                                                     RecomputeKind kind, int64_t budget_bytes) {
  const RecomputeOptions recompute = RecomputeOptionsFor(options, kind, budget_bytes);
  MG_ASSIGN_OR_RETURN(RecomputeChoice choice, ChooseRecomputation(graph, recompute));
  if (!choice.fits) {
    // Only an exhaustive search proves that nothing fits; the portfolio's lowest depends on its
    // time and on the budget it steers by.
    return absl::ResourceExhaustedError(absl::StrCat(
        "recomputation cannot bring the lower bound to ", budget_bytes, " bytes: the lowest it "
        "reached is ", choice.lower_bound_bytes, " bytes (", choice.ops.size(), " of ",
        choice.candidates, " forward ops rerun)",
        choice.proven_optimal
            ? "; no choice of forward ops to rerun fits (searched exhaustively)"
            : "; its search is heuristic and had half of --time-limit: a longer limit may "
              "reach lower"));
  }
  return PlanChosenRecomputation(graph, options, std::move(choice));
}

absl::StatusOr<RecomputedPlan> PlanChosenRecomputation(const Graph& graph,
                                                       const PlanOptions& options,
                                                       RecomputeChoice choice) {
  MG_ASSIGN_OR_RETURN(Graph rewritten, ApplyRecomputation(graph, choice.ops));
  PlanOptions rest = options;
  rest.time_limit_seconds =
      std::max(options.time_limit_seconds * (1 - time_shares::kRecomputeChoice), 1e-3);
  MG_ASSIGN_OR_RETURN(Plan plan, PlanMemory(rewritten, rest));
  plan.recompute = RecomputeSummary{choice.method,
                                    static_cast<int>(choice.ops.size()),
                                    choice.candidates,
                                    choice.original_lower_bound_bytes,
                                    choice.extra_flops,
                                    choice.forward_flops,
                                    choice.proven_optimal};
  return RecomputedPlan{std::move(rewritten), std::move(plan), std::move(choice)};
}

}  // namespace memonger
