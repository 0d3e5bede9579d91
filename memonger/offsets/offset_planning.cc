#include "memonger/offsets/offset_planning.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "graph/records.h"
#include "memonger/offsets/best_fit.h"
#include "memonger/offsets/greedy_by_size.h"
#include "memonger/offsets/local_search.h"
#include "memonger/offsets/peak_window.h"
#include "memonger/offsets/window_repair.h"
#include "memonger/time_shares.h"
#include "util/check.h"
#include "util/bytes.h"
#include "util/checked_math.h"
#include "util/deadline.h"
#include "util/status_macros.h"

namespace memonger {
namespace {

bool IsPowerOfTwo(int64_t x) { return x >= 1 && (x & (x - 1)) == 0; }

}  // namespace

absl::StatusOr<OffsetSolution> SolveOffsetProblem(const OffsetProblem& problem,
                                                  OffsetStrategy strategy,
                                                  const OffsetSolveOptions& options) {
  // The limit every step below gets its share of, from this moment.
  const util::Deadline limit(std::chrono::steady_clock::now(), options.time_limit_seconds);
  if (!(options.time_limit_seconds >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("time limit ", options.time_limit_seconds, " s is negative"));
  }
  LocalSearchOptions local;
  switch (strategy) {
    case OffsetStrategy::kGreedyBySize:
      return PlanGreedyBySizeWithin(problem, limit);
    case OffsetStrategy::kBestFit: {
      MG_ASSIGN_OR_RETURN(BestFitResult portfolio,
                          RunBestFitPortfolioWithin(problem, limit, time_shares::kOffsetSearches,
                                                    options.threads));
      return std::move(portfolio.solution);
    }
    case OffsetStrategy::kBestFitWithLocalSearch:
      local.time_limit_seconds = options.time_limit_seconds;
      local.threads = options.threads;
      return PlanBestFitWithLocalSearch(problem, local);
    case OffsetStrategy::kExact:
    case OffsetStrategy::kAuto:
      break;
  }
  OffsetSolution incumbent;
  PortfolioProgress portfolio_progress;  // the portfolio's runs made, where it was cut
  const auto searched = std::count_if(problem.items.begin(), problem.items.end(),
                                      [](const OffsetItem& item) { return item.bytes > 0; });
  // What follows the heuristic plan: the branch and bound searches up to kMaxExactItems items;
  // peak windows (peak_window.h) up to kMaxPeakWindowProblemItems.
  const bool branch_and_bound = searched <= kMaxExactItems;
  const bool windows = searched <= kMaxPeakWindowProblemItems;
  if (strategy == OffsetStrategy::kExact) {
    // As auto's: no run starts after a quarter of the limit where the searches need the rest;
    // above kMaxPeakWindowProblemItems nothing searches after it.
    MG_ASSIGN_OR_RETURN(BestFitResult portfolio,
                        RunBestFitPortfolioWithin(problem, limit,
                                                  windows ? time_shares::kPortfolioStarts
                                                          : time_shares::kOffsetSearches,
                                                  options.threads));
    incumbent = std::move(portfolio.solution);
    portfolio_progress = {portfolio.settled_runs, portfolio.first_run_seconds};
  } else {
    // Its share of the limit, or all of it where nothing exact would search (too many items).
    local.threads = options.threads;
    local.enough_height = options.enough_height;
    local.time_limit_seconds =
        windows ? limit.Share(time_shares::kLocalSearchBeforeWindows).limit_seconds()
                : limit.limit_seconds();
    // The portfolio and its first pass keep the time they have without windows.
    if (windows) local.portfolio_time_limit_seconds = options.time_limit_seconds;
    MG_ASSIGN_OR_RETURN(incumbent, PlanBestFitWithLocalSearch(problem, local, &portfolio_progress));
  }
  // A cut first pass means the limit is spent: the exact search would only check the incumbent
  // again (O(n log n), a tenth of a second on a million items) and return it.
  if (incumbent.proven_optimal || incumbent.cut_pass_seconds_short > 0) return incumbent;
  if (DecidesEnough(problem, incumbent, options.enough_height)) return incumbent;
  ExactOffsetsOptions exact;
  // The stretch around the busiest step, solved exactly on its own: the far slacker steps
  // elsewhere often take the rest greedily. With half of the time left where the branch and
  // bound follows, else with all of it (S_1 needs 1 s of auto's 2). A window's branch and bound
  // gets half of what is left when it starts (peak_window.h), so one it cannot settle ends them
  // with time to spare: the branch and bound, or above kMaxExactItems (auto) window repair,
  // gets what they leave.
  using Clock = std::chrono::steady_clock;
  const Clock::time_point searches_end = limit.EndOfShare(time_shares::kOffsetSearches);
  if (windows) {
    const Clock::time_point now = Clock::now();
    PeakWindowOptions window_options;
    window_options.threads = options.threads;
    window_options.stop = options.stop;
    window_options.deadline =
        now + util::ShareOfTimeLeft(
                  now, searches_end,
                  branch_and_bound ? time_shares::kWindowsBeforeBranchAndBound : 1.0);
    MG_ASSIGN_OR_RETURN(PeakWindowResult windowed,
                        PlacePeakWindows(problem, incumbent, window_options));
    if (windowed.solution.proven_optimal) return windowed.solution;
    incumbent = std::move(windowed.solution);
    exact.proven_lower_bound = windowed.lower_bound;
    if (strategy == OffsetStrategy::kAuto && !branch_and_bound) {
      RepairOptions repair;
      repair.deadline = searches_end;
      repair.check_input = false;  // checked where it is applied, as every plan
      MG_ASSIGN_OR_RETURN(RepairResult repaired, RepairWindows(problem, incumbent, repair));
      incumbent = std::move(repaired.solution);
      // Valid, so no lower than the optimum, which the windows' bound does not exceed.
      if (incumbent.height <= windowed.lower_bound) incumbent.proven_optimal = true;
      if (incumbent.proven_optimal) return incumbent;
    }
  }
  // Above kMaxExactItems no branch and bound follows: where the windows and repair ended early,
  // the portfolio's runs not made yet (it starts none after a quarter of the limit) get what
  // they left. On 60,000 long-lived items (a second a pass) auto at 5 s ended at 1.071 x the
  // bound after 1.3 s; the third run reaches 1.0007.
  if (!branch_and_bound) {
    MG_ASSIGN_OR_RETURN(ResumedPortfolio resumed,
                        ResumeBestFitPortfolio(problem, portfolio_progress, incumbent.height,
                                               searches_end, options.threads));
    if (resumed.solution.has_value()) {
      incumbent = *std::move(resumed.solution);
      if (incumbent.height <= exact.proven_lower_bound) incumbent.proven_optimal = true;
      if (incumbent.proven_optimal) return incumbent;
    }
  }
  exact.time_limit_seconds = limit.SecondsLeft();
  exact.threads = options.threads;
  exact.progress = options.exact_progress;
  exact.stop = options.stop;
  return PlaceExact(problem, incumbent, exact);
}

absl::string_view OffsetStrategyName(OffsetStrategy strategy) {
  switch (strategy) {
    case OffsetStrategy::kGreedyBySize: return "greedy-by-size";
    case OffsetStrategy::kBestFit: return "best-fit";
    case OffsetStrategy::kBestFitWithLocalSearch: return "best-fit+local-search";
    case OffsetStrategy::kExact: return "exact";
    case OffsetStrategy::kAuto: return "auto";
  }
  return "best-fit";
}

absl::StatusOr<std::vector<DeviceOffsetProblem>> OffsetProblemsFor(const graph::Graph& graph,
                                                                   const Liveness& liveness,
                                                                   int64_t alignment) {
  if (!IsPowerOfTwo(alignment)) {
    return absl::InvalidArgumentError(
        absl::StrCat("alignment ", alignment, " is not a power of two >= 1"));
  }
  // Device-major: std::map over (type, id). Each problem's items are counted first: grown by
  // doubling, the item list of a million-value graph held up to twice its size through planning.
  std::map<std::pair<int, int>, DeviceOffsetProblem> by_device;
  std::map<std::pair<int, int>, size_t> item_count;
  for (graph::ValueId id = 0; id < graph.num_values(); ++id) {
    if (!liveness.planned[id] || liveness.alias_root[id] != id) continue;
    ++item_count[{liveness.device[id].type, liveness.device[id].id}];
  }
  for (const auto& [key, count] : item_count) {
    DeviceOffsetProblem& p = by_device[key];
    p.problem.items.reserve(count);
    p.roots.reserve(count);
  }
  for (graph::ValueId id = 0; id < graph.num_values(); ++id) {
    if (!liveness.planned[id] || liveness.alias_root[id] != id) continue;
    int64_t item_alignment = alignment;
    for (graph::ValueId m : liveness.members[id]) {
      const graph::Value& v = graph.value(m);
      if (v.alignment == 0) continue;
      if (!IsPowerOfTwo(v.alignment)) {
        return absl::InvalidArgumentError(absl::StrCat("value '", v.DisplayName(),
                                                       "' asks for alignment ", v.alignment,
                                                       ", not a power of two"));
      }
      item_alignment = std::max(item_alignment, v.alignment);
    }
    const auto bytes = util::CheckedAlignUp(liveness.class_bytes[id], item_alignment);
    if (!bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "value '", graph.value(id).DisplayName(), "' does not fit in 2^63 bytes once aligned"));
    }
    const graph::Device device = liveness.device[id];
    DeviceOffsetProblem& p = by_device[{device.type, device.id}];
    p.device = device;
    // A net with no ops still holds its inputs and constants at step 0 (an ONNX model whose
    // only node was a Constant, folded into a constant).
    p.problem.num_steps = std::max(liveness.num_steps, 1);
    OffsetItem item;
    item.first_step = liveness.lifetime[id].first_step;
    item.last_step = liveness.lifetime[id].last_step;
    item.bytes = *bytes;
    item.alignment = item_alignment;
    p.problem.items.push_back(item);
    p.roots.push_back(id);
  }
  // Records graphs keep the records' times: search orders rank items by how long they live.
  std::vector<int64_t> step_times = graph::RecordStepTimes(graph, liveness.schedule.ops);
  if (step_times.size() != static_cast<size_t>(liveness.num_steps)) step_times.clear();
  std::vector<DeviceOffsetProblem> problems;
  problems.reserve(by_device.size());
  for (auto& [key, p] : by_device) {
    p.problem.step_times = step_times;
    problems.push_back(std::move(p));
  }
  return problems;
}

absl::StatusOr<OffsetProblem> OffsetProblemFromRecords(
    const std::vector<graph::UsageRecord>& records, int64_t alignment) {
  if (!IsPowerOfTwo(alignment)) {
    return absl::InvalidArgumentError(
        absl::StrCat("alignment ", alignment, " is not a power of two >= 1"));
  }
  std::vector<int64_t> steps;
  steps.reserve(2 * records.size());
  for (const graph::UsageRecord& r : records) {
    if (r.first_step < 0 || r.last_step < r.first_step) {
      return absl::InvalidArgumentError(absl::StrCat("record '", r.name, "' has lifetime [",
                                                     r.first_step, ", ", r.last_step, "]"));
    }
    steps.push_back(r.first_step);
    steps.push_back(r.last_step);
  }
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  if (steps.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return absl::InvalidArgumentError("too many distinct steps");
  }
  auto rank = [&](int64_t step) {
    return static_cast<int>(std::lower_bound(steps.begin(), steps.end(), step) - steps.begin());
  };
  OffsetProblem problem;
  problem.num_steps = static_cast<int>(steps.size());
  problem.step_times = steps;
  problem.items.reserve(records.size());
  for (const graph::UsageRecord& r : records) {
    if (r.bytes < 0 || (r.alignment != 0 && !IsPowerOfTwo(r.alignment))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "record '", r.name, "' has bytes ", r.bytes, " and alignment ", r.alignment));
    }
    OffsetItem item;
    item.first_step = rank(r.first_step);
    item.last_step = rank(r.last_step);
    item.alignment = std::max(alignment, r.alignment);
    const auto bytes = util::CheckedAlignUp(r.bytes, item.alignment);
    if (!bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("record '", r.name, "' does not fit in 2^63 bytes once aligned"));
    }
    item.bytes = *bytes;
    problem.items.push_back(item);
  }
  return problem;
}

absl::Status ApplyOffsetSolutions(const graph::Graph& graph, const Liveness& liveness,
                                  std::vector<DeviceOffsetProblem>&& problems,
                                  std::vector<OffsetSolution>&& solutions, Plan& plan) {
  const int n = graph.num_values();
  MG_CHECK(static_cast<int>(plan.buffer_of_value.size()) == n);
  MG_CHECK(problems.size() == solutions.size());
  // Two passes, so that the plan's buffers never exist beside the problems' items (on a 4M-op
  // net the two, with the offsets per value, were the run's peak): the first checks each
  // solution, stacks the regions and turns each solution's offsets into arena offsets, keeping
  // of each item only its bytes; the second makes the buffers.
  bool optimal = true;
  int64_t region_end = 0;
  std::vector<std::vector<int64_t>> item_bytes(problems.size());
  // Values whose own alignment rounded their bytes beyond the plan's alignment: how many, the
  // bytes added, and the largest such alignment (for the note below).
  int64_t padded_values = 0;
  int64_t padding_bytes = 0;
  int64_t padding_alignment = 0;
  for (size_t r = 0; r < problems.size(); ++r) {
    DeviceOffsetProblem& p = problems[r];
    OffsetSolution& s = solutions[r];
    MG_CHECK(p.roots.size() == p.problem.items.size());
    absl::Status valid = CheckOffsetSolution(p.problem, s.offsets);
    if (!valid.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("the offsets for device ",
                                                     graph::DeviceToString(p.device),
                                                     " are not valid: ", valid.message()));
    }
    int64_t region_alignment = plan.alignment;
    int64_t height = 0;
    for (size_t i = 0; i < p.roots.size(); ++i) {
      region_alignment = std::max(region_alignment, p.problem.items[i].alignment);
      height = std::max(height, s.offsets[i] + p.problem.items[i].bytes);
    }
    const auto base = util::CheckedAlignUp(region_end, region_alignment);
    const auto end = base ? util::CheckedAdd(*base, height) : std::nullopt;
    if (!end) {
      return absl::InvalidArgumentError("the stacked device regions need more than 2^63 bytes");
    }
    // Proven optimal is each device's height; the arena is also optimal only where stacking
    // the regions added no padding before this one (another order of the regions might not).
    optimal = optimal && *base == region_end;
    region_end = *end;
    optimal = optimal && (s.proven_optimal || height == OffsetLowerBound(p.problem));
    // An item whose own alignment rounded its bytes beyond the plan's alignment is larger in
    // the problem than the value needs: the problem's optimum is then only an upper bound on
    // the real one (a 5-byte value aligned to 64 takes 64 bytes here, 5 in a sharing plan).
    item_bytes[r].reserve(p.roots.size());
    for (size_t i = 0; i < p.roots.size(); ++i) {
      const int64_t bytes = p.problem.items[i].bytes;
      const std::optional<int64_t> needed =
          util::CheckedAlignUp(liveness.class_bytes[p.roots[i]], plan.alignment);
      optimal = optimal && needed == bytes;
      if (needed.has_value() && *needed < bytes) {
        ++padded_values;
        padding_bytes = util::CheckedAdd(padding_bytes, bytes - *needed)
                            .value_or(std::numeric_limits<int64_t>::max());
        padding_alignment = std::max(padding_alignment, p.problem.items[i].alignment);
      }
      s.offsets[i] += *base;  // within the end checked above
      item_bytes[r].push_back(bytes);
    }
    p.problem = OffsetProblem();
  }

  // Buffers are numbered in root-id order: each root's number is written to its own
  // buffer_of_value first (no array of its own: one int per value), its members' below.
  int32_t num_buffers = 0;
  for (graph::ValueId id = 0; id < n; ++id) {
    const bool root = liveness.planned[id] && liveness.alias_root[id] == id;
    plan.buffer_of_value[id] = root ? num_buffers++ : -1;
  }
  plan.buffers.assign(num_buffers, PlanBuffer{});
  int placed = 0;
  for (size_t r = 0; r < problems.size(); ++r) {
    const DeviceOffsetProblem& p = problems[r];
    for (size_t i = 0; i < p.roots.size(); ++i) {
      const graph::ValueId root = p.roots[i];
      MG_CHECK(root >= 0 && root < n && liveness.alias_root[root] == root);
      const int32_t b = plan.buffer_of_value[root];
      MG_CHECK(b >= 0);
      PlanBuffer& buffer = plan.buffers[b];
      buffer.offset = solutions[r].offsets[i];
      buffer.size = item_bytes[r][i];
      buffer.device = p.device;
      for (graph::ValueId m : liveness.members[root]) plan.buffer_of_value[m] = b;
      ++placed;
    }
  }
  MG_CHECK(placed == num_buffers);  // every planned class in exactly one problem
  double seconds_short = 0;
  for (const OffsetSolution& s : solutions) {
    seconds_short = std::max(seconds_short, s.cut_pass_seconds_short);
  }
  std::vector<DeviceOffsetProblem>().swap(problems);
  std::vector<OffsetSolution>().swap(solutions);
  std::vector<std::vector<int64_t>>().swap(item_bytes);
  FinishPlan(plan);
  plan.proven_optimal = optimal;
  if (padded_values > 0) {
    plan.notes.push_back(absl::StrCat(
        padded_values, " value(s) ask for an alignment above --alignment (up to ",
        util::FormatBytes(padding_alignment),
        ") and take whole multiples of it: ", util::FormatBytes(padding_bytes),
        " more than their bytes in all, which the arena holds and the lower bound (most live "
        "bytes) does not count; no plan is called optimal then"));
  }
  if (seconds_short > 0) {
    const std::string what =
        "the time limit cut the first greedy placement short (the items it had not reached were "
        "stacked by a quick rule, far above the lower bound)";
    plan.notes.push_back(
        std::isinf(seconds_short)
            ? absl::StrCat(what, "; it left no time to place any item: raise --time-limit")
            : absl::StrFormat("%s; at its rate so far it needed %.1f s more, and more where "
                              "later items meet more placed ones: raise --time-limit by more "
                              "than that for a whole pass",
                              what, seconds_short));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<OffsetSolution>> SolveOffsetProblems(
    const std::vector<DeviceOffsetProblem>& problems, OffsetStrategy strategy,
    const OffsetSolveOptions& options) {
  const util::Deadline limit(std::chrono::steady_clock::now(), options.time_limit_seconds);
  std::vector<OffsetSolution> solutions;
  solutions.reserve(problems.size());
  for (const DeviceOffsetProblem& p : problems) {
    OffsetSolveOptions left = options;
    left.time_limit_seconds = limit.SecondsLeft();
    if (problems.size() != 1) left.enough_height.reset();
    MG_ASSIGN_OR_RETURN(OffsetSolution s, SolveOffsetProblem(p.problem, strategy, left));
    solutions.push_back(std::move(s));
  }
  return solutions;
}

absl::Status PlaceOffsets(const graph::Graph& graph, const Liveness& liveness,
                          OffsetStrategy strategy, const OffsetSolveOptions& options,
                          Plan& plan) {
  MG_RETURN_IF_ERROR(CheckSerialExecution(plan.execution, OffsetStrategyName(strategy),
                                          SerialReliance::kOffsets));
  const util::Deadline limit(std::chrono::steady_clock::now(), options.time_limit_seconds);
  // FinishPlan sets the offsets per value again at the end: not held through the search
  // (8 bytes a value, at the peak of a 4M-op net's run).
  std::vector<int64_t>().swap(plan.offset_of_value);
  MG_ASSIGN_OR_RETURN(std::vector<DeviceOffsetProblem> problems,
                      OffsetProblemsFor(graph, liveness, plan.alignment));
  // The limit covers building the problems, and applying and checking the offsets after the
  // search, which the search leaves.
  const double building = limit.SecondsSpent();
  OffsetSolveOptions solve = options;
  solve.time_limit_seconds = std::max(
      0.0, options.time_limit_seconds - building * (1 + time_shares::kApplyPerBuild));
  MG_ASSIGN_OR_RETURN(std::vector<OffsetSolution> solutions,
                      SolveOffsetProblems(problems, strategy, solve));
  return ApplyOffsetSolutions(graph, liveness, std::move(problems), std::move(solutions), plan);
}

}  // namespace memonger
