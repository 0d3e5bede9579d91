#include "memonger/planner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/control_regions.h"
#include "memonger/enforced_inplace.h"
#include "memonger/memory_order.h"
#include "memonger/offsets/offset_planning.h"
#include "memonger/sharing/exact_sharing.h"
#include "memonger/sharing/interference.h"
#include "memonger/sharing/memonger_dag.h"
#include "memonger/sharing/memonger_fast.h"
#include "memonger/sharing/sharing.h"
#include "memonger/time_shares.h"
#include "util/checked_math.h"
#include "util/deadline.h"
#include "util/limits.h"
#include "util/status_macros.h"

namespace memonger {

absl::Status CheckServesParallelExecution(PlannerKind planner) {
  constexpr ExecutionModel kParallel = ExecutionModel::kParallel;
  switch (planner) {
    case PlannerKind::kGreedyBySize:
    case PlannerKind::kBestFit:
    case PlannerKind::kExact:
      return CheckSerialExecution(kParallel, PlannerName(planner), SerialReliance::kOffsets);
    case PlannerKind::kMemongerGreedy:
    case PlannerKind::kMemongerDp:
      return CheckSerialExecution(kParallel, PlannerName(planner), SerialReliance::kInterference);
    case PlannerKind::kMemongerFast:
      return CheckSerialExecution(kParallel, PlannerName(planner), SerialReliance::kFastPass);
    default:
      return absl::OkStatus();
  }
}

namespace {

constexpr absl::string_view kKnownPlanners =
    "auto, best-fit, greedy-by-size, exact, exact-sharing, memonger-dag, memonger-greedy, "
    "memonger-dp, memonger-fast, none";

bool IsOffsetPlanner(PlannerKind planner) {
  return planner == PlannerKind::kGreedyBySize || planner == PlannerKind::kBestFit ||
         planner == PlannerKind::kExact || planner == PlannerKind::kAuto;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The offset planners, each an OffsetStrategy run on every device's problem.
absl::Status PlaceWithOffsets(const graph::Graph& graph, const Liveness& liveness,
                              const PlanOptions& options, Plan& plan) {
  OffsetStrategy strategy = OffsetStrategy::kAuto;
  switch (options.planner) {
    case PlannerKind::kGreedyBySize: strategy = OffsetStrategy::kGreedyBySize; break;
    case PlannerKind::kBestFit: strategy = OffsetStrategy::kBestFit; break;
    case PlannerKind::kExact: strategy = OffsetStrategy::kExact; break;
    default: break;
  }
  // No placement fits where the bound does not: one quick valid one answers the caller.
  const bool searching = strategy == OffsetStrategy::kAuto || strategy == OffsetStrategy::kExact;
  if (searching && options.enough_arena_bytes.has_value() &&
      plan.lower_bound_bytes > *options.enough_arena_bytes) {
    strategy = OffsetStrategy::kGreedyBySize;
  }
  OffsetSolveOptions solve;
  solve.time_limit_seconds = options.time_limit_seconds;
  solve.threads = options.threads;
  solve.exact_progress = options.exact_progress;
  solve.stop = options.stop;
  solve.enough_height = options.enough_arena_bytes;
  return PlaceOffsets(graph, liveness, strategy, solve, plan);
}

absl::Status ValidateOptions(const PlanOptions& options) {
  MG_RETURN_IF_ERROR(util::CheckAlignment(options.alignment, "alignment"));
  if (options.memonger.size_blind && !IsMemongerBaseline(options.planner) &&
      options.planner != PlannerKind::kNone) {
    return absl::InvalidArgumentError(absl::StrCat(
        "planning without sizes (size-blind) is for the memonger baselines (memonger-dag, "
        "memonger-greedy, memonger-dp, memonger-fast); ", PlannerName(options.planner),
        " needs every value's size: give the graph inputs' shapes (--input-shape)"));
  }
  MG_RETURN_IF_ERROR(util::CheckThreads(options.threads, "threads"));
  return util::CheckTimeLimit(options.time_limit_seconds, "time limit").status();
}

// Every planned alias class in memory of its own, aligned, must fit in int64 for the plan's sums.
absl::Status CheckNaiveFits(const Liveness& liveness, int64_t alignment) {
  int64_t total = 0;
  for (graph::ValueId id = 0; id < static_cast<graph::ValueId>(liveness.planned.size()); ++id) {
    if (!liveness.planned[id] || liveness.alias_root[id] != id) continue;
    const auto aligned = util::CheckedAlignUp(liveness.class_bytes[id], alignment);
    const auto sum = aligned ? util::CheckedAdd(total, *aligned) : std::nullopt;
    if (!sum) {
      return absl::InvalidArgumentError(
          "the net's values together need more than 2^63 bytes; no plan can hold them");
    }
    total = *sum;
  }
  return absl::OkStatus();
}

absl::StatusOr<SharingGroups> SharingGroupsFor(const graph::Graph& graph,
                                               const Liveness& liveness,
                                               const PlanOptions& options, Plan& plan,
                                               std::vector<std::string>& names) {
  const SharingRun run{options.alignment, options.execution, options.time_limit_seconds};
  switch (options.planner) {
    case PlannerKind::kGreedyBySize:
    case PlannerKind::kBestFit:
    case PlannerKind::kExact:
    case PlannerKind::kAuto:
      return absl::InternalError("offset planners have no sharing groups");
    case PlannerKind::kNone: {
      SharingGroups groups;
      for (graph::ValueId id = 0; id < graph.num_values(); ++id) {
        if (liveness.planned[id] && liveness.alias_root[id] == id) groups.push_back({id});
      }
      return groups;
    }
    case PlannerKind::kMemongerDag:
      return PlanMemongerDag(graph, liveness, options.memonger, options.execution, &names);
    case PlannerKind::kMemongerGreedy:
      return PlanMemongerInterference(graph, liveness, options.memonger, run,
                                      /*dynamic_programming=*/false, &names);
    case PlannerKind::kMemongerDp:
      return PlanMemongerInterference(graph, liveness, options.memonger, run,
                                      /*dynamic_programming=*/true, &names);
    case PlannerKind::kMemongerFast: {
      if (options.execution == ExecutionModel::kParallel) {
        MG_RETURN_IF_ERROR(CheckServesParallelExecution(options.planner));
      }
      MG_ASSIGN_OR_RETURN(MemongerFastResult result, PlanMemongerFast(graph, liveness));
      names = std::move(result.names);
      return std::move(result.groups);
    }
    case PlannerKind::kExactSharing: {
      // For a parallel executor, disjoint serial lifetimes do not order two values: the pairs
      // happens-before does not order conflict too.
      const std::vector<SharingItem> items = SharingItems(graph, liveness, options.alignment);
      std::vector<std::pair<int, int>> conflicts;
      if (options.execution == ExecutionModel::kParallel) {
        // The happens-before pairs cost O(values^2) queries: bounded as the search is.
        if (items.size() > static_cast<size_t>(kMaxSearchItems)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "exact-sharing for a parallel executor handles at most ", kMaxSearchItems,
              " values; this net has ", items.size(), ": use memonger-dag"));
        }
        conflicts = ParallelConflicts(graph, liveness, items);
      }
      MG_ASSIGN_OR_RETURN(ExactSharingResult result,
                          PlanExactSharing(items, options.time_limit_seconds, conflicts));
      plan.proven_optimal = result.proven_optimal;
      if (result.first_fit_cut > 0) {
        plan.notes.push_back(absl::StrCat(
            "the time limit cut exact-sharing's first-fit grouping short: ", result.first_fit_cut,
            " of ", items.size(),
            " values were grouped by a quick rule (each joins the buffer whose values all end "
            "first, if they end before it starts), so the sum of buffers is higher than first "
            "fit's; raise --time-limit for a whole first fit"));
      }
      return std::move(result.groups);
    }
  }
  return absl::InternalError("unknown planner");
}

// Every planned alias class in exactly one group (BuildSharingPlan's precondition).
absl::Status CheckGroups(const graph::Graph& graph, const Liveness& liveness,
                         const SharingGroups& groups, absl::string_view planner) {
  std::vector<bool> seen(graph.num_values(), false);
  for (const std::vector<graph::ValueId>& group : groups) {
    for (graph::ValueId root : group) {
      if (root < 0 || root >= graph.num_values() || !liveness.planned[root] ||
          liveness.alias_root[root] != root || seen[root]) {
        return absl::InternalError(absl::StrCat(
            "planner ", planner, " grouped value #", root,
            ", which is not a planned alias class or appears twice"));
      }
      seen[root] = true;
    }
  }
  for (graph::ValueId id = 0; id < graph.num_values(); ++id) {
    if (liveness.planned[id] && liveness.alias_root[id] == id && !seen[id]) {
      return absl::InternalError(absl::StrCat("planner ", planner, " left '",
                                              graph.value(id).DisplayName(), "' without a buffer"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::string_view PlannerName(PlannerKind planner) {
  switch (planner) {
    case PlannerKind::kNone: return "none";
    case PlannerKind::kMemongerDag: return "memonger-dag";
    case PlannerKind::kMemongerGreedy: return "memonger-greedy";
    case PlannerKind::kMemongerDp: return "memonger-dp";
    case PlannerKind::kMemongerFast: return "memonger-fast";
    case PlannerKind::kExactSharing: return "exact-sharing";
    case PlannerKind::kGreedyBySize: return "greedy-by-size";
    case PlannerKind::kBestFit: return "best-fit";
    case PlannerKind::kExact: return "exact";
    case PlannerKind::kAuto: return "auto";
  }
  return "none";
}

absl::StatusOr<PlannerKind> ParsePlanner(absl::string_view name) {
  for (PlannerKind planner : {PlannerKind::kNone, PlannerKind::kMemongerDag,
                              PlannerKind::kMemongerGreedy, PlannerKind::kMemongerDp,
                              PlannerKind::kMemongerFast, PlannerKind::kExactSharing,
                              PlannerKind::kGreedyBySize,
                              PlannerKind::kBestFit, PlannerKind::kExact, PlannerKind::kAuto}) {
    if (PlannerName(planner) == name) return planner;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown planner '", util::Quote(name), "' (known: ", kKnownPlanners, ")"));
}

bool IsMemongerBaseline(PlannerKind planner) {
  return planner == PlannerKind::kMemongerDag || planner == PlannerKind::kMemongerGreedy ||
         planner == PlannerKind::kMemongerDp || planner == PlannerKind::kMemongerFast;
}

absl::StatusOr<Plan> PlanMemory(const graph::Graph& graph, const PlanOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  // The whole call's limit: the order search gets its share, the planner what is left.
  const util::Deadline limit(start, options.time_limit_seconds);
  MG_RETURN_IF_ERROR(ValidateOptions(options));
  MG_RETURN_IF_ERROR(CheckEnforcedInPlace(graph));
  // Control-flow regions run as written (graph/control_regions.h), one op at a time.
  if (options.order == OrderKind::kMemoryAware) {
    MG_RETURN_IF_ERROR(graph::RefuseControlRegions(graph, "the memory-aware order"));
  }
  if (options.execution == ExecutionModel::kParallel) {
    MG_RETURN_IF_ERROR(graph::RefuseControlRegions(graph, "a parallel execution model"));
  }
  // Size-blind decisions need no types; without them every value counts as one byte.
  bool all_typed = true;
  for (const graph::Value& v : graph.values()) {
    if (v.type.has_value()) continue;
    all_typed = false;
    if (!options.memonger.size_blind) {
      return absl::FailedPreconditionError(absl::StrCat(
          "value '", v.DisplayName(), "' has no type: run shape inference before planning"));
    }
  }
  LivenessOptions liveness_options = options.liveness.CallerChosen();
  // One blob per name, as in Caffe2. Two ops writing one name need not be ordered in our graph
  // (it has no write-after-write edges), so for a parallel executor a version joins its name's
  // class only when it is ordered after it.
  liveness_options.blob_per_name = IsMemongerBaseline(options.planner);
  liveness_options.names_need_order = options.execution == ExecutionModel::kParallel;
  liveness_options.size_blind = !all_typed;
  // In-place reuse is the offset planners' and exact-sharing's: `none` gives every value
  // memory of its own, Caffe2's memonger shares blobs by name only, a parallel executor may
  // still run an input's other readers while an op writes over it, and without sizes no two
  // values are known to be equal.
  liveness_options.in_place = options.liveness.in_place && options.planner != PlannerKind::kNone &&
                              !IsMemongerBaseline(options.planner) &&
                              options.execution == ExecutionModel::kSerial && all_typed;
  Schedule schedule;
  std::optional<OrderSearch> order_search;
  PlanOptions planner_options = options;
  if (options.order == OrderKind::kMemoryAware) {
    // The order search takes its share of the time limit, the planner what is left (below).
    MemoryOrderOptions order_options;
    order_options.alignment = options.alignment;
    // The order search counts values apart from their inputs (its classes may not depend on
    // the order it is choosing); in-place reuse applies to the order it finds.
    order_options.liveness = liveness_options;
    order_options.liveness.in_place = false;
    order_options.time_limit_seconds = limit.Share(time_shares::kOrderSearch).limit_seconds();
    order_options.stop = options.stop;
    order_options.seeds = options.order_seeds;
    order_options.exact = options.order_exact_search;
    MG_ASSIGN_OR_RETURN(MemoryOrder best, FindMemoryAwareOrder(graph, order_options));
    schedule.order = OrderKind::kMemoryAware;
    schedule.ops = std::move(best.ops);
    order_search = OrderSearch{best.given_peak_bytes, best.method, best.proven_optimal,
                               best.exact_cut_short, best.seconds, std::move(best.tried)};
  } else {
    MG_ASSIGN_OR_RETURN(schedule, MakeSchedule(graph, options.order));
  }
  const auto liveness_start = std::chrono::steady_clock::now();
  std::optional<Liveness> computed;
  if (order_search.has_value() && liveness_options.in_place) {
    // The search counted values apart; with in-place reuse both orders are counted again, and
    // the given order is kept where it is not higher (an order chosen without in-place pairs
    // may lose more of them than it gains). The search's proof (no order lower) is of the
    // other count.
    auto peak_of = [&](const Liveness& l) {
      const std::vector<int64_t> live = LiveBytesPerStep(l, options.alignment);
      return live.empty() ? int64_t{0} : *std::max_element(live.begin(), live.end());
    };
    MG_ASSIGN_OR_RETURN(Schedule given, MakeSchedule(graph, OrderKind::kGiven));
    given.order = OrderKind::kMemoryAware;
    MG_ASSIGN_OR_RETURN(Liveness given_liveness,
                        ComputeLiveness(graph, std::move(given), liveness_options));
    MG_ASSIGN_OR_RETURN(Liveness found_liveness,
                        ComputeLiveness(graph, std::move(schedule), liveness_options));
    const int64_t given_bound = peak_of(given_liveness);
    order_search->given_lower_bound_bytes = given_bound;
    order_search->proven_optimal = false;
    if (given_bound <= peak_of(found_liveness)) {
      if (order_search->method != "given") {
        order_search->method = absl::StrCat("given (", order_search->method,
                                            "'s order is not lower with in-place reuse)");
      }
      computed = std::move(given_liveness);
    } else {
      computed = std::move(found_liveness);
    }
  } else {
    MG_ASSIGN_OR_RETURN(computed, ComputeLiveness(graph, std::move(schedule), liveness_options));
  }
  Liveness liveness = *std::move(computed);
  const double liveness_seconds = SecondsSince(liveness_start);
  MG_RETURN_IF_ERROR(CheckNaiveFits(liveness, options.alignment));
  // The time limit is the whole call's: the planner gets what the order and liveness left.
  // exact-sharing also leaves, for building the plan from its groups after it, as long as
  // liveness took (about what that costs: both O(values log values); 0.4 s on a 400,000-op
  // training net). Not the order search's time: that is a share of the limit, not a cost.
  const double after_planner =
      options.planner == PlannerKind::kExactSharing ? liveness_seconds : 0.0;
  planner_options.time_limit_seconds =
      std::max(0.0, options.time_limit_seconds - limit.SecondsSpent() - after_planner);

  // Offsets over serial lifetimes are not safe under a parallel executor; memonger's token DFS
  // is: `auto` runs memonger-dag there.
  const bool auto_parallel = planner_options.planner == PlannerKind::kAuto &&
                             planner_options.execution == ExecutionModel::kParallel;
  if (auto_parallel) planner_options.planner = PlannerKind::kMemongerDag;
  Plan plan;
  plan.model = planner_options.model_name.empty() ? graph.name() : planner_options.model_name;
  plan.planner = std::string(PlannerName(planner_options.planner));
  plan.execution = planner_options.execution;
  InitPlan(graph, liveness, planner_options.alignment, plan, /*top_values=*/8,
           /*copy_lifetimes=*/false);
  plan.order_search = order_search;
  if (IsOffsetPlanner(planner_options.planner)) {
    MG_RETURN_IF_ERROR(PlaceWithOffsets(graph, liveness, planner_options, plan));
    plan.lifetime = std::move(liveness.lifetime);
    plan.planning_seconds = SecondsSince(start);
    return plan;
  }
  std::vector<std::string> names;
  MG_ASSIGN_OR_RETURN(SharingGroups groups,
                      SharingGroupsFor(graph, liveness, planner_options, plan, names));
  MG_RETURN_IF_ERROR(CheckGroups(graph, liveness, groups, plan.planner));
  BuildSharingPlan(graph, liveness, groups, plan);
  for (size_t g = 0; g < groups.size() && g < names.size(); ++g) {
    if (groups[g].empty() || names[g].empty()) continue;
    plan.buffers[plan.buffer_of_value[groups[g].front()]].blob_name = names[g];
  }
  FinishPlan(plan);
  plan.lifetime = std::move(liveness.lifetime);
  if (auto_parallel) plan.planner = "auto (memonger-dag: parallel execution)";
  plan.planning_seconds = SecondsSince(start);
  return plan;
}

}  // namespace memonger
