// fp16 storage of chosen values ("keep the feature cache in fp16"): the value is cast to
// float16 right after it is produced, and each reader gets a cast back to the original type
// just before it runs. The full-precision value then lives only for its producer's step and the
// casts; the cache lives in half the bytes for the rest of its lifetime.
//
//   MG_ASSIGN_OR_RETURN(Graph g, StoreInFp16(graph, {"features"}));
//   // g: ... features = Producer(...); features_fp16 = Cast(features, float16); ...
//   //        features_restored = Cast(features_fp16, float32); Reader(features_restored) ...
//
// Not lossless in general: float16 has 5 exponent bits, so values above 65504 become infinity
// and values below 2^-24 become zero (bfloat16 and float32 have 8 exponent bits). Run the net
// with the executor's float16 census (kernels/fp16_census.h) to count what was lost.
//
// Names: "<name>_fp16" for the stored value, "<name>_restored" (then _1, _2, ...) for each
// reader's copy. Values are addressed by blob name; a name must be written once (no in-place
// update after it is stored).
#ifndef MEMONGER_GRAPH_FP16_STORAGE_H_
#define MEMONGER_GRAPH_FP16_STORAGE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace memonger::graph {

// InvalidArgument for an unknown name, a value that is not float32 or bfloat16 (float16 is
// already half; integers are not converted), a graph output (its consumer outside the net
// expects the original type), a name written more than once (an in-place update), or a name
// given twice. REQUIRES: `graph` is typed; the result is typed too.
absl::StatusOr<Graph> StoreInFp16(const Graph& graph, const std::vector<std::string>& names);

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_FP16_STORAGE_H_
