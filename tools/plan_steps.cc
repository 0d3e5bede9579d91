#include "tools/plan_steps.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "graph/fp16_storage.h"
#include "graph/gradient_builder.h"
#include "graph/update_in_backward.h"
#include "graph/records.h"
#include "kernels/tensor_files.h"
#include "memonger/device_bytes.h"
#include "memonger/recompute.h"
#include "memonger/verify_plan.h"
#include "tools/fit_nets.h"
#include "util/bytes.h"
#include "util/file_io.h"
#include "util/limits.h"
#include "util/status_macros.h"
#include "workloads/workloads.h"

namespace memonger::tools {

std::string OneLine(absl::string_view message) {
  std::string out;
  out.reserve(message.size());
  for (absl::string_view line : absl::StrSplit(message, '\n', absl::SkipWhitespace())) {
    if (!out.empty()) out += "; ";
    absl::StrAppend(&out, absl::StripAsciiWhitespace(line));
  }
  // Names in messages come from files: bytes that are not text are shown escaped.
  return util::EscapeAsText(out);
}

bool IsRecordsGraph(const graph::Graph& graph) {
  if (graph.num_ops() == 0) return false;  // a model with no op left (not a trace)
  for (const auto& op : graph.ops()) {
    if (op.type != graph::kRecordStepOpType) return false;
  }
  return true;
}

absl::StatusOr<NetSource> MakeNetSource(const Flags& flags) {
  NetSource source;
  source.flags = &flags;
  source.load.bindings = flags.bindings;
  source.load.limits = flags.limits;
  source.load.keep_data = flags.execute != "none" && !flags.verify;
  if (source.load.keep_data && !flags.inputs.empty()) {
    MG_ASSIGN_OR_RETURN(auto inputs, alloc::ReadTensorFiles(flags.inputs, flags.limits));
    if (flags.ranges.ranges.empty() && flags.fit.empty()) {
      for (const auto& [name, data] : inputs) {
        source.load.bindings.data_shapes[name] = data.type.dims;
      }
    }
    source.run_inputs =
        std::make_shared<const std::map<std::string, graph::TensorData>>(std::move(inputs));
  }
  if (!flags.workload.empty()) {
    MG_ASSIGN_OR_RETURN(source.workload, graph::ParseWorkloadSpec(flags.workload));
  }
  if (!flags.fit.empty() && !source.workload.has_value() &&
      source.load.bindings.dims.count(flags.fit) == 0) {
    source.load.bindings.dims[flags.fit] = 1;
  }
  return source;
}

absl::StatusOr<graph::Graph> LoadTypedNet(const NetSource& source, const GraphRequest& request) {
  const Flags& flags = *source.flags;
  const std::optional<int64_t>& fit_value = request.fit_value;
  const absl::StatusOr<PlannerKind> planner = ParsePlanner(flags.planner);
  const bool baseline = planner.ok() && IsMemongerBaseline(*planner);
  if (source.workload.has_value()) {
    graph::WorkloadSpec spec = *source.workload;
    if (fit_value.has_value()) spec = graph::WithParam(spec, flags.fit, absl::StrCat(*fit_value));
    // typed already; a symbolic one declares its inputs in its symbols (for symbolic plans)
    return request.symbolic_workload ? graph::BuildSymbolicWorkload(spec, nullptr)
                                     : graph::BuildWorkload(spec);
  }
  graph::LoadOptions load = source.load;
  if (fit_value.has_value()) load.bindings.dims[flags.fit] = *fit_value;
  // A training net differentiates through what reads a weight: nothing of it is folded.
  load.fold_params = flags.mode != "training";
  absl::StatusOr<graph::Graph> g = source.model_bytes != nullptr
                                       ? graph::LoadModelBytes(*source.model_bytes, flags.model, load)
                                       : graph::LoadModel(flags.model, load);
  if (!g.ok()) return g.status();
  const std::vector<std::string> unknown = graph::InputsWithoutShape(*g, load.bindings);
  if (request.size_blind != nullptr && baseline && !unknown.empty()) {
    *request.size_blind = true;
    if (!flags.size_blind && request.notes != nullptr) {
      request.notes->push_back(absl::StrCat(
          "the shapes of ", unknown.size(), " graph input(s) are unknown (",
          util::Quote(unknown.front()), unknown.size() > 1 ? ", ..." : "",
          "): planning size-blind, as Caffe2's memonger does without blob shapes; give "
          "--input-shape for byte sizes"));
    }
    return g;
  }
  MG_RETURN_IF_ERROR(graph::InferShapes(*g, load.bindings));
  return g;
}

absl::StatusOr<graph::Graph> FinishNet(const NetSource& source, graph::Graph net) {
  const Flags& flags = *source.flags;
  if (flags.mode == "training" && !graph::HasGradientOps(net)) {
    // A forward net: training means its backward pass too (memonger's AddGradientOperators).
    MG_ASSIGN_OR_RETURN(net, graph::AddGradientOps(net, flags.losses));
  }
  if (flags.update_in_backward > 0) {
    MG_ASSIGN_OR_RETURN(net, graph::UpdateInBackward(net, flags.update_in_backward));
  }
  if (!flags.store_fp16.empty()) {
    MG_ASSIGN_OR_RETURN(net, graph::StoreInFp16(net, flags.store_fp16));
  }
  return net;
}

absl::StatusOr<graph::Graph> MakeGraph(const NetSource& source, const GraphRequest& request) {
  bool size_blind = false;
  GraphRequest load = request;
  if (request.size_blind != nullptr) load.size_blind = &size_blind;
  MG_ASSIGN_OR_RETURN(graph::Graph g, LoadTypedNet(source, load));
  if (size_blind) {
    *request.size_blind = true;
    return g;
  }
  return FinishNet(source, std::move(g));
}

std::function<absl::StatusOr<graph::Graph>(
    const absl::flat_hash_map<std::string, std::vector<int64_t>>& measured)>
MeasuringRetype(NetSource source) {
  source.load.notes = nullptr;
  source.load.keep_data = false;
  source.load.keep_folded_data = true;
  return [source = std::move(source)](
             const absl::flat_hash_map<std::string, std::vector<int64_t>>& measured) {
    NetSource at = source;
    at.load.measured_sizes = measured;
    return MakeGraph(at);
  };
}

namespace {

// Names the flags give must be values of the net: a typo would otherwise change nothing and
// say nothing.
absl::Status CheckValueNames(const Flags& flags, const graph::Graph& graph) {
  for (const auto& [flag, names] :
       {std::pair<const char*, const std::vector<std::string>*>{"--dont-share", &flags.dont_share},
        {"--head", &flags.heads},
        {"--static", &flags.static_names},
        {"--param-grad", &flags.param_grads},
        {"--loss", &flags.losses}}) {
    for (const std::string& name : *names) {
      if (graph.FindVersions(name).empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(flag, " ", util::Quote(name), ": the net has no value of that name"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PlanOptions> MakePlanOptions(const Flags& flags, const graph::Graph& graph) {
  PlanOptions options;
  MG_ASSIGN_OR_RETURN(options.planner, ParsePlanner(flags.planner));
  MG_ASSIGN_OR_RETURN(options.order, ParseOrder(flags.order));
  if (flags.execution.empty()) {
    options.execution =
        graph.prefers_parallel() ? ExecutionModel::kParallel : ExecutionModel::kSerial;
  } else {
    MG_ASSIGN_OR_RETURN(options.execution, ParseExecution(flags.execution));
  }
  options.memonger.mode = flags.mode == "training" ? Mode::kTraining : Mode::kInference;
  MG_RETURN_IF_ERROR(CheckValueNames(flags, graph));
  options.alignment = flags.alignment;
  options.time_limit_seconds = flags.time_limit;
  options.threads = flags.threads;
  options.liveness.plan_static = flags.plan_static;
  options.liveness.views = flags.views;
  options.liveness.in_place = flags.in_place;
  options.model_name = flags.model.empty() ? flags.workload : flags.model;
  options.memonger.losses = flags.losses;
  options.memonger.share_activations = flags.share_activations;
  options.memonger.share_all_activations = flags.share_all_activations;
  options.memonger.namescope = flags.namescope;
  options.memonger.param_grads = flags.param_grads;
  options.memonger.dont_share = flags.dont_share;
  options.memonger.heads = flags.heads;
  options.liveness.static_names = flags.static_names;
  options.liveness.recycle_inputs = flags.recycle_inputs;
  options.memonger.size_blind = flags.size_blind;
  if (!flags.losses.empty() && options.memonger.mode != Mode::kTraining) {
    return absl::InvalidArgumentError("--loss needs --mode training");
  }
  if (IsRecordsGraph(graph) && options.order != OrderKind::kGiven) {
    return absl::InvalidArgumentError(
        "usage records and traces have fixed steps: only --order given applies");
  }
  return options;
}

absl::Status CheckPlannerPlan(const graph::Graph& graph, const Plan& plan) {
  if (absl::Status s = VerifyPlan(graph, plan); !s.ok()) {
    return absl::InternalError(
        absl::StrCat("the planner '", plan.planner, "' produced an invalid plan: ", s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<Plan> PlanWithFlags(const Flags& flags, const PlanOptions& options,
                                   graph::Graph& graph) {
  if (flags.recompute == "none") return PlanMemory(graph, options);
  MG_ASSIGN_OR_RETURN(const RecomputeKind kind, ParseRecompute(flags.recompute));
  // The budget is device bytes; recomputation aims the arena at what the rest leaves of it.
  MG_ASSIGN_OR_RETURN(const int64_t outside,
                      OutsideArenaBytes(graph, options.liveness, flags.optimizer));
  absl::StatusOr<RecomputedPlan> recomputed =
      PlanWithRecomputation(graph, options, kind, ArenaShare(flags.budget, outside));
  if (absl::IsResourceExhausted(recomputed.status()) && outside > 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        recomputed.status().message(), " (the arena's share of the budget: ",
        util::FormatBytes(flags.budget), " less ", util::FormatBytes(outside),
        " of params, constants and optimizer state outside it)"));
  }
  MG_RETURN_IF_ERROR(recomputed.status());
  graph = std::move(recomputed->graph);
  return std::move(recomputed->plan);
}

NetSource ForManyBindings(const NetSource& source, const graph::SymbolBindings& probe,
                          const graph::Graph* loaded) {
  if (source.workload.has_value() || source.load.keep_data) return source;
  const Flags& flags = *source.flags;
  NetSource full = source;
  if (full.model_bytes == nullptr) {
    const bool text = !absl::EndsWithIgnoreCase(flags.model, ".onnx") &&
                      !absl::EndsWithIgnoreCase(flags.model, ".pb");
    absl::StatusOr<std::string> bytes = util::ReadInputFile(
        flags.model, source.load.limits,
        text ? util::FileContent::kText : util::FileContent::kBinary);
    if (!bytes.ok()) return source;
    full.model_bytes = std::make_shared<const std::string>(*std::move(bytes));
  }
  absl::StatusOr<std::string> planning =
      graph::PlanningBytes(*full.model_bytes, flags.model, full.load);
  if (!planning.ok() || planning->size() == full.model_bytes->size()) return full;
  NetSource stripped = full;
  stripped.model_bytes = std::make_shared<const std::string>(*std::move(planning));
  for (NetSource* s : {&full, &stripped}) {
    for (const auto& [symbol, value] : probe) s->load.bindings.dims[symbol] = value;
    s->load.notes = nullptr;
  }
  std::optional<absl::StatusOr<graph::Graph>> imported;
  if (loaded == nullptr) imported.emplace(MakeGraph(full));
  if (imported.has_value() && !imported->ok()) return full;
  const graph::Graph& a = loaded != nullptr ? *loaded : **imported;
  absl::StatusOr<graph::Graph> b = MakeGraph(stripped);
  if (!b.ok() || !graph::SamePlanningGraph(a, *b)) return full;
  stripped.load = source.load;
  return stripped;
}

absl::StatusOr<FitResult> FindFit(const NetSource& given_source, const PlanOptions& options,
                                  bool training,
                                  std::function<void(const FitProgress&)> progress,
                                  const graph::Graph* loaded) {
  // The search binds --fit's symbol, which the source binds to 1 already.
  const NetSource source = ForManyBindings(given_source, {}, loaded);
  const Flags& flags = *source.flags;
  const int64_t budget = flags.budget;
  FitSearch search;
  search.progress = std::move(progress);
  search.symbol = flags.fit;
  search.budget = budget;
  search.optimizer = flags.optimizer;
  search.cures.push_back({"given", options});
  if (options.order != OrderKind::kMemoryAware) {
    search.cures.front().name = std::string(OrderName(options.order));
    PlanOptions memory_aware = options;
    memory_aware.order = OrderKind::kMemoryAware;
    search.cures.push_back({"memory-aware", memory_aware});
  } else {
    search.cures.front().name = "memory-aware";
  }
  if (training) search.cures.push_back({"recompute", options, /*recompute=*/true});
  const Optimizer optimizer = flags.optimizer;
  auto point_of = [optimizer](const graph::Graph& g, const Plan& plan) -> absl::StatusOr<FitPoint> {
    MG_RETURN_IF_ERROR(CheckPlannerPlan(g, plan));
    FitPoint point;
    point.arena_bytes = plan.arena_bytes;
    point.device_bytes = DeviceBytesOf(plan, optimizer).total();
    point.lower_bound_bytes = plan.lower_bound_bytes;
    return point;
  };
  FitNets nets(source);
  // The memory-aware order found at the last value, for the next: the same net at another size
  // (tried there beside the portfolio), and whether the exact search ran out of time on it,
  // which it would do again at the next size (on alibi_encoder each plan spent its whole order
  // search share there, 0.75 s, and found nothing better).
  struct OrderSeed {
    std::vector<graph::OpId> ops;
    bool exact_search = true;
  };
  std::map<std::string, OrderSeed> seeded;  // by cure
  // The recompute cure tries its ladder at each size (microseconds a rung). The search asks
  // whether the rung with the lowest peak brings the lower bound within the budget, and places
  // nothing: an arena is never below its lower bound, so a size it leaves over the budget
  // cannot fit, and one within is placed at the answer (kPlaceCheapest: the fewest FLOPs that
  // fit, else kPlaceLowest), a size lower where even that placement misses. Near the budget a
  // placement takes the offset planner up to its time limit (0.2-0.4 s each on densenet121),
  // where the bound takes microseconds. Where a size's net has other candidates than the
  // ladder's, the portfolio searches it and its choice is placed (the first that fits; the
  // fewest FLOPs at the answer).
  std::optional<RecomputeLadder> ladder;
  std::set<int64_t> bound_only;  // sizes the search judged by the bound alone
  enum class Stage { kSearch, kPlaceLowest, kPlaceCheapest };
  Stage stage = Stage::kSearch;
  bool fewest_flops = false;
  auto plan_at = [&](int64_t value, const FitCure& cure) -> absl::StatusOr<FitPoint> {
    if (options.stop != nullptr && options.stop->load()) {
      return absl::CancelledError("--fit: stopped");
    }
    MG_ASSIGN_OR_RETURN(const graph::Graph* typed_graph, nets.At(value));
    const graph::Graph& g = *typed_graph;
    PlanOptions cure_options = cure.options;
    // The search asks only whether the value fits: the placement stops once that is decided.
    MG_ASSIGN_OR_RETURN(const int64_t outside,
                        OutsideArenaBytes(g, cure_options.liveness, optimizer));
    cure_options.enough_arena_bytes = ArenaShare(budget, outside);
    OrderSeed& seed = seeded[cure.name];
    if (!seed.ops.empty()) cure_options.order_seeds = {seed.ops};
    cure_options.order_exact_search = seed.exact_search;
    MG_ASSIGN_OR_RETURN(Plan plan, PlanMemory(g, cure_options));
    if (!cure.recompute && plan.order_search.has_value()) {
      seed.ops.clear();
      for (const PlanStep& step : plan.steps) seed.ops.push_back(step.op);
      seed.exact_search = seed.exact_search && !plan.order_search->exact_cut_short;
    }
    MG_ASSIGN_OR_RETURN(FitPoint point, point_of(g, plan));
    if (!cure.recompute || point.device_bytes <= budget) return point;
    // Recomputation aims the arena at what the rest leaves of the budget.
    const int64_t arena_budget = ArenaShare(budget, outside);
    RecomputeOptions r = RecomputeOptionsFor(cure.options, RecomputeKind::kAuto, arena_budget);
    // The ladder is climbed once, at the first size that needs recomputation, and tried at
    // every size after it (RecomputeLadder); a size whose net has other candidates is searched
    // on its own.
    if (!ladder.has_value()) {
      MG_ASSIGN_OR_RETURN(ladder, ClimbRecomputation(g, r));
    }
    absl::StatusOr<RecomputeChoice> chosen = ChooseFromLadder(
        g, *ladder, r,
        stage == Stage::kPlaceCheapest ? LadderPick::kFewestFlops : LadderPick::kLowestPeak);
    const bool from_ladder = !absl::IsFailedPrecondition(chosen.status());
    if (!from_ladder) {
      r.first_fit = !fewest_flops;
      chosen = ChooseRecomputation(g, r);
    }
    MG_ASSIGN_OR_RETURN(RecomputeChoice choice, std::move(chosen));
    // (A choice of no ops is the plain net, whose placement missed above: placed below.)
    if (from_ladder && stage == Stage::kSearch && choice.fits && !choice.ops.empty()) {
      point.lower_bound_bytes = choice.lower_bound_bytes;
      point.arena_bytes = choice.lower_bound_bytes;
      point.device_bytes = choice.lower_bound_bytes + outside;
      point.recomputed_ops = static_cast<int>(choice.ops.size());
      point.extra_flops = choice.extra_flops;
      point.forward_flops = choice.forward_flops;
      bound_only.insert(value);
      return point;
    }
    PlanOptions recompute_options = cure.options;
    recompute_options.enough_arena_bytes = arena_budget;
    if (!choice.fits) {
      // Does not fit: the least it needs is the lowest lower bound recomputation reached.
      point.lower_bound_bytes = choice.lower_bound_bytes;
      point.arena_bytes = choice.lower_bound_bytes;
      point.device_bytes = choice.lower_bound_bytes + outside;
      return point;
    }
    MG_ASSIGN_OR_RETURN(RecomputedPlan recomputed,
                        PlanChosenRecomputation(g, recompute_options, std::move(choice)));
    MG_ASSIGN_OR_RETURN(FitPoint rewritten, point_of(recomputed.graph, recomputed.plan));
    if (const std::optional<RecomputeSummary>& summary = recomputed.plan.recompute) {
      rewritten.recomputed_ops = summary->ops;
      rewritten.extra_flops = summary->extra_flops;
      rewritten.forward_flops = summary->forward_flops;
    }
    return rewritten;
  };
  // The sizes each answer rests on, where their nets were retyped, against an import: where
  // one differs, retyping is off and the search runs again on imports alone.
  auto confirmed = [&](const FitResult& fit) -> absl::StatusOr<bool> {
    for (const FitRow& row : fit.rows) {
      for (const std::optional<FitPoint>* point :
           {&row.at_largest, &row.above, &row.also_fits, &row.period_largest}) {
        if (!point->has_value()) continue;
        MG_ASSIGN_OR_RETURN(const bool same, nets.Confirm((*point)->value));
        if (!same) return false;
      }
    }
    return true;
  };
  // The recompute rows' sizes the search only bounded, placed: the answer (the fewest FLOPs
  // first; where the search only bounded it, the lowest peak next; a size lower where neither
  // placement fits: a scan, of no step where the placement reaches the bound, as on every zoo
  // model), and a not-monotone value, dropped where its placement misses.
  auto place = [&](FitResult& fit) -> absl::Status {
    fewest_flops = true;
    for (size_t k = 0; k < fit.rows.size(); ++k) {
      FitRow& row = fit.rows[k];
      const FitCure& cure = search.cures[k];
      if (!cure.recompute) continue;
      const auto began = std::chrono::steady_clock::now();
      for (std::optional<FitPoint>* extra : {&row.also_fits, &row.period_largest}) {
        if (!extra->has_value() || bound_only.count((*extra)->value) == 0) continue;
        stage = Stage::kPlaceLowest;
        MG_ASSIGN_OR_RETURN(FitPoint p, plan_at((*extra)->value, cure));
        ++row.plans;
        p.value = (*extra)->value;
        if (p.device_bytes <= budget) {
          *extra = p;
        } else {
          extra->reset();
        }
      }
      if (!row.also_fits.has_value()) {
        row.period_largest.reset();
        row.period = 0;
      }
      if (row.at_largest.has_value() && row.at_largest->recomputed_ops > 0) {
        const bool placed = bound_only.count(*row.largest) == 0;
        for (int64_t value = *row.largest;; --value) {
          stage = Stage::kPlaceCheapest;
          MG_ASSIGN_OR_RETURN(FitPoint cheapest, plan_at(value, cure));
          ++row.plans;
          if (cheapest.device_bytes <= budget) {
            cheapest.value = value;
            row.at_largest = cheapest;
            break;
          }
          if (placed) break;  // the first that fit stands (the time limit may cut the search)
          stage = Stage::kPlaceLowest;
          MG_ASSIGN_OR_RETURN(FitPoint lowest, plan_at(value, cure));
          ++row.plans;
          lowest.value = value;
          if (lowest.device_bytes <= budget) {
            row.at_largest = lowest;
            break;
          }
          row.above = lowest;
          row.range_ended = false;
          if (value == search.min_value) {
            row.largest.reset();
            row.at_largest.reset();
            break;
          }
          row.largest = value - 1;
        }
      }
      row.seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    }
    stage = Stage::kSearch;
    fewest_flops = false;
    return absl::OkStatus();
  };
  MG_ASSIGN_OR_RETURN(FitResult fit, FindLargestFit(search, plan_at));
  MG_RETURN_IF_ERROR(place(fit));
  MG_ASSIGN_OR_RETURN(const bool same, confirmed(fit));
  if (!same) {
    seeded.clear();
    ladder.reset();
    bound_only.clear();
    MG_ASSIGN_OR_RETURN(fit, FindLargestFit(search, plan_at));
    MG_RETURN_IF_ERROR(place(fit));
  }
  fit.nets_imported = nets.imports();
  fit.nets_retyped = nets.retypes();
  return fit;
}

GraphAt RangeGraphAt(const NetSource& given_source) {
  auto prepared = std::make_shared<const NetSource>(
      ForManyBindings(given_source, given_source.flags->ranges.Low()));
  return [prepared](const graph::SymbolBindings& at) -> absl::StatusOr<graph::Graph> {
    const NetSource& source = *prepared;
    if (source.workload.has_value()) {
      NetSource at_source = source;
      for (const auto& [symbol, value] : at) {
        at_source.workload = graph::WithParam(*at_source.workload, symbol, absl::StrCat(value));
      }
      GraphRequest symbolic;
      symbolic.symbolic_workload = true;
      return MakeGraph(at_source, symbolic);
    }
    NetSource at_source = source;
    at_source.load.notes = nullptr;
    for (const auto& [symbol, value] : at) at_source.load.bindings.dims[symbol] = value;
    return MakeGraph(at_source);
  };
}

absl::StatusOr<graph::ShapeBindings> RangeFixedBindings(const NetSource& source) {
  const Flags& flags = *source.flags;
  graph::ShapeBindings fixed = flags.bindings;
  if (source.workload.has_value()) {
    graph::SymbolBindings values;
    MG_RETURN_IF_ERROR(graph::BuildSymbolicWorkload(*source.workload, &values).status());
    for (const auto& [symbol, value] : values) {
      if (flags.ranges.Find(symbol) == nullptr) fixed.dims[symbol] = value;
    }
  }
  return fixed;
}

}  // namespace memonger::tools
