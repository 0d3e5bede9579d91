// Caffe2's ComputeBlobRecyclingForDag (memonger.cc) and its Python wrappers share_grad_blobs and
// optimize_inference_for_dag, on blob names, without the deviations of memonger-dag.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "graph/dependencies.h"
#include "memonger/caffe2_exact.h"
#include "util/deep_stack.h"
#include "util/limits.h"
#include "util/status_macros.h"

namespace memonger::caffe2 {
namespace {

using Tokens = std::set<int>;
// memonger.cc's pool entry: (-share count, name), ordered by std::greater (a min-heap).
using PoolEntry = std::pair<int, std::string>;
using Pool = std::vector<PoolEntry>;

const graph::Device kCpu{};

void PushHeap(Pool& pool, PoolEntry entry) {
  pool.push_back(std::move(entry));
  std::push_heap(pool.begin(), pool.end(), std::greater<PoolEntry>());
}
PoolEntry PopHeap(Pool& pool) {
  std::pop_heap(pool.begin(), pool.end(), std::greater<PoolEntry>());
  PoolEntry top = std::move(pool.back());
  pool.pop_back();
  return top;
}

// Wraps to int32 as memonger's `int` sizes do.
int32_t Int32(int64_t x) { return static_cast<int32_t>(static_cast<uint32_t>(x)); }

// A map that remembers the order of first insertion (Python's dict, which the renaming walks).
class OrderedMap {
 public:
  const std::string* Find(const std::string& key) const {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items_[it->second].second;
  }
  void Set(const std::string& key, std::string value) {
    auto [it, inserted] = index_.try_emplace(key, items_.size());
    if (inserted) {
      items_.emplace_back(key, std::move(value));
    } else {
      items_[it->second].second = std::move(value);
    }
  }
  void SetDefault(const std::string& key, const std::string& value) {
    if (Find(key) == nullptr) Set(key, value);
  }
  const std::vector<std::pair<std::string, std::string>>& items() const { return items_; }

 private:
  std::vector<std::pair<std::string, std::string>> items_;
  absl::flat_hash_map<std::string, size_t> index_;
};

class DagRecycler {
 public:
  DagRecycler(const NameNet& net, std::vector<std::string> heads, std::vector<int> op_indices,
              std::set<std::string> shareable, std::string namescope,
              std::set<std::string> dont_share, const BlobShapes& shapes)
      : net_(net),
        heads_(std::move(heads)),
        op_indices_(std::move(op_indices)),
        shareable_(std::move(shareable)),
        namescope_(std::move(namescope)),
        dont_share_(std::move(dont_share)),
        shapes_(shapes) {
    const size_t n = net_.ops.size();
    op_inputs_.assign(n, 0);
    op_visited_count_.assign(n, 0);
    op_token_deposit_.assign(n, Tokens());
    op_visited_.assign(n, false);
  }

  // memonger recursed once per op on the traversal's path: so does ProcessOp, on a thread with
  // a stack for util::kMaxCaffe2RecursionDepth frames.
  absl::StatusOr<Renames> Run() {
    absl::StatusOr<Renames> result = absl::InternalError("the traversal did not run");
    MG_RETURN_IF_ERROR(util::RunWithStack(util::kCaffe2StackBytes, [&] { result = RunHere(); }));
    return result;
  }

 private:
  absl::StatusOr<Renames> RunHere() {
    MG_RETURN_IF_ERROR(Setup());
    // Roots: unvisited consumers of a head with in-degree 0; each gets a fresh pool and token.
    for (const std::string& head : heads_) {
      const std::vector<int> consumers = blob_to_ops_[head];
      for (int i : consumers) {
        if (!op_visited_[i] && op_inputs_[i] == 0) {
          Pool pool;
          Tokens tokens = {tokens_counter_++};
          MG_RETURN_IF_ERROR(ProcessOp(i, pool, tokens, 1));
        }
      }
    }
    return Rename();
  }

  bool Shareable(const std::string& b) const { return shareable_.count(b) > 0; }
  const std::string& Mapped(const std::string& b) const {
    const std::string* m = mapping_.Find(b);
    return m == nullptr ? b : *m;
  }
  graph::Device DeviceOf(const std::string& b) const {
    auto it = blob_device_.find(b);
    return it == blob_device_.end() ? kCpu : it->second;  // heads, external blobs: CPU 0
  }
  int ConsumerCount(const std::string& b) const {
    auto it = blob_to_ops_.find(b);
    return it == blob_to_ops_.end() ? 0 : static_cast<int>(it->second.size());
  }
  int32_t BlobSize(const std::string& b) const {
    auto it = shapes_.find(b);
    if (it == shapes_.end()) return 0;
    int32_t size = 1;
    for (int64_t d : it->second) {
      // The low 32 bits of the product, as Python's exact product wrapped to int32 has them;
      // unsigned, so that no product overflows.
      size = Int32(static_cast<int64_t>(static_cast<uint64_t>(static_cast<int64_t>(size)) *
                                        static_cast<uint64_t>(d)));
    }
    return size;
  }

  absl::Status Setup() {
    const std::set<std::string> heads(heads_.begin(), heads_.end());
    for (int i : op_indices_) {
      for (const std::string& out : net_.ops[i].outputs) {
        if (Shareable(out) && dont_share_.count(out) == 0) optim_op_outputs_.insert(out);
      }
    }
    absl::flat_hash_map<std::string, int> blob_seen;
    for (int i : op_indices_) {
      const NameOp& op = net_.ops[i];
      for (const std::string& in : op.inputs) {
        if (!Shareable(in) && heads.count(in) == 0) continue;
        if (optim_op_outputs_.count(in) > 0) {
          auto seen = blob_seen.find(in);
          if (seen == blob_seen.end()) {
            return absl::FailedPreconditionError(absl::StrCat(
                "Caffe2's memonger fails on this net: input '", util::Quote(in),
                "' was not output by an op before (memonger.cc's CAFFE_ENFORCE)"));
          }
          op_inputs_[i] += seen->second;
        } else {
          share_counts_[in] = 1;
        }
        blob_to_ops_[in].push_back(i);
      }
      for (const std::string& out : op.outputs) {
        ++blob_seen[out];
        blob_device_[out] = graph::OutputDevice(op.type, op.device);
      }
    }
    return absl::OkStatus();
  }

  bool CanUse(const std::string& name, const Tokens& tokens, const graph::Device& device) {
    if (DeviceOf(name) != device) return false;
    const Tokens& required = req_tokens_[name];
    return std::includes(tokens.begin(), tokens.end(), required.begin(), required.end());
  }

  std::string FreeBlob(const std::string& name, const Tokens& tokens, Pool& pool,
                       const graph::Device& device) {
    if (shapes_.empty()) {
      // Size-blind: pop until a usable candidate appears; push the rejected ones back.
      std::vector<PoolEntry> rejected;
      std::string found;
      while (!pool.empty()) {
        PoolEntry candidate = PopHeap(pool);
        if (CanUse(candidate.second, tokens, device)) {
          found = candidate.second;
          break;
        }
        rejected.push_back(std::move(candidate));
      }
      for (PoolEntry& entry : rejected) PushHeap(pool, std::move(entry));
      return found;
    }
    // Size-aware: scan the heap array; a usable candidate replaces the best when it is at least
    // as large and the best is still too small or no smaller than it.
    const int32_t required = BlobSize(name);
    int64_t best_size = -1;
    int best_index = -1;
    for (size_t i = 0; i < pool.size(); ++i) {
      if (!CanUse(pool[i].second, tokens, device)) continue;
      auto known = blob_sizes_.find(pool[i].second);  // set when pushed
      const int64_t size = known == blob_sizes_.end() ? 0 : known->second;
      if (size >= best_size && (best_size < required || best_size >= size)) {
        best_size = size;
        best_index = static_cast<int>(i);
      }
    }
    if (best_index < 0) return "";
    std::string found = pool[best_index].second;
    pool.erase(pool.begin() + best_index);  // vector::erase: no longer a heap, as in memonger
    return found;
  }

  absl::Status ProcessOp(int op_index, Pool& pool, Tokens& tokens, int depth) {
    if (depth > util::kMaxCaffe2RecursionDepth) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "--caffe2-bugs: the traversal is deeper than ", util::kMaxCaffe2RecursionDepth,
          " ops (Caffe2 recursed once per op on the path); plan this net without --caffe2-bugs"));
    }
    tokens.insert(op_token_deposit_[op_index].begin(), op_token_deposit_[op_index].end());
    op_token_deposit_[op_index].clear();
    if (op_visited_[op_index]) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Caffe2's memonger fails on this net: op ", op_index, " is visited twice"));
    }
    op_visited_[op_index] = true;
    const NameOp& op = net_.ops[op_index];

    // Stamp the tokens on every blob touched, and on its canonical blob.
    for (const auto* list : {&op.inputs, &op.outputs}) {
      for (const std::string& b : *list) {
        const std::string actual = Mapped(b);
        req_tokens_[actual].insert(tokens.begin(), tokens.end());
        if (actual != b) req_tokens_[b].insert(tokens.begin(), tokens.end());
      }
    }

    // Release: a shareable input whose consumer entries have all been seen.
    std::vector<PoolEntry> new_free;
    std::set<std::string> new_free_set;
    for (const std::string& in : op.inputs) {
      if (!Shareable(in)) continue;
      if (++blob_input_count_[in] == ConsumerCount(in)) {
        const std::string actual = Mapped(in);
        if (dont_share_.count(actual) == 0) {
          new_free.emplace_back(-share_counts_[actual], actual);
          new_free_set.insert(actual);
        }
      }
    }

    // Assign: shareable outputs written here for the first time, not freed here.
    for (const std::string& out : op.outputs) {
      if (!Shareable(out) || processed_output_blobs_.count(out) > 0 ||
          new_free_set.count(out) > 0) {
        continue;
      }
      const std::string freed = FreeBlob(out, tokens, pool, DeviceOf(out));
      if (!freed.empty()) {
        req_tokens_[freed].insert(tokens.begin(), tokens.end());
        ++share_counts_[freed];
        mapping_.Set(out, freed);
      }
      processed_output_blobs_.insert(out);
    }

    // Push the newly freed blobs; the duplicate check is against the pool as it was before this
    // loop (memonger builds that set once).
    std::set<std::string> in_pool;
    for (const PoolEntry& entry : pool) in_pool.insert(entry.second);
    for (PoolEntry& entry : new_free) {
      if (in_pool.count(entry.second) > 0) continue;
      if (!shapes_.empty() && blob_sizes_.count(entry.second) == 0) {
        blob_sizes_[entry.second] = BlobSize(entry.second);
      }
      PushHeap(pool, std::move(entry));
    }

    // Descend: every write counts down every consumer entry of the name (memonger's rule);
    // a consumer that reaches its in-degree is visited, with a fresh token at a fork.
    int branches = 0;
    for (const std::string& out : op.outputs) branches += ConsumerCount(out);
    for (const std::string& out : op.outputs) {
      auto it = blob_to_ops_.find(out);
      if (it == blob_to_ops_.end()) continue;
      const std::vector<int> consumers = it->second;
      for (int consumer : consumers) {
        if (++op_visited_count_[consumer] == op_inputs_[consumer]) {
          Tokens new_tokens = tokens;
          if (branches > 1) new_tokens.insert(tokens_counter_++);
          MG_RETURN_IF_ERROR(ProcessOp(consumer, pool, new_tokens, depth + 1));
        } else if (!op_visited_[consumer]) {
          op_token_deposit_[consumer].insert(tokens.begin(), tokens.end());
        }
      }
    }
    return absl::OkStatus();
  }

  // memonger's renaming: canonical blobs that are optimizable outputs get
  // "<namescope>__m<k>_shared" (k in order of first assignment), the others keep their name;
  // every mapped name follows its canonical blob (one pass, as memonger's loop).
  Renames Rename() {
    OrderedMap renamed;
    int index = 0;
    std::vector<std::string> canonicals;
    for (const auto& [from, to] : mapping_.items()) canonicals.push_back(to);
    for (const std::string& canonical : canonicals) {
      if (optim_op_outputs_.count(canonical) > 0) {
        if (renamed.Find(canonical) == nullptr) {
          renamed.Set(canonical, absl::StrCat(namescope_, "__m", index++, "_shared"));
        }
      } else {
        renamed.SetDefault(canonical, canonical);
      }
    }
    for (const auto& [k, v] : renamed.items()) mapping_.SetDefault(k, v);
    const std::vector<std::pair<std::string, std::string>> snapshot = mapping_.items();
    for (const auto& [k, v] : snapshot) {
      const std::string* target = renamed.Find(v);
      if (target != nullptr && *target != v) {
        const std::string name = *target;
        renamed.Set(k, name);
        mapping_.Set(k, name);
      }
    }
    Renames renames;
    for (const auto& [k, v] : mapping_.items()) {
      if (k != v) renames[k] = v;
    }
    return renames;
  }

  const NameNet& net_;
  const std::vector<std::string> heads_;
  const std::vector<int> op_indices_;
  const std::set<std::string> shareable_;
  const std::string namescope_;
  const std::set<std::string> dont_share_;
  const BlobShapes& shapes_;

  std::vector<int> op_inputs_;  // required in-degree
  std::vector<int> op_visited_count_;
  std::vector<Tokens> op_token_deposit_;
  std::vector<bool> op_visited_;
  int tokens_counter_ = 1;
  absl::flat_hash_map<std::string, std::vector<int>> blob_to_ops_;  // one entry per read
  absl::flat_hash_map<std::string, int> blob_input_count_;
  absl::flat_hash_map<std::string, int> share_counts_;
  absl::flat_hash_map<std::string, int64_t> blob_sizes_;
  absl::flat_hash_map<std::string, Tokens> req_tokens_;
  std::set<std::string> optim_op_outputs_;
  OrderedMap mapping_;  // blob -> canonical blob, in order of assignment
  absl::flat_hash_map<std::string, graph::Device> blob_device_;
  std::set<std::string> processed_output_blobs_;
};

}  // namespace

NameNet NameNetOf(const graph::Graph& graph) {
  NameNet net;
  net.type = graph.net_type();
  for (graph::ValueId v : graph.inputs()) net.external_inputs.push_back(graph.value(v).name);
  for (graph::ValueId v : graph.outputs()) net.external_outputs.push_back(graph.value(v).name);
  for (const graph::Op& op : graph.ops()) {
    NameOp named;
    named.type = op.type;
    for (graph::ValueId v : op.inputs) named.inputs.push_back(graph.value(v).name);
    for (graph::ValueId v : op.outputs) named.outputs.push_back(graph.value(v).name);
    named.device = op.device;
    named.is_gradient_op = op.is_gradient_op;
    net.ops.push_back(std::move(named));
  }
  return net;
}

std::vector<std::string> AutogenLosses(const NameNet& net) {
  std::vector<std::string> losses;
  for (const NameOp& op : net.ops) {
    if (op.inputs.size() != 1 || op.outputs.size() != 1) continue;
    if (op.outputs.front() == absl::StrCat(op.inputs.front(), "_autogen_grad") &&
        std::find(losses.begin(), losses.end(), op.inputs.front()) == losses.end()) {
      losses.push_back(op.inputs.front());
    }
  }
  return losses;
}

std::set<std::string> DefaultParamGrads(const graph::Graph& graph) {
  std::set<std::string> names;
  for (const auto& [param, grad] : graph.param_grads()) names.insert(graph.value(grad).name);
  if (!names.empty()) return names;
  for (graph::ValueId input : graph.inputs()) {
    const graph::Value& value = graph.value(input);
    bool read_first = false;
    const absl::Span<const graph::OpId> readers = graph.consumers(input);
    for (graph::OpId reader : readers) {
      const graph::Op& op = graph.op(reader);
      read_first = read_first || (!op.inputs.empty() && op.inputs.front() == input);
    }
    const std::string grad = absl::StrCat(value.name, "_grad");
    if (!read_first && !readers.empty() && !graph.FindVersions(grad).empty()) {
      names.insert(grad);
    }
  }
  return names;
}

std::set<std::string> ActivationBlobs(const NameNet& net) {
  const std::set<std::string> external_outputs(net.external_outputs.begin(),
                                               net.external_outputs.end());
  std::vector<std::string> found;
  for (const NameOp& op : net.ops) {
    for (const std::string& b : op.outputs) {
      const std::string weight = absl::StrCat(b, "_w");
      if (std::find(op.inputs.begin(), op.inputs.end(), weight) != op.inputs.end() &&
          external_outputs.count(b) == 0) {
        found.push_back(b);
      }
    }
  }
  found.resize(found.size() >= 2 ? found.size() - 2 : 0);
  return std::set<std::string>(found.begin(), found.end());
}

absl::StatusOr<Renames> ShareGradBlobs(const NameNet& net, const std::vector<std::string>& losses,
                                       const std::set<std::string>& param_grads,
                                       std::string namescope,
                                       const std::set<std::string>& dont_share,
                                       bool share_activations, const BlobShapes& shapes) {
  if (!namescope.empty() && namescope.back() != '/') namescope += '/';
  auto is_grad_blob = [&](const std::string& b) {
    return absl::EndsWith(b, "_grad") &&
           (absl::StartsWith(b, namescope) || absl::StartsWith(b, absl::StrCat("_", namescope))) &&
           param_grads.count(b) == 0;
  };
  const std::set<std::string> activations =
      share_activations ? ActivationBlobs(net) : std::set<std::string>();
  std::vector<int> grad_ops;
  std::set<std::string> shareable;
  for (int i = 0; i < static_cast<int>(net.ops.size()); ++i) {
    const NameOp& op = net.ops[i];
    bool gradient_op = false;
    for (const auto* list : {&op.inputs, &op.outputs}) {
      for (const std::string& b : *list) {
        gradient_op = gradient_op || is_grad_blob(b);
        if (is_grad_blob(b) || activations.count(b) > 0) shareable.insert(b);
      }
    }
    if (gradient_op) grad_ops.push_back(i);
  }
  return DagRecycler(net, losses, std::move(grad_ops), std::move(shareable), namescope,
                     dont_share, shapes)
      .Run();
}

absl::StatusOr<Renames> OptimizeInferenceForDag(const NameNet& net,
                                                const std::vector<std::string>& heads,
                                                const std::string& namescope) {
  std::set<std::string> external(net.external_inputs.begin(), net.external_inputs.end());
  external.insert(net.external_outputs.begin(), net.external_outputs.end());
  std::set<std::string> activations;
  std::set<std::string> seen_as_output;
  std::vector<int> all_ops;
  for (int i = 0; i < static_cast<int>(net.ops.size()); ++i) {
    const NameOp& op = net.ops[i];
    for (const std::string& b : op.inputs) {
      if (external.count(b) > 0) continue;
      activations.insert(b);
      if (seen_as_output.count(b) == 0) {
        return absl::FailedPreconditionError(absl::StrCat(
            "Caffe2's optimize_inference_for_dag fails on this net: '", util::Quote(b),
            "' is not an external input"));
      }
    }
    for (const std::string& b : op.outputs) {
      if (external.count(b) == 0) activations.insert(b);
    }
    seen_as_output.insert(op.outputs.begin(), op.outputs.end());
    if (op.is_gradient_op) {
      return absl::FailedPreconditionError(
          "Caffe2's optimize_inference_for_dag takes inference-only nets: this one has a "
          "gradient op");
    }
    all_ops.push_back(i);
  }
  return DagRecycler(net, heads, std::move(all_ops), std::move(activations), namescope, {}, {})
      .Run();
}

}  // namespace memonger::caffe2
