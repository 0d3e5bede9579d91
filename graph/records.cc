#include "graph/records.h"

#include <algorithm>
#include <optional>

#include <nlohmann/json.hpp>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "util/csv.h"
#include "util/limits.h"
#include "util/status_macros.h"

namespace memonger::graph {
namespace {

// Steps beyond this are surely a mistake (and would not fit the int step indices downstream).
constexpr int64_t kMaxStep = int64_t{1} << 50;

absl::Status CheckRecord(const UsageRecord& r, size_t index, const std::string& source_name,
                         absl::flat_hash_set<std::string>& names) {
  const std::string where =
      absl::StrCat(source_name, ": record ", index, " ('", util::Quote(r.name), "')");
  if (r.name.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": empty name"));
  if (r.bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": negative size ", r.bytes));
  }
  if (r.first_step < 0 || r.first_step > kMaxStep || r.last_step > kMaxStep) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": step ", r.first_step < 0 ? r.first_step : r.last_step,
                     " is out of range [0, 2^50]"));
  }
  if (r.last_step < r.first_step) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ends (step ", r.last_step,
                                                   ") before it starts (step ", r.first_step,
                                                   ")"));
  }
  if (r.alignment != 0) {  // 0: the plan's alignment
    if (absl::Status s = util::CheckAlignment(r.alignment, "alignment"); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", s.message()));
    }
  }
  if (!names.insert(r.name).second) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": the name is used twice"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> JsonInt(const nlohmann::json& record, const char* field, bool required,
                                int64_t fallback, const std::string& where) {
  auto it = record.find(field);
  if (it == record.end()) {
    if (!required) return fallback;
    return absl::InvalidArgumentError(absl::StrCat(where, ": missing \"", field, "\""));
  }
  if (it->is_number_unsigned()) {
    const uint64_t v = it->get<uint64_t>();
    if (v > static_cast<uint64_t>(INT64_MAX)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": \"", field, "\" = ", v, " does not fit in 64 bits"));
    }
    return static_cast<int64_t>(v);
  }
  if (it->is_number_integer()) return it->get<int64_t>();
  return absl::InvalidArgumentError(absl::StrCat(where, ": \"", field, "\" must be an integer, not ",
                                                 util::Quote(it->dump())));
}

}  // namespace

absl::StatusOr<std::vector<UsageRecord>> ParseRecordsJson(const std::string& text,
                                                          const std::string& source_name,
                                                          const util::InputLimits& limits) {
  MG_RETURN_IF_ERROR(util::CheckInputSize(static_cast<int64_t>(text.size()), limits, source_name));
  if (absl::Status s = util::CheckJsonNesting(text, limits.max_nesting_depth); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": ", s.message()));
  }
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": not valid JSON"));
  }
  if (!doc.is_object() || !doc.contains("schema") || doc["schema"] != "memonger.records/v1") {
    return absl::InvalidArgumentError(absl::StrCat(
        source_name, ": not a usage-record file (expected \"schema\": \"memonger.records/v1\")"));
  }
  if (!doc.contains("records") || !doc["records"].is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": \"records\" must be an array"));
  }
  std::vector<UsageRecord> records;
  absl::flat_hash_set<std::string> names;
  const nlohmann::json& list = doc["records"];
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& r = list[i];
    const std::string where = absl::StrCat(source_name, ": record ", i);
    if (!r.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": not an object"));
    UsageRecord record;
    if (auto it = r.find("name"); it != r.end()) {
      if (!it->is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": \"name\" must be a string"));
      }
      record.name = it->get<std::string>();
    } else {
      record.name = absl::StrCat("r", i);
    }
    MG_ASSIGN_OR_RETURN(record.bytes, JsonInt(r, "bytes", true, 0, where));
    MG_ASSIGN_OR_RETURN(record.first_step, JsonInt(r, "first_step", true, 0, where));
    MG_ASSIGN_OR_RETURN(record.last_step, JsonInt(r, "last_step", true, 0, where));
    MG_ASSIGN_OR_RETURN(record.alignment, JsonInt(r, "alignment", false, 0, where));
    MG_ASSIGN_OR_RETURN(record.offset, JsonInt(r, "offset", false, -1, where));
    MG_RETURN_IF_ERROR(CheckRecord(record, i, source_name, names));
    records.push_back(std::move(record));
    if (static_cast<int64_t>(records.size()) > util::kMaxValues) {
      return absl::InvalidArgumentError(absl::StrCat(
          source_name, ": more than ", util::kMaxValues, " records, the limit on values"));
    }
  }
  if (records.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": no records"));
  }
  return records;
}

absl::StatusOr<std::vector<UsageRecord>> ParseMiniMallocCsv(const std::string& text,
                                                            const std::string& source_name,
                                                            const util::InputLimits& limits) {
  MG_RETURN_IF_ERROR(util::CheckInputSize(static_cast<int64_t>(text.size()), limits, source_name));
  std::vector<UsageRecord> records;
  absl::flat_hash_set<std::string> names;
  std::vector<std::string> header;
  util::CsvReader reader(text);
  std::vector<std::string> cells;
  while (reader.Next(cells)) {
    const std::string where = absl::StrCat(source_name, ": line ", reader.line());
    if (header.empty()) {
      header = cells;
      for (std::string& h : header) h = absl::AsciiStrToLower(h);
      for (const char* need : {"id", "lower", "upper", "size"}) {
        if (std::find(header.begin(), header.end(), need) == header.end()) {
          return absl::InvalidArgumentError(absl::StrCat(
              where, ": the header lacks column '", need,
              "' (expected id,lower,upper,size[,alignment,gaps,offset])"));
        }
      }
      for (size_t c = 0; c < header.size(); ++c) {
        static constexpr const char* kKnown[] = {"id",        "lower", "upper", "size",
                                                 "alignment", "gaps",  "offset"};
        if (std::find(std::begin(kKnown), std::end(kKnown), header[c]) == std::end(kKnown)) {
          return absl::InvalidArgumentError(absl::StrCat(
              where, ": unknown column '", util::Quote(header[c]),
              "' (expected id,lower,upper,size[,alignment,gaps,offset])"));
        }
        if (std::find(header.begin(), header.begin() + c, header[c]) != header.begin() + c) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": the column '", header[c], "' appears twice"));
        }
      }
      continue;
    }
    if (cells.size() != header.size()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", cells.size(),
                                                     " cells, the header has ", header.size()));
    }
    UsageRecord record;
    int64_t lower = 0;
    int64_t upper = 0;
    for (size_t c = 0; c < cells.size(); ++c) {
      const std::string& column = header[c];
      if (column == "id") {
        record.name = cells[c];
        continue;
      }
      if (column == "gaps") continue;  // MiniMalloc's gaps are not modelled; see docs
      int64_t value = 0;
      if (!absl::SimpleAtoi(cells[c], &value)) {
        if (column == "offset" && cells[c].empty()) continue;
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": ", column, " '", util::Quote(cells[c]),
            "' is not an integer that fits in 64 bits"));
      }
      if (column == "lower") lower = value;
      else if (column == "upper") upper = value;
      else if (column == "size") record.bytes = value;
      else if (column == "alignment") record.alignment = value;
      else if (column == "offset") record.offset = value;
    }
    if (upper <= lower) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": record '", util::Quote(record.name),
                                                     "' has upper ", upper, " <= lower ", lower,
                                                     " (upper is exclusive)"));
    }
    record.first_step = lower;
    record.last_step = upper - 1;
    MG_RETURN_IF_ERROR(CheckRecord(record, records.size(), source_name, names));
    records.push_back(std::move(record));
    if (static_cast<int64_t>(records.size()) > util::kMaxValues) {
      return absl::InvalidArgumentError(absl::StrCat(
          source_name, ": more than ", util::kMaxValues, " records, the limit on values"));
    }
  }
  if (!reader.status().ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ": ", reader.status().message()));
  }
  if (records.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": no records"));
  }
  return records;
}

absl::StatusOr<Graph> GraphFromRecords(const std::vector<UsageRecord>& records,
                                       const std::string& name) {
  std::vector<int64_t> boundaries;
  boundaries.reserve(records.size() * 2);
  for (const UsageRecord& r : records) {
    boundaries.push_back(r.first_step);
    boundaries.push_back(r.last_step);
  }
  std::sort(boundaries.begin(), boundaries.end());
  boundaries.erase(std::unique(boundaries.begin(), boundaries.end()), boundaries.end());
  auto step_of = [&](int64_t s) {
    return static_cast<size_t>(std::lower_bound(boundaries.begin(), boundaries.end(), s) -
                               boundaries.begin());
  };

  std::vector<OpSpec> ops(boundaries.size());
  for (size_t k = 0; k < ops.size(); ++k) {
    ops[k].type = kRecordStepOpType;
    ops[k].name = absl::StrCat("step_", boundaries[k]);
    ops[k].attrs.push_back(Attribute{std::string(kRecordStepTimeAttr), boundaries[k]});
  }
  GraphBuilder builder(name);
  for (const UsageRecord& r : records) {
    ops[step_of(r.first_step)].outputs.push_back(r.name);
    if (r.last_step > r.first_step) ops[step_of(r.last_step)].inputs.push_back(r.name);
    Declaration d;
    d.dtype = DataType::kUInt8;
    d.dims = std::vector<DeclaredDim>{{r.bytes, ""}};
    builder.Declare(r.name, std::move(d), r.alignment);
  }
  for (OpSpec& op : ops) builder.AddOp(std::move(op));
  return std::move(builder).Build();
}

std::vector<int64_t> RecordStepTimes(const Graph& graph, const std::vector<OpId>& order) {
  std::vector<int64_t> times;
  times.reserve(order.size());
  for (OpId id : order) {
    const Op& op = graph.op(id);
    const std::optional<int64_t> time =
        op.type == kRecordStepOpType ? op.attributes().GetInt(kRecordStepTimeAttr) : std::nullopt;
    if (!time.has_value() || (!times.empty() && *time <= times.back())) return {};
    times.push_back(*time);
  }
  return times;
}

}  // namespace memonger::graph
