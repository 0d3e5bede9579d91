// memonger-fast: Caffe2 memonger's single-pass recycling for simple nets (optimize_inference_net
// in caffe2/core/memonger.cc, called by the Python wrapper optimize_inference_fast), kept as a
// named baseline with memonger's behaviour.
//
//   LivenessOptions lo;
//   lo.blob_per_name = true;   // memonger's blobs are names
//   MG_ASSIGN_OR_RETURN(Liveness liveness, ComputeLiveness(graph, schedule, lo));
//   MG_ASSIGN_OR_RETURN(MemongerFastResult r, PlanMemongerFast(graph, liveness));
//
// The algorithm, over the ops in schedule order (step i):
//   1. ranges: a class gets the range (i, i) at its first write by op i unless it is static
//      (StaticClasses: graph inputs and outputs, parameter gradients, --static); each later
//      read at step j extends it to end at j. Graph inputs, never written, get no range.
//   2. one pass with a LIFO stack of free buffers. At step i:
//        a. each input whose range ends at i: when it has no buffer yet it becomes the
//           canonical member of a new buffer named "__m<k>_shared" (k = buffers so far); that
//           buffer is newly free (once per op);
//        b. each output whose range starts at i takes the buffer on top of the stack, if any;
//        c. the newly freed buffers are pushed in Caffe2's order: it put the names of the
//           blobs an op frees into a std::unordered_set<std::string> (in input order) and
//           pushed them in the set's iteration order. We fill a real one the same way, so the
//           order is the standard library's, as it was Caffe2's (libstdc++: bucket order; for
//           two names, usually the reverse of the inputs'; a 14th name rehashes).
//      Freed buffers enter the stack after the outputs are served, so an op never gets its
//      own inputs' memory.
// No sizes (a recycled buffer grows at run time), no devices (memonger ignored them; here a
// buffer is only taken by an output on its device: the next one down the stack that is), no
// parallel executor. A name written again after its last read stays live until that write
// (Caffe2's range ended at the last read, and the later write could land in a buffer already
// handed to another blob). Every value that dies gets a "__m<k>_shared" name, shared or not, as in
// Caffe2. O(ops + edges + values) time, or O(buffers) per output with several devices.
#ifndef MEMONGER_MEMONGER_SHARING_MEMONGER_FAST_H_
#define MEMONGER_MEMONGER_SHARING_MEMONGER_FAST_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "memonger/liveness.h"
#include "memonger/sharing/sharing.h"

namespace memonger {

struct MemongerFastResult {
  SharingGroups groups;             // every planned class in exactly one group
  std::vector<std::string> names;   // per group: "__m<k>_shared", or "" (keeps its name)
};

// REQUIRES: `liveness` computed for `graph` (with blob_per_name for Caffe2's answer).
absl::StatusOr<MemongerFastResult> PlanMemongerFast(const graph::Graph& graph,
                                                    const Liveness& liveness);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_SHARING_MEMONGER_FAST_H_
