// What a model holds before any planning: op and value counts, bytes by role, the naive
// activation footprint (every non-static value in its own memory), and the largest values.
// `optimize-net MODEL` prints this.
#ifndef MEMONGER_REPORT_MODEL_SUMMARY_H_
#define MEMONGER_REPORT_MODEL_SUMMARY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace memonger {

struct ModelSummary {
  std::string model;
  int num_ops = 0;
  int num_values = 0;
  // Params and constants (not placed in the arena unless asked).
  int64_t static_bytes = 0;
  // Sum of the bytes of every non-static value, each in memory of its own. An in-place output
  // occupies its input's memory and is not counted again.
  int64_t naive_bytes = 0;
  std::map<graph::Role, int64_t> bytes_by_role;  // in-place outputs excluded
  std::map<graph::Role, int> values_by_role;
  std::map<std::string, int> ops_by_type;
  std::vector<graph::ValueId> largest_values;  // by bytes, descending; ties by id
};

// REQUIRES: every value typed (InferShapes done). InvalidArgument when one is not or a size
// overflows.
absl::StatusOr<ModelSummary> SummarizeModel(const graph::Graph& graph, std::string model_name,
                                            int top_values = 10);

// A few lines for people.
std::string SummaryToText(const graph::Graph& graph, const ModelSummary& summary);
// The same as a JSON document (schema "memonger.summary/v1").
std::string SummaryToJson(const graph::Graph& graph, const ModelSummary& summary);

}  // namespace memonger

#endif  // MEMONGER_REPORT_MODEL_SUMMARY_H_
