// Workload specs: "kind:key=value,key=value,...", the argument of `optimize-net --workload`.
//
//   MG_ASSIGN_OR_RETURN(WorkloadSpec spec, ParseWorkloadSpec("attention:n=18000,kernel=math"));
//   WorkloadParams params(spec, WorkloadKeys("attention"));  // the keys the workload knows
//   MG_ASSIGN_OR_RETURN(int64_t n, params.Int("n", 18000, /*min=*/1));
//   MG_RETURN_IF_ERROR(params.Finish());                    // InvalidArgument on unknown keys
//
// Keys are case-sensitive and may appear once; values are kept as text until a workload reads
// them, so each workload decides its keys, defaults and ranges (workloads/workloads.h).
#ifndef MEMONGER_WORKLOADS_WORKLOAD_SPEC_H_
#define MEMONGER_WORKLOADS_WORKLOAD_SPEC_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/dtype.h"

namespace memonger::graph {

struct WorkloadSpec {
  std::string kind;                                         // "attention", "mlp", ...
  std::vector<std::pair<std::string, std::string>> params;  // in the order written
};

// InvalidArgument for an empty kind, a parameter without '=', an empty key or value, or a key
// given twice (each message quotes the spec).
absl::StatusOr<WorkloadSpec> ParseWorkloadSpec(absl::string_view text);

// "kind:key=value,..." (parameters in their order).
std::string WorkloadSpecToString(const WorkloadSpec& spec);

// The spec with `key` set to `value` (replaced in place when present, else appended).
WorkloadSpec WithParam(WorkloadSpec spec, absl::string_view key, absl::string_view value);

// The keys each workload kind accepts, in the order its messages list them (one table, read by
// the kinds' parsers and by --fit's check); empty for an unknown kind.
const std::vector<std::string>& WorkloadKeys(absl::string_view kind);

// True when `key` is one of the kind's keys and takes a size (an integer), not a word (mode,
// dtype, kernel, ...).
bool IsWorkloadSizeKey(absl::string_view kind, absl::string_view key);

// InvalidArgument unless `key` is one of the spec's kind's size keys (`--fit KEY` with a
// workload): "attention workload: no key 'zz' (known: n, cls, ...)", "attention workload: 'mode'
// is a choice, not a size (sizes: n, cls, ...)", the key quoted (util::Quote). OK for an unknown
// kind, whose own error comes when it is built.
absl::Status CheckWorkloadKey(const WorkloadSpec& spec, absl::string_view key);

// Typed reads of a spec's parameters. Every read names the workload and key in its errors.
class WorkloadParams {
 public:
  // `known`: every key the workload accepts (listed in the unknown-key message).
  WorkloadParams(const WorkloadSpec& spec, std::vector<std::string> known);

  // An integer in [min, max], or `fallback` when the key is absent.
  absl::StatusOr<int64_t> Int(absl::string_view key, int64_t fallback, int64_t min,
                              int64_t max = INT64_MAX);
  // One of `choices`, or `fallback` when absent.
  absl::StatusOr<std::string> Choice(absl::string_view key, absl::string_view fallback,
                                     const std::vector<std::string>& choices);
  // A floating-point element type: fp32, fp16 or bf16 (`fallback` when absent).
  absl::StatusOr<DataType> FloatType(absl::string_view key, absl::string_view fallback);
  // The `mode` key: true for training, false for inference (the default).
  absl::StatusOr<bool> Training();
  // True when the key was given.
  bool Has(absl::string_view key) const;

  // InvalidArgument naming the first key that is not in `known`.
  absl::Status Finish() const;

 private:
  const std::string* Find(absl::string_view key) const;

  const WorkloadSpec& spec_;
  std::vector<std::string> known_;
};

}  // namespace memonger::graph

#endif  // MEMONGER_WORKLOADS_WORKLOAD_SPEC_H_
