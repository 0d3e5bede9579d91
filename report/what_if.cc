#include "report/what_if.h"

#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "graph/dtype.h"
#include "graph/tensor_type.h"
#include "memonger/verify_plan.h"
#include "util/status_macros.h"
#include "workloads/workload_attention.h"
#include "workloads/workloads.h"

namespace memonger {
namespace {

struct Axis {
  std::string key;
  std::vector<std::string> values;
};

// Decimal units, as the field quotes memory: "7.78 GB", "27.65 MB".
std::string Gb(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1e9) return absl::StrFormat("%.2f GB", b / 1e9);
  if (b >= 1e6) return absl::StrFormat("%.2f MB", b / 1e6);
  if (b >= 1e3) return absl::StrFormat("%.2f kB", b / 1e3);
  return absl::StrFormat("%d B", bytes);
}

// The attention sizes the field quotes, for the base spec (nothing when it is not attention).
std::string AttentionFacts(const graph::WorkloadSpec& base) {
  absl::StatusOr<graph::AttentionWorkload> w = graph::ParseAttentionWorkload(base);
  if (!w.ok()) return "";
  const int64_t L = w->tokens();
  const int64_t maps = w->batch * w->heads * L * L;  // B·H·L² elements
  std::string out = absl::StrFormat(
      "attention: L = %d tokens, %d heads; one [%d,%d,%d,%d] map = %s fp32, %s fp16/bf16\n", L,
      w->heads, w->batch, w->heads, L, L, Gb(4 * maps), Gb(2 * maps));
  if (w->alibi) {
    const int64_t row = w->bias_pad == 0 ? L : (L + w->bias_pad - 1) / w->bias_pad * w->bias_pad;
    const int64_t bias =
        (w->repeat ? w->batch : 1) * w->heads * L * row * graph::DataTypeSize(w->bias_dtype);
    absl::StrAppendFormat(&out, "bias as stored: [%d,%d,%d,%d] %s = %s, resident for all %d "
                                "blocks\n",
                          w->repeat ? w->batch : 1, w->heads, L, row,
                          graph::DataTypeName(w->bias_dtype), Gb(bias), w->depth);
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<WhatIfVariant>> ExpandVariants(
    const graph::WorkloadSpec& base, const std::vector<std::string>& explicit_variants,
    const std::vector<std::string>& compares) {
  std::vector<Axis> axes;
  for (const std::string& compare : compares) {
    const size_t eq = compare.find('=');
    Axis axis;
    axis.key = std::string(absl::StripAsciiWhitespace(compare.substr(0, eq)));
    if (eq != std::string::npos) {
      for (absl::string_view v : absl::StrSplit(compare.substr(eq + 1), ',')) {
        v = absl::StripAsciiWhitespace(v);
        if (!v.empty()) axis.values.emplace_back(v);
      }
    }
    if (axis.key.empty() || axis.values.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--compare '", compare, "': write KEY=V1,V2,... (e.g. kernel=math,efficient)"));
    }
    for (const Axis& other : axes) {
      if (other.key == axis.key) {
        return absl::InvalidArgumentError(
            absl::StrCat("--compare: key '", axis.key, "' is compared twice"));
      }
    }
    axes.push_back(std::move(axis));
  }
  std::vector<WhatIfVariant> variants;
  for (const std::string& text : explicit_variants) {
    // "k=v,k=v" parses as the parameters of a spec of any kind.
    absl::StatusOr<graph::WorkloadSpec> overrides =
        graph::ParseWorkloadSpec(absl::StrCat("variant:", text));
    if (!overrides.ok() || overrides->params.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--variant '", text, "': write KEY=VALUE,KEY=VALUE (e.g. kernel=efficient,bias_pad=8)",
          overrides.ok() ? "" : absl::StrCat(": ", overrides.status().message())));
    }
    WhatIfVariant v{"", base};
    for (const auto& [key, value] : overrides->params) {
      v.spec = graph::WithParam(std::move(v.spec), key, value);
      absl::StrAppend(&v.label, v.label.empty() ? "" : " ", key, "=", value);
    }
    variants.push_back(std::move(v));
  }
  if (variants.empty()) variants.push_back(WhatIfVariant{"", base});
  for (const Axis& axis : axes) {
    std::vector<WhatIfVariant> next;
    for (const WhatIfVariant& v : variants) {
      for (const std::string& value : axis.values) {
        WhatIfVariant w;
        w.label = absl::StrCat(v.label, v.label.empty() ? "" : " ", axis.key, "=", value);
        w.spec = graph::WithParam(v.spec, axis.key, value);
        next.push_back(std::move(w));
      }
    }
    variants = std::move(next);
  }
  if (axes.empty() && explicit_variants.empty()) variants[0].label = "as given";
  return variants;
}

absl::StatusOr<std::vector<WhatIfRow>> PlanVariants(const std::vector<WhatIfVariant>& variants,
                                                    const PlanOptions& options,
                                                    Optimizer optimizer) {
  std::vector<WhatIfRow> rows;
  for (const WhatIfVariant& v : variants) {
    auto with_label = [&](const absl::Status& s) {
      return absl::Status(s.code(), absl::StrCat("variant ", v.label, ": ", s.message()));
    };
    absl::StatusOr<graph::Graph> graph = graph::BuildWorkload(v.spec);
    if (!graph.ok()) return with_label(graph.status());
    PlanOptions variant_options = options;
    variant_options.model_name = graph::WorkloadSpecToString(v.spec);
    absl::StatusOr<Plan> plan = PlanMemory(*graph, variant_options);
    if (!plan.ok()) return with_label(plan.status());
    if (absl::Status s = VerifyPlan(*graph, *plan); !s.ok()) return with_label(s);
    WhatIfRow row;
    row.label = v.label;
    row.arena_bytes = plan->arena_bytes;
    row.lower_bound_bytes = plan->lower_bound_bytes;
    row.static_bytes = plan->static_bytes;
    const DeviceBytes device = DeviceBytesOf(*plan, optimizer);
    row.optimizer_state_bytes = device.optimizer_state;
    row.device_bytes = device.total();
    row.proven_optimal = plan->proven_optimal;
    if (!plan->steps.empty()) row.peak_op = graph->op(plan->steps[plan->peak_step].op).Label();
    for (graph::ValueId id : plan->peak_values) {
      if (row.peak_values.size() == 3) break;
      const graph::Value& value = graph->value(id);
      absl::StatusOr<int64_t> bytes = graph::ByteSize(*value.type, value.name);
      row.peak_values.push_back(
          WhatIfValue{value.DisplayName(), graph::TensorTypeToString(*value.type),
                      bytes.ok() ? *bytes : 0});
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string WhatIfToText(const graph::WorkloadSpec& base, const std::vector<WhatIfRow>& rows,
                         int64_t budget) {
  std::string out = absl::StrCat("what-if for ", graph::WorkloadSpecToString(base), "\n");
  absl::StrAppend(&out, AttentionFacts(base));
  const bool optimizer = std::any_of(rows.begin(), rows.end(), [](const WhatIfRow& r) {
    return r.optimizer_state_bytes > 0;
  });
  absl::StrAppend(&out, "device = arena + weights (static values)",
                  optimizer ? " + optimizer state" : "", "; GB = 10^9 bytes, MB = 10^6\n\n");
  size_t width = 7;
  for (const WhatIfRow& r : rows) width = std::max(width, r.label.size());
  absl::StrAppendFormat(&out, "%-*s  %10s  %10s  %10s", width, "variant", "device", "arena",
                        "weights");
  if (optimizer) absl::StrAppendFormat(&out, "  %10s", "optimizer");
  absl::StrAppendFormat(&out, "  %10s", "lower bnd");
  if (budget >= 0) absl::StrAppendFormat(&out, "  %16s", "vs budget");
  absl::StrAppend(&out, "  peak at\n");
  for (const WhatIfRow& r : rows) {
    absl::StrAppendFormat(&out, "%-*s  %10s  %10s  %10s", width, r.label, Gb(r.device_bytes),
                          Gb(r.arena_bytes), Gb(r.static_bytes));
    if (optimizer) absl::StrAppendFormat(&out, "  %10s", Gb(r.optimizer_state_bytes));
    absl::StrAppendFormat(&out, "  %10s", Gb(r.lower_bound_bytes));
    if (budget >= 0) {
      const int64_t diff = r.device_bytes - budget;
      absl::StrAppendFormat(&out, "  %16s",
                            diff > 0 ? absl::StrCat("over by ", Gb(diff))
                                     : absl::StrCat("fits, ", Gb(-diff), " free"));
    }
    absl::StrAppend(&out, "  ", r.peak_op, "\n");
  }
  absl::StrAppend(&out, "\nlargest values live at each variant's peak:\n");
  for (const WhatIfRow& r : rows) {
    std::vector<std::string> parts;
    for (const WhatIfValue& v : r.peak_values) {
      parts.push_back(absl::StrCat(v.name, " ", v.type, " ", Gb(v.bytes)));
    }
    absl::StrAppend(&out, "  ", r.label, ": ", absl::StrJoin(parts, "; "), "\n");
  }
  return out;
}

std::string WhatIfToJson(const graph::WorkloadSpec& base, const std::vector<WhatIfRow>& rows,
                         int64_t budget) {
  using Json = nlohmann::ordered_json;
  Json variants = Json::array();
  for (const WhatIfRow& row : rows) {
    Json peak_values = Json::array();
    for (const WhatIfValue& v : row.peak_values) {
      peak_values.push_back({{"name", v.name}, {"type", v.type}, {"bytes", v.bytes}});
    }
    Json r;
    r["variant"] = row.label;
    r["device_bytes"] = row.device_bytes;
    r["arena_bytes"] = row.arena_bytes;
    r["static_bytes"] = row.static_bytes;
    r["optimizer_state_bytes"] = row.optimizer_state_bytes;
    r["lower_bound_bytes"] = row.lower_bound_bytes;
    r["proven_optimal"] = row.proven_optimal;
    r["fits"] = budget >= 0 ? Json(row.device_bytes <= budget) : Json(nullptr);
    r["peak_op"] = row.peak_op;
    r["peak_values"] = std::move(peak_values);
    variants.push_back(std::move(r));
  }
  Json doc;
  doc["schema"] = "memonger.whatif/v1";
  doc["workload"] = graph::WorkloadSpecToString(base);
  doc["budget"] = budget >= 0 ? Json(budget) : Json(nullptr);
  doc["variants"] = std::move(variants);
  return doc.dump(1) + "\n";
}

}  // namespace memonger
