// Which elements a Slice reads (ONNX Slice, opsets 1-13): its starts, ends, axes and steps
// normalised against the input's dims, one place for the Slice kernel and the gradient builder
// (which writes dY back at the same elements).
//
//   MG_ASSIGN_OR_RETURN(SliceBounds b, NormalizeSlice(x_dims, starts, ends, axes, steps));
//   // along axis d the slice reads b.count[d] elements: b.first[d] + i * b.step[d]
//
// Negative starts and ends count from the end; positive steps clamp them to [0, dim], negative
// ones to [-1, dim - 1] (an end of INT64_MAX or INT64_MIN reads to the edge); an axis not
// named is read whole. O(rank).
#ifndef MEMONGER_GRAPH_SLICE_BOUNDS_H_
#define MEMONGER_GRAPH_SLICE_BOUNDS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace memonger::graph {

struct SliceBounds {
  std::vector<int64_t> first;  // per axis of the input: the first index read
  std::vector<int64_t> step;   // per axis: 1 where not sliced
  std::vector<int64_t> count;  // per axis: the output's dim
};

// InvalidArgument for lists of different lengths (empty `axes`: 0, 1, ...; empty `steps`: 1s),
// an axis outside [-rank, rank) or named twice, or a step of 0.
absl::StatusOr<SliceBounds> NormalizeSlice(const std::vector<int64_t>& dims,
                                           const std::vector<int64_t>& starts,
                                           const std::vector<int64_t>& ends,
                                           std::vector<int64_t> axes,
                                           std::vector<int64_t> steps);

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_SLICE_BOUNDS_H_
