// The steps of an optimize-net run that every front end takes alike: the net a run plans (loaded,
// typed, with its backward pass and fp16 storage rewrite), the PlanOptions its flags ask for,
// the --fit search and the typed nets of a range. optimize-net's main and the Python module
// (python/) both call these, so that a Python call and the command line with the same flags
// plan the same net with the same options.
//
//   MG_ASSIGN_OR_RETURN(NetSource source, MakeNetSource(flags));
//   MG_ASSIGN_OR_RETURN(graph::Graph g, MakeGraph(source));
//   MG_ASSIGN_OR_RETURN(PlanOptions options, MakePlanOptions(flags, g));
#ifndef MEMONGER_TOOLS_PLAN_STEPS_H_
#define MEMONGER_TOOLS_PLAN_STEPS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"
#include "graph/model_loader.h"
#include "graph/shape_inference.h"
#include "graph/tensor_data.h"
#include "memonger/planner.h"
#include "report/fit.h"
#include "tools/cli_flags.h"
#include "tools/symbolic_run.h"
#include "workloads/workload_spec.h"

namespace memonger::tools {

// A message on one line, however many lines a library (libonnx) put in it, bytes that are not
// text escaped: users' scripts and the hostile-input suite read the first line of stderr.
std::string OneLine(absl::string_view message);

// Whether every op of `graph` is a step of usage records or a trace (fixed steps).
bool IsRecordsGraph(const graph::Graph& graph);

// Where a run's net comes from: the flags (which must outlive it), how models are loaded, the
// workload when one is given, and the model's bytes where the caller holds them in memory
// (Python's memonger.load(bytes); flags.model then only names them: its extension the format).
// Without bytes, flags.model is read, each time a net is made.
struct NetSource {
  const Flags* flags = nullptr;
  graph::LoadOptions load;
  std::optional<graph::WorkloadSpec> workload;
  std::shared_ptr<const std::string> model_bytes;
  // --inputs, read once: their shapes bind the model's free dims (ShapeBindings::data_shapes),
  // their data is the run's.
  std::shared_ptr<const std::map<std::string, graph::TensorData>> run_inputs;
};

// The source of `flags`' net: the workload parsed, the bindings and limits of the flags, the
// model's data kept where it runs with real kernels, --inputs read (their shapes binding the
// model's free dims unless a range or --fit sizes them), and --fit's symbol bound to 1 where the
// flags leave it free (the model must plan as given before the search binds it).
absl::StatusOr<NetSource> MakeNetSource(const Flags& flags);

// The net to plan: the workload (with request.fit_value set for --fit's key) or the model (with
// --fit's symbol bound to it), typed, with its backward pass for --mode training and its fp16
// storage rewrite. `request.size_blind`, when given, may plan without sizes: it is set (and
// shape inference skipped) for a memonger baseline whose graph inputs' shapes are unknown (a
// note says which unless --size-blind asked for it), as Caffe2's memonger plans without blob
// shapes. With the shapes known, --size-blind only makes the baselines decide without sizes
// (MemongerOptions::size_blind) and the plan keeps real bytes.
struct GraphRequest {
  std::optional<int64_t> fit_value;           // --fit's key or symbol set to this value
  bool* size_blind = nullptr;                 // may plan without sizes: set where it does
  std::vector<std::string>* notes = nullptr;  // where the size-blind note goes
  bool symbolic_workload = false;             // a workload declaring its inputs in symbols
};
absl::StatusOr<graph::Graph> MakeGraph(const NetSource& source, const GraphRequest& request = {});

// MakeGraph's two halves: the net loaded and typed (the workload built, or the model imported
// and shape inference run), and its rewrites (the backward pass for --mode training, fp16
// storage). MakeGraph is FinishNet(LoadTypedNet(...)) but where the load plans size-blind.
absl::StatusOr<graph::Graph> LoadTypedNet(const NetSource& source,
                                          const GraphRequest& request = {});
absl::StatusOr<graph::Graph> FinishNet(const NetSource& source, graph::Graph net);

// How a run that measures data-dependent sizes retypes `source`'s net (alloc::Executor::Retype):
// MakeGraph again with the sizes measured, without the weights' data (the run holds them) but
// with every folded value's and Constant's. REQUIRES: source.flags outlives the function.
std::function<absl::StatusOr<graph::Graph>(
    const absl::flat_hash_map<std::string, std::vector<int64_t>>& measured)>
MeasuringRetype(NetSource source);

// The options the flags ask for, checked against the net (names the flags give must be values of
// it). No progress callback: a terminal's is the tool's to set.
absl::StatusOr<PlanOptions> MakePlanOptions(const Flags& flags, const graph::Graph& graph);

// The verifier's verdict on a plan a planner made for `graph`: Internal, naming the planner,
// where VerifyPlan refuses it (a planner bug, never the input's fault).
absl::Status CheckPlannerPlan(const graph::Graph& graph, const Plan& plan);

// The plan the flags ask for of `graph`, not yet verified: with --recompute, the net rewritten
// for recomputation (`graph` becomes it) and its plan, ResourceExhausted where no choice meets
// --budget; else PlanMemory's.
absl::StatusOr<Plan> PlanWithFlags(const Flags& flags, const PlanOptions& options,
                                   graph::Graph& graph);

// --fit: the largest value of flags.fit whose plan fits flags.budget, for the given order, for
// the memory-aware order and, for a training net, with recomputation (report/fit.h). Every
// placement is checked by VerifyPlan; the recompute cure judges the sizes it searches by the
// lower bound of its ladder's lowest-peak choice and places its answer (RecomputeLadder).
// Cancelled once options.stop is set (before the next size is planned). `progress` (may be
// empty) is called after each size is planned. The model is read once; each size is typed
// once, imported or retyped (tools/fit_nets.h: the answer's sizes are imported to confirm; a
// mismatch searches again on imports), a later cure planning the same sizes, and
// the memory-aware order found at one size seeds the search at the next (PlanOptions::
// order_seeds), without the exact search once it ran out of time on this net. `loaded`: the net
// the caller imported from `source` already (nullptr: none), which ForManyBindings then need
// not import again.
absl::StatusOr<FitResult> FindFit(const NetSource& source, const PlanOptions& options,
                                  bool training,
                                  std::function<void(const FitProgress&)> progress = {},
                                  const graph::Graph* loaded = nullptr);

// The source for a run that types the net at many bindings (--fit's search, a range's planner):
// the model file read once, and, where an import without the large tensors' data gives the same
// net at `probe` (graph::SamePlanningGraph; planning reads no weights, folding may), those
// bytes (graph::PlanningBytes), so that each binding does not copy every weight again. A
// workload, a run that keeps data (--execute), or anything that fails: `source` as it is.
// `loaded`: the net already imported from `source` at `probe` (nullptr: imported here).
NetSource ForManyBindings(const NetSource& source, const graph::SymbolBindings& probe,
                          const graph::Graph* loaded = nullptr);

// A range (--dim S=LO..HI): the net typed at a binding of flags.ranges, and the bindings of the
// model's other symbols and inputs (--dim S=V, --input-shape; a workload's own values).
GraphAt RangeGraphAt(const NetSource& source);
absl::StatusOr<graph::ShapeBindings> RangeFixedBindings(const NetSource& source);

}  // namespace memonger::tools

#endif  // MEMONGER_TOOLS_PLAN_STEPS_H_
