// optimize-net --caffe2-bugs: Caffe2's memonger answer for a NetDef, exactly (memonger/caffe2_exact.h),
// as a renamed net and a summary. Caffe2's own verifiers (verify_graph_equality,
// verify_inplace_blobs) run where Caffe2 ran them; a replay of the renamed net reports every read of
// a clobbered blob and every blob that changes device, as warnings.
#ifndef MEMONGER_TOOLS_CAFFE2_EXACT_RUN_H_
#define MEMONGER_TOOLS_CAFFE2_EXACT_RUN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "memonger/planner.h"
#include "tools/cli_flags.h"
#include "util/file_io.h"

namespace memonger::tools {

struct Caffe2ExactReport {
  std::string text;                   // the summary, for stdout
  std::vector<std::string> warnings;  // one line each, for stderr
};

// `graph` is flags.model as loaded (ops in the file's order); `sized`: every value has a type
// (shapes known and not --size-blind), so the DAG planner is size-aware and greedy/DP get byte
// sizes. Sets flags.net_out in `outputs` when given. FailedPrecondition where Caffe2 raised.
absl::StatusOr<Caffe2ExactReport> RunCaffe2Exact(const Flags& flags, const graph::Graph& graph,
                                                 const PlanOptions& options, bool sized,
                                                 util::OutputFiles& outputs);

}  // namespace memonger::tools

#endif  // MEMONGER_TOOLS_CAFFE2_EXACT_RUN_H_
