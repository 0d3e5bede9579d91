// optimize-net: loads a model, infers every value's type, plans its memory and reports.
// Thin by design: parse flags, call the library, print, map the Status to an exit code.
//
// Exit codes: 0 success; 1 the input or the run failed (the message on stderr names the file,
// op or value); 2 usage error; 3 the plan does not fit --budget.
#include <unistd.h>  // also defines __GLIBC__ on glibc
#if defined(__GLIBC__)
#include <malloc.h>  // mallopt
#endif

#include <chrono>
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
#include "absl/strings/match.h"
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
#include "memonger/device_bytes.h"
#include "memonger/planner.h"
#include "memonger/recompute.h"
#include "memonger/time_shares.h"
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
#include "tools/plan_steps.h"
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
using memonger::tools::GraphRequest;
using memonger::tools::IsRecordsGraph;
using memonger::tools::MakeGraph;
using memonger::tools::NetSource;
using memonger::tools::OneLine;

// The bytes of the rewritten net (shared values renamed), checked to compute the same graph.
absl::StatusOr<std::string> RewrittenNetBytes(const memonger::graph::Graph& graph,
                                              const memonger::Plan& plan, const std::string& path,
                                              const Flags& flags) {
  MG_ASSIGN_OR_RETURN(memonger::RewrittenNet rewritten, memonger::RewriteNet(graph, plan));
  const memonger::proto::NetDef reference = memonger::ReferenceNet(graph, plan);
  const absl::Status equal = memonger::VerifyGraphEquality(reference, rewritten.net);
  const absl::Status inplace =
      memonger::VerifyInplaceBlobs(reference, rewritten.net, plan.liveness.in_place);
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

// The flags' options, with the branch and bound's progress shown where stderr is a terminal.
absl::StatusOr<memonger::PlanOptions> TerminalPlanOptions(const Flags& flags,
                                                          const memonger::graph::Graph& graph) {
  MG_ASSIGN_OR_RETURN(memonger::PlanOptions options, memonger::tools::MakePlanOptions(flags, graph));
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
  return options;
}

// --fit: the largest value of flags.fit whose plan fits the budget, for the given order and for
// the memory-aware order (report/fit.h). Exit 0 when some value fits, 3 when none does.
int RunFit(const NetSource& source, const memonger::PlanOptions& options, bool training,
           const memonger::graph::Graph& loaded) {
  const Flags& flags = *source.flags;
  // Once the search has run a second, a line on stderr for each size planned (at most one a
  // second), so that a long search is not silent.
  const auto start = std::chrono::steady_clock::now();
  double last_line = 0;
  auto progress = [&](const memonger::FitProgress& p) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (seconds < 1 || seconds - last_line < 1) return;
    last_line = seconds;
    std::cerr << absl::StrFormat(
        "--fit: %s %s=%d %s (%d plans, %.1f s)\n", p.cure, flags.fit, p.value,
        p.refused ? std::string("refused")
                  : absl::StrCat(memonger::util::FormatBytes(p.device_bytes),
                                 p.fits ? " fits" : " does not fit"),
        p.plans, seconds);
  };
  absl::StatusOr<memonger::FitResult> fit =
      memonger::tools::FindFit(source, options, training, progress, &loaded);
  if (!fit.ok()) {
    std::cerr << "optimize-net: " << OneLine(fit.status().message()) << "\n";
    return kExitFailed;
  }
  if (flags.timings) {
    // Where the search's time went: each cure's, and how the nets it planned were typed.
    std::string cures;
    for (const memonger::FitRow& row : fit->rows) {
      absl::StrAppendFormat(&cures, "%s%s %.3f s (%d plans)", cures.empty() ? "" : ", ", row.cure,
                            row.seconds, row.plans);
    }
    std::cerr << absl::StrFormat("optimize-net: fit: %s; nets %d imported, %d retyped\n", cures,
                                 fit->nets_imported, fit->nets_retyped);
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
// exit code 3): a tighter placement of the same order, the memory-aware order, recomputation.
// Each changes only the arena: `outside` (params, constants, optimizer state) stays.
void PrintCures(const memonger::graph::Graph& graph, const memonger::PlanOptions& options,
                const memonger::Plan& plan, int64_t budget, int64_t outside, bool recomputed) {
  using memonger::util::FormatBytes;
  auto verdict = [&](int64_t arena) {
    const int64_t bytes = arena + outside;
    const std::string device =
        outside > 0 ? absl::StrCat("device ", FormatBytes(bytes), ", ") : std::string();
    return bytes <= budget ? absl::StrCat(device, "fits, ", FormatBytes(budget - bytes), " to spare")
                           : absl::StrCat(device, "still ", FormatBytes(bytes - budget), " over");
  };
  if (plan.lower_bound_bytes + outside <= budget) {
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
    absl::StatusOr<memonger::RecomputedPlan> r = memonger::PlanWithRecomputation(
        graph, options, memonger::RecomputeKind::kAuto, memonger::ArenaShare(budget, outside));
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

// Verify mode (--verify): every op fills its outputs with a pattern and checks its inputs.
absl::StatusOr<std::string> ExecuteVerify(const Flags& flags, const memonger::graph::Graph& graph,
                                          const memonger::Plan& plan) {
  namespace alloc = memonger::alloc;
  const auto device = flags.execute == "cuda" ? alloc::Device::kCuda : alloc::Device::kHost;
  MG_ASSIGN_OR_RETURN(alloc::Arena arena,
                      alloc::Arena::Create(device, plan.arena_bytes, plan.alignment));
  MG_ASSIGN_OR_RETURN(alloc::Executor executor, alloc::Executor::Create(graph, plan, arena));
  MG_RETURN_IF_ERROR(executor.RunVerify());
  return absl::StrCat("executed        verify mode on ", flags.execute, ": ", graph.num_ops(),
                      " ops, every input intact\n");
}

// One line per output compared with --expect; `beyond_tolerance` names the first beyond
// --tolerance.
absl::StatusOr<std::string> CompareWithExpected(
    const Flags& flags, const memonger::graph::Graph& graph,
    const memonger::alloc::HostRunReport& report,
    const std::map<std::string, memonger::graph::TensorData>& expected,
    std::string& beyond_tolerance) {
  MG_ASSIGN_OR_RETURN(const std::vector<memonger::alloc::OutputError> errors,
                      memonger::alloc::CompareOutputs(graph, report, expected));
  std::string text;
  for (const memonger::alloc::OutputError& e : errors) {
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
  return text;
}

// What a run with real kernels says beyond its time: seeded statics, the outputs written.
std::string RunSummary(const Flags& flags, const memonger::graph::Graph& graph,
                       const memonger::alloc::HostRunReport& report) {
  std::string text;
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

// Runs the net in one arena of the planned size: verify mode or the real kernels (the CPU
// kernels on the host, the device kernels on CUDA), on the user's --inputs where given, checked
// against --expect. Returns the report's lines; `beyond_tolerance` names the first output whose
// error exceeds --tolerance ("" when none does).
absl::StatusOr<std::string> Execute(const Flags& flags, const NetSource& source,
                                    const memonger::graph::Graph& graph,
                                    const memonger::Plan& plan, std::string& beyond_tolerance) {
  namespace alloc = memonger::alloc;
  if (flags.verify) return ExecuteVerify(flags, graph, plan);
  const bool cuda = flags.execute == "cuda";
  alloc::HostRunOptions options;
  if (!graph.data_dependent_sizes().empty()) {
    // The run retypes the model from the bytes the load read, with the sizes it measured.
    options.retype = memonger::tools::MeasuringRetype(source);
  }
  options.seed = flags.seed;
  options.seed_missing = flags.seed_missing;
  options.outputs_dir = flags.outputs_out;
  options.keep_outputs = !flags.expect.empty();
  options.threads = flags.threads;
  if (source.run_inputs != nullptr) {
    MG_RETURN_IF_ERROR(alloc::CheckRunInputs(graph, *source.run_inputs));
    for (const auto& [name, data] : *source.run_inputs) options.data.emplace(name, data);
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
      ")", report.retypes > 0
               ? absl::StrCat("; data-dependent sizes measured, the net retyped ",
                              report.retypes, " times in ",
                              absl::StrFormat("%.1f", report.retype_seconds * 1000), " ms")
               : "",
      "\n");
  if (!flags.expect.empty()) {
    MG_ASSIGN_OR_RETURN(std::string compared,
                        CompareWithExpected(flags, graph, report, expected, beyond_tolerance));
    absl::StrAppend(&text, compared);
  }
  if (!cuda) absl::StrAppend(&text, census.ToText());
  absl::StrAppend(&text, RunSummary(flags, graph, report));
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
  if (options.memonger.mode == memonger::Mode::kTraining &&
      !memonger::graph::HasGradientOps(graph)) {
    return fail(absl::InvalidArgumentError(
        "--mode training on a net without gradient ops builds its backward pass, which needs "
        "shapes: give every graph input's shape (--input-shape)"));
  }
  options.memonger.size_blind = true;
  absl::StatusOr<memonger::Plan> plan = memonger::PlanMemory(graph, options);
  if (!plan.ok()) return fail(plan.status());
  if (absl::Status s = memonger::tools::CheckPlannerPlan(graph, *plan); !s.ok()) return fail(s);
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

// Writes `status` as optimize-net's one line of error; returns the exit code of a failed run.
int Fail(const absl::Status& status) {
  std::cerr << "optimize-net: " << OneLine(status.message()) << "\n";
  return kExitFailed;
}

void PrintNotes(const std::vector<std::string>& notes) {
  for (const std::string& note : notes) std::cerr << "optimize-net: note: " << note << "\n";
}

// What every step of a run reads: the flags, how models are loaded, the workload when one is
// given, and the output files, written together at the end and only when the run succeeds.
struct RunContext {
  const Flags& flags;
  NetSource source;
  memonger::util::OutputFiles outputs;
};

// --compare / --variant over a range: one symbolic plan per variant, side by side.
int RunWhatIfOverRange(RunContext& run) {
  const Flags& flags = run.flags;
  if (!run.source.workload.has_value()) {
    return Fail(absl::InvalidArgumentError("--compare and --variant need a --workload"));
  }
  auto variants = memonger::ExpandVariants(*run.source.workload, flags.variants, flags.compare);
  if (!variants.ok()) return Fail(variants.status());
  GraphRequest symbolic;
  symbolic.symbolic_workload = true;
  absl::StatusOr<memonger::graph::Graph> base = MakeGraph(run.source, symbolic);
  if (!base.ok()) return Fail(base.status());
  auto options = TerminalPlanOptions(flags, *base);
  if (!options.ok()) return Fail(options.status());
  auto rows = memonger::PlanVariantsOverRange(*variants, *options, flags.ranges, flags.budget,
                                              flags.optimizer);
  if (!rows.ok()) return Fail(rows.status());
  std::cout << memonger::WhatIfRangeToText(*run.source.workload, flags.ranges, *rows, flags.budget);
  for (const memonger::WhatIfRangeRow& row : *rows) {
    if (flags.budget >= 0 && row.device_low > flags.budget) return kExitOverBudget;
  }
  return kExitOk;
}

// A range (--dim S=LO..HI): one plan for the box of bindings, the net typed at each binding
// the planner asks for.
int RunRange(RunContext& run) {
  const Flags& flags = run.flags;
  const memonger::tools::GraphAt graph_at = memonger::tools::RangeGraphAt(run.source);
  absl::StatusOr<memonger::graph::ShapeBindings> fixed =
      memonger::tools::RangeFixedBindings(run.source);
  if (!fixed.ok()) return Fail(fixed.status());
  auto report = memonger::tools::RunSymbolic(
      flags, *fixed, graph_at,
      [&](const memonger::graph::Graph& g) { return TerminalPlanOptions(flags, g); }, run.outputs);
  if (!report.ok()) return Fail(report.status());
  PrintNotes(report->notes);
  if (absl::Status s = run.outputs.Commit(); !s.ok()) return Fail(s);
  std::cout << report->text;
  return report->over_budget ? kExitOverBudget : kExitOk;
}

// The what-if report: the workload in each variant, planned and verified, side by side.
int RunWhatIf(const RunContext& run, const memonger::PlanOptions& options) {
  const Flags& flags = run.flags;
  auto variants = memonger::ExpandVariants(*run.source.workload, flags.variants, flags.compare);
  if (!variants.ok()) return Fail(variants.status());
  auto rows = memonger::PlanVariants(*variants, options, flags.optimizer);
  if (!rows.ok()) return Fail(rows.status());
  const memonger::graph::WorkloadSpec& workload = *run.source.workload;
  std::cout << (flags.format == "json" ? memonger::WhatIfToJson(workload, *rows, flags.budget)
                                       : memonger::WhatIfToText(workload, *rows, flags.budget));
  for (const memonger::WhatIfRow& row : *rows) {
    if (flags.budget >= 0 && row.device_bytes > flags.budget) return kExitOverBudget;
  }
  return kExitOk;
}

// A saved plan (--plan-in): its text, and whether it is a symbolic one (memonger.plan/v2),
// which is bound to this run's binding rather than planned again.
struct SavedPlan {
  std::optional<std::string> text;
  bool symbolic = false;
};

// The plan of `graph`: recomputed (the net is rewritten, and `graph` becomes the rewritten
// net), planned, or read from --plan-in. `exit_code` is set where the run ends without a plan
// and without an error to print (an infeasible budget for recomputation).
absl::StatusOr<memonger::Plan> MakePlan(const RunContext& run, const SavedPlan& saved,
                                        const memonger::PlanOptions& options,
                                        memonger::graph::Graph& graph,
                                        std::optional<int>& exit_code) {
  const Flags& flags = run.flags;
  if (flags.recompute != "none") {
    absl::StatusOr<memonger::Plan> plan = memonger::tools::PlanWithFlags(flags, options, graph);
    if (absl::IsResourceExhausted(plan.status())) {
      std::cerr << "optimize-net: the budget is infeasible: " << OneLine(plan.status().message())
                << "\n";
      exit_code = kExitOverBudget;
    }
    return plan;
  }
  if (flags.plan_in.empty()) {
    absl::StatusOr<memonger::Plan> plan = memonger::tools::PlanWithFlags(flags, options, graph);
    if (options.exact_progress) std::cerr << "\r\033[K" << std::flush;  // clear the progress line
    return plan;
  }
  if (saved.symbolic) {
    // The binding: the --dim values, or the workload's own n and batch.
    memonger::graph::SymbolBindings dims = flags.bindings.dims;
    if (run.source.workload.has_value()) {
      MG_RETURN_IF_ERROR(
          memonger::graph::BuildSymbolicWorkload(*run.source.workload, &dims).status());
    }
    return memonger::BindSymbolicPlanJson(graph, *saved.text, flags.plan_in, dims);
  }
  return memonger::PlanFromJson(graph, *saved.text, flags.plan_in);
}

// Every plan is checked by the independent verifier before anyone sees it; a saved plan that
// verifies at the lower bound (recomputed from the model, not read) is optimal as surely as a
// planner's.
absl::Status CheckPlan(const Flags& flags, const memonger::graph::Graph& graph,
                       memonger::Plan& plan) {
  if (flags.plan_in.empty()) {
    MG_RETURN_IF_ERROR(memonger::tools::CheckPlannerPlan(graph, plan));
  } else if (auto s = memonger::VerifyPlan(graph, plan); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flags.plan_in, ": the plan is not valid for this model: ", s.message()));
  }
  // Said once the saved plan has verified (a plan refused gets its one line of error only).
  if (!flags.plan_in_overrides.empty()) {
    std::cerr << "optimize-net: note: " << absl::StrJoin(flags.plan_in_overrides, ", ")
              << " given with --plan-in are not used: the saved plan's own planner ("
              << plan.planner << "), order (" << memonger::OrderName(plan.order)
              << ") and alignment (" << plan.alignment << ") are\n";
  }
  if (!flags.plan_in.empty() && plan.arena_bytes <= plan.lower_bound_bytes) {
    plan.proven_optimal = true;
  }
  return absl::OkStatus();
}

// --plan-json, --plan-csv, --html, --net-out: set to be written with the other outputs.
absl::Status SetPlanOutputs(const Flags& flags, const memonger::graph::Graph& graph,
                            const memonger::Plan& plan, memonger::util::OutputFiles& outputs) {
  if (!flags.plan_json.empty()) outputs.Set(flags.plan_json, memonger::PlanToJson(graph, plan, flags.optimizer));
  if (!flags.plan_csv.empty()) {
    outputs.Set(flags.plan_csv, memonger::PlanToMiniMallocCsv(graph, plan));
  }
  if (!flags.html.empty()) {
    memonger::HtmlOptions html;
    const int64_t outside = memonger::DeviceBytesOf(plan, flags.optimizer).outside_arena();
    html.budget_bytes = memonger::ArenaShare(flags.budget, outside);
    if (flags.budget >= 0 && outside > 0) {
      html.budget_label = absl::StrCat(memonger::util::FormatBytes(flags.budget), " less ",
                                       memonger::util::FormatBytes(outside), " outside the arena");
    }
    outputs.Set(flags.html, memonger::PlanToHtml(graph, plan, html));
  }
  if (!flags.net_out.empty()) {
    MG_ASSIGN_OR_RETURN(std::string net, RewrittenNetBytes(graph, plan, flags.net_out, flags));
    outputs.Set(flags.net_out, std::move(net));
  }
  return absl::OkStatus();
}

// The report on stdout: the plan document (--format json), or the model summary, the plan's
// text (and --ascii map) and what executing it said.
absl::Status PrintReport(const Flags& flags, const memonger::graph::Graph& graph,
                         const memonger::PlanOptions& options, const memonger::Plan& plan,
                         const std::string& execution_report) {
  if (flags.format == "json") {
    std::cout << memonger::PlanToJson(graph, plan, flags.optimizer);
    return absl::OkStatus();
  }
  MG_ASSIGN_OR_RETURN(memonger::ModelSummary summary,
                      memonger::SummarizeModel(graph, options.model_name, flags.top));
  std::cout << memonger::SummaryToText(graph, summary) << "\n"
            << memonger::PlanToText(graph, plan, flags.optimizer);
  if (flags.ascii) std::cout << "\n" << memonger::PlanToAscii(graph, plan);
  std::cout << execution_report;
  return absl::OkStatus();
}

// One plan of one net: made, verified, written, executed where asked, reported; exit code 3
// with the cures where it exceeds --budget.
int PlanAndReport(RunContext& run, const SavedPlan& saved, memonger::graph::Graph& graph,
                  const memonger::PlanOptions& options, memonger::tools::PhaseClock& clock) {
  const Flags& flags = run.flags;
  std::optional<int> exit_code;
  absl::StatusOr<memonger::Plan> plan = MakePlan(run, saved, options, graph, exit_code);
  if (exit_code.has_value()) return *exit_code;
  if (!plan.ok()) return Fail(plan.status());
  clock.Mark("plan");
  PrintNotes(plan->notes);
  if (flags.optimizer != memonger::Optimizer::kNone && plan->trainable_bytes == 0) {
    // A Caffe2 NetDef passes its weights as external inputs: nothing says which are trained.
    PrintNotes({"--optimizer: the net has no trained params (params paired with a gradient, or "
                "params with a '<name>_grad' value): no optimizer state is counted"});
  }
  if (flags.cuda_graphs || flags.execute == "cuda") {
    // Which steps a CUDA graph could capture with the device kernels (the table made on the
    // host has the same ops and checks as the CUDA one).
    plan->graphable = memonger::alloc::FindGraphableSections(
        graph, *plan, memonger::alloc::MakeDeviceKernelTableOnHost());
  }
  if (absl::Status s = CheckPlan(flags, graph, *plan); !s.ok()) return Fail(s);
  clock.Mark("verify");
  if (absl::Status s = SetPlanOutputs(flags, graph, *plan, run.outputs); !s.ok()) return Fail(s);
  std::string execution_report;
  std::string beyond_tolerance;
  if (flags.execute != "none") {
    auto report = Execute(flags, run.source, graph, *plan, beyond_tolerance);
    if (!report.ok()) return Fail(report.status());
    execution_report = *std::move(report);
    clock.Mark("execute");
  }
  if (absl::Status s = run.outputs.Commit(); !s.ok()) return Fail(s);
  clock.Mark("outputs");
  if (absl::Status s = PrintReport(flags, graph, options, *plan, execution_report); !s.ok()) {
    return Fail(s);
  }
  clock.Mark("report");
  if (flags.timings) clock.Print(std::cerr);
  if (!beyond_tolerance.empty()) {
    std::cerr << "optimize-net: " << beyond_tolerance << "\n";
    return kExitFailed;
  }
  const int64_t budget = flags.budget;
  const memonger::DeviceBytes device = memonger::DeviceBytesOf(*plan, flags.optimizer);
  if (budget >= 0 && device.total() > budget) {
    using memonger::util::FormatBytes;
    std::cerr << "optimize-net: the plan needs " << FormatBytes(device.total()) << " ("
              << device.total() << " bytes) on the device, "
              << FormatBytes(device.total() - budget) << " more than the budget of "
              << FormatBytes(budget) << ": " << memonger::DeviceBytesToText(device) << "\n";
    PrintCures(graph, options, *plan, budget, device.outside_arena(), flags.recompute != "none");
    return kExitOverBudget;
  }
  return kExitOk;
}

// Returns the exit code; prints what failed. The flags say which kind of run this is: a range,
// --fit, --caffe2-bugs, a size-blind baseline, a what-if table, or one plan.
int Run(const Flags& flags) {
  absl::StatusOr<NetSource> source = memonger::tools::MakeNetSource(flags);
  if (!source.ok()) return Fail(source.status());
  RunContext run{flags, *std::move(source), {}};
  if (absl::Status s = memonger::tools::DeclareOutputs(flags, run.outputs); !s.ok()) {
    return Fail(s);
  }
  std::vector<std::string> notes;
  run.source.load.notes = &notes;
  if (flags.execute == "host" && !flags.verify && run.source.model_bytes == nullptr &&
      absl::EndsWithIgnoreCase(flags.model, ".onnx")) {
    // Read once: a run that measures data-dependent sizes retypes the model from these bytes.
    absl::StatusOr<std::string> bytes = memonger::util::ReadInputFile(flags.model, flags.limits);
    if (!bytes.ok()) return Fail(bytes.status());
    run.source.model_bytes = std::make_shared<const std::string>(*std::move(bytes));
  }
  const bool what_if = !flags.compare.empty() || !flags.variants.empty();
  if (!flags.ranges.empty()) return what_if ? RunWhatIfOverRange(run) : RunRange(run);
  SavedPlan saved;
  if (!flags.plan_in.empty()) {
    absl::StatusOr<std::string> text = memonger::util::ReadInputFile(flags.plan_in, flags.limits);
    if (!text.ok()) return Fail(text.status());
    saved.text = *std::move(text);
    saved.symbolic = memonger::IsSymbolicPlanJson(*saved.text);
  }
  memonger::tools::PhaseClock clock;
  bool size_blind = false;
  GraphRequest request;
  request.size_blind = &size_blind;
  request.notes = &notes;
  request.symbolic_workload = saved.symbolic;
  absl::StatusOr<memonger::graph::Graph> graph = MakeGraph(run.source, request);
  if (!graph.ok()) return Fail(graph.status());
  clock.Mark("load");
  PrintNotes(notes);
  run.source.load.notes = nullptr;  // --fit loads the model again
  auto options = TerminalPlanOptions(flags, *graph);
  if (!options.ok()) return Fail(options.status());
  if (flags.caffe2_bugs) {
    absl::StatusOr<memonger::tools::Caffe2ExactReport> report = memonger::tools::RunCaffe2Exact(
        flags, *graph, *options, !size_blind && !flags.size_blind, run.outputs);
    if (!report.ok()) return Fail(report.status());
    for (const std::string& warning : report->warnings) {
      std::cerr << "optimize-net: warning: " << warning << "\n";
    }
    if (absl::Status s = run.outputs.Commit(); !s.ok()) return Fail(s);
    std::cout << report->text;
    return kExitOk;
  }
  if (size_blind) return RunSizeBlind(flags, *graph, *options);
  const bool training = memonger::graph::HasGradientOps(*graph);
  if (!flags.fit.empty()) {
    const int rc = RunFit(run.source, *options, training, *graph);
    clock.Mark("fit");
    if (flags.timings) clock.Print(std::cerr);
    return rc;
  }
  if (flags.recompute != "none" && !training) {
    return Fail(absl::InvalidArgumentError(
        "--recompute is for training nets: this net has no backward ops (add --mode training)"));
  }
  if (what_if) return RunWhatIf(run, *options);
  return PlanAndReport(run, saved, *graph, *options, clock);
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
