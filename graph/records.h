// Raw planning problems without a graph: usage records (schema memonger.records/v1, JSON) and
// MiniMalloc's CSV. Each record is one buffer with a byte size and a lifetime; it becomes one
// value of a synthetic graph so that every planner and the verifier treat it like a model.
//
//   {"schema": "memonger.records/v1",
//    "records": [{"name": "t0", "bytes": 7, "first_step": 0, "last_step": 1}, ...]}
//   (first_step and last_step inclusive; optional "alignment" and "offset"; a record without
//   "name" is named "r<its index>")
//
//   id,lower,upper,size[,alignment,gaps,offset]      (MiniMalloc; upper exclusive)
//
// The synthetic graph has one op (type "Step") per distinct lifetime boundary: the steps are
// compressed to the sorted distinct values of first_step and last_step, which keeps every
// overlap (and so the lower bound) of the original problem while bounding the op count by twice
// the record count. Record r is produced by the op of its first step and read by the op of its
// last step; its type is uint8[bytes]. Steps are times, not ops to reorder: plan such graphs
// with the given order. GraphFromRecords assembles this graph directly (there are no names to
// resolve), the graph GraphBuilder would build from the step ops, in O(n log n).
#ifndef MEMONGER_GRAPH_RECORDS_H_
#define MEMONGER_GRAPH_RECORDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "util/limits.h"

namespace memonger::graph {

struct UsageRecord {
  std::string name;
  int64_t bytes = 0;
  int64_t first_step = 0;  // inclusive
  int64_t last_step = 0;   // inclusive
  int64_t alignment = 0;   // 0: the plan's default
  int64_t offset = -1;     // an offset recorded in the file, -1 if none
};

// InvalidArgument naming the file and the record (by index and name) for malformed input:
// not JSON, a wrong schema, missing or non-integer fields, negative bytes or steps,
// last_step < first_step (upper <= lower in CSV), numbers that do not fit, duplicate names,
// alignment not a power of two up to 2^30, a negative offset, a JSON key given twice in one
// object, text over limits.max_input_bytes, JSON nested deeper than limits.max_nesting_depth,
// more than util::kMaxValues records. CSV follows RFC 4180
// (util/csv.h): names round-trip whatever characters they hold.
absl::StatusOr<std::vector<UsageRecord>> ParseRecordsJson(const std::string& text,
                                                          const std::string& source_name,
                                                          const util::InputLimits& limits = {});
absl::StatusOr<std::vector<UsageRecord>> ParseMiniMallocCsv(const std::string& text,
                                                            const std::string& source_name,
                                                            const util::InputLimits& limits = {});

// InvalidArgument naming `name` and the record for records the parsers would refuse (an
// empty name, negative bytes, a step out of range or ending before it starts, a bad alignment,
// a name used twice), none at all, or more than util::kMaxValues.
absl::StatusOr<Graph> GraphFromRecords(const std::vector<UsageRecord>& records,
                                       const std::string& name);

// The operation type of the synthetic step ops, and their int attribute holding the step's
// time in the records (the records' own first_step / last_step values).
inline constexpr char kRecordStepOpType[] = "Step";
inline constexpr char kRecordStepTimeAttr[] = "time";

// The records' times of the ops in `order` (a schedule of `graph`), when every op is a step op of
// GraphFromRecords and the times increase along the order; otherwise empty. Planners use them
// as OffsetProblem::step_times: how long a record lives in its own time unit, which the steps
// (compressed to distinct boundaries) no longer show.
std::vector<int64_t> RecordStepTimes(const Graph& graph, const std::vector<OpId>& order);

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_RECORDS_H_
