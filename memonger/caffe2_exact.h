// Caffe2's memonger exactly, bugs included (`optimize-net --caffe2-bugs`).
//
// The memonger-* planners (memonger/sharing/) are Caffe2's algorithms with the deviations
// docs/memonger.md lists: each keeps a plan valid where Caffe2's answer overwrites a live blob,
// shares memory across devices, or ignores an option's meaning. This file is the other half of
// the contract: Caffe2's answer itself, for a user who must reproduce what Caffe2 did (to compare,
// or to explain a Caffe2 job's behaviour). It works as Caffe2 did, on blob names, in the net's op
// order, and returns the renaming; it never becomes a plan with offsets, and its result is
// checked by SimulateRenamedNet (a serial replay) rather than trusted.
//
//   MG_ASSIGN_OR_RETURN(caffe2::NameNet net, caffe2::NameNetOf(graph));
//   MG_ASSIGN_OR_RETURN(caffe2::Renames renames,
//                       caffe2::ShareGradBlobs(net, {"loss"}, param_grads, "", {}, true, {}));
//   caffe2::Hazards hazards = caffe2::SimulateRenamedNet(net, renames);
//
// The functions, as in caffe2/python/memonger.py and caffe2/core/memonger.cc (the reference is
// ../shared/reference/memonger-algorithms.md; tests/reference/memonger_ref.py is the same port in
// Python, and the parity test compares the two):
//   ShareGradBlobs           share_grad_blobs: the token DFS from the losses over the gradient
//                            ops (a name ending in "_grad" under the namescope, not a parameter
//                            gradient), optionally sharing Caffe2's activations; element counts
//                            (int32, wrapping) when shapes are given, else size-blind;
//   OptimizeInferenceForDag  optimize_inference_for_dag: the same DFS over every op from the
//                            heads, never size-aware;
//   OptimizeInterference     optimize_interference in the net's own op order: live ranges,
//                            then greedy or DP chains, static blobs as chains of their own,
//                            each chain renamed to its last member;
//   OptimizeInferenceFast    optimize_inference_fast (memonger.cc's optimize_inference_net): a
//                            LIFO stack of freed names; a net of another type than "" or
//                            "simple", or with a RecurrentNetwork op, comes back unchanged;
//   InterferenceEdges        compute_interference_graph's edges (i < j, op j reads an output of
//                            op i).
// Caffe2's own orderings (networkx's topological sorts) are version-dependent and not
// reproduced: OptimizeInterference keeps the op order, as its `ordering_function` identity does.
// The heap of free blobs is libstdc++'s std::push_heap/std::pop_heap, as in memonger.cc, so the
// size-aware scan sees the same array. Caffe2's numbering k of `<namescope>__m<k>_shared` follows
// an unordered_map; here it follows the order of assignment.
//
// Errors: FailedPrecondition where Caffe2 raised (an input never written by a traversed op, an op
// visited twice, a gradient op given to the inference planner, the DP's assertions, no blob read
// after the first op), ResourceExhausted for a
// traversal deeper than util::kMaxCaffe2RecursionDepth (Caffe2 recursed too; here the recursion
// runs on a stack of its own, util::kCaffe2StackBytes), DeadlineExceeded when the DP runs past `deadline` (Caffe2's DP has no
// limit and is exponential).
//
// Complexity: as Caffe2's. DFS O(ops * inputs + outputs * pool * tokens); ranges O(ops);
// greedy O(blobs * chains); DP exponential in the window of overlapping ranges.
#ifndef MEMONGER_MEMONGER_CAFFE2_EXACT_H_
#define MEMONGER_MEMONGER_CAFFE2_EXACT_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "graph/graph.h"

namespace memonger::caffe2 {

// A net as Caffe2's memonger sees it: ops over blob names.
struct NameOp {
  std::string type;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  graph::Device device;
  bool is_gradient_op = false;
};
struct NameNet {
  std::vector<NameOp> ops;
  std::vector<std::string> external_inputs;
  std::vector<std::string> external_outputs;
  std::string type;  // NetDef type: "", "simple", "dag", ...
};

// The graph's ops in their order, with their blob names.
NameNet NameNetOf(const graph::Graph& graph);

// Old name -> new name, for every name that changes (op inputs and outputs only; external
// inputs and outputs are never renamed).
using Renames = std::map<std::string, std::string>;

// Element counts per blob name (Caffe2's blob_shapes after InferShapesAndTypes).
using BlobShapes = std::map<std::string, std::vector<int64_t>>;

absl::StatusOr<Renames> ShareGradBlobs(const NameNet& net, const std::vector<std::string>& losses,
                                       const std::set<std::string>& param_grads,
                                       std::string namescope,
                                       const std::set<std::string>& dont_share,
                                       bool share_activations, const BlobShapes& shapes);

absl::StatusOr<Renames> OptimizeInferenceForDag(const NameNet& net,
                                                const std::vector<std::string>& heads,
                                                const std::string& namescope);

// `blob_sizes`: bytes per name (every name the ops touch), or empty: every blob counts 1.
absl::StatusOr<Renames> OptimizeInterference(const NameNet& net,
                                             const std::set<std::string>& static_blobs,
                                             const std::map<std::string, int64_t>& blob_sizes,
                                             bool dynamic_programming, absl::Time deadline);

absl::StatusOr<Renames> OptimizeInferenceFast(const NameNet& net,
                                              const std::set<std::string>& static_blobs);

std::vector<std::pair<int, int>> InterferenceEdges(const NameNet& net);

// Caffe2's heuristics for a net that declares nothing (share_grad_blobs's callers):
// the losses, each X an op reads to write exactly "X_autogen_grad" (in op order);
std::vector<std::string> AutogenLosses(const NameNet& net);
// the parameter gradients, when the caller names none: the net's declared ones, else "P_grad"
// for each graph input P that some op reads but none reads as its first input (FC and Conv read
// weights and biases after their data), where the net has such a name;
std::set<std::string> DefaultParamGrads(const graph::Graph& graph);
// the activations share_activations shares: an output b of an op reading b + "_w", not an
// external output, the last two such outputs (in op order, repeats counted) left out.
std::set<std::string> ActivationBlobs(const NameNet& net);

// What the renamed net does when its ops run one after another, as a Caffe2 workspace would run
// them: a read that finds its blob holding another value (clobbered) or nothing (an external
// input renamed away from the name it is fed under), an external output not in its blob at the
// end, and blobs that hold values of two devices (Caffe2 then reallocates the blob at each
// change: nothing is shared there).
struct Hazards {
  std::vector<std::string> clobbered_reads;  // one line each
  std::vector<std::string> cross_device;     // one line per blob
};
Hazards SimulateRenamedNet(const NameNet& net, const Renames& renames);

}  // namespace memonger::caffe2

#endif  // MEMONGER_MEMONGER_CAFFE2_EXACT_H_
