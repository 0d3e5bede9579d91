// The random workload: a seeded random DAG of real, typed ops (every op has a schema, a CPU
// kernel and a gradient rule), for planning at any scale and for property tests of the whole
// pipeline: it plans, exports with --net-out, loads back, runs with --execute host and trains.
//
//   optimize-net --workload random:ops=100000,seed=1
//   optimize-net --workload random:ops=60,batch=2,width=8,mode=training --execute host
//
// Keys (defaults): ops (1000: forward ops, the loss head included), seed (1), batch (32),
// width (256: a multiple of 4; activations are [batch, k * width / 4] with k in 1..16),
// branches (4: how many paths run side by side), skip (10: percent of steps that join a path
// with an earlier value), reach (1000: how many path values back a skip may reach), inplace
// (30: percent of eligible ops written in place), dead (5: percent of steps that compute a
// value nobody reads), dtype (fp32 | fp16 | bf16), mode (inference | training).
//
// Algorithm. A list of path heads starts as the input `data` [batch, width]. Each step applies
// one motif to uniformly chosen heads, in this order of chances:
//   fork   (heads < branches) Split a head along its width into 2-3 heads, or fan out: the
//          same value becomes a second head (one value, several readers);
//   join   (heads > branches; rarely otherwise) two heads into one: Add or Sum (equal widths),
//          Concat (the sum fits in 16 units), else FC of one to the other's width, then Add;
//   skip   (skip%) a head joined as above with an earlier path value (one of the last
//          `reach`), of the head's width when there is one: the distance back is log-uniform,
//          so mostly recent and sometimes far (long-lived values);
//   dead   (dead%) Relu/Sigmoid/Tanh/Gelu of a recent path value, never read again;
//   layer  otherwise: FC (new width), MatMul then bias Add, Relu/Sigmoid/Tanh/Gelu,
//          LayerNormalization (with its Mean and InvStdDev outputs: read only by the backward
//          pass, dead in inference), Softmax, Mul by a constant, a grouped Softmax between two
//          Reshape views [batch, w] <-> [batch, t, d], or a parameter-free attention mixer
//          (Reshape view, Transpose, MatMul scores [batch, t, t], Softmax, MatMul, Reshape).
// New widths are k units (k from {1, 2, 3, 4, 6, 8, 12, 16}, 4 most often), so values of equal
// width recur and joins find partners. In place (Caffe2-style, output name = input name):
// Relu/Sigmoid/Tanh, the bias Add, Mul by a constant, Add and Sum over their first input, each
// with probability inplace% and only where training stays exact and no other path is changed:
// never over the graph input, a view or the input of a view, a value another path also heads
// (fan-out), an output whose gradient rule reads it (Relu, Sigmoid, Tanh, Softmax), or a value
// that FC, MatMul, Gelu or LayerNormalization has read (their rules read that version in the
// backward pass). LayerNormalization needs 4 features and Softmax 2 (normalising 2 gives +-1
// whatever the input: no gradient would pass); narrower heads get an activation instead, as
// do motifs whose ops do not fit in what is left, so the net has exactly `ops` forward ops. The
// last two are the head
//   output = Concat(remaining heads, axis 1); loss = AveragedLoss(output)
// so every value that is not dead reaches the declared loss. Reshape ops are marked `view`
// (they alias their input under --views). Weights and biases are params, Mul's factors
// constants. mode=training appends the backward ops (graph/gradient_builder.h).
//
// Deterministic: one util::SplitMix64 seeded with `seed` and integer arithmetic only, so a
// spec gives the same net on every platform. `inplace`, `batch`, `dtype` and `mode` do not
// change the random draws, so specs that differ only in them have the same ops (in place or
// not): `--compare inplace=0,100` measures in-place writes alone.
//
// Complexity: O(ops (log ops + branches)) to generate (a skip finds its reach by binary
// search; an in-place check and a join look through the at most branches + 2 heads), then the
// graph build and shape inference, O(ops + values).
#ifndef MEMONGER_WORKLOADS_WORKLOAD_RANDOM_H_
#define MEMONGER_WORKLOADS_WORKLOAD_RANDOM_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "graph/dtype.h"
#include "graph/graph.h"
#include "workloads/workload_spec.h"

namespace memonger::graph {

struct RandomWorkload {
  int64_t ops = 1000;
  uint64_t seed = 1;
  int64_t batch = 32;
  int64_t width = 256;
  int64_t branches = 4;
  int64_t skip = 10;     // percent
  int64_t reach = 1000;  // path values a skip (or a dead op) may reach back
  int64_t inplace = 30;  // percent
  int64_t dead = 5;      // percent
  DataType dtype = DataType::kFloat32;
  bool training = false;
};

// The most forward ops a spec may ask for: 2^22 (about 2.9 GB to plan), and 2^20 with
// mode=training, whose backward pass triples the net.
inline constexpr int64_t kMaxRandomOps = int64_t{1} << 22;
inline constexpr int64_t kMaxRandomTrainingOps = int64_t{1} << 20;

// InvalidArgument for unknown keys, values out of range (ops in 3..kMaxRandomOps, or
// kMaxRandomTrainingOps with mode=training; seed >= 0; batch, branches, reach >= 1; width a
// multiple of 4 from 4; skip, inplace, dead in 0..100) or unknown choices.
absl::StatusOr<RandomWorkload> ParseRandomWorkload(const WorkloadSpec& spec);

// The net, typed (shape inference done); with its backward ops when `training`.
absl::StatusOr<Graph> BuildRandomGraph(const RandomWorkload& workload);

}  // namespace memonger::graph

#endif  // MEMONGER_WORKLOADS_WORKLOAD_RANDOM_H_
