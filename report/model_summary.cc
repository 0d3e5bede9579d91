#include "report/model_summary.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/bytes.h"
#include "util/checked_math.h"
#include "util/status_macros.h"

namespace memonger {
namespace {

int64_t BytesOf(const graph::Value& v) { return *graph::ByteSize(*v.type, v.name); }

}  // namespace

absl::StatusOr<ModelSummary> SummarizeModel(const graph::Graph& graph, std::string model_name,
                                            int top_values) {
  ModelSummary s;
  s.model = std::move(model_name);
  s.num_ops = graph.num_ops();
  s.num_values = graph.num_values();
  for (const graph::Op& op : graph.ops()) ++s.ops_by_type[op.type];
  std::vector<std::pair<int64_t, graph::ValueId>> by_size;
  for (graph::ValueId id = 0; id < graph.num_values(); ++id) {
    const graph::Value& v = graph.value(id);
    if (!v.type.has_value()) {
      return absl::FailedPreconditionError(
          absl::StrCat("value '", v.DisplayName(), "' has no type: run shape inference first"));
    }
    MG_ASSIGN_OR_RETURN(int64_t bytes, graph::ValueByteSize(v));
    ++s.values_by_role[v.role];
    if (v.inplace_of != graph::kNone) continue;
    by_size.emplace_back(bytes, id);
    int64_t& role_total = s.bytes_by_role[v.role];
    int64_t& total = graph::IsStatic(v.role) ? s.static_bytes : s.naive_bytes;
    const auto new_role_total = util::CheckedAdd(role_total, bytes);
    const auto new_total = util::CheckedAdd(total, bytes);
    if (!new_role_total || !new_total) {
      return absl::InvalidArgumentError("the model's total bytes do not fit in 64 bits");
    }
    role_total = *new_role_total;
    total = *new_total;
  }
  // Only the largest `top_values` are ordered (O(n log top)): the order is total (ties by id), so
  // they are those a whole sort would list first. Sorting all 5M of a 4M-op net's values was
  // half of its report's 0.9 s.
  const int top = std::clamp<int>(top_values, 0, static_cast<int>(by_size.size()));
  std::partial_sort(by_size.begin(), by_size.begin() + top, by_size.end(),
                    [](const auto& a, const auto& b) {
                      return a.first != b.first ? a.first > b.first : a.second < b.second;
                    });
  for (int i = 0; i < top; ++i) {
    s.largest_values.push_back(by_size[i].second);
  }
  return s;
}

std::string SummaryToText(const graph::Graph& graph, const ModelSummary& s) {
  std::string out;
  absl::StrAppendFormat(&out, "model          %s\n", s.model);
  absl::StrAppendFormat(&out, "ops            %d\n", s.num_ops);
  absl::StrAppendFormat(&out, "values         %d\n", s.num_values);
  absl::StrAppendFormat(&out, "params bytes   %s (%d)\n", util::FormatBytes(s.static_bytes),
                        s.static_bytes);
  // Not "naive bytes": the plan's naive bytes below count each alias class once, aligned, and
  // one report showed two different figures under one name.
  absl::StrAppendFormat(&out,
                        "value bytes    %s (%d)  every non-static value's own bytes, unaligned\n",
                        util::FormatBytes(s.naive_bytes), s.naive_bytes);
  for (const auto& [role, bytes] : s.bytes_by_role) {
    absl::StrAppendFormat(&out, "  %-12s %s in %d values\n", graph::RoleName(role),
                          util::FormatBytes(bytes), s.values_by_role.at(role));
  }
  if (!s.largest_values.empty()) absl::StrAppend(&out, "largest values\n");
  for (graph::ValueId id : s.largest_values) {
    const graph::Value& v = graph.value(id);
    absl::StrAppendFormat(&out, "  %12s  %-10s %-28s %s\n", util::FormatBytes(BytesOf(v)),
                          graph::RoleName(v.role), graph::TensorTypeToString(*v.type),
                          v.DisplayName());
  }
  return out;
}

std::string SummaryToJson(const graph::Graph& graph, const ModelSummary& s) {
  nlohmann::ordered_json j;
  j["schema"] = "memonger.summary/v1";
  j["model"] = s.model;
  j["ops"] = s.num_ops;
  j["values"] = s.num_values;
  j["static_bytes"] = s.static_bytes;
  j["naive_bytes"] = s.naive_bytes;
  nlohmann::ordered_json roles = nlohmann::ordered_json::object();
  for (const auto& [role, count] : s.values_by_role) {
    const auto it = s.bytes_by_role.find(role);
    roles[std::string(graph::RoleName(role))] = {
        {"values", count}, {"bytes", it == s.bytes_by_role.end() ? 0 : it->second}};
  }
  j["roles"] = roles;
  nlohmann::ordered_json types = nlohmann::ordered_json::object();
  for (const auto& [type, count] : s.ops_by_type) types[type] = count;
  j["op_types"] = types;
  nlohmann::ordered_json largest = nlohmann::ordered_json::array();
  for (graph::ValueId id : s.largest_values) {
    const graph::Value& v = graph.value(id);
    largest.push_back({{"name", v.DisplayName()},
                       {"dtype", std::string(graph::DataTypeName(v.type->dtype))},
                       {"shape", v.type->dims},
                       {"bytes", BytesOf(v)},
                       {"role", std::string(graph::RoleName(v.role))}});
  }
  j["largest_values"] = largest;
  return j.dump(2) + "\n";
}

}  // namespace memonger
