#include "report/fit.h"

#include <map>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/bytes.h"
#include "util/status_macros.h"

namespace memonger {
namespace {

// Plans values of one cure, each at most once.
class CurePlanner {
 public:
  CurePlanner(const FitPlanner& plan, const FitCure& cure, int64_t budget)
      : plan_(plan), cure_(cure), budget_(budget) {}

  absl::StatusOr<FitPoint> At(int64_t value) {
    auto it = cache_.find(value);
    if (it != cache_.end()) return it->second;
    absl::StatusOr<FitPoint> point = plan_(value, cure_);
    if (!point.ok()) {
      const absl::StatusCode code = point.status().code();
      if (code != absl::StatusCode::kInvalidArgument && code != absl::StatusCode::kOutOfRange) {
        return point.status();
      }
      FitPoint refused;
      refused.value = value;
      refused.refused = std::string(point.status().message());
      point = refused;
    }
    point->value = value;
    ++plans_;
    return cache_.emplace(value, *point).first->second;
  }

  bool Fits(const FitPoint& p) const { return p.refused.empty() && p.device_bytes <= budget_; }
  int plans() const { return plans_; }

 private:
  const FitPlanner& plan_;
  const FitCure& cure_;
  int64_t budget_;
  std::map<int64_t, FitPoint> cache_;
  int plans_ = 0;
};

absl::StatusOr<FitRow> SearchCure(const FitSearch& search, const FitCure& cure,
                                  const FitPlanner& plan) {
  CurePlanner planner(plan, cure, search.budget);
  FitRow row;
  row.cure = cure.name;
  MG_ASSIGN_OR_RETURN(FitPoint first, planner.At(search.min_value));
  if (!planner.Fits(first)) {
    row.above = first;
    row.range_ended = !first.refused.empty();
    row.plans = planner.plans();
    return row;
  }
  // Gallop: the gap doubles until a value does not fit (or the range ends).
  int64_t fits = search.min_value;
  int64_t fails = -1;
  for (int64_t step = 1;; step *= 2) {
    const int64_t next = fits > search.max_value - step ? search.max_value : fits + step;
    if (next == fits) break;  // max_value fits
    MG_ASSIGN_OR_RETURN(FitPoint p, planner.At(next));
    if (!planner.Fits(p)) {
      fails = next;
      break;
    }
    fits = next;
    if (step > (int64_t{1} << 61)) break;
  }
  // Bisect: `fits` fits, `fails` does not.
  while (fails != -1 && fails - fits > 1) {
    const int64_t mid = fits + (fails - fits) / 2;
    MG_ASSIGN_OR_RETURN(FitPoint p, planner.At(mid));
    if (planner.Fits(p)) {
      fits = mid;
    } else {
      fails = mid;
    }
  }
  MG_ASSIGN_OR_RETURN(FitPoint at, planner.At(fits));
  row.largest = fits;
  row.at_largest = at;
  if (fails != -1) {
    MG_ASSIGN_OR_RETURN(FitPoint above, planner.At(fails));
    row.above = above;
    row.range_ended = !above.refused.empty();
  }
  row.plans = planner.plans();
  return row;
}

}  // namespace

absl::StatusOr<FitResult> FindLargestFit(const FitSearch& search, const FitPlanner& plan) {
  if (search.budget < 0) {
    return absl::InvalidArgumentError("--fit needs a --budget of 0 bytes or more");
  }
  if (search.min_value > search.max_value || search.min_value < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--fit ", search.symbol, ": empty range [",
                                                   search.min_value, ", ", search.max_value, "]"));
  }
  if (search.cures.empty()) return absl::InvalidArgumentError("--fit: nothing to search");
  FitResult result;
  result.symbol = search.symbol;
  result.budget = search.budget;
  for (const FitCure& cure : search.cures) {
    absl::StatusOr<FitRow> row = SearchCure(search, cure, plan);
    if (!row.ok()) {
      return absl::Status(row.status().code(), absl::StrCat("--fit ", search.symbol, " (",
                                                            cure.name, "): ",
                                                            row.status().message()));
    }
    result.rows.push_back(*std::move(row));
  }
  return result;
}

std::string FitToText(const FitResult& fit) {
  std::string out = absl::StrFormat(
      "fit              the largest %s whose device bytes (arena + weights) fit %d B (%s)\n",
      fit.symbol, fit.budget, util::FormatBytes(fit.budget));
  for (const FitRow& row : fit.rows) {
    if (!row.largest.has_value()) {
      absl::StrAppendFormat(&out, "  %-14s none: %s=%d %s (%d plans)\n", row.cure, fit.symbol,
                            row.above->value,
                            row.above->refused.empty()
                                ? absl::StrCat("needs ", util::FormatBytes(row.above->device_bytes))
                                : absl::StrCat("is refused: ", row.above->refused),
                            row.plans);
      continue;
    }
    std::string above = "the range ends there";
    if (row.above.has_value()) {
      above = row.range_ended
                  ? absl::StrCat(fit.symbol, "=", row.above->value, " is refused: ",
                                 row.above->refused)
                  : absl::StrCat(fit.symbol, "=", row.above->value, " needs ",
                                 row.above->device_bytes, " B");
    }
    absl::StrAppendFormat(&out, "  %-14s %s=%d: %d B = %s (arena %s, lower bound %s); %s (%d plans)\n",
                          row.cure, fit.symbol, *row.largest, row.at_largest->device_bytes,
                          util::FormatBytes(row.at_largest->device_bytes),
                          util::FormatBytes(row.at_largest->arena_bytes),
                          util::FormatBytes(row.at_largest->lower_bound_bytes), above, row.plans);
  }
  return out;
}

std::string FitToJson(const FitResult& fit) {
  using Json = nlohmann::ordered_json;
  Json largest = Json::object();
  Json cures = Json::array();
  for (const FitRow& row : fit.rows) {
    largest[row.cure] = row.largest.has_value() ? Json(*row.largest) : Json(nullptr);
    Json c;
    c["cure"] = row.cure;
    c["largest"] = largest[row.cure];
    c["device_bytes"] = row.at_largest ? Json(row.at_largest->device_bytes) : Json(nullptr);
    c["arena_bytes"] = row.at_largest ? Json(row.at_largest->arena_bytes) : Json(nullptr);
    c["lower_bound_bytes"] =
        row.at_largest ? Json(row.at_largest->lower_bound_bytes) : Json(nullptr);
    c["above"] = row.above ? Json(row.above->value) : Json(nullptr);
    c["above_device_bytes"] =
        row.above && row.above->refused.empty() ? Json(row.above->device_bytes) : Json(nullptr);
    c["range_ended"] = row.range_ended;
    c["plans"] = row.plans;
    cures.push_back(std::move(c));
  }
  Json doc;
  doc["schema"] = "memonger.fit/v1";
  doc["fit"] = {{"symbol", fit.symbol}, {"budget", fit.budget}, {"largest", largest},
                {"cures", cures}};
  return doc.dump(1) + "\n";
}

}  // namespace memonger
