#include "report/fit.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <optional>
#include <map>
#include <utility>
#include <vector>

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
  CurePlanner(const FitPlanner& plan, const FitCure& cure, const FitSearch& search,
              int* plans_so_far)
      : plan_(plan), cure_(cure), budget_(search.budget), progress_(search.progress),
        plans_so_far_(plans_so_far) {}

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
    ++*plans_so_far_;
    if (progress_) {
      progress_(FitProgress{cure_.name, value, point->device_bytes, Fits(*point),
                            !point->refused.empty(), *plans_so_far_});
    }
    return cache_.emplace(value, *point).first->second;
  }

  bool Fits(const FitPoint& p) const { return p.refused.empty() && p.device_bytes <= budget_; }
  int plans() const { return plans_; }

 private:
  const FitPlanner& plan_;
  const FitCure& cure_;
  int64_t budget_;
  const std::function<void(const FitProgress&)>& progress_;
  int* plans_so_far_;  // over every cure
  std::map<int64_t, FitPoint> cache_;
  int plans_ = 0;
};

int64_t Gcd(int64_t a, int64_t b) {
  while (b != 0) a = std::exchange(b, a % b);
  return a;
}

// Gallop from `lo` (which fits) towards `hi`, the gap doubling until a value does not fit, then
// bisect: `fits` the largest value found to fit, `fails` the first found not to (-1: none did,
// up to `hi`). O(log(fits - lo)) calls; the search assumes fitting values form a prefix.
struct Boundary {
  int64_t fits = 0;
  int64_t fails = -1;
};
// `fails_above`: a value above hi known not to fit (-1: none), the answer where hi fits.
absl::StatusOr<Boundary> GallopAndBisect(
    int64_t lo, int64_t hi, const std::function<absl::StatusOr<bool>(int64_t)>& fits_at,
    int64_t fails_above = -1) {
  Boundary b;
  b.fits = lo;
  if (hi <= lo) {
    b.fails = fails_above;
    return b;
  }
  for (int64_t step = 1;; step *= 2) {
    const int64_t next = b.fits > hi - step ? hi : b.fits + step;
    if (next == b.fits) {  // hi fits
      b.fails = fails_above;
      break;
    }
    MG_ASSIGN_OR_RETURN(const bool fits, fits_at(next));
    if (!fits) {
      b.fails = next;
      break;
    }
    b.fits = next;
    if (step > (int64_t{1} << 61)) break;
  }
  while (b.fails != -1 && b.fails - b.fits > 1) {
    const int64_t mid = b.fits + (b.fails - b.fits) / 2;
    MG_ASSIGN_OR_RETURN(const bool fits, fits_at(mid));
    (fits ? b.fits : b.fails) = mid;
  }
  return b;
}

// The kFitProbes values after the first that failed. None fits where the bytes grow with the
// value. Where some do (the efficient attention kernel copies a bias whose rows are not a
// multiple of 8, so n with n + 1 a multiple of 8 need half: n=22223 fits 24 GB where 22221
// does not), the row says so, and where two or more do, the values a whole number of their
// spacing apart are searched (gallop and bisect along them, the same assumption there).
absl::Status ProbeBeyond(const FitSearch& search, CurePlanner& planner, int64_t fails,
                         FitRow& row) {
  // A probe that fails to plan counts as not fitting: the answer above stands whatever the
  // probes meet.
  std::vector<int64_t> fitting;
  for (int64_t v = fails + 1; v <= search.max_value && v - fails <= kFitProbes; ++v) {
    absl::StatusOr<FitPoint> p = planner.At(v);
    if (p.ok() && planner.Fits(*p)) fitting.push_back(v);
  }
  if (fitting.empty()) return absl::OkStatus();
  MG_ASSIGN_OR_RETURN(row.also_fits, planner.At(fitting.front()));
  int64_t period = 0;
  for (int64_t v : fitting) period = Gcd(period, v - fitting.front());
  if (period == 0) return absl::OkStatus();  // one value fits: no spacing to follow
  row.period = period;
  // Along fitting.front() + period * k, k from 0.
  const int64_t start = fitting.front();
  MG_ASSIGN_OR_RETURN(
      const Boundary along,
      GallopAndBisect(0, (search.max_value - start) / period,
                      [&](int64_t k) -> absl::StatusOr<bool> {
                        absl::StatusOr<FitPoint> p = planner.At(start + k * period);
                        return p.ok() && planner.Fits(*p);
                      }));
  MG_ASSIGN_OR_RETURN(row.period_largest, planner.At(start + along.fits * period));
  return absl::OkStatus();
}

// Where the device bytes cross the budget, from `lo` (which fits) up to `hi`: the largest value
// found to fit and the first found not to (-1: none did, up to hi). The bytes of a net grow
// about linearly with a batch or sequence size, so one value is aimed first: where the line
// through lo and the gallop's first value (2 lo; lo + 1 from an earlier cure's answer) meets the
// budget, then its neighbour (the one
// after it where it fits, before it where not). Where the bytes fell from an earlier cure's
// answer to the next value (the cure took effect there: recomputation), the line runs through
// that value and the one after it. On a line that settles the answer in 4 plans.
// An aim too far is aimed again once, on the line from the second value to the one before it.
// Where it does not (attention's L^2, bytes that jump), the gallop and bisection go on from
// what the aims left: at most 6 plans more than they would have taken alone. Fitting values are
// assumed to form a prefix.
absl::StatusOr<Boundary> FindBoundary(
    int64_t lo, int64_t hi, int64_t budget, CurePlanner& planner,
    const std::function<absl::StatusOr<bool>(int64_t)>& fits_at, bool lo_is_a_guess) {
  MG_ASSIGN_OR_RETURN(FitPoint at_lo, planner.At(lo));
  // From an earlier cure's answer (lo_is_a_guess), the answer is usually lo itself: its
  // neighbour first, the line from the two after.
  const int64_t gap = lo_is_a_guess ? 1 : std::max<int64_t>(lo, 1);
  int64_t second = lo > hi - gap ? hi : lo + gap;
  if (second == lo) return Boundary{lo, -1};
  MG_ASSIGN_OR_RETURN(FitPoint at_second, planner.At(second));
  if (!planner.Fits(at_second)) return GallopAndBisect(lo, second - 1, fits_at, second);
  long double rise = static_cast<long double>(at_second.device_bytes) -
                     static_cast<long double>(at_lo.device_bytes);
  if (rise <= 0 && lo_is_a_guess && second < hi) {
    // The bytes fell: the cure took effect between the two (recomputation from the first size
    // the earlier cure's answer left over). The line runs from the next pair.
    lo = second;
    at_lo = at_second;
    second = lo + 1;
    MG_ASSIGN_OR_RETURN(at_second, planner.At(second));
    if (!planner.Fits(at_second)) return Boundary{lo, second};
    rise = static_cast<long double>(at_second.device_bytes) -
           static_cast<long double>(at_lo.device_bytes);
  }
  if (second == hi || rise <= 0) return GallopAndBisect(second, hi, fits_at);
  const long double slope = rise / static_cast<long double>(second - lo);
  const long double aim_at =
      static_cast<long double>(second) +
      std::floor((static_cast<long double>(budget) -
                  static_cast<long double>(at_second.device_bytes)) / slope);
  if (aim_at <= static_cast<long double>(second)) return GallopAndBisect(second, hi, fits_at);
  const int64_t aim = aim_at >= static_cast<long double>(hi) ? hi : static_cast<int64_t>(aim_at);
  MG_ASSIGN_OR_RETURN(const bool aim_fits, fits_at(aim));
  if (aim_fits) {
    if (aim == hi) return Boundary{aim, -1};
    MG_ASSIGN_OR_RETURN(const bool next_fits, fits_at(aim + 1));
    if (!next_fits) return Boundary{aim, aim + 1};
    return GallopAndBisect(aim + 1, hi, fits_at);
  }
  MG_ASSIGN_OR_RETURN(const bool before_fits, fits_at(aim - 1));
  if (before_fits) return Boundary{aim - 1, aim};
  // Aimed too far (the first two values' line is steeper than the rest: bytes that do not
  // grow with the value weigh most there): once more, on the line from `second` to aim - 1.
  MG_ASSIGN_OR_RETURN(const FitPoint at_before, planner.At(aim - 1));
  const long double rise_before = static_cast<long double>(at_before.device_bytes) -
                                  static_cast<long double>(at_second.device_bytes);
  if (!at_before.refused.empty() || rise_before <= 0 || aim - 2 <= second) {
    return GallopAndBisect(second, aim - 2, fits_at, aim - 1);
  }
  const long double again_at =
      static_cast<long double>(second) +
      std::floor((static_cast<long double>(budget) -
                  static_cast<long double>(at_second.device_bytes)) *
                 static_cast<long double>(aim - 1 - second) / rise_before);
  if (again_at <= static_cast<long double>(second)) {
    return GallopAndBisect(second, aim - 2, fits_at, aim - 1);
  }
  const int64_t again = std::min<int64_t>(aim - 2, static_cast<int64_t>(again_at));
  MG_ASSIGN_OR_RETURN(const bool again_fits, fits_at(again));
  if (!again_fits) return GallopAndBisect(second, again - 1, fits_at, again);
  if (again + 1 == aim - 1) return Boundary{again, aim - 1};
  MG_ASSIGN_OR_RETURN(const bool after_fits, fits_at(again + 1));
  if (!after_fits) return Boundary{again, again + 1};
  return GallopAndBisect(again + 1, aim - 2, fits_at, aim - 1);
}

// `start`: where the gallop begins once min_value fits, the answer of a cure searched before
// (each cure lowers the bytes, so its answer is rarely below the last): planned first, and
// where it does not fit the gallop starts from min_value as usual.
absl::StatusOr<FitRow> SearchCure(const FitSearch& search, const FitCure& cure,
                                  const FitPlanner& plan, int* plans_so_far,
                                  std::optional<int64_t> start, bool* probe) {
  CurePlanner planner(plan, cure, search, plans_so_far);
  FitRow row;
  row.cure = cure.name;
  int64_t lo = search.min_value;
  if (start.has_value() && *start > lo && *start <= search.max_value) {
    MG_ASSIGN_OR_RETURN(FitPoint at_start, planner.At(*start));
    if (planner.Fits(at_start)) lo = *start;  // then min_value fits too, by the assumption
  }
  if (lo == search.min_value) {
    MG_ASSIGN_OR_RETURN(FitPoint first, planner.At(search.min_value));
    if (!planner.Fits(first)) {
      row.above = first;
      row.range_ended = !first.refused.empty();
      row.plans = planner.plans();
      return row;
    }
  }
  MG_ASSIGN_OR_RETURN(const Boundary boundary,
                      FindBoundary(lo, search.max_value, search.budget, planner,
                                   [&](int64_t value) -> absl::StatusOr<bool> {
                                     MG_ASSIGN_OR_RETURN(FitPoint p, planner.At(value));
                                     return planner.Fits(p);
                                   },
                                   /*lo_is_a_guess=*/lo != search.min_value));
  const int64_t fits = boundary.fits;
  const int64_t fails = boundary.fails;
  MG_ASSIGN_OR_RETURN(FitPoint at, planner.At(fits));
  row.largest = fits;
  row.at_largest = at;
  if (fails != -1) {
    MG_ASSIGN_OR_RETURN(FitPoint above, planner.At(fails));
    row.above = above;
    row.range_ended = !above.refused.empty();
  }
  if (*probe && fails != -1 && !row.range_ended) {
    MG_RETURN_IF_ERROR(ProbeBeyond(search, planner, fails, row));
    // The probes test the net's sizes (a kernel's padding, every 8th length), the same for
    // every cure: once they found the bytes monotone, later cures would plan kFitProbes more
    // values each (a recompute plan takes about a second) to learn it again.
    *probe = row.also_fits.has_value();
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
  result.optimizer = search.optimizer;
  int plans = 0;
  std::optional<int64_t> start;
  bool probe = true;  // until a cure's probes find the bytes monotone
  for (const FitCure& cure : search.cures) {
    const auto began = std::chrono::steady_clock::now();
    absl::StatusOr<FitRow> row = SearchCure(search, cure, plan, &plans, start, &probe);
    if (!row.ok()) {
      return absl::Status(row.status().code(), absl::StrCat("--fit ", search.symbol, " (",
                                                            cure.name, "): ",
                                                            row.status().message()));
    }
    if (row->largest.has_value()) start = row->largest;
    row->seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    result.rows.push_back(*std::move(row));
  }
  return result;
}

std::string FitToText(const FitResult& fit) {
  const std::string state = fit.optimizer == Optimizer::kNone
                                ? ""
                                : absl::StrCat(" + ", OptimizerName(fit.optimizer), " state");
  std::string out = absl::StrFormat(
      "fit              the largest %s whose device bytes (arena + weights%s) fit %d B (%s)\n",
      fit.symbol, state, fit.budget, util::FormatBytes(fit.budget));
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
    std::string beyond;
    if (row.also_fits.has_value()) {
      beyond = absl::StrCat("\n  ", std::string(14, ' '), " not monotone: ", fit.symbol, "=",
                            row.also_fits->value, " fits too (",
                            util::FormatBytes(row.also_fits->device_bytes), ")");
      if (row.period_largest.has_value()) {
        absl::StrAppend(&beyond, "; from it in steps of ", row.period, ", up to ", fit.symbol,
                        "=", row.period_largest->value, " (",
                        util::FormatBytes(row.period_largest->device_bytes), ")");
      } else {
        absl::StrAppend(&beyond, ": the bytes do not grow with ", fit.symbol,
                        ", and larger values may fit");
      }
    }
    std::string rerun;
    if (row.at_largest->recomputed_ops > 0) {
      const FitPoint& at = *row.at_largest;
      rerun = absl::StrCat(", ", at.recomputed_ops, " forward ops rerun: +", at.extra_flops,
                           " FLOPs");
      if (at.forward_flops > 0) {
        absl::StrAppendFormat(&rerun, " (%.1f%% of the forward pass)",
                              100.0 * static_cast<double>(at.extra_flops) /
                                  static_cast<double>(at.forward_flops));
      }
    }
    absl::StrAppendFormat(&out, "  %-14s %s=%d: %d B = %s (arena %s, lower bound %s%s); %s (%d plans)%s\n",
                          row.cure, fit.symbol, *row.largest, row.at_largest->device_bytes,
                          util::FormatBytes(row.at_largest->device_bytes),
                          util::FormatBytes(row.at_largest->arena_bytes),
                          util::FormatBytes(row.at_largest->lower_bound_bytes), rerun, above,
                          row.plans, beyond);
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
    if (row.at_largest && row.at_largest->recomputed_ops > 0) {
      c["recomputed_ops"] = row.at_largest->recomputed_ops;
      c["extra_flops"] = row.at_largest->extra_flops;
      c["forward_flops"] = row.at_largest->forward_flops;
    }
    c["above"] = row.above ? Json(row.above->value) : Json(nullptr);
    c["above_device_bytes"] =
        row.above && row.above->refused.empty() ? Json(row.above->device_bytes) : Json(nullptr);
    c["range_ended"] = row.range_ended;
    c["also_fits"] = row.also_fits ? Json(row.also_fits->value) : Json(nullptr);
    c["also_fits_device_bytes"] =
        row.also_fits ? Json(row.also_fits->device_bytes) : Json(nullptr);
    c["period"] = row.period_largest ? Json(row.period) : Json(nullptr);
    c["largest_in_period"] = row.period_largest ? Json(row.period_largest->value) : Json(nullptr);
    c["largest_in_period_device_bytes"] =
        row.period_largest ? Json(row.period_largest->device_bytes) : Json(nullptr);
    c["plans"] = row.plans;
    cures.push_back(std::move(c));
  }
  Json doc;
  doc["schema"] = "memonger.fit/v1";
  doc["fit"] = {{"symbol", fit.symbol}, {"budget", fit.budget},
                {"optimizer", std::string(OptimizerName(fit.optimizer))}, {"largest", largest},
                {"cures", cures}};
  return doc.dump(1) + "\n";
}

}  // namespace memonger
