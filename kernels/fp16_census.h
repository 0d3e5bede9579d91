// The float16 census: what rounding to float16 lost, per value, counted while a net runs. Storing
// a value in float16 (graph/fp16_storage.h, --store-fp16) is not lossless: float16 keeps 5
// exponent bits where float32 and bfloat16 keep 8. The census wraps the Cast kernel of a table
// and, for every Cast to float16 from float32, bfloat16 or float64 that executes, counts the
// input's elements that
//   - overflowed: finite, but rounded to +-infinity (|x| >= 65520, the halfway point above
//     float16's largest finite 65504);
//   - flushed to zero: nonzero, but rounded to +-0 (0 < |x| <= 2^-25);
//   - became subnormal: rounded to a nonzero float16 subnormal (below 2^-14, 10 bits or fewer
//     of precision left).
// NaN and infinite inputs are in none of the three. The counts come from the same rounding
// as the Cast kernel (float16.h: to nearest, ties to even, through float32).
//
//   alloc::Fp16Census census(graph);
//   MG_RETURN_IF_ERROR(executor.Run(alloc::WithFp16Census(alloc::MakeCpuKernelTable(), &census)));
//   std::cout << census.ToText();
//   // fp16 census    'features': 3 of 4096 overflowed, 12 flushed to zero, 0 subnormal
//
// The census is an object the caller owns and passes in (no global state); the executor runs
// ops one at a time, so it needs no lock. A value cast more than once (several runs, or two
// Casts of one value) has its counts added.
#ifndef MEMONGER_KERNELS_FP16_CENSUS_H_
#define MEMONGER_KERNELS_FP16_CENSUS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "graph/dtype.h"
#include "graph/graph.h"
#include "kernels/kernel.h"

namespace memonger::alloc {

struct Fp16Counts {
  int64_t elements = 0;
  int64_t overflowed = 0;
  int64_t flushed_to_zero = 0;
  int64_t subnormal = 0;
};

// Counts for rounding `count` elements of type `from` (float32, bfloat16 or float64) at `data`
// to float16. Other types: all zeros but `elements`.
Fp16Counts CountFp16Rounding(graph::DataType from, const std::byte* data, int64_t count);

struct Fp16CensusEntry {
  graph::ValueId value = graph::kNone;  // the Cast's input
  std::string value_name;               // its display name
  graph::DataType from = graph::DataType::kFloat32;
  int casts = 0;                        // Casts of it executed
  Fp16Counts counts;
};

class Fp16Census {
 public:
  // REQUIRES: `graph` (the net the executor runs) outlives the census.
  explicit Fp16Census(const graph::Graph& graph) : graph_(&graph) {}

  // Adds the counts of one executed Cast of `value`.
  void Record(graph::ValueId value, graph::DataType from, const Fp16Counts& counts);

  // In the order the values were first cast.
  const std::vector<Fp16CensusEntry>& entries() const { return entries_; }

  // One line per value: "fp16 census    '<name>': O of N overflowed, Z flushed to zero, S
  // subnormal\n"; empty when no Cast to float16 ran.
  std::string ToText() const;

 private:
  const graph::Graph* graph_;
  std::vector<Fp16CensusEntry> entries_;
};

// `table` with its Cast kernel wrapped: Casts to float16 from float32, bfloat16 or float64 are
// counted into `census` (before the Cast runs, so an in-place Cast counts its input) when the
// wrapped kernel succeeds. Every other op, and every other Cast, runs unchanged. A table
// without a Cast kernel is returned as it is. REQUIRES: `census` outlives the table's use.
KernelTable WithFp16Census(KernelTable table, Fp16Census* census);

}  // namespace memonger::alloc

#endif  // MEMONGER_KERNELS_FP16_CENSUS_H_
