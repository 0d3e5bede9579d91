#include "graph/records.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include <nlohmann/json.hpp>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "util/csv.h"
#include "util/json.h"
#include "util/limits.h"
#include "util/status_macros.h"

namespace memonger::graph {
namespace {

// Steps beyond this are surely a mistake (and would not fit the int step indices downstream).
constexpr int64_t kMaxStep = int64_t{1} << 50;

// Every field of one record; names are checked for repeats by the caller. The message is built
// only for an error (a million records each formatting it were a tenth of loading them).
absl::Status CheckRecord(const UsageRecord& r, size_t index, const std::string& source_name) {
  auto error = [&](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ": record ", index, " ('", util::Quote(r.name), "'): ", what));
  };
  if (r.name.empty()) return error("empty name");
  if (r.bytes < 0) return error(absl::StrCat("negative size ", r.bytes));
  if (r.first_step < 0 || r.first_step > kMaxStep || r.last_step > kMaxStep) {
    return error(absl::StrCat("step ", r.first_step < 0 ? r.first_step : r.last_step,
                              " is out of range [0, 2^50]"));
  }
  if (r.last_step < r.first_step) {
    return error(absl::StrCat("ends (step ", r.last_step, ") before it starts (step ",
                              r.first_step, ")"));
  }
  if (r.alignment != 0) {  // 0: the plan's alignment
    if (absl::Status s = util::CheckAlignment(r.alignment, "alignment"); !s.ok()) {
      return error(s.message());
    }
  }
  return absl::OkStatus();
}

// InvalidArgument naming the first record whose name an earlier one has.
absl::Status CheckNamesUnique(const std::vector<UsageRecord>& records,
                              const std::string& source_name) {
  absl::flat_hash_set<absl::string_view> names;
  names.reserve(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    if (!names.insert(records[i].name).second) {
      return absl::InvalidArgumentError(absl::StrCat(source_name, ": record ", i, " ('",
                                                     util::Quote(records[i].name),
                                                     "'): the name is used twice"));
    }
  }
  return absl::OkStatus();
}

// `where` names the record, for an error only.
template <typename Where>
absl::StatusOr<int64_t> JsonInt(const nlohmann::json& record, const char* field, bool required,
                                int64_t fallback, const Where& where) {
  auto it = record.find(field);
  if (it == record.end()) {
    if (!required) return fallback;
    return absl::InvalidArgumentError(absl::StrCat(where(), ": missing \"", field, "\""));
  }
  if (it->is_number_unsigned()) {
    const uint64_t v = it->get<uint64_t>();
    if (v > static_cast<uint64_t>(INT64_MAX)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(), ": \"", field, "\" = ", v, " does not fit in 64 bits"));
    }
    return static_cast<int64_t>(v);
  }
  if (it->is_number_integer()) return it->get<int64_t>();
  return absl::InvalidArgumentError(absl::StrCat(where(), ": \"", field, "\" must be an integer, not ",
                                                 util::Quote(it->dump())));
}

}  // namespace

absl::StatusOr<std::vector<UsageRecord>> ParseRecordsJson(const std::string& text,
                                                          const std::string& source_name,
                                                          const util::InputLimits& limits) {
  MG_RETURN_IF_ERROR(util::CheckInputSize(static_cast<int64_t>(text.size()), limits, source_name));
  absl::StatusOr<nlohmann::json> parsed = util::ParseJson(text, limits.max_nesting_depth);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": ", parsed.status().message()));
  }
  const nlohmann::json doc = *std::move(parsed);
  if (!doc.is_object() || !doc.contains("schema") || doc["schema"] != "memonger.records/v1") {
    return absl::InvalidArgumentError(absl::StrCat(
        source_name, ": not a usage-record file (expected \"schema\": \"memonger.records/v1\")"));
  }
  if (!doc.contains("records") || !doc["records"].is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": \"records\" must be an array"));
  }
  std::vector<UsageRecord> records;
  const nlohmann::json& list = doc["records"];
  if (static_cast<int64_t>(list.size()) > util::kMaxValues) {
    return absl::InvalidArgumentError(absl::StrCat(
        source_name, ": more than ", util::kMaxValues, " records, the limit on values"));
  }
  records.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& r = list[i];
    auto where = [&] { return absl::StrCat(source_name, ": record ", i); };
    if (!r.is_object()) return absl::InvalidArgumentError(absl::StrCat(where(), ": not an object"));
    UsageRecord record;
    if (auto it = r.find("name"); it != r.end()) {
      if (!it->is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(where(), ": \"name\" must be a string"));
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
    // -1 stands for "no offset" inside; a file's offset is a byte position, never negative.
    if (r.contains("offset") && record.offset < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          where(), ": negative \"offset\" ", record.offset));
    }
    MG_RETURN_IF_ERROR(CheckRecord(record, i, source_name));
    records.push_back(std::move(record));
  }
  if (records.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": no records"));
  }
  MG_RETURN_IF_ERROR(CheckNamesUnique(records, source_name));
  return records;
}

absl::StatusOr<std::vector<UsageRecord>> ParseMiniMallocCsv(const std::string& text,
                                                            const std::string& source_name,
                                                            const util::InputLimits& limits) {
  MG_RETURN_IF_ERROR(util::CheckInputSize(static_cast<int64_t>(text.size()), limits, source_name));
  std::vector<UsageRecord> records;
  // A row per line, less the header: sized once, not grown a million records at a time.
  records.reserve(static_cast<size_t>(
      std::min<int64_t>(std::count(text.begin(), text.end(), '\n') + 1, util::kMaxValues + 1)));
  std::vector<std::string> header;
  // The header's columns, in kKnown's order.
  enum class Column { kId, kLower, kUpper, kSize, kAlignment, kGaps, kOffset };
  std::vector<Column> columns;
  util::CsvReader reader(text);
  std::vector<std::string> cells;
  while (reader.Next(cells)) {
    auto where = [&] { return absl::StrCat(source_name, ": line ", reader.line()); };
    if (header.empty()) {
      header = cells;
      for (std::string& h : header) h = absl::AsciiStrToLower(h);
      for (const char* need : {"id", "lower", "upper", "size"}) {
        if (std::find(header.begin(), header.end(), need) == header.end()) {
          return absl::InvalidArgumentError(absl::StrCat(
              where(), ": the header lacks column '", need,
              "' (expected id,lower,upper,size[,alignment,gaps,offset])"));
        }
      }
      for (size_t c = 0; c < header.size(); ++c) {
        static constexpr const char* kKnown[] = {"id",        "lower", "upper", "size",
                                                 "alignment", "gaps",  "offset"};
        const auto* known = std::find(std::begin(kKnown), std::end(kKnown), header[c]);
        if (known == std::end(kKnown)) {
          return absl::InvalidArgumentError(absl::StrCat(
              where(), ": unknown column '", util::Quote(header[c]),
              "' (expected id,lower,upper,size[,alignment,gaps,offset])"));
        }
        if (std::find(header.begin(), header.begin() + c, header[c]) != header.begin() + c) {
          return absl::InvalidArgumentError(
              absl::StrCat(where(), ": the column '", header[c], "' appears twice"));
        }
        columns.push_back(static_cast<Column>(known - std::begin(kKnown)));
      }
      continue;
    }
    if (cells.size() != header.size()) {
      return absl::InvalidArgumentError(absl::StrCat(where(), ": ", cells.size(),
                                                     " cells, the header has ", header.size()));
    }
    UsageRecord record;
    int64_t lower = 0;
    int64_t upper = 0;
    for (size_t c = 0; c < cells.size(); ++c) {
      int64_t* field = nullptr;
      switch (columns[c]) {
        case Column::kId:
          record.name = std::move(cells[c]);
          continue;
        case Column::kGaps:  // MiniMalloc's gaps are not modelled; see docs
          continue;
        case Column::kLower: field = &lower; break;
        case Column::kUpper: field = &upper; break;
        case Column::kSize: field = &record.bytes; break;
        case Column::kAlignment: field = &record.alignment; break;
        case Column::kOffset:
          if (cells[c].empty()) continue;
          field = &record.offset;
          break;
      }
      if (!absl::SimpleAtoi(cells[c], field)) {
        return absl::InvalidArgumentError(absl::StrCat(
            where(), ": ", header[c], " '", util::Quote(cells[c]),
            "' is not an integer that fits in 64 bits"));
      }
      // -1 stands for "no offset" inside; a file's offset is a byte position, never negative.
      if (field == &record.offset && record.offset < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(where(), ": ", header[c], " ", record.offset, " is negative"));
      }
    }
    if (upper <= lower) {
      return absl::InvalidArgumentError(absl::StrCat(where(), ": record '", util::Quote(record.name),
                                                     "' has upper ", upper, " <= lower ", lower,
                                                     " (upper is exclusive)"));
    }
    record.first_step = lower;
    record.last_step = upper - 1;
    MG_RETURN_IF_ERROR(CheckRecord(record, records.size(), source_name));
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
  MG_RETURN_IF_ERROR(CheckNamesUnique(records, source_name));
  return records;
}

absl::StatusOr<Graph> GraphFromRecords(const std::vector<UsageRecord>& records,
                                       const std::string& name) {
  if (records.empty()) return absl::InvalidArgumentError(absl::StrCat(name, ": no records"));
  if (static_cast<int64_t>(records.size()) > util::kMaxValues) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": ", records.size(), " records, more than the limit of ", util::kMaxValues));
  }
  for (size_t i = 0; i < records.size(); ++i) {
    MG_RETURN_IF_ERROR(CheckRecord(records[i], i, name));
  }
  std::vector<int64_t> boundaries;
  boundaries.reserve(records.size() * 2);
  for (const UsageRecord& r : records) {
    boundaries.push_back(r.first_step);
    boundaries.push_back(r.last_step);
  }
  std::sort(boundaries.begin(), boundaries.end());
  boundaries.erase(std::unique(boundaries.begin(), boundaries.end()), boundaries.end());
  auto step_of = [&](int64_t s) {
    return static_cast<OpId>(std::lower_bound(boundaries.begin(), boundaries.end(), s) -
                             boundaries.begin());
  };

  // The graph is assembled directly: no names to resolve, no in-place writes, every producer
  // before its reader. Values are numbered by first step, then by record, as GraphBuilder
  // would number the outputs of the step ops.
  const size_t n = records.size();
  std::vector<OpId> first(n);
  std::vector<OpId> last(n);
  std::vector<int32_t> outputs_at(boundaries.size() + 1, 0);
  std::vector<int32_t> inputs_at(boundaries.size(), 0);
  for (size_t i = 0; i < n; ++i) {
    first[i] = step_of(records[i].first_step);
    last[i] = step_of(records[i].last_step);
    ++outputs_at[first[i] + 1];
    if (last[i] > first[i]) ++inputs_at[last[i]];
  }
  for (size_t k = 1; k < outputs_at.size(); ++k) outputs_at[k] += outputs_at[k - 1];
  // record_of[v]: the record of value v. The values are filled in their own order, so that
  // their heap parts (shapes, declarations) lie in the order later passes read them.
  std::vector<int32_t> record_of(n);
  {
    std::vector<int32_t> next(outputs_at.begin(), outputs_at.end() - 1);
    for (size_t i = 0; i < n; ++i) record_of[next[first[i]]++] = static_cast<int32_t>(i);
  }

  Graph g;
  g.name_ = name;
  g.ops_.resize(boundaries.size());
  for (size_t k = 0; k < boundaries.size(); ++k) {
    Op& op = g.ops_[k];
    op.type = kRecordStepOpType;
    op.name = absl::StrCat("step_", boundaries[k]);
    op.attrs.push_back(Attribute{std::string(kRecordStepTimeAttr), boundaries[k]});
    op.outputs.reserve(static_cast<size_t>(outputs_at[k + 1] - outputs_at[k]));
    op.inputs.reserve(static_cast<size_t>(inputs_at[k]));
  }
  g.values_.resize(n);
  g.versions_ = NameIndex(g.values_.data(), n);
  std::vector<ValueId> value_of(n);
  for (ValueId id = 0; id < static_cast<ValueId>(n); ++id) {
    const int32_t i = record_of[id];
    const UsageRecord& r = records[i];
    Value& v = g.values_[id];
    v.name = r.name;  // the index reads the value's own name
    if (g.versions_.Add(id) > 0) {
      const int32_t other = record_of[g.versions_.Versions(v.name).front()];
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": records ", std::min(i, other), " and ", std::max(i, other), " ('",
          util::Quote(r.name), "'): the name is used twice"));
    }
    value_of[i] = id;
    v.producer = first[i];
    v.type = TensorType{DataType::kUInt8, {r.bytes}};
    // Declared too, as GraphBuilder's graph is: a net written from this graph (--net-out) must
    // state the types its Step ops cannot infer.
    v.declared = Declaration{DataType::kUInt8, DeclaredDims{{r.bytes, ""}}};
    v.alignment = r.alignment;
    g.ops_[first[i]].outputs.push_back(id);
  }
  // A step's inputs in file order, as GraphBuilder lists them.
  for (size_t i = 0; i < n; ++i) {
    if (last[i] > first[i]) g.ops_[last[i]].inputs.push_back(value_of[i]);
  }
  g.IndexConsumers();
  g.topological_order_.resize(g.ops_.size());
  std::iota(g.topological_order_.begin(), g.topological_order_.end(), 0);
  return g;
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
