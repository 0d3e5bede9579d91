#include "workloads/workload_spec.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "util/limits.h"
#include "util/status_macros.h"

namespace memonger::graph {

namespace {

struct KindKeys {
  absl::string_view kind;
  std::vector<std::string> keys;     // in the order messages list them
  std::vector<std::string> choices;  // the keys that take a word, not a size
};

const KindKeys* FindKind(absl::string_view kind) {
  static const std::vector<KindKeys>* const kKinds = new std::vector<KindKeys>{
      {"attention",
       {"n", "cls", "batch", "dim", "heads", "depth", "mlp", "dtype", "kernel", "bias",
        "bias_dtype", "bias_pad", "broadcast", "mode"},
       {"dtype", "kernel", "bias", "bias_dtype", "broadcast", "mode"}},
      {"guillotine", {"records", "seed", "steps", "height", "unit"}, {}},
      {"mlp", {"layers", "batch", "dim", "classes", "mode"}, {"mode"}},
      {"random",
       {"ops", "seed", "batch", "width", "branches", "skip", "reach", "inplace", "dead", "dtype",
        "mode"},
       {"dtype", "mode"}},
      {"randwire",
       {"nodes", "k", "p", "stages", "seed", "batch", "width", "dtype", "mode"},
       {"dtype", "mode"}},
      {"resnet50", {"batch", "image", "classes", "mode"}, {"mode"}},
  };
  for (const KindKeys& k : *kKinds) {
    if (k.kind == kind) return &k;
  }
  return nullptr;
}

bool Contains(const std::vector<std::string>& list, absl::string_view key) {
  return std::find(list.begin(), list.end(), key) != list.end();
}

}  // namespace

const std::vector<std::string>& WorkloadKeys(absl::string_view kind) {
  static const std::vector<std::string>* const kNone = new std::vector<std::string>();
  const KindKeys* k = FindKind(kind);
  return k != nullptr ? k->keys : *kNone;
}

bool IsWorkloadSizeKey(absl::string_view kind, absl::string_view key) {
  const KindKeys* k = FindKind(kind);
  return k != nullptr && Contains(k->keys, key) && !Contains(k->choices, key);
}

absl::Status CheckWorkloadKey(const WorkloadSpec& spec, absl::string_view key) {
  const KindKeys* k = FindKind(spec.kind);
  if (k == nullptr || IsWorkloadSizeKey(spec.kind, key)) return absl::OkStatus();
  std::vector<std::string> sizes;
  for (const std::string& s : k->keys) {
    if (!Contains(k->choices, s)) sizes.push_back(s);
  }
  if (Contains(k->choices, key)) {
    return absl::InvalidArgumentError(absl::StrCat(spec.kind, " workload: '", util::Quote(key),
                                                   "' is a choice, not a size (sizes: ",
                                                   absl::StrJoin(sizes, ", "), ")"));
  }
  return absl::InvalidArgumentError(absl::StrCat(spec.kind, " workload: no key '",
                                                 util::Quote(key), "' (known: ",
                                                 absl::StrJoin(k->keys, ", "), ")"));
}

absl::StatusOr<WorkloadSpec> ParseWorkloadSpec(absl::string_view text) {
  const absl::string_view stripped = absl::StripAsciiWhitespace(text);
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("workload '", stripped, "': ", why));
  };
  WorkloadSpec spec;
  const size_t colon = stripped.find(':');
  spec.kind = std::string(absl::StripAsciiWhitespace(stripped.substr(0, colon)));
  if (spec.kind.empty()) return bad("no workload kind before ':' (e.g. attention:n=5000)");
  if (colon == absl::string_view::npos) return spec;
  for (absl::string_view part : absl::StrSplit(stripped.substr(colon + 1), ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) continue;  // "attention:" or a trailing comma
    const size_t eq = part.find('=');
    if (eq == absl::string_view::npos) {
      return bad(absl::StrCat("parameter '", part, "' has no '=' (write key=value)"));
    }
    std::string key(absl::StripAsciiWhitespace(part.substr(0, eq)));
    std::string value(absl::StripAsciiWhitespace(part.substr(eq + 1)));
    if (key.empty() || value.empty()) {
      return bad(absl::StrCat("parameter '", part, "' needs a key and a value"));
    }
    for (const auto& [k, v] : spec.params) {
      if (k == key) return bad(absl::StrCat("key '", key, "' is given twice"));
    }
    spec.params.emplace_back(std::move(key), std::move(value));
  }
  return spec;
}

std::string WorkloadSpecToString(const WorkloadSpec& spec) {
  std::vector<std::string> parts;
  parts.reserve(spec.params.size());
  for (const auto& [key, value] : spec.params) parts.push_back(absl::StrCat(key, "=", value));
  return absl::StrCat(spec.kind, ":", absl::StrJoin(parts, ","));
}

WorkloadSpec WithParam(WorkloadSpec spec, absl::string_view key, absl::string_view value) {
  for (auto& [k, v] : spec.params) {
    if (k == key) {
      v = std::string(value);
      return spec;
    }
  }
  spec.params.emplace_back(std::string(key), std::string(value));
  return spec;
}

WorkloadParams::WorkloadParams(const WorkloadSpec& spec, std::vector<std::string> known)
    : spec_(spec), known_(std::move(known)) {}

const std::string* WorkloadParams::Find(absl::string_view key) const {
  for (const auto& [k, v] : spec_.params) {
    if (k == key) return &v;
  }
  return nullptr;
}

bool WorkloadParams::Has(absl::string_view key) const { return Find(key) != nullptr; }

absl::StatusOr<int64_t> WorkloadParams::Int(absl::string_view key, int64_t fallback,
                                            int64_t min, int64_t max) {
  const std::string* text = Find(key);
  if (text == nullptr) return fallback;
  int64_t value = 0;
  if (!absl::SimpleAtoi(*text, &value)) {
    return absl::InvalidArgumentError(absl::StrCat(spec_.kind, " workload: ", key, "=", *text,
                                                   " is not an integer"));
  }
  if (value < min || value > max) {
    return absl::InvalidArgumentError(absl::StrCat(
        spec_.kind, " workload: ", key, "=", value, " is out of range (", min, " to ",
        max == INT64_MAX ? std::string("any") : absl::StrCat(max), ")"));
  }
  return value;
}

absl::StatusOr<std::string> WorkloadParams::Choice(absl::string_view key,
                                                   absl::string_view fallback,
                                                   const std::vector<std::string>& choices) {
  const std::string* text = Find(key);
  if (text == nullptr) return std::string(fallback);
  if (std::find(choices.begin(), choices.end(), *text) == choices.end()) {
    return absl::InvalidArgumentError(absl::StrCat(spec_.kind, " workload: ", key, "=", *text,
                                                   " is not one of ",
                                                   absl::StrJoin(choices, ", ")));
  }
  return *text;
}

absl::StatusOr<DataType> WorkloadParams::FloatType(absl::string_view key,
                                                   absl::string_view fallback) {
  MG_ASSIGN_OR_RETURN(std::string name, Choice(key, fallback, {"fp32", "fp16", "bf16"}));
  return ParseDataType(name);
}

absl::StatusOr<bool> WorkloadParams::Training() {
  MG_ASSIGN_OR_RETURN(std::string mode, Choice("mode", "inference", {"inference", "training"}));
  return mode == "training";
}

absl::Status WorkloadParams::Finish() const {
  for (const auto& [key, value] : spec_.params) {
    if (std::find(known_.begin(), known_.end(), key) == known_.end()) {
      return absl::InvalidArgumentError(absl::StrCat(spec_.kind, " workload: unknown key '", key,
                                                     "' (known: ", absl::StrJoin(known_, ", "),
                                                     ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace memonger::graph
