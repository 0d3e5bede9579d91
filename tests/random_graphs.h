// Fixed-seed random nets for property tests: typed graphs with branches, joins, in-place ops,
// multi-output ops, dead values, control inputs, params and (optionally) view ops and several
// devices. Types are set directly (uint8 tensors of random byte sizes, with a few zero-sized
// ones), so the graphs do not depend on op schemas or shape inference: op types are "Rand"
// (no schema), "RandInPlace" and, for views, "Identity" with `view` set.
//
//   graph::Graph g = RandomGraph(/*seed=*/7, RandomGraphOptions{.num_ops = 30});
//
// The same seed and options give the same graph.
#ifndef MEMONGER_TESTS_RANDOM_GRAPHS_H_
#define MEMONGER_TESTS_RANDOM_GRAPHS_H_

#include <cstdint>
#include <map>
#include <string>

#include "graph/graph.h"

namespace memonger::testing {

struct RandomGraphOptions {
  int num_ops = 20;
  int num_inputs = 2;     // non-static graph inputs
  int num_params = 2;     // static inputs (role param)
  int num_outputs = 2;    // graph outputs, besides the last op's first output
  int max_op_inputs = 3;  // data inputs per op (joins when > 1)
  int max_op_outputs = 3;
  double inplace_probability = 0.15;    // an op overwriting one of its inputs
  double multi_output_probability = 0.2;
  double param_input_probability = 0.3;
  double control_input_probability = 0.05;
  double view_probability = 0.0;        // an Identity op marked `view`
  double zero_bytes_probability = 0.02;
  int num_devices = 1;                  // > 1: ops spread over cpu, cuda:0, ...
  int64_t max_bytes = 1 << 16;          // byte sizes are log-uniform in [1, max_bytes]
};

graph::Graph RandomGraph(uint64_t seed, const RandomGraphOptions& options = {});

// A NASNet-like net: `cells` cells, each of `blocks` blocks. A block reads two inputs chosen
// among the two previous cells' outputs and the cell's earlier blocks, applies an op to each
// and joins them; a cell's output joins the blocks no other block read. Byte sizes are chosen
// per cell (log-uniform up to 64 KiB), and each block's two branch values differ, so that the
// order of the blocks decides the peak. Op types "Rand" as in RandomGraph.
graph::Graph NasNetLikeGraph(uint64_t seed, int cells = 4, int blocks = 5);

// Gives every value of `graph` the type uint8[bytes]: `bytes_by_name` by blob name, else
// `default_bytes`. An in-place output gets the type of the value it overwrites. For small
// hand-written nets whose op types have no schemas.
void AssignByteTypes(graph::Graph& graph, const std::map<std::string, int64_t>& bytes_by_name,
                     int64_t default_bytes);

}  // namespace memonger::testing

#endif  // MEMONGER_TESTS_RANDOM_GRAPHS_H_
