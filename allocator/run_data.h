// A user's own data for a run, and a reference to hold its outputs against:
// `optimize-net --execute host --inputs DIR|FILE.npz --expect DIR [--tolerance T]`.
//
//   MG_ASSIGN_OR_RETURN(auto inputs, alloc::ReadTensorFiles("inputs/"));   // tensor_files.h
//   MG_RETURN_IF_ERROR(alloc::CheckRunInputs(graph, inputs));
//   options.data.insert(inputs.begin(), inputs.end());
//   ... RunOnHost ...
//   MG_ASSIGN_OR_RETURN(auto expected, alloc::ReadTensorFiles("expected/"));
//   MG_ASSIGN_OR_RETURN(auto errors, alloc::CompareOutputs(graph, report, expected));
//
// CheckRunInputs: every graph input that is not a weight or constant must be given, and every
// tensor given must be one (a missing or extra name is an InvalidArgument naming it and the
// inputs the model has); each tensor's dtype and dims must be the input's as planned.
//
// CompareOutputs: every reference tensor names a graph output of the same dtype and dims, and
// every output has one. Per output: the largest absolute difference, and the relative error
// max|ours - reference| / max|reference| over the whole tensor (an elementwise quotient blows
// up at the zeros every activation has), computed in double; integers and bools as well, where
// any difference is an error of at least 1. A NaN or infinity in one tensor but not at the same
// place in the other counts as an infinite error.
#ifndef MEMONGER_ALLOCATOR_RUN_DATA_H_
#define MEMONGER_ALLOCATOR_RUN_DATA_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "allocator/host_run.h"
#include "graph/graph.h"
#include "graph/tensor_data.h"

namespace memonger::alloc {

absl::Status CheckRunInputs(const graph::Graph& graph,
                            const std::map<std::string, graph::TensorData>& inputs);

struct OutputError {
  std::string name;
  double max_abs = 0;
  double relative = 0;  // max_abs / max|reference| (0 when both are all zeros)
};

// REQUIRES: `report` kept its outputs (HostRunOptions::keep_outputs).
absl::StatusOr<std::vector<OutputError>> CompareOutputs(
    const graph::Graph& graph, const HostRunReport& report,
    const std::map<std::string, graph::TensorData>& expected);

}  // namespace memonger::alloc

#endif  // MEMONGER_ALLOCATOR_RUN_DATA_H_
