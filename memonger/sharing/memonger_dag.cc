#include "memonger/sharing/memonger_dag.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <cstddef>
#include <tuple>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "memonger/caffe2_exact.h"
#include "memonger/sharing/token_sets.h"
#include "util/check.h"
#include "util/status_macros.h"

namespace memonger {
namespace {

using graph::kNone;
using graph::OpId;
using graph::ValueId;

// One entry of the pool of free buffers: memonger's std::pair<int, std::string>
// (-share_count, blob name), compared lexicographically. `name_rank` is the rank of the
// canonical class's display name among all values, so ties break by name as in memonger.
struct PoolEntry {
  int neg_share_count = 0;
  int name_rank = 0;
  ValueId blob = kNone;
  // Copies of what the pool scan reads of the buffer, so that it reads the entries in order
  // instead of three per-value arrays at random (on a 300,000-op net the scan was 40% of the
  // run, most of it those reads): its device, its bytes, and the token that made its last use
  // test fail (-1: none; DagPlanner::missing_token_ keeps it while the buffer is in use).
  graph::Device device;
  int missing_token = -1;
  int64_t bytes = 0;
};
// std::greater on the pair: memonger's heap comparator (a min-heap).
bool Greater(const PoolEntry& a, const PoolEntry& b) {
  if (a.neg_share_count != b.neg_share_count) return a.neg_share_count > b.neg_share_count;
  return a.name_rank > b.name_rank;
}

// std::push_heap with std::greater, written out as libstdc++ implements it. The size-aware
// rule erases from the middle of the heap array, after which it is no longer a heap;
// std::push_heap on such an array is outside the standard's contract, so the libstdc++ steps
// are reproduced here instead of relying on the library (and on debug-mode heap checks
// staying off).
void SiftUp(std::vector<PoolEntry>& heap, size_t hole, size_t top, PoolEntry value) {
  size_t parent = (hole - 1) / 2;
  while (hole > top && Greater(heap[parent], value)) {
    heap[hole] = heap[parent];
    hole = parent;
    parent = (hole - 1) / 2;
  }
  heap[hole] = value;
}
void PushHeap(std::vector<PoolEntry>& heap, PoolEntry entry) {
  heap.push_back(entry);
  SiftUp(heap, heap.size() - 1, 0, entry);
}
// The pool of free buffers of one traversal. memonger kept a std::vector as a binary heap.
// The size-aware rule scans that array, so its layout matters and is reproduced (`heap`).
// The size-blind rule pops until a usable buffer appears and pushes the others back: the
// first usable buffer in key order, whatever the layout; a sorted array gives the same
// answer without popping and pushing back every unusable buffer (`ordered`).
struct Pool {
  std::vector<PoolEntry> heap;     // size-aware (training)
  std::vector<PoolEntry> ordered;  // size-blind (inference): ascending keys
};
bool KeyLess(const PoolEntry& a, const PoolEntry& b) { return Greater(b, a); }

bool EndsWith(absl::string_view s, absl::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The whole computation; one object per call (no state survives it).
class DagPlanner {
 public:
  DagPlanner(const graph::Graph& graph, const Liveness& liveness,
             const MemongerOptions& options, ExecutionModel execution)
      : graph_(graph),
        liveness_(liveness),
        options_(options),
        parallel_(execution == ExecutionModel::kParallel),
        // share_grad_blobs uses shapes when it is given them; optimize_inference_for_dag never.
        size_aware_(options.mode == Mode::kTraining && !options.size_blind),
        // A token is minted per traversal root and per op entered from a fork, each op entered
        // once: fewer than num_ops + 2 (numbered from 1); twice that leaves room to spare.
        sets_(2 * int64_t{graph.num_ops()} + 2),
        dense_(static_cast<size_t>(sets_.dense_words()), 0) {}

  absl::StatusOr<SharingGroups> Run(std::vector<std::string>* names) {
    MG_RETURN_IF_ERROR(Classify());
    Setup();
    RunRoots();
    SharingGroups groups = MakeGroups();
    MG_RETURN_IF_ERROR(CheckGroups(groups));
    if (names != nullptr) *names = GroupNames(groups);
    return groups;
  }

 private:
  ValueId Root(ValueId v) const {
    const ValueId r = liveness_.alias_root[v];
    return r == kNone ? v : r;
  }
  int Step(OpId op) const { return liveness_.schedule.step_of_op[op]; }

  // memonger's get_blob_or_mapped_blob: one level of mapping.
  ValueId Mapped(ValueId blob) const { return mapping_[blob] == kNone ? blob : mapping_[blob]; }

  // The losses of a Caffe2 net that declares none: Caffe2's gradient builder seeds the gradient
  // of each loss X with an op reading X and writing "X_autogen_grad" (a ConstantFill).
  std::vector<ValueId> AutogenLosses() const {
    std::vector<ValueId> losses;
    for (const graph::Op& op : graph_.ops()) {
      if (op.inputs.size() != 1 || op.outputs.size() != 1) continue;
      const graph::Value& in = graph_.value(op.inputs.front());
      if (graph_.value(op.outputs.front()).name == absl::StrCat(in.name, "_autogen_grad") &&
          std::find(losses.begin(), losses.end(), op.inputs.front()) == losses.end()) {
        losses.push_back(op.inputs.front());
      }
    }
    return losses;
  }

  // share_grad_blobs's namescope: a non-empty one ends in '/'.
  std::string TrainingNamescope() const {
    std::string ns = options_.namescope;
    if (!ns.empty() && ns.back() != '/') ns += '/';
    return ns;
  }

  // Caffe2's gradient blob (share_grad_blobs): the name ends in "_grad" and starts with the
  // namescope or "_" + namescope, and it is not a parameter gradient. Auto-split pieces
  // ("_x_grad_autosplit_0") fail the suffix test. Nets that declare gradients (a declared
  // gradient role, is_gradient_op) also have those, except auto-split pieces.
  bool IsGradientBlob(ValueId v) const {
    const graph::Value& value = graph_.value(v);
    if (param_grad_names_.count(value.name) > 0) return false;
    if (EndsWith(value.name, "_grad") &&
        (absl::StartsWith(value.name, namescope_) ||
         absl::StartsWith(value.name, absl::StrCat("_", namescope_)))) {
      return true;
    }
    return declares_gradients_ && value.role == graph::Role::kGradient &&
           !absl::StrContains(value.name, "_grad_autosplit_");
  }

  // Caffe2's gradient op: one with a gradient blob among its inputs or outputs; in nets that
  // declare gradients also an op flagged is_gradient_op or of a type ending in "Gradient".
  bool IsGradientOp(const graph::Op& op) const {
    if (declares_gradients_ && (op.is_gradient_op || EndsWith(op.type, "Gradient"))) return true;
    for (const auto* list : {&op.inputs, &op.outputs}) {
      for (ValueId v : *list) {
        if (is_gradient_blob_[v]) return true;
      }
    }
    return false;
  }

  // The parameter gradients' names: options.param_grads, else Caffe2's defaults
  // (caffe2::DefaultParamGrads).
  void FindParamGrads() {
    if (!options_.param_grads.empty()) {
      param_grad_names_.insert(options_.param_grads.begin(), options_.param_grads.end());
      return;
    }
    const std::set<std::string> found = caffe2::DefaultParamGrads(graph_);
    param_grad_names_.insert(found.begin(), found.end());
  }

  // Caffe2's activation heuristic (share_grad_blobs with share_activations).
  void FindActivations() {
    const std::set<std::string> found = caffe2::ActivationBlobs(caffe2::NameNetOf(graph_));
    activation_names_.insert(found.begin(), found.end());
  }

  // Heads, traversed ops, shareable and optimizable classes, head classes.
  absl::Status Classify() {
    const int num_values = graph_.num_values();
    const int num_ops = graph_.num_ops();
    MG_CHECK(static_cast<int>(liveness_.alias_root.size()) == num_values);
    MG_CHECK(static_cast<int>(liveness_.schedule.step_of_op.size()) == num_ops);
    const bool training = options_.mode == Mode::kTraining;

    // Heads.
    std::vector<ValueId> head_values;
    if (training) {
      if (options_.losses.empty()) {
        head_values = graph_.losses();
        if (head_values.empty()) head_values = AutogenLosses();
      } else {
        for (const std::string& name : options_.losses) {
          const std::vector<ValueId> versions = graph_.FindVersions(name);
          if (versions.empty()) {
            return absl::InvalidArgumentError(absl::StrCat("loss '", name, "' is not in the net"));
          }
          head_values.insert(head_values.end(), versions.begin(), versions.end());
        }
      }
      if (head_values.empty()) {
        return absl::InvalidArgumentError(
            "memonger-dag in training mode starts from the losses, and the net declares none "
            "(nor seeds a gradient 'X_autogen_grad' from a value X, as Caffe2's gradient "
            "builder does): name them (--loss NAME)");
      }
    } else if (options_.heads.empty()) {
      for (ValueId v : graph_.inputs()) {
        if (!graph::IsStatic(graph_.value(v).role)) head_values.push_back(v);
      }
    } else {
      for (const std::string& name : options_.heads) {
        const std::vector<ValueId> versions = graph_.FindVersions(name);
        if (versions.empty()) {
          return absl::InvalidArgumentError(absl::StrCat("head '", name, "' is not in the net"));
        }
        head_values.insert(head_values.end(), versions.begin(), versions.end());
      }
    }
    is_head_.assign(num_values, false);
    for (ValueId v : head_values) {
      const ValueId c = Root(v);
      if (!is_head_[c]) heads_.push_back(c);
      is_head_[c] = true;
    }

    // Gradients (training).
    is_gradient_blob_.assign(num_values, false);
    if (training) {
      namescope_ = TrainingNamescope();
      for (const graph::Op& op : graph_.ops()) declares_gradients_ |= op.is_gradient_op;
      for (const graph::Value& value : graph_.values()) {
        declares_gradients_ |= value.role_declared && value.role == graph::Role::kGradient;
      }
      FindParamGrads();
      if (options_.share_activations) FindActivations();
      for (ValueId v = 0; v < num_values; ++v) is_gradient_blob_[v] = IsGradientBlob(v);
    }

    // Traversed ops (memonger's op_indices).
    traversed_.assign(num_ops, false);
    for (OpId op = 0; op < num_ops; ++op) {
      traversed_[op] = !training || IsGradientOp(graph_.op(op));
    }

    // Shareable values, then classes (all members shareable).
    std::vector<bool> excluded(num_values, false);
    for (ValueId v : graph_.inputs()) excluded[v] = true;
    for (ValueId v : graph_.outputs()) excluded[v] = true;
    if (training) {
      for (const auto& [param, grad] : graph_.param_grads()) excluded[grad] = true;
    }
    for (const auto* names : {&options_.dont_share, &liveness_.options.static_names}) {
      for (const std::string& name : *names) {
        for (ValueId v : graph_.FindVersions(name)) excluded[v] = true;
      }
    }
    std::vector<bool> value_shareable(num_values, false);
    for (ValueId v = 0; v < num_values; ++v) {
      const graph::Value& value = graph_.value(v);
      if (excluded[v] || !liveness_.planned[v] || graph::IsStatic(value.role) ||
          value.producer == kNone) {
        continue;
      }
      if (training) {
        value_shareable[v] =
            is_gradient_blob_[v] || activation_names_.count(value.name) > 0 ||
            (options_.share_all_activations && value.role == graph::Role::kActivation);
      } else {
        value_shareable[v] = true;
      }
    }
    shareable_.assign(num_values, false);
    optimizable_.assign(num_values, false);
    for (ValueId v = 0; v < num_values; ++v) {
      if (Root(v) != v || !liveness_.planned[v]) continue;
      bool all = true;
      bool written_by_traversed_op = false;
      for (ValueId m : liveness_.members[v]) {
        all = all && value_shareable[m];
        const OpId p = graph_.value(m).producer;
        written_by_traversed_op = written_by_traversed_op || (p != kNone && traversed_[p]);
      }
      shareable_[v] = all && !liveness_.members[v].empty();
      optimizable_[v] = shareable_[v] && written_by_traversed_op;
    }
    return absl::OkStatus();
  }

  // In-degrees, consumer lists, share counts; the per-class bookkeeping the traversal needs.
  void Setup() {
    const int num_values = graph_.num_values();
    const int num_ops = graph_.num_ops();
    consumers_.assign(num_values, {});
    seen_.assign(num_values, 0);
    share_count_.assign(num_values, 0);
    mapping_.assign(num_values, kNone);
    assigned_seq_.assign(num_values, -1);
    processed_.assign(num_values, false);
    in_pool_.assign(num_values, false);
    req_tokens_.assign(num_values, TokenSets::kEmpty);
    missing_token_.assign(num_values, -1);
    in_degree_.assign(num_ops, 0);
    visit_count_.assign(num_ops, 0);
    visited_.assign(num_ops, false);
    deposit_.assign(num_ops, TokenSets::kEmpty);

    ComputeAliasTree();
    for (OpId op : graph_.TopologicalOrder()) {
      if (!traversed_[op]) continue;
      for (ValueId in : graph_.op(op).inputs) {
        const ValueId c = Root(in);
        if (!shareable_[c] && !is_head_[c]) continue;
        const int writes = optimizable_[c] ? writers_before_[in] : 0;
        if (writes > 0) {
          in_degree_[op] += writes;
        } else {
          // An external blob (or, in our model, a class whose first traversed writer comes
          // later: memonger would have failed on it): shared by one blob so far.
          share_count_[c] = 1;
        }
        consumers_[c].push_back({op, tin_[in]});
      }
    }
    // Readers of one member stay in program (topological) order; the members in alias-tree
    // order, so the readers of a member's subtree are one range. For an in-place chain this is
    // the program order, as in memonger.
    for (std::vector<Consumer>& list : consumers_) {
      std::stable_sort(list.begin(), list.end(),
                       [](const Consumer& a, const Consumer& b) { return a.tin < b.tin; });
    }

    // Names for heap tie-breaks: the rank of each shareable class's display name.
    std::vector<std::pair<std::string, ValueId>> names;
    for (ValueId v = 0; v < num_values; ++v) {
      if (shareable_[v]) names.emplace_back(graph_.value(v).DisplayName(), v);
    }
    std::sort(names.begin(), names.end());
    name_rank_.assign(num_values, 0);
    for (size_t i = 0; i < names.size(); ++i) name_rank_[names[i].second] = static_cast<int>(i);

    // Ops outside the traversal that touch a shareable class (in training: the forward ops
    // around activations). memonger did not see them; a buffer is reused only once they are
    // done (serial: an earlier step; parallel: they happen before the reusing op).
    untracked_.assign(num_values, {});
    untracked_last_step_.assign(num_values, -1);
    for (ValueId c = 0; c < num_values; ++c) {
      if (!shareable_[c]) continue;
      std::vector<OpId>& list = untracked_[c];
      for (ValueId m : liveness_.members[c]) {
        const graph::Value& value = graph_.value(m);
        if (value.producer != kNone && !traversed_[value.producer]) list.push_back(value.producer);
        for (OpId reader : graph_.consumers(m)) {
          if (!traversed_[reader]) list.push_back(reader);
        }
      }
      std::sort(list.begin(), list.end());
      list.erase(std::unique(list.begin(), list.end()), list.end());
      for (OpId op : list) untracked_last_step_[c] = std::max(untracked_last_step_[c], Step(op));
    }
    if (parallel_) happens_before_.emplace(graph_);
  }

  // memonger's can_use_blob, plus the untracked-readers condition (a deviation that only
  // matters where memonger was unsafe).
  bool CanUse(PoolEntry& entry, TokenSets::Set tokens, const graph::Device& device,
              OpId op) const {
    const ValueId blob = entry.blob;
    if (entry.device != device) return false;
    // A token that made the last test of this buffer fail usually makes this one fail too
    // (the asking ops are in the same branch): a cheap exact pre-test, since a buffer's
    // stamped tokens only grow. (dense_ holds `tokens`: CanUse is called from GetFreeBlob only,
    // after its refresh; a check here per buffer tested was 12% of the scan.)
    if (entry.missing_token >= 0 && !DenseContains(entry.missing_token)) return false;
    entry.missing_token = sets_.LargestMissing(req_tokens_[blob], tokens);
    if (entry.missing_token >= 0) return false;
    if (!parallel_) return untracked_last_step_[blob] < Step(op);
    for (OpId other : untracked_[blob]) {
      if (!happens_before_->Before(other, op)) return false;
    }
    return true;
  }

  // Whether the token is in the set dense_ holds (GetFreeBlob's `tokens`).
  bool DenseContains(int token) const {
    return (dense_[static_cast<size_t>(token) >> 6] >> (token & 63) & 1) != 0;
  }

  // memonger's get_free_blob. kNone when no free buffer is usable.
  ValueId GetFreeBlob(ValueId out, TokenSets::Set tokens, OpId op, Pool& pool) {
    // The pool is scanned in order, each buffer tested against `tokens`: as a bitset, made
    // from the last call's (the asking ops follow one another down a traversal).
    sets_.Refresh(dense_of_, tokens, dense_);
    dense_of_ = tokens;  // what CanUse's bit tests read
    const graph::Device& device = liveness_.device[out];
    ValueId freed = kNone;
    if (!size_aware_) {
      // No shapes (optimize_inference_for_dag): the most shared usable buffer.
      std::vector<PoolEntry>& ordered = pool.ordered;
      for (size_t i = 0; i < ordered.size(); ++i) {
        if (CanUse(ordered[i], tokens, device, op)) {
          freed = ordered[i].blob;
          missing_token_[freed] = ordered[i].missing_token;
          ordered.erase(ordered.begin() + static_cast<std::ptrdiff_t>(i));
          break;
        }
      }
    } else {
      // With shapes: scan the heap array; grow while too small, then only an equal size.
      std::vector<PoolEntry>& heap = pool.heap;
      const int64_t required = liveness_.class_bytes[out];
      int64_t best_size = -1;
      int best_index = -1;
      for (size_t i = 0; i < heap.size(); ++i) {
        if (!CanUse(heap[i], tokens, device, op)) continue;
        const int64_t size = heap[i].bytes;
        if (size >= best_size && (best_size < required || best_size >= size)) {
          best_size = size;
          best_index = static_cast<int>(i);
        }
      }
      if (best_index != -1) {
        freed = heap[best_index].blob;
        missing_token_[freed] = heap[best_index].missing_token;
        heap.erase(heap.begin() + best_index);
      }
    }
    if (freed != kNone) in_pool_[freed] = false;
    return freed;
  }

  // The consumers a writer counts down when it writes `out`: exactly those whose in-degree
  // counted this write, the readers of `out` and of the members aliasing it (for an in-place
  // chain: the readers of the later versions), when the class is optimizable. A half-open
  // range of consumers_[Root(out)].
  //
  // memonger counted down every consumer of the blob name: an in-place writer also counted
  // the earlier readers of the version it overwrites, and an op writing a head in place
  // counted the head's readers, whose in-degree never included it; either could visit an op
  // before its inputs were written and let it reuse memory still in use (see the deviations
  // in the header).
  std::pair<size_t, size_t> ConsumerRange(ValueId out) const {
    const ValueId c = Root(out);
    const std::vector<Consumer>& list = consumers_[c];
    if (!optimizable_[c]) return {list.size(), list.size()};
    auto by_tin = [](const Consumer& e, int t) { return e.tin < t; };
    const auto first = std::lower_bound(list.begin(), list.end(), tin_[out], by_tin);
    const auto last = std::lower_bound(first, list.end(), tout_[out], by_tin);
    return {static_cast<size_t>(first - list.begin()), static_cast<size_t>(last - list.begin())};
  }

  // The alias tree of every class: a member's parent is the value it overwrites in place or
  // views. tin_/tout_ number the members in depth-first order ([tin, tout) is the subtree);
  // writers_before_[m] counts the traversed writers of m and its ancestors: the writes a
  // reader of m waits for (memonger's "writes of the blob so far").
  void ComputeAliasTree() {
    const int num_values = graph_.num_values();
    // Rewrites (blob_per_name): a member with the root's name that is neither in place nor a
    // view follows the newest earlier version of the name in the class.
    rewrite_of_.assign(num_values, kNone);
    later_writers_.assign(num_values, 0);
    later_seen_.assign(num_values, 0);
    for (ValueId c = 0; c < num_values; ++c) {
      if (Root(c) != c || !liveness_.options.blob_per_name) continue;
      ValueId previous = kNone;
      for (ValueId m : liveness_.members[c]) {
        const graph::Value& value = graph_.value(m);
        if (value.name != graph_.value(c).name) continue;
        const bool rewrite = m != c && value.inplace_of == kNone && value.producer != kNone &&
                             !graph_.op(value.producer).view;
        if (rewrite && previous != kNone) {
          rewrite_of_[m] = previous;
          if (traversed_[value.producer]) ++later_writers_[c];
        }
        if (previous == kNone || graph_.value(previous).version < value.version) previous = m;
      }
    }
    tin_.assign(num_values, 0);
    tout_.assign(num_values, 0);
    writers_before_.assign(num_values, 0);
    std::vector<std::vector<ValueId>> children(num_values);
    for (ValueId c = 0; c < num_values; ++c) {
      if (Root(c) != c) continue;
      for (ValueId m : liveness_.members[c]) {
        if (m != c) children[AliasParent(m)].push_back(m);
      }
    }
    int counter = 0;
    std::vector<std::pair<ValueId, size_t>> stack;
    for (ValueId c = 0; c < num_values; ++c) {
      if (Root(c) != c) continue;
      auto enter = [&](ValueId m, int inherited) {
        tin_[m] = counter++;
        const OpId p = graph_.value(m).producer;
        writers_before_[m] = inherited + (p != kNone && traversed_[p] ? 1 : 0);
        stack.emplace_back(m, 0);
      };
      enter(c, 0);
      while (!stack.empty()) {
        auto& [m, next] = stack.back();
        if (next < children[m].size()) {
          const ValueId child = children[m][next++];
          enter(child, writers_before_[m]);  // may reallocate `stack`
        } else {
          tout_[m] = counter;
          stack.pop_back();
        }
      }
    }
  }

  ValueId AliasParent(ValueId m) const {
    const graph::Value& value = graph_.value(m);
    const ValueId c = Root(m);
    if (value.inplace_of != kNone && Root(value.inplace_of) == c) return value.inplace_of;
    if (value.producer != kNone) {
      const graph::Op& op = graph_.op(value.producer);
      if (op.view && !op.inputs.empty() && Root(op.inputs[0]) == c) return op.inputs[0];
    }
    // One blob per name: a rewrite of the name follows the version before it, so that a
    // reader of the k-th write waits for k writes, as memonger counted them.
    if (rewrite_of_[m] != kNone) return rewrite_of_[m];
    return c;  // an alias of another kind: a child of the root
  }

  void Stamp(ValueId v, TokenSets::Set tokens) {
    const ValueId c = Root(v);
    if (!shareable_[c]) return;  // only pool members are ever asked for their tokens
    const ValueId actual = Mapped(c);
    req_tokens_[actual] = sets_.Union(req_tokens_[actual], tokens);
    if (actual != c) req_tokens_[c] = sets_.Union(req_tokens_[c], tokens);
  }

  struct Frame {
    OpId op = kNone;
    TokenSets::Set tokens = TokenSets::kEmpty;
    bool fork = false;     // the op's outputs have more than one consumer entry
    size_t output = 0;     // iteration state of the descent: output index,
    size_t consumer = 0;   // and the range of consumers of that output still to count down
    size_t consumer_end = 0;
  };

  // process_op steps 1-5; pushes the frame for step 6 (the descent).
  void Enter(OpId op, TokenSets::Set tokens, Pool& pool, std::vector<Frame>& stack) {
    tokens = sets_.Union(tokens, deposit_[op]);
    deposit_[op] = TokenSets::kEmpty;
    MG_CHECK(!visited_[op]);
    visited_[op] = true;
    const graph::Op& current = graph_.op(op);

    for (ValueId in : current.inputs) Stamp(in, tokens);
    for (ValueId out : current.outputs) Stamp(out, tokens);

    // Release: a class whose consumers have all been visited, and (a deviation that keeps a
    // buffer from being handed on before the name is written again) whose later writers too.
    std::vector<PoolEntry> new_free;
    auto release = [&](ValueId c) {
      const ValueId actual = Mapped(c);
      PoolEntry entry;  // only the blob is read of these (newly_freed below)
      entry.neg_share_count = -share_count_[actual];
      entry.name_rank = name_rank_[actual];
      entry.blob = actual;
      new_free.push_back(entry);
    };
    for (ValueId in : current.inputs) {
      const ValueId c = Root(in);
      if (!shareable_[c]) continue;
      if (++seen_[c] == static_cast<int>(consumers_[c].size()) &&
          later_seen_[c] == later_writers_[c]) {
        release(c);
      }
    }
    for (ValueId out : current.outputs) {
      const ValueId c = Root(out);
      if (!shareable_[c] || rewrite_of_[out] == kNone) continue;
      if (++later_seen_[c] == later_writers_[c] &&
          seen_[c] == static_cast<int>(consumers_[c].size())) {
        release(c);
      }
    }

    // Assign: a class at the first of its writes the traversal visits (memonger marks a name
    // processed there), the oldest version's or a rewrite's.
    for (ValueId out : current.outputs) {
      const ValueId c = Root(out);
      if ((c != out && rewrite_of_[out] == kNone) || !optimizable_[c] || processed_[c]) continue;
      const bool newly_freed = std::any_of(new_free.begin(), new_free.end(),
                                           [&](const PoolEntry& e) { return e.blob == c; });
      if (newly_freed) continue;
      processed_[c] = true;
      const ValueId freed = GetFreeBlob(c, tokens, op, pool);
      if (freed == kNone || freed == c) continue;
      req_tokens_[freed] = sets_.Union(req_tokens_[freed], tokens);
      ++share_count_[freed];
      mapping_[c] = freed;
      assigned_seq_[c] = next_seq_++;
      // The group now also waits for the class's untracked touchers.
      untracked_[freed].insert(untracked_[freed].end(), untracked_[c].begin(),
                               untracked_[c].end());
      untracked_last_step_[freed] = std::max(untracked_last_step_[freed], untracked_last_step_[c]);
    }

    // Push the newly freed buffers (no duplicates).
    for (PoolEntry& entry : new_free) {
      if (in_pool_[entry.blob]) continue;
      in_pool_[entry.blob] = true;
      touched_pool_.push_back(entry.blob);
      entry.device = liveness_.device[entry.blob];
      entry.bytes = liveness_.class_bytes[entry.blob];
      entry.missing_token = missing_token_[entry.blob];
      if (size_aware_) {
        PushHeap(pool.heap, entry);
      } else {
        pool.ordered.insert(
            std::lower_bound(pool.ordered.begin(), pool.ordered.end(), entry, KeyLess), entry);
      }
    }

    size_t branches = 0;
    for (ValueId out : current.outputs) {
      const auto [first, last] = ConsumerRange(out);
      branches += last - first;
    }
    Frame frame;
    frame.op = op;
    frame.tokens = tokens;
    frame.fork = branches > 1;
    if (!current.outputs.empty()) {
      std::tie(frame.consumer, frame.consumer_end) = ConsumerRange(current.outputs[0]);
    }
    stack.push_back(std::move(frame));
  }

  // One depth-first traversal from a root op, with its own pool (memonger's recursion, on an
  // explicit stack: a frame resumes its descent where the child's subtree left it).
  void Traverse(OpId root) {
    Pool pool;
    std::vector<Frame> stack;
    Enter(root, sets_.Insert(TokenSets::kEmpty, token_counter_++), pool, stack);
    while (!stack.empty()) {
      const size_t top = stack.size() - 1;
      const graph::Op& op = graph_.op(stack[top].op);
      Frame& frame = stack[top];
      if (frame.output >= op.outputs.size()) {
        stack.pop_back();
        continue;
      }
      if (frame.consumer >= frame.consumer_end) {
        ++frame.output;
        if (frame.output < op.outputs.size()) {
          std::tie(frame.consumer, frame.consumer_end) = ConsumerRange(op.outputs[frame.output]);
        }
        continue;
      }
      const OpId child = consumers_[Root(op.outputs[frame.output])][frame.consumer++].op;
      if (++visit_count_[child] == in_degree_[child]) {
        const TokenSets::Set child_tokens =
            frame.fork ? sets_.Insert(frame.tokens, token_counter_++) : frame.tokens;
        Enter(child, child_tokens, pool, stack);  // may reallocate `stack`
      } else if (!visited_[child]) {
        deposit_[child] = sets_.Union(deposit_[child], frame.tokens);
      }
    }
    for (ValueId blob : touched_pool_) in_pool_[blob] = false;
    touched_pool_.clear();
  }

  void RunRoots() {
    for (ValueId head : heads_) {
      for (const Consumer& consumer : consumers_[head]) {
        const OpId op = consumer.op;
        if (!visited_[op] && in_degree_[op] == 0) Traverse(op);
      }
    }
  }

  // The final canonical class of a class (following mapping chains, which memonger's renaming
  // also followed).
  ValueId Canonical(ValueId c) const {
    int hops = 0;
    while (mapping_[c] != kNone) {
      c = mapping_[c];
      MG_CHECK(++hops <= static_cast<int>(mapping_.size()));
    }
    return c;
  }

  SharingGroups MakeGroups() const {
    const int num_values = graph_.num_values();
    std::vector<std::vector<ValueId>> by_canonical(num_values);
    for (ValueId v = 0; v < num_values; ++v) {
      if (Root(v) != v || !liveness_.planned[v]) continue;
      by_canonical[Canonical(v)].push_back(v);
    }
    SharingGroups groups;
    for (ValueId canonical = 0; canonical < num_values; ++canonical) {
      std::vector<ValueId>& members = by_canonical[canonical];
      if (members.empty()) continue;
      MG_CHECK(liveness_.planned[canonical]);
      std::sort(members.begin(), members.end(), [&](ValueId a, ValueId b) {
        return std::make_pair(assigned_seq_[a], a) < std::make_pair(assigned_seq_[b], b);
      });
      groups.push_back(std::move(members));
    }
    return groups;
  }

  // The blob names memonger gives the groups: a buffer whose canonical class was an output of a
  // traversed op is "<namescope>__m<k>_shared" (k counting such buffers in group order; Caffe2's
  // follows hash-map order); any other shared buffer keeps its canonical class's name (in
  // training, gradients reusing an activation's buffer take the activation's name). "" for a
  // group of one.
  std::vector<std::string> GroupNames(const SharingGroups& groups) const {
    const std::string ns =
        options_.mode == Mode::kTraining ? TrainingNamescope() : options_.namescope;
    std::vector<std::string> names;
    int k = 0;
    for (const std::vector<ValueId>& group : groups) {
      if (group.size() < 2) {
        names.emplace_back();
      } else if (optimizable_[group.front()]) {
        names.push_back(absl::StrCat(ns, "__m", k++, "_shared"));
      } else {
        names.push_back(graph_.value(group.front()).name);
      }
    }
    return names;
  }

  // The ops reading or writing any member of class `c` of `live`.
  std::vector<OpId> Touchers(const Liveness& live, ValueId c) const {
    std::vector<OpId> ops;
    for (ValueId m : live.members[c]) {
      const graph::Value& value = graph_.value(m);
      if (value.producer != kNone) ops.push_back(value.producer);
      const absl::Span<const OpId> readers = graph_.consumers(m);
      ops.insert(ops.end(), readers.begin(), readers.end());
    }
    std::sort(ops.begin(), ops.end());
    ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
    return ops;
  }

  // The safety check, on the values as the verifier sees them: each SSA alias class (with one
  // blob per name, a class here holds every version of a name, each checked on its own). Two
  // of one group must live at disjoint steps unless they are one class here (versions of one
  // name, in order), and in the parallel model each is done (every op touching it) before the
  // next one in step order is written; consecutive ones suffice, the relation being transitive
  // along the chain.
  absl::Status CheckGroups(const SharingGroups& groups) const {
    std::optional<Liveness> ssa;
    if (liveness_.options.blob_per_name) {
      LivenessOptions options = liveness_.options;
      options.blob_per_name = false;
      absl::StatusOr<Liveness> computed =
          ComputeLiveness(graph_, liveness_.schedule, options);
      if (!computed.ok()) return computed.status();
      ssa = *std::move(computed);
    }
    const Liveness& own = ssa.has_value() ? *ssa : liveness_;
    for (const std::vector<ValueId>& group : groups) {
      if (group.size() < 2) continue;
      std::vector<std::pair<ValueId, ValueId>> items;  // (SSA class root, class here)
      for (ValueId c : group) {
        for (ValueId m : liveness_.members[c]) {
          if (own.alias_root[m] == m) items.emplace_back(m, c);
        }
      }
      std::sort(items.begin(), items.end(), [&](const auto& x, const auto& y) {
        return std::make_pair(own.lifetime[x.first].first_step, x.first) <
               std::make_pair(own.lifetime[y.first].first_step, y.first);
      });
      auto fail = [&](ValueId a, ValueId b, const std::string& why) {
        const Lifetime& la = own.lifetime[a];
        const Lifetime& lb = own.lifetime[b];
        return absl::InternalError(absl::StrCat(
            "memonger-dag put '", graph_.value(a).DisplayName(), "' (steps [", la.first_step,
            ", ", la.last_step, "]) and '", graph_.value(b).DisplayName(), "' (steps [",
            lb.first_step, ", ", lb.last_step, "]) in one buffer, but ", why,
            " (a bug in the planner)"));
      };
      for (size_t i = 0; i < items.size(); ++i) {
        const auto [a, ca] = items[i];
        for (size_t j = i + 1; j < items.size(); ++j) {
          const auto [b, cb] = items[j];
          if (own.lifetime[b].first_step > own.lifetime[a].last_step) break;
          if (ca != cb) return fail(a, b, "their lifetimes overlap");
        }
        if (i + 1 < items.size() && own.device[a] != own.device[items[i + 1].first]) {
          return fail(a, items[i + 1].first, "their devices differ");
        }
      }
      if (!parallel_) continue;
      for (size_t i = 0; i + 1 < items.size(); ++i) {
        const ValueId a = items[i].first;
        const ValueId b = items[i + 1].first;
        const OpId writer = graph_.value(b).producer;
        if (writer == kNone) return fail(a, b, "the second has no writer");
        for (OpId op : Touchers(own, a)) {
          if (!happens_before_->Before(op, writer)) {
            return fail(a, b, absl::StrCat(graph_.op(op).Label(), " need not happen before ",
                                           graph_.op(writer).Label(), " in parallel execution"));
          }
        }
      }
    }
    return absl::OkStatus();
  }

  const graph::Graph& graph_;
  const Liveness& liveness_;
  const MemongerOptions& options_;
  const bool parallel_;
  const bool size_aware_;  // share_grad_blobs got shapes; optimize_inference_for_dag did not
  std::optional<HappensBefore> happens_before_;

  // Classification.
  std::string namescope_;                     // training: ends in '/' unless empty
  bool declares_gradients_ = false;           // the net flags gradient ops or roles
  std::set<std::string> param_grad_names_;
  std::set<std::string> activation_names_;    // Caffe2's heuristic (share_activations)
  std::vector<bool> is_gradient_blob_;        // per value (training)
  std::vector<ValueId> heads_;     // head classes, in the order given
  std::vector<bool> is_head_;      // per class root
  std::vector<bool> traversed_;    // per op: memonger's op_indices
  std::vector<bool> shareable_;    // per class root
  std::vector<bool> optimizable_;  // per class root: shareable and written by a traversed op

  // Per class root (memonger's per-blob state).
  struct Consumer {
    OpId op = kNone;
    int tin = 0;  // of the member it reads
  };
  std::vector<std::vector<Consumer>> consumers_;  // blob_to_ops_: one per input occurrence
  std::vector<int> tin_, tout_;               // per value: its alias subtree
  std::vector<int> writers_before_;           // per value
  std::vector<int> seen_;                     // blob_input_count_
  std::vector<ValueId> rewrite_of_;           // per value: the version a rewrite follows
  std::vector<int> later_writers_;            // per class: traversed rewrites of its name
  std::vector<int> later_seen_;               // per class: those visited so far
  std::vector<int> share_count_;              // share_counts_
  std::vector<ValueId> mapping_;              // mapping_: class -> buffer's canonical class
  std::vector<int> assigned_seq_;             // order of the mappings (for group order)
  std::vector<bool> processed_;               // processed_output_blobs_
  std::vector<TokenSets::Set> req_tokens_;    // req_tokens_
  // Per class, while it is not in a pool: why CanUse last said no (-1: it did not). A pool
  // entry carries it (PoolEntry::missing_token) while the class is free.
  std::vector<int> missing_token_;
  std::vector<int> name_rank_;
  std::vector<bool> in_pool_;
  std::vector<ValueId> touched_pool_;
  std::vector<std::vector<OpId>> untracked_;  // per canonical: untracked touchers of the group
  std::vector<int> untracked_last_step_;
  int next_seq_ = 0;

  // Per op.
  std::vector<int> in_degree_;     // op_inputs_
  std::vector<int> visit_count_;   // op_visited_count_
  std::vector<bool> visited_;      // op_visited_
  std::vector<TokenSets::Set> deposit_;  // op_token_deposit_
  int token_counter_ = 1;          // tokens_counter_
  // Every token set above is a handle into this arena (memonger's std::unordered_set<int>).
  TokenSets sets_;
  std::vector<uint64_t> dense_;                  // the set dense_of_, as a bitset
  TokenSets::Set dense_of_ = TokenSets::kEmpty;
};

}  // namespace

absl::StatusOr<SharingGroups> PlanMemongerDag(const graph::Graph& graph,
                                              const Liveness& liveness,
                                              const MemongerOptions& options,
                                              ExecutionModel execution,
                                              std::vector<std::string>* names) {
  DagPlanner planner(graph, liveness, options, execution);
  return planner.Run(names);
}

}  // namespace memonger
