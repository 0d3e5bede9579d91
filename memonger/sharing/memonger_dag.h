// memonger-dag: Caffe2 memonger's token-based depth-first blob recycling
// (ComputeBlobRecyclingForDag, caffe2/core/memonger.cc, with its Python wrappers
// share_grad_blobs for training and optimize_inference_for_dag for inference), kept as a named
// baseline with memonger's behaviour, not better. It decides which alias classes share one
// buffer; BuildSharingPlan then lays the buffers out.
//
//   MG_ASSIGN_OR_RETURN(Schedule schedule, MakeSchedule(graph, OrderKind::kGiven));
//   MG_ASSIGN_OR_RETURN(Liveness liveness, ComputeLiveness(graph, schedule));
//   MemongerOptions options;
//   options.mode = Mode::kTraining;             // heads = the losses, gradient ops only
//   options.share_activations = true;
//   MG_ASSIGN_OR_RETURN(SharingGroups groups,
//                       PlanMemongerDag(graph, liveness, options, ExecutionModel::kSerial));
//
// memonger works on blob names; here a "blob" is an alias class: an in-place chain, and with
// LivenessOptions::blob_per_name (PlanMemory sets it for the memonger baselines) every version
// of a name. Its consumers are the readers of all its members; it is freed once all of them,
// and every later writer of the name, ran. The algorithm:
//   1. Choose the heads (DFS start values), the ops to traverse and the shareable classes:
//        training   heads = options.losses (default: the graph's losses, else each X read to
//                   write X_autogen_grad); ops = gradient ops, those with a gradient blob among
//                   their inputs or outputs: Caffe2's rule, a name ending in "_grad" under
//                   options.namescope (or "_" + namescope), not a parameter gradient
//                   (options.param_grads, else declared, else P_grad of inputs P no op reads
//                   first), plus declared gradients in nets that declare them; shareable =
//                   gradient blobs, plus Caffe2's activations (output b of an op reading b_w,
//                   the last two left out) with options.share_activations, or every activation
//                   with options.share_all_activations.
//        inference  heads = options.heads (default: the graph's non-static inputs); all ops;
//                   shareable = every planned value that is neither a graph input nor output.
//      Never shareable: options.dont_share names (every version), graph inputs and outputs,
//      static values (and LivenessOptions::static_names); a class is shareable only when all its members are.
//   2. Setup, in topological order: each traversed op's in-degree is the number of traversed
//      writes of the shareable classes it reads, up to the member it reads (an in-place chain
//      written by k ops counts k for a reader of its last version); every read of a shareable
//      or head class appends the op to the class's consumer list.
//   3. For each head, for each consumer with in-degree 0 not yet visited: a depth-first
//      traversal with a fresh empty pool of free buffers and a fresh token. Visiting an op:
//        a. merge the tokens deposited by its other parents; stamp its tokens on every class
//           it reads or writes;
//        b. release: a shareable class whose consumers have all been visited becomes free;
//        c. assign: each shareable output whose class this traversal writes for the first
//           time (the oldest version's write or a rewrite of the name) takes a free buffer
//           (see below) whose stamped tokens it all holds and whose device equals its own;
//        d. push the buffers released in (b) into the pool, a min-heap on minus the number of
//           classes already sharing the buffer, then the name (an op never reuses its own
//           inputs' memory);
//        e. descend: every consumer whose in-degree counted one of its writes is counted
//           down; one that reaches its in-degree is visited with this op's tokens plus a
//           fresh token when there is more than one such consumer entry (a fork); the others
//           get this op's tokens deposited.
//      Parallel branches carry different tokens, so they never reuse each other's buffers
//      before they join: the result is safe for a parallel executor too.
//   4. Choosing a free buffer, training with sizes (share_grad_blobs with shapes, unless
//      options.size_blind; sizes in bytes): scan
//      the heap array; a usable candidate becomes the choice when it is at least as large as
//      the current choice and either the current choice is smaller than the output or the two
//      are equal. So: the first fitting buffer in heap-array order (not the smallest), or,
//      when none fits, the largest, which then grows (a buffer is as large as its largest
//      member). Inference (optimize_inference_for_dag passed no shapes) and size-blind
//      training: the first usable buffer in heap order, whatever its size.
//   Ops no traversal reaches keep their own memory.
//
// Deviations from memonger (details and reasons in docs/memonger.md, each proven case by case
// by tests/reference/parity.py): byte sizes instead of element counts; dont_share values never
// share; real devices for forward activations; a writer counts down only the consumers whose
// in-degree counted its write (memonger's per-name lists let a rewrite of a name release the
// earlier readers of the version it overwrites, and an op writing a head in place release the
// head's readers, visiting them before their inputs existed: unsafe); a blob is free only
// after its later writers ran; a buffer also touched by ops outside the traversal (forward ops
// around activations in training) is reused only once they are done (serial: an earlier step;
// parallel: they happen before the reusing op).
//
// Safety: the result is checked before it is returned, value by value as the verifier sees
// them (each version of a name on its own): two of one group must live at disjoint steps, and
// in the parallel execution model every op touching one must happen before the op writing the
// next. A violation is an internal error (a bug).
//
// Complexity, for T tokens (at most one per visited op) and d = log_8(T / 64): token sets are
// persistent tries that share what they have in common (token_sets.h), so a union or stamp
// costs O(d x the words where the two sets differ), not O(T / 64); the pool scan tests each
// free buffer with a bit test against a bitset of the asking op's tokens (refreshed from the
// previous op's, the same way), and a full subset test only where the token remembered from
// the buffer's last failed test no longer rules it out. So O(ops + edges) set operations plus
// O(outputs x pool) tests: memonger's pool scan, quadratic where buffers pile up unusable in
// the pool (a 300,000-op random inference net: 2.3 s). Memory O(values + ops + the nodes the
// set operations made + T / 64): the whole run on that net takes 334 MB (3.3 GB with a bitset
// per buffer).
// An explicit stack, so deep graphs do not overflow the call stack. Deterministic.
#ifndef MEMONGER_MEMONGER_SHARING_MEMONGER_DAG_H_
#define MEMONGER_MEMONGER_SHARING_MEMONGER_DAG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "memonger/liveness.h"
#include "memonger/sharing/sharing.h"

namespace memonger {

// Groups of alias-class roots sharing one buffer; every planned class appears in exactly one
// group (unshared classes as singletons). Groups are ordered by their first class's root id;
// within a group the first class is memonger's canonical blob, the others follow in the order
// they were assigned to it.
//
// `names`, when given, gets one entry per group: the blob name memonger gives it
// ("<namescope>__m<k>_shared", or the canonical class's name when that is not an output of a
// traversed op), "" for a group of one.
// InvalidArgument for a loss or head name that is not in the graph, and for training mode
// without any loss. InternalError if the safety check above fails.
// REQUIRES: `liveness` computed for `graph`.
absl::StatusOr<SharingGroups> PlanMemongerDag(const graph::Graph& graph,
                                              const Liveness& liveness,
                                              const MemongerOptions& options,
                                              ExecutionModel execution,
                                              std::vector<std::string>* names = nullptr);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_SHARING_MEMONGER_DAG_H_
