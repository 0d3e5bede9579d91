// The rewritten net: memonger's output form. Values that share a buffer are renamed to one
// blob name, so a name-based runtime (Caffe2 style: a blob is resized on write) reuses memory
// the way the plan says. Ops come in schedule order.
//
// Naming, per buffer:
//   1. a buffer holding a graph input or output keeps that value's name (external names never
//      change); a second external value in the same buffer keeps its own name too (the runtime
//      then holds two blobs where the plan has one buffer: the plan's offsets stay the truth);
//   1b. a buffer the planner named (PlanBuffer::blob_name: the memonger baselines name buffers
//      as Caffe2's memonger does, "<namescope>__m<k>_shared" or a member's name) takes it;
//   2. a buffer holding two or more alias classes is named "__mg_shared_<k>";
//   3. a buffer holding one alias class keeps the name of the class's first value (with
//      "__v<version>" appended for versions after the first, so that reordered ops cannot
//      confuse two versions of one name); with one blob per name (LivenessOptions::blob_per_name), a
//      buffer holding the versions of one name only keeps that name.
// A view's output the plan keeps in its input's memory (--views) is named apart, as are the
// values written in place over it: one name would make the view an in-place op and hand its
// shape to later readers of the input, so the net cannot say that the two share memory (the
// plan's offsets still do). Static values keep their names. A name claimed twice is made
// unique with "__mg<buffer>".
//
// The checks are memonger's: VerifyGraphEquality (same op types, devices and engines, and every
// input reads the output of the same earlier op) and VerifyInplaceBlobs (no op gains or loses an
// in-place pair, except the pairs in-place reuse of a dying input names: then output 0 takes its
// input's name, which is how a name-based runtime writes in place). Compare a rewritten net against ReferenceNet, the original in the same order.
#ifndef MEMONGER_REPORT_NET_REWRITE_H_
#define MEMONGER_REPORT_NET_REWRITE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "memonger/plan.h"
#include "proto/memonger.pb.h"

namespace memonger {

inline constexpr char kSharedBlobPrefix[] = "__mg_shared_";

struct RewrittenNet {
  proto::NetDef net;
  std::vector<std::string> value_names;  // per ValueId: its name in `net`
  int shared_buffers = 0;                // buffers named kSharedBlobPrefix<k>
};

// REQUIRES: `plan` verifies against `graph`.
absl::StatusOr<RewrittenNet> RewriteNet(const graph::Graph& graph, const Plan& plan);

// RewriteNet's names alone, without the net (what accounting a plan needs).
struct RewrittenNames {
  std::vector<std::string> value_names;  // per ValueId
  int shared_buffers = 0;
};
absl::StatusOr<RewrittenNames> RewriteNames(const graph::Graph& graph, const Plan& plan);

// The original net with ops in the plan's schedule order, every value under a unique SSA name
// (in-place outputs under the name of the value they overwrite).
proto::NetDef ReferenceNet(const graph::Graph& graph, const Plan& plan);

// Renames the blobs of `net`'s ops (inputs and outputs; external inputs and outputs never) by
// `renames` (old -> new), and inside the nets RecurrentNetwork and AsyncIf ops hold, with a
// `<blob>.rename` argument per renamed blob on each RecurrentNetwork op, as memonger's
// apply_assignments and apply_recurrent_blob_assignments do.
void ApplyRenames(proto::NetDef& net, const std::map<std::string, std::string>& renames);

// memonger's count_blobs: the distinct names among the ops' inputs and outputs.
int CountBlobs(const proto::NetDef& net);

// The report of a size-blind plan (LivenessOptions::size_blind, the memonger baselines without sizes):
// planner, blob counts before (`reference`) and after renaming (`rewritten`), and each shared
// buffer's name with the names it holds. No bytes: the plan has none.
std::string SizeBlindPlanToText(const graph::Graph& graph, const Plan& plan,
                                const RewrittenNet& rewritten, const proto::NetDef& reference);

// InvalidArgument describing the first difference.
absl::Status VerifyGraphEquality(const proto::NetDef& a, const proto::NetDef& b);
// With `in_place_reuse` (a plan made with LivenessOptions::in_place), `b` may add the pairs
// (input i, output o) that graph/in_place.h lets the op write over: an output named as the
// input whose bytes it took. Every pair of `a` must still be in `b`.
absl::Status VerifyInplaceBlobs(const proto::NetDef& a, const proto::NetDef& b,
                                bool in_place_reuse = false);

}  // namespace memonger

#endif  // MEMONGER_REPORT_NET_REWRITE_H_
