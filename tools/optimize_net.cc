// optimize-net: loads a model, infers every value's type, plans its memory and reports.
// Thin by design: parse flags, call the library, print, map the Status to an exit code.
//
// Exit codes: 0 success; 1 the input or the run failed (the message on stderr names the file,
// op or value); 2 usage error; 3 the plan does not fit --budget.
#include <unistd.h>  // also defines __GLIBC__ on glibc
#if defined(__GLIBC__)
#include <malloc.h>  // mallopt
#endif

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <iostream>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "allocator/arena.h"
#include "allocator/executor.h"
#include "allocator/graphable.h"
#include "allocator/host_run.h"
#include "allocator/run_data.h"
#include "kernels/tensor_files.h"
#include "graph/fp16_storage.h"
#include "graph/gradient_builder.h"
#include "graph/model_loader.h"
#include "graph/net_def.h"
#include "graph/records.h"
#include "graph/shape_inference.h"
#include "kernels/cuda/kernels_device.h"
#include "kernels/fp16_census.h"
#include "memonger/planner.h"
#include "memonger/recompute.h"
#include "memonger/verify_plan.h"
#include "report/fit.h"
#include "report/symbolic_plan_json.h"
#include "report/what_if_range.h"
#include "report/model_summary.h"
#include "report/net_free.h"
#include "report/net_rewrite.h"
#include "report/plan_ascii.h"
#include "report/plan_html.h"
#include "report/plan_import.h"
#include "report/plan_report.h"
#include "report/what_if.h"
#include "util/bytes.h"
#include "tools/caffe2_exact_run.h"
#include "tools/symbolic_run.h"
#include "tools/cli_flags.h"
#include "tools/phase_clock.h"
#include "util/file_io.h"
#include "util/limits.h"
#include "util/status_macros.h"
#include "workloads/workload_spec.h"
#include "workloads/workloads.h"

namespace {

using memonger::tools::Flags;
using memonger::tools::kExitFailed;
using memonger::tools::kExitOk;
using memonger::tools::kExitOverBudget;
using memonger::tools::kExitUsage;

// A message on one line, however many lines a library (libonnx) put in it: a user's scripts
// and the hostile-input suite read the first line of stderr.
std::string OneLine(absl::string_view message) {
  std::string out;
  out.reserve(message.size());
  for (absl::string_view line : absl::StrSplit(message, '\n', absl::SkipWhitespace())) {
    if (!out.empty()) out += "; ";
    absl::StrAppend(&out, absl::StripAsciiWhitespace(line));
  }
  // Names in messages come from files: bytes that are not text are shown escaped.
  return memonger::util::EscapeAsText(out);
}

bool IsRecordsGraph(const memonger::graph::Graph& graph) {
  if (graph.num_ops() == 0) return false;  // a model with no op left (not a trace)
  for (const auto& op : graph.ops()) {
    if (op.type != memonger::graph::kRecordStepOpType) return false;
  }
  return true;
}

// The bytes of the rewritten net (shared values renamed), checked to compute the same graph.
absl::StatusOr<std::string> RewrittenNetBytes(const memonger::graph::Graph& graph,
                                              const memonger::Plan& plan, const std::string& path,
                                              const Flags& flags) {
  MG_ASSIGN_OR_RETURN(memonger::RewrittenNet rewritten, memonger::RewriteNet(graph, plan));
  const memonger::proto::NetDef reference = memonger::ReferenceNet(graph, plan);
  const absl::Status equal = memonger::VerifyGraphEquality(reference, rewritten.net);
  const absl::Status inplace = memonger::VerifyInplaceBlobs(reference, rewritten.net);
  if (!equal.ok() || !inplace.ok()) {
    return absl::InternalError(absl::StrCat("the rewritten net does not compute the same graph: ",
                                            equal.ok() ? inplace.message() : equal.message()));
  }
  // --insert-free: Caffe2's release_blobs_when_used on the renamed net (static names kept).
  if (flags.insert_free) {
    rewritten.net = memonger::InsertFrees(
        rewritten.net, std::set<std::string>(flags.static_names.begin(), flags.static_names.end()));
  }
  // The extension was checked with the flags.
  const std::string ext =
      absl::AsciiStrToLower(std::filesystem::path(path).extension().string());
  return memonger::graph::SerializeNetDef(rewritten.net,
                                          ext == ".pb" ? memonger::graph::NetFileFormat::kBinary
                                                       : memonger::graph::NetFileFormat::kText);
}

// Names the flags give must be values of the net: a typo would otherwise change nothing and
// say nothing.
absl::Status CheckValueNames(const Flags& flags, const memonger::graph::Graph& graph) {
  for (const auto& [flag, names] :
       {std::pair<const char*, const std::vector<std::string>*>{"--dont-share", &flags.dont_share},
        {"--head", &flags.heads},
        {"--static", &flags.static_names},
        {"--param-grad", &flags.param_grads},
        {"--loss", &flags.losses}}) {
    for (const std::string& name : *names) {
      if (graph.FindVersions(name).empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            flag, " ", memonger::util::Quote(name), ": the net has no value of that name"));
      }
    }
  }
  return absl::OkStatus();
}

// Options from flags. Errors here are usage errors (exit 2) only when CLI11 could not catch
// them; everything else is an input error.
absl::StatusOr<memonger::PlanOptions> MakePlanOptions(const Flags& flags,
                                                      const memonger::graph::Graph& graph) {
  memonger::PlanOptions options;
  MG_ASSIGN_OR_RETURN(options.planner, memonger::ParsePlanner(flags.planner));
  MG_ASSIGN_OR_RETURN(options.order, memonger::ParseOrder(flags.order));
  if (flags.execution.empty()) {
    options.execution = graph.prefers_parallel() ? memonger::ExecutionModel::kParallel
                                                 : memonger::ExecutionModel::kSerial;
  } else {
    MG_ASSIGN_OR_RETURN(options.execution, memonger::ParseExecution(flags.execution));
  }
  options.mode = flags.mode == "training" ? memonger::Mode::kTraining : memonger::Mode::kInference;
  MG_RETURN_IF_ERROR(CheckValueNames(flags, graph));
  options.alignment = flags.alignment;
  options.time_limit_seconds = flags.time_limit;
  options.threads = flags.threads;
  options.plan_static = flags.plan_static;
  options.views = flags.views;
  options.model_name = flags.model.empty() ? flags.workload : flags.model;
  // Progress of a long branch and bound, for a person watching a terminal.
  if (isatty(STDERR_FILENO)) {
    options.exact_progress = [](const memonger::ExactProgress& p) {
      if (p.seconds < 1) return;
      // Gaps in bytes: on large arenas best and bound often differ by less than the rounding.
      std::cerr << "\rexact: " << static_cast<int>(p.seconds) << " s, best "
                << memonger::util::FormatBytes(p.best_height) << " (lower bound + "
                << p.best_height - p.lower_bound << " B), probing lower bound + "
                << p.probing_height - p.lower_bound << " B, " << p.nodes << " nodes   "
                << std::flush;
    };
  }
  options.losses = flags.losses;
  options.share_activations = flags.share_activations;
  options.share_all_activations = flags.share_all_activations;
  options.namescope = flags.namescope;
  options.param_grads = flags.param_grads;
  options.dont_share = flags.dont_share;
  options.heads = flags.heads;
  options.static_names = flags.static_names;
  options.recycle_inputs = flags.recycle_inputs;
  options.size_blind = flags.size_blind;
  if (!flags.losses.empty() && options.mode != memonger::Mode::kTraining) {
    return absl::InvalidArgumentError("--loss needs --mode training");
  }
  if (IsRecordsGraph(graph) && options.order != memonger::OrderKind::kGiven) {
    return absl::InvalidArgumentError(
        "usage records and traces have fixed steps: only --order given applies");
  }
  return options;
}

// The net to plan: the workload (with `fit_value` set for --fit's key when given) or the model
// file (with --fit's symbol bound to it), typed, with its backward pass for --mode training and
// its fp16 storage rewrite.
// `size_blind`, when given, may plan without sizes: it is set (and shape inference skipped)
// for a memonger baseline whose graph inputs' shapes are unknown (a note says which unless
// --size-blind asked for it), as Caffe2's memonger plans without blob shapes. With the shapes
// known, --size-blind only makes the baselines decide without sizes (PlanOptions::size_blind)
// and the plan keeps real bytes.
absl::StatusOr<memonger::graph::Graph> MakeGraph(
    const Flags& flags, const memonger::graph::LoadOptions& base_load,
    const std::optional<memonger::graph::WorkloadSpec>& workload,
    std::optional<int64_t> fit_value = std::nullopt, bool* size_blind = nullptr,
    std::vector<std::string>* notes = nullptr, bool symbolic_workload = false) {
  namespace graph = memonger::graph;
  absl::StatusOr<graph::Graph> g;
  const absl::StatusOr<memonger::PlannerKind> planner = memonger::ParsePlanner(flags.planner);
  const bool baseline = planner.ok() && memonger::IsMemongerBaseline(*planner);
  if (workload.has_value()) {
    graph::WorkloadSpec spec = *workload;
    if (fit_value.has_value()) spec = graph::WithParam(spec, flags.fit, absl::StrCat(*fit_value));
    // typed already; a symbolic one declares its inputs in its symbols (for symbolic plans)
    g = symbolic_workload ? graph::BuildSymbolicWorkload(spec, nullptr) : graph::BuildWorkload(spec);
  } else {
    graph::LoadOptions load = base_load;
    if (fit_value.has_value()) load.bindings.dims[flags.fit] = *fit_value;
    g = graph::LoadModel(flags.model, load);
    if (!g.ok()) return g.status();
    const std::vector<std::string> unknown = graph::InputsWithoutShape(*g, load.bindings);
    if (size_blind != nullptr && baseline && !unknown.empty()) {
      *size_blind = true;
      if (!flags.size_blind && notes != nullptr) {
        notes->push_back(absl::StrCat(
            "the shapes of ", unknown.size(), " graph input(s) are unknown (",
            memonger::util::Quote(unknown.front()), unknown.size() > 1 ? ", ..." : "",
            "): planning size-blind, as Caffe2's memonger does without blob shapes; give "
            "--input-shape for byte sizes"));
      }
      return g;
    }
    MG_RETURN_IF_ERROR(graph::InferShapes(*g, load.bindings));
  }
  if (!g.ok()) return g.status();
  if (flags.mode == "training" && !graph::HasGradientOps(*g)) {
    // A forward net: training means its backward pass too (memonger's AddGradientOperators).
    MG_ASSIGN_OR_RETURN(*g, graph::AddGradientOps(*g, flags.losses));
  }
  if (!flags.store_fp16.empty()) {
    MG_ASSIGN_OR_RETURN(*g, graph::StoreInFp16(*g, flags.store_fp16));
  }
  return g;
}

// --fit: the largest value of flags.fit whose plan fits the budget, for the given order and for
// the memory-aware order (report/fit.h). Exit 0 when some value fits, 3 when none does.
int RunFit(const Flags& flags, const memonger::graph::LoadOptions& load,
           const std::optional<memonger::graph::WorkloadSpec>& workload,
           const memonger::PlanOptions& options, int64_t budget, bool training) {
  memonger::FitSearch search;
  search.symbol = flags.fit;
  search.budget = budget;
  search.cures.push_back({"given", options});
  if (options.order != memonger::OrderKind::kMemoryAware) {
    search.cures.front().name = std::string(memonger::OrderName(options.order));
    memonger::PlanOptions memory_aware = options;
    memory_aware.order = memonger::OrderKind::kMemoryAware;
    search.cures.push_back({"memory-aware", memory_aware});
  } else {
    search.cures.front().name = "memory-aware";
  }
  if (training) search.cures.push_back({"recompute", options, /*recompute=*/true});
  auto point_of = [](const memonger::graph::Graph& g,
                     const memonger::Plan& plan) -> absl::StatusOr<memonger::FitPoint> {
    if (auto s = memonger::VerifyPlan(g, plan); !s.ok()) {
      return absl::InternalError(absl::StrCat("the planner '", plan.planner,
                                              "' produced an invalid plan: ", s.message()));
    }
    memonger::FitPoint point;
    point.arena_bytes = plan.arena_bytes;
    point.device_bytes = plan.arena_bytes + plan.static_bytes;
    point.lower_bound_bytes = plan.lower_bound_bytes;
    return point;
  };
  auto plan_at = [&](int64_t value, const memonger::FitCure& cure)
      -> absl::StatusOr<memonger::FitPoint> {
    MG_ASSIGN_OR_RETURN(memonger::graph::Graph g, MakeGraph(flags, load, workload, value));
    MG_ASSIGN_OR_RETURN(memonger::Plan plan, memonger::PlanMemory(g, cure.options));
    MG_ASSIGN_OR_RETURN(memonger::FitPoint point, point_of(g, plan));
    if (!cure.recompute || point.device_bytes <= budget) return point;
    // Recomputation aims the arena at what the weights leave of the budget.
    const int64_t arena_budget = budget - plan.static_bytes;
    absl::StatusOr<memonger::RecomputedPlan> recomputed = memonger::PlanWithRecomputation(
        g, cure.options, memonger::RecomputeKind::kAuto, std::max<int64_t>(arena_budget, 0));
    if (absl::IsResourceExhausted(recomputed.status())) {
      // Does not fit: the least it needs is the lowest lower bound recomputation reached.
      memonger::RecomputeOptions r;
      r.budget_bytes = std::max<int64_t>(arena_budget, 0);
      r.alignment = cure.options.alignment;
      r.liveness.views = cure.options.views;
      r.liveness.plan_static = cure.options.plan_static;
      r.liveness.recycle_inputs = cure.options.recycle_inputs;
      r.liveness.static_names = cure.options.static_names;
      r.time_limit_seconds = cure.options.time_limit_seconds / 2;
      MG_ASSIGN_OR_RETURN(memonger::RecomputeChoice choice, memonger::ChooseRecomputation(g, r));
      point.lower_bound_bytes = choice.lower_bound_bytes;
      point.arena_bytes = choice.lower_bound_bytes;
      point.device_bytes = choice.lower_bound_bytes + plan.static_bytes;
      return point;
    }
    if (!recomputed.ok()) return recomputed.status();
    return point_of(recomputed->graph, recomputed->plan);
  };
  absl::StatusOr<memonger::FitResult> fit = memonger::FindLargestFit(search, plan_at);
  if (!fit.ok()) {
    std::cerr << "optimize-net: " << OneLine(fit.status().message()) << "\n";
    return kExitFailed;
  }
  if (flags.format == "json") {
    std::cout << memonger::FitToJson(*fit);
  } else {
    std::cout << memonger::FitToText(*fit);
  }
  for (const memonger::FitRow& row : fit->rows) {
    if (row.largest.has_value()) return kExitOk;
  }
  return kExitOverBudget;
}

// After an over-budget plan: what each cure would give, one line each (to stderr, before the
// exit code 3): a tighter placement of the same order, and the memory-aware order.
void PrintCures(const memonger::graph::Graph& graph, const memonger::PlanOptions& options,
                const memonger::Plan& plan, int64_t budget, bool recomputed) {
  using memonger::util::FormatBytes;
  auto verdict = [&](int64_t bytes) {
    return bytes <= budget ? absl::StrCat("fits, ", FormatBytes(budget - bytes), " to spare")
                           : absl::StrCat("still ", FormatBytes(bytes - budget), " over");
  };
  if (plan.lower_bound_bytes <= budget) {
    std::cerr << "optimize-net: cure: a tighter placement: this order's lower bound is "
              << FormatBytes(plan.lower_bound_bytes) << " (" << verdict(plan.lower_bound_bytes)
              << "); try --planner exact with a longer --time-limit\n";
  } else {
    std::cerr << "optimize-net: cure: no placement of this order fits: its lower bound is "
              << FormatBytes(plan.lower_bound_bytes) << " (" << verdict(plan.lower_bound_bytes)
              << ")\n";
  }
  if (options.order != memonger::OrderKind::kMemoryAware && !IsRecordsGraph(graph)) {
    memonger::PlanOptions memory_aware = options;
    memory_aware.order = memonger::OrderKind::kMemoryAware;
    absl::StatusOr<memonger::Plan> reordered = memonger::PlanMemory(graph, memory_aware);
    if (reordered.ok() && memonger::VerifyPlan(graph, *reordered).ok()) {
      std::cerr << "optimize-net: cure: --order memory-aware: arena "
                << FormatBytes(reordered->arena_bytes) << ", lower bound "
                << FormatBytes(reordered->lower_bound_bytes) << " ("
                << verdict(reordered->arena_bytes) << ")\n";
    } else if (!reordered.ok()) {
      std::cerr << "optimize-net: cure: --order memory-aware: " << OneLine(reordered.status().message())
                << "\n";
    }
  }
  if (!recomputed && memonger::graph::HasGradientOps(graph)) {
    absl::StatusOr<memonger::RecomputedPlan> r =
        memonger::PlanWithRecomputation(graph, options, memonger::RecomputeKind::kAuto, budget);
    if (r.ok()) {
      std::cerr << "optimize-net: cure: --recompute auto: arena "
                << FormatBytes(r->plan.arena_bytes) << " with " << r->choice.ops.size()
                << " forward ops rerun, +" << r->choice.extra_flops << " FLOPs ("
                << verdict(r->plan.arena_bytes) << ")\n";
    } else {
      std::cerr << "optimize-net: cure: --recompute auto: " << OneLine(r.status().message()) << "\n";
    }
  }
}

// Runs the net in one arena of the planned size: verify mode (--verify: every op fills its
// outputs with a pattern and checks its inputs) or the real kernels (the CPU kernels on the
// host, the device kernels on CUDA), on the user's --inputs where given, checked against
// --expect. Returns the report's lines; `beyond_tolerance` names the first output whose error
// exceeds --tolerance ("" when none does).
absl::StatusOr<std::string> Execute(const Flags& flags, const memonger::graph::Graph& graph,
                                    const memonger::Plan& plan, std::string& beyond_tolerance) {
  namespace alloc = memonger::alloc;
  if (flags.verify) {
    const auto device = flags.execute == "cuda" ? alloc::Device::kCuda : alloc::Device::kHost;
    MG_ASSIGN_OR_RETURN(alloc::Arena arena,
                        alloc::Arena::Create(device, plan.arena_bytes, plan.alignment));
    MG_ASSIGN_OR_RETURN(alloc::Executor executor, alloc::Executor::Create(graph, plan, arena));
    MG_RETURN_IF_ERROR(executor.RunVerify());
    return absl::StrCat("executed        verify mode on ", flags.execute, ": ", graph.num_ops(),
                        " ops, every input intact\n");
  }
  const bool cuda = flags.execute == "cuda";
  alloc::HostRunOptions options;
  options.seed = flags.seed;
  options.seed_missing = flags.seed_missing;
  options.outputs_dir = flags.outputs_out;
  options.keep_outputs = !flags.expect.empty();
  options.threads = flags.threads;
  if (!flags.inputs.empty()) {
    MG_ASSIGN_OR_RETURN(auto inputs, alloc::ReadTensorFiles(flags.inputs, flags.limits));
    MG_RETURN_IF_ERROR(alloc::CheckRunInputs(graph, inputs));
    for (auto& [name, data] : inputs) options.data.emplace(name, std::move(data));
  }
  std::map<std::string, memonger::graph::TensorData> expected;
  if (!flags.expect.empty()) {
    MG_ASSIGN_OR_RETURN(expected, alloc::ReadTensorFiles(flags.expect, flags.limits));
  }
  alloc::Fp16Census census(graph);  // what every Cast to float16 lost, per value (host only)
  alloc::NetRunTarget target;
  alloc::CudaKernels cuda_kernels;
  if (cuda) {
    // Scratch and cuBLAS workspace in one allocation before the first step; one stream; one
    // wait after the last step.
    alloc::CudaKernelOptions cuda_options;
    cuda_options.scratch_bytes = alloc::DeviceScratchBytes(graph);
    MG_ASSIGN_OR_RETURN(cuda_kernels, alloc::MakeCudaKernels(cuda_options));
    target.device = alloc::Device::kCuda;
    target.kernels = &cuda_kernels.table;
    target.finish = cuda_kernels.synchronize;
  } else {
    options.fp16_census = &census;
  }
  MG_ASSIGN_OR_RETURN(alloc::HostRunReport report, alloc::RunNet(graph, plan, options, target));
  std::string text = absl::StrCat(
      "executed        ", cuda ? "CUDA" : "host", " kernels: ", graph.num_ops(), " ops in ",
      absl::StrFormat("%.1f", report.kernel_seconds * 1000), " ms; inputs and statics: ",
      report.from_caller > 0 ? absl::StrCat(report.from_caller, " from --inputs, ") : "",
      report.from_model, " from the model, ", report.seeded, " seeded (seed ", flags.seed,
      ")\n");
  if (!flags.expect.empty()) {
    MG_ASSIGN_OR_RETURN(const std::vector<alloc::OutputError> errors,
                        alloc::CompareOutputs(graph, report, expected));
    for (const alloc::OutputError& e : errors) {
      const bool beyond = !(e.relative <= flags.tolerance);
      absl::StrAppend(&text, "expect          '", memonger::util::EscapeAsText(e.name),
                      "': max abs error ", absl::StrFormat("%.3g", e.max_abs), ", relative ",
                      absl::StrFormat("%.3g", e.relative), beyond ? " > " : " <= ",
                      absl::StrFormat("%g", flags.tolerance), "\n");
      if (beyond && beyond_tolerance.empty()) {
        beyond_tolerance = absl::StrCat("output '", memonger::util::EscapeAsText(e.name),
                                        "' differs from --expect: relative error ",
                                        absl::StrFormat("%.3g", e.relative), " > --tolerance ",
                                        absl::StrFormat("%g", flags.tolerance));
      }
    }
  }
  if (!cuda) absl::StrAppend(&text, census.ToText());
  if (!report.seeded_statics.empty()) {
    absl::StrAppend(&text, "seeded statics  ", report.seeded_statics.size(),
                    " params/constants without data in the model",
                    graph.static_data() != nullptr ? " (--seed-missing)" : " (the format carries none)",
                    ", e.g. '", report.seeded_statics.front(), "'\n");
  }
  if (!flags.outputs_out.empty()) {
    absl::StrAppend(&text, "outputs         ", report.outputs.size(), " written to ",
                    flags.outputs_out, " (.npy)\n");
    // Where a file is not named as its output: which output it holds.
    for (const memonger::alloc::HostRunOutput& out : report.outputs) {
      const std::string file = std::filesystem::path(out.file).filename().string();
      if (file != out.name + ".npy") {
        absl::StrAppend(&text, "  ", memonger::util::EscapeAsText(out.name), " -> ", file, "\n");
      }
    }
  }
  return text;
}

// A memonger baseline planned without sizes (Caffe2's memonger without blob shapes): which
// values share a buffer and under what name, checked by the verifier with every value counted
// as one byte, reported in blobs, and the rewritten net. Everything that needs bytes is refused.
int RunSizeBlind(const Flags& flags, const memonger::graph::Graph& graph,
                 memonger::PlanOptions options) {
  auto fail = [](const absl::Status& status) {
    std::cerr << "optimize-net: " << OneLine(status.message()) << "\n";
    return kExitFailed;
  };
  if (const std::string flag = memonger::tools::FlagNeedingOffsets(flags); !flag.empty()) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        flag, " needs byte sizes, and this plan is size-blind (graph inputs without shapes): "
        "give every graph input's shape (--input-shape)")));
  }
  if (options.mode == memonger::Mode::kTraining && !memonger::graph::HasGradientOps(graph)) {
    return fail(absl::InvalidArgumentError(
        "--mode training on a net without gradient ops builds its backward pass, which needs "
        "shapes: give every graph input's shape (--input-shape)"));
  }
  options.size_blind = true;
  absl::StatusOr<memonger::Plan> plan = memonger::PlanMemory(graph, options);
  if (!plan.ok()) return fail(plan.status());
  if (auto s = memonger::VerifyPlan(graph, *plan); !s.ok()) {
    return fail(absl::InternalError(absl::StrCat(
        "the planner '", plan->planner, "' produced an invalid plan: ", s.message())));
  }
  absl::StatusOr<memonger::RewrittenNet> rewritten = memonger::RewriteNet(graph, *plan);
  if (!rewritten.ok()) return fail(rewritten.status());
  memonger::util::OutputFiles outputs;
  if (absl::Status s = memonger::tools::DeclareOutputs(flags, outputs); !s.ok()) return fail(s);
  if (!flags.net_out.empty()) {
    absl::StatusOr<std::string> net = RewrittenNetBytes(graph, *plan, flags.net_out, flags);
    if (!net.ok()) return fail(net.status());
    outputs.Set(flags.net_out, *std::move(net));
  }
  if (absl::Status s = outputs.Commit(); !s.ok()) return fail(s);
  std::cout << memonger::SizeBlindPlanToText(graph, *plan, *rewritten,
                                             memonger::ReferenceNet(graph, *plan));
  return kExitOk;
}

// Returns the exit code; prints what failed.
int Run(const Flags& flags) {
  auto fail = [](const absl::Status& status) {
    std::cerr << "optimize-net: " << OneLine(status.message()) << "\n";
    return kExitFailed;
  };
  const int64_t budget = flags.budget;
  // The output files were checked with the flags; they are written together at the end, and
  // only when the whole run succeeds.
  memonger::util::OutputFiles outputs;
  if (absl::Status s = memonger::tools::DeclareOutputs(flags, outputs); !s.ok()) return fail(s);
  memonger::graph::LoadOptions load;
  load.bindings = flags.bindings;
  load.limits = flags.limits;
  load.keep_data = flags.execute != "none" && !flags.verify;
  std::vector<std::string> notes;
  load.notes = &notes;
  std::optional<memonger::graph::WorkloadSpec> workload;
  if (!flags.workload.empty()) {
    auto spec = memonger::graph::ParseWorkloadSpec(flags.workload);
    if (!spec.ok()) return fail(spec.status());
    workload = *spec;
  }
  if (!flags.ranges.empty() && (!flags.compare.empty() || !flags.variants.empty())) {
    // The what-if table over a range: one symbolic plan per variant.
    if (!workload.has_value()) {
      return fail(absl::InvalidArgumentError("--compare and --variant need a --workload"));
    }
    auto variants = memonger::ExpandVariants(*workload, flags.variants, flags.compare);
    if (!variants.ok()) return fail(variants.status());
    absl::StatusOr<memonger::graph::Graph> base =
        MakeGraph(flags, load, workload, std::nullopt, nullptr, nullptr, /*symbolic=*/true);
    if (!base.ok()) return fail(base.status());
    auto options = MakePlanOptions(flags, *base);
    if (!options.ok()) return fail(options.status());
    auto rows = memonger::PlanVariantsOverRange(*variants, *options, flags.ranges, flags.budget);
    if (!rows.ok()) return fail(rows.status());
    std::cout << memonger::WhatIfRangeToText(*workload, flags.ranges, *rows, flags.budget);
    for (const memonger::WhatIfRangeRow& row : *rows) {
      if (flags.budget >= 0 && row.device_low > flags.budget) return kExitOverBudget;
    }
    return kExitOk;
  }
  if (!flags.ranges.empty()) {
    // One plan for a box of bindings: the net is typed at each binding the planner asks for.
    auto graph_at = [&](const memonger::graph::SymbolBindings& at)
        -> absl::StatusOr<memonger::graph::Graph> {
      if (workload.has_value()) {
        memonger::graph::WorkloadSpec spec = *workload;
        for (const auto& [symbol, value] : at) {
          spec = memonger::graph::WithParam(spec, symbol, absl::StrCat(value));
        }
        return MakeGraph(flags, load, spec, std::nullopt, nullptr, nullptr, /*symbolic=*/true);
      }
      memonger::graph::LoadOptions at_load = load;
      at_load.notes = nullptr;
      for (const auto& [symbol, value] : at) at_load.bindings.dims[symbol] = value;
      return MakeGraph(flags, at_load, std::nullopt);
    };
    memonger::graph::ShapeBindings fixed = flags.bindings;
    if (workload.has_value()) {
      memonger::graph::SymbolBindings values;
      auto built = memonger::graph::BuildSymbolicWorkload(*workload, &values);
      if (!built.ok()) return fail(built.status());
      for (const auto& [symbol, value] : values) {
        if (flags.ranges.Find(symbol) == nullptr) fixed.dims[symbol] = value;
      }
    }
    auto report = memonger::tools::RunSymbolic(
        flags, fixed, graph_at,
        [&](const memonger::graph::Graph& g) { return MakePlanOptions(flags, g); }, outputs);
    if (!report.ok()) return fail(report.status());
    for (const std::string& note : report->notes) std::cerr << "optimize-net: note: " << note << "\n";
    if (absl::Status s = outputs.Commit(); !s.ok()) return fail(s);
    std::cout << report->text;
    return report->over_budget ? kExitOverBudget : kExitOk;
  }
  // A symbolic plan (memonger.plan/v2) is bound to this run's binding, not planned again.
  std::optional<std::string> plan_in_text;
  bool symbolic_plan_in = false;
  if (!flags.plan_in.empty()) {
    absl::StatusOr<std::string> text = memonger::util::ReadInputFile(flags.plan_in, flags.limits);
    if (!text.ok()) return fail(text.status());
    plan_in_text = *std::move(text);
    symbolic_plan_in = memonger::IsSymbolicPlanJson(*plan_in_text);
  }
  if (!flags.fit.empty() && !workload.has_value() && load.bindings.dims.count(flags.fit) == 0) {
    // The model must plan as given (every other symbol bound): bind the fitted one to 1 first.
    load.bindings.dims[flags.fit] = 1;
  }
  memonger::tools::PhaseClock clock;
  bool size_blind = false;
  absl::StatusOr<memonger::graph::Graph> graph =
      MakeGraph(flags, load, workload, std::nullopt, &size_blind, &notes, symbolic_plan_in);
  if (!graph.ok()) return fail(graph.status());
  clock.Mark("load");
  for (const std::string& note : notes) std::cerr << "optimize-net: note: " << note << "\n";
  load.notes = nullptr;  // --fit loads the model again
  auto options = MakePlanOptions(flags, *graph);
  if (!options.ok()) return fail(options.status());
  if (flags.caffe2_bugs) {
    absl::StatusOr<memonger::tools::Caffe2ExactReport> report = memonger::tools::RunCaffe2Exact(
        flags, *graph, *options, !size_blind && !flags.size_blind, outputs);
    if (!report.ok()) return fail(report.status());
    for (const std::string& warning : report->warnings) {
      std::cerr << "optimize-net: warning: " << warning << "\n";
    }
    if (absl::Status s = outputs.Commit(); !s.ok()) return fail(s);
    std::cout << report->text;
    return kExitOk;
  }
  if (size_blind) return RunSizeBlind(flags, *graph, *options);
  const bool training = memonger::graph::HasGradientOps(*graph);
  if (!flags.fit.empty()) return RunFit(flags, load, workload, *options, budget, training);
  if (flags.recompute != "none" && !training) {
    return fail(absl::InvalidArgumentError(
        "--recompute is for training nets: this net has no backward ops (add --mode training)"));
  }
  if (!flags.compare.empty() || !flags.variants.empty()) {
    // The what-if report: the workload in each variant, planned and verified, side by side.
    auto variants = memonger::ExpandVariants(*workload, flags.variants, flags.compare);
    if (!variants.ok()) return fail(variants.status());
    auto rows = memonger::PlanVariants(*variants, *options);
    if (!rows.ok()) return fail(rows.status());
    std::cout << (flags.format == "json" ? memonger::WhatIfToJson(*workload, *rows, budget)
                                         : memonger::WhatIfToText(*workload, *rows, budget));
    for (const memonger::WhatIfRow& row : *rows) {
      if (budget >= 0 && row.device_bytes > budget) return kExitOverBudget;
    }
    return kExitOk;
  }
  absl::StatusOr<memonger::Plan> plan;
  if (flags.recompute != "none") {
    // The net is rewritten: everything below (verification, outputs, execution) uses the
    // rewritten net.
    auto kind = memonger::ParseRecompute(flags.recompute);
    if (!kind.ok()) return fail(kind.status());
    auto recomputed = memonger::PlanWithRecomputation(*graph, *options, *kind, budget);
    if (!recomputed.ok()) {
      if (absl::IsResourceExhausted(recomputed.status())) {
        std::cerr << "optimize-net: the budget is infeasible: " << OneLine(recomputed.status().message())
                  << "\n";
        return kExitOverBudget;
      }
      return fail(recomputed.status());
    }
    graph = std::move(recomputed->graph);
    plan = std::move(recomputed->plan);
  } else if (flags.plan_in.empty()) {
    plan = memonger::PlanMemory(*graph, *options);
    if (options->exact_progress) std::cerr << "\r\033[K" << std::flush;  // clear the progress line
  } else if (symbolic_plan_in) {
    // The binding: the --dim values, or the workload's own n and batch.
    memonger::graph::SymbolBindings dims = flags.bindings.dims;
    if (workload.has_value()) {
      auto built = memonger::graph::BuildSymbolicWorkload(*workload, &dims);
      if (!built.ok()) return fail(built.status());
    }
    plan = memonger::BindSymbolicPlanJson(*graph, *plan_in_text, flags.plan_in, dims);
  } else {
    plan = memonger::PlanFromJson(*graph, *plan_in_text, flags.plan_in);
  }
  if (!plan.ok()) return fail(plan.status());
  clock.Mark("plan");
  for (const std::string& note : plan->notes) std::cerr << "optimize-net: note: " << note << "\n";
  if (flags.cuda_graphs || flags.execute == "cuda") {
    // Which steps a CUDA graph could capture with the device kernels (the table made on the
    // host has the same ops and checks as the CUDA one).
    plan->graphable = memonger::alloc::FindGraphableSections(
        *graph, *plan, memonger::alloc::MakeDeviceKernelTableOnHost());
  }
  // Every plan is checked by the independent verifier before anyone sees it.
  if (auto s = memonger::VerifyPlan(*graph, *plan); !s.ok()) {
    if (!flags.plan_in.empty()) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat(flags.plan_in, ": the plan is not valid for this model: ", s.message())));
    }
    return fail(absl::InternalError(absl::StrCat("the planner '", plan->planner,
                                                 "' produced an invalid plan: ", s.message())));
  }
  // Said once the saved plan has verified (a plan refused gets its one line of error only).
  if (!flags.plan_in_overrides.empty()) {
    std::cerr << "optimize-net: note: " << absl::StrJoin(flags.plan_in_overrides, ", ")
              << " given with --plan-in are not used: the saved plan's own planner ("
              << plan->planner << "), order (" << memonger::OrderName(plan->order)
              << ") and alignment (" << plan->alignment << ") are\n";
  }
  // A saved plan, verified, at the lower bound (recomputed from the model, not read) is
  // optimal as surely as a planner's: the round trip keeps "proven optimal".
  if (!flags.plan_in.empty() && plan->arena_bytes <= plan->lower_bound_bytes) {
    plan->proven_optimal = true;
  }
  clock.Mark("verify");
  if (!flags.plan_json.empty()) outputs.Set(flags.plan_json, memonger::PlanToJson(*graph, *plan));
  if (!flags.plan_csv.empty()) {
    outputs.Set(flags.plan_csv, memonger::PlanToMiniMallocCsv(*graph, *plan));
  }
  if (!flags.html.empty()) outputs.Set(flags.html, memonger::PlanToHtml(*graph, *plan));
  if (!flags.net_out.empty()) {
    absl::StatusOr<std::string> net = RewrittenNetBytes(*graph, *plan, flags.net_out, flags);
    if (!net.ok()) return fail(net.status());
    outputs.Set(flags.net_out, *std::move(net));
  }
  std::string execution_report;
  std::string beyond_tolerance;
  if (flags.execute != "none") {
    auto report = Execute(flags, *graph, *plan, beyond_tolerance);
    if (!report.ok()) return fail(report.status());
    execution_report = *std::move(report);
    clock.Mark("execute");
  }
  if (absl::Status s = outputs.Commit(); !s.ok()) return fail(s);
  clock.Mark("outputs");
  if (flags.format == "json") {
    std::cout << memonger::PlanToJson(*graph, *plan);
  } else {
    auto summary = memonger::SummarizeModel(*graph, options->model_name, flags.top);
    if (!summary.ok()) return fail(summary.status());
    std::cout << memonger::SummaryToText(*graph, *summary) << "\n"
              << memonger::PlanToText(*graph, *plan);
    if (flags.ascii) std::cout << "\n" << memonger::PlanToAscii(*graph, *plan);
    std::cout << execution_report;
  }
  clock.Mark("report");
  if (flags.timings) clock.Print(std::cerr);
  if (!beyond_tolerance.empty()) {
    std::cerr << "optimize-net: " << beyond_tolerance << "\n";
    return kExitFailed;
  }
  if (budget >= 0 && plan->arena_bytes > budget) {
    std::cerr << "optimize-net: the arena needs " << memonger::util::FormatBytes(plan->arena_bytes)
              << " (" << plan->arena_bytes << " bytes), "
              << memonger::util::FormatBytes(plan->arena_bytes - budget)
              << " more than the budget of " << memonger::util::FormatBytes(budget) << "\n";
    PrintCures(*graph, *options, *plan, budget, flags.recompute != "none");
    return kExitOverBudget;
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  // Arrays of a MiB or more get pages of their own, given back when freed. glibc's default
  // threshold rises to 32 MiB after the first such free, after which a big net's load-time
  // arrays (the builder's names, hash maps) were freed into the heap and left holes the
  // planner's arrays did not fill: 6% of a 2^20-op run's peak (BENCHMARKS.md).
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
  std::variant<Flags, int> parsed =
      memonger::tools::ParseCommandLine(argc, argv, std::cout, std::cerr);
  if (const int* exit_code = std::get_if<int>(&parsed)) return *exit_code;
  return Run(std::get<Flags>(parsed));
}
