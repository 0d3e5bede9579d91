// memonger._memonger: the library as Python sees it (docs/python.md), thin by design. Every call
// takes the command line's flags as a list of strings (memonger/__init__.py builds them from
// keyword arguments), parses them with optimize-net's own parser and runs optimize-net's own
// steps (tools/plan_steps.h): a Python call plans exactly what the command line plans with the
// same flags, and fails with the same one-line message, raised as memonger.Error.
//
// Long calls (loading, planning, --fit, ranges, execution) run on a worker thread while the
// calling thread waits without the GIL, so other Python threads run meanwhile; every 50 ms the
// waiting thread takes the GIL back to look for a signal. A Ctrl-C sets the planners' stop flag
// (PlanOptions::stop), waits for the worker to return and raises KeyboardInterrupt. The worker
// touches no Python object.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "allocator/host_run.h"
#include "allocator/run_data.h"
#include "graph/dtype.h"
#include "graph/gradient_builder.h"
#include "graph/model_loader.h"
#include "kernels/cuda/kernels_device.h"
#include "memonger/planner.h"
#include "memonger/verify_plan.h"
#include "report/fit.h"
#include "report/plan_html.h"
#include "report/plan_report.h"
#include "report/symbolic_plan_json.h"
#include "report/symbolic_summary.h"
#include "tools/cli_flags.h"
#include "tools/plan_steps.h"
#include "tools/symbolic_run.h"
#include "util/file_io.h"
#include "util/status_macros.h"

namespace py = pybind11;

namespace memonger::python {
namespace {

// What the library reported: raised in Python as memonger.Error (a ValueError).
class Failure : public std::runtime_error {
 public:
  explicit Failure(const std::string& message) : std::runtime_error(message) {}
};

template <typename T>
T ValueOrRaise(absl::StatusOr<T> result) {
  if (!result.ok()) throw Failure(tools::OneLine(result.status().message()));
  return *std::move(result);
}

void RaiseIfError(const absl::Status& status) {
  if (!status.ok()) throw Failure(tools::OneLine(status.message()));
}

// Runs `work` on a worker thread while this thread waits without the GIL (see the top of the
// file). `stop`, when given, is set on a Ctrl-C; the worker is joined before returning, also
// when this thread is unwound without returning: at interpreter exit, Python ends a daemon
// thread that takes the GIL back (pthread_exit), and the guard then stops and joins the worker
// before its std::thread is destroyed. The GIL is released and taken back by explicit calls, not
// by a guard's destructor, so that this unwinding never starts inside a destructor.
template <typename Work>
auto RunWithoutGil(Work&& work, std::atomic<bool>* stop = nullptr) -> decltype(work()) {
  using Result = decltype(work());
  std::optional<Result> result;
  std::exception_ptr error;
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  std::thread worker([&] {
    try {
      result.emplace(work());
    } catch (...) {
      error = std::current_exception();
    }
    const std::lock_guard<std::mutex> lock(mutex);
    done = true;
    finished.notify_all();
  });
  struct JoinGuard {
    std::thread& worker;
    std::atomic<bool>* stop;
    ~JoinGuard() {
      if (!worker.joinable()) return;
      if (stop != nullptr) stop->store(true);
      worker.join();
    }
  } guard{worker, stop};
  bool interrupted = false;
  while (true) {
    PyThreadState* state = PyEval_SaveThread();
    bool now_done;
    {
      std::unique_lock<std::mutex> lock(mutex);
      now_done = finished.wait_for(lock, std::chrono::milliseconds(50), [&] { return done; });
    }
    PyEval_RestoreThread(state);
    if (now_done) break;
    if (PyErr_CheckSignals() != 0) {  // KeyboardInterrupt (or a handler's exception) is set
      interrupted = true;
      if (stop != nullptr) stop->store(true);
      break;
    }
  }
  {
    PyThreadState* state = PyEval_SaveThread();
    worker.join();
    PyEval_RestoreThread(state);
  }
  if (interrupted) throw py::error_already_set();
  if (error) std::rethrow_exception(error);
  return *std::move(result);
}

// The flags of `args` as optimize-net parses them; a usage error raises its one line (without
// the tool's name).
std::shared_ptr<const tools::Flags> ParseFlags(const std::vector<std::string>& args) {
  std::vector<const char*> argv = {"optimize-net"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out;
  std::ostringstream err;
  std::variant<tools::Flags, int> parsed =
      tools::ParseCommandLine(static_cast<int>(argv.size()), argv.data(), out, err);
  if (const int* code = std::get_if<int>(&parsed)) {
    std::string message = err.str();
    if (message.empty()) message = out.str();
    message = message.substr(0, message.find('\n'));
    absl::string_view line = message;
    absl::ConsumePrefix(&line, "optimize-net: ");
    message = std::string(line);
    if (message.empty()) message = absl::StrCat("the flags were refused (exit code ", *code, ")");
    throw Failure(message);
  }
  return std::make_shared<const tools::Flags>(std::get<tools::Flags>(std::move(parsed)));
}

// Refuses the flags that write files or reports of the command line: the binding returns what
// they would write (plan.to_json(), plan.html(), execute's outputs) instead.
void RefuseCommandLineOutputs(const tools::Flags& flags) {
  const std::pair<bool, const char*> refused[] = {
      {!flags.plan_json.empty(), "--plan-json (use plan.to_json())"},
      {!flags.plan_csv.empty(), "--plan-csv"},
      {!flags.html.empty(), "--html (use plan.html())"},
      {!flags.net_out.empty(), "--net-out"},
      {!flags.plan_in.empty(), "--plan-in"},
      {flags.execute != "none", "--execute (use memonger.execute)"},
      {!flags.outputs_out.empty(), "--outputs-out"},
      {!flags.inputs.empty(), "--inputs (pass inputs= to memonger.execute)"},
      {!flags.expect.empty(), "--expect"},
      {!flags.compare.empty() || !flags.variants.empty(), "--compare and --variant"},
      {flags.caffe2_bugs, "--caffe2-bugs"},
      {flags.size_blind, "--size-blind"},
      {flags.cuda_graphs, "--cuda-graphs"},
  };
  for (const auto& [given, what] : refused) {
    if (given) throw Failure(absl::StrCat(what, " is the command line's, not the Python API's"));
  }
}

// A loaded model: the flags it was loaded with (MODEL, --dim, --input-shape, --input-type), its
// bytes, read once, and the net typed at the given binding (at the high corner of a range).
// A model whose dims are not all bound loads untyped (`graph` null, `unbound` says which dim):
// memonger.fit binds its symbol as --fit does, and memonger.plan says what is missing.
struct Model {
  std::vector<std::string> args;
  std::shared_ptr<const std::string> bytes;
  std::shared_ptr<const graph::Graph> graph;
  std::string unbound;
  bool ranged = false;
  std::string name;

  const graph::Graph& typed() const {
    if (graph == nullptr) throw Failure(unbound);
    return *graph;
  }
};

// The loaders' error for a graph input's dim that nothing binds (ONNX import and NetDef shape
// inference say it alike).
bool IsUnboundDim(const absl::Status& status) {
  return absl::StrContains(status.message(), "is unbound; pass --dim");
}

// Where a call's net comes from: the model's bytes and the call's flags (owned here, so that
// NetSource's pointer to them stays valid as long as this does).
struct Source {
  std::shared_ptr<const tools::Flags> flags;
  tools::NetSource net;
};

std::shared_ptr<Source> MakeSource(const Model& model, const std::vector<std::string>& args) {
  std::vector<std::string> all = model.args;
  all.insert(all.end(), args.begin(), args.end());
  auto source = std::make_shared<Source>();
  source->flags = ParseFlags(all);
  RefuseCommandLineOutputs(*source->flags);
  source->net = ValueOrRaise(tools::MakeNetSource(*source->flags));
  source->net.model_bytes = model.bytes;
  // Planning needs no tensor data: the model's, decoded once at load, is lent to the plan's net
  // when it runs (memonger.execute).
  source->net.load.keep_data = false;
  return source;
}

// A plan with the net it was made for (the model's, or one rewritten for training or
// recomputation), verified.
struct PyPlan {
  std::shared_ptr<const graph::Graph> graph;
  Plan plan;
  int64_t budget = -1;  // device bytes (memonger/device_bytes.h)
  Optimizer optimizer = Optimizer::kNone;
  std::shared_ptr<const std::string> model_bytes;  // of the model it was made for
};

// The bytes of a model file, read once under the flags' limits, or the loader's error for a
// path it would refuse (unknown extension, no such file).
std::shared_ptr<const std::string> ReadModelFile(const std::string& path,
                                                 const util::InputLimits& limits) {
  const std::string lower = absl::AsciiStrToLower(path);
  const bool text = absl::EndsWith(lower, ".pbtxt") || absl::EndsWith(lower, ".prototxt") ||
                    absl::EndsWith(lower, ".json") || absl::EndsWith(lower, ".csv");
  const bool binary = absl::EndsWith(lower, ".onnx") || absl::EndsWith(lower, ".pb");
  if (!text && !binary) {
    graph::LoadOptions options;
    options.limits = limits;
    RaiseIfError(graph::LoadModel(path, options).status());
    throw Failure(absl::StrCat(util::Quote(path), ": not a model file"));
  }
  return std::make_shared<const std::string>(ValueOrRaise(util::ReadInputFile(
      path, limits, text ? util::FileContent::kText : util::FileContent::kBinary)));
}

Model Load(const std::vector<std::string>& args, std::optional<py::bytes> data) {
  Model model;
  model.args = args;
  std::shared_ptr<const tools::Flags> flags = ParseFlags(args);
  RefuseCommandLineOutputs(*flags);
  if (flags->model.empty()) throw Failure("no model given");
  model.name = flags->model;
  std::string bytes_copy;
  if (data.has_value()) bytes_copy = std::string(*data);  // with the GIL
  model.ranged = !flags->ranges.empty();
  auto [bytes, graph, unbound] = RunWithoutGil([&] {
    std::shared_ptr<const std::string> bytes =
        data.has_value() ? std::make_shared<const std::string>(std::move(bytes_copy))
                         : ReadModelFile(flags->model, flags->limits);
    tools::NetSource source = ValueOrRaise(tools::MakeNetSource(*flags));
    source.model_bytes = bytes;
    source.load.keep_data = true;
    absl::StatusOr<graph::Graph> g =
        model.ranged ? tools::RangeGraphAt(source)(flags->ranges.High()) : tools::MakeGraph(source);
    std::shared_ptr<const graph::Graph> typed;
    std::string unbound;
    if (g.ok()) {
      typed = std::make_shared<const graph::Graph>(*std::move(g));
    } else if (IsUnboundDim(g.status())) {
      unbound = tools::OneLine(g.status().message());
    } else {
      RaiseIfError(g.status());
    }
    return std::make_tuple(bytes, typed, unbound);
  });
  model.bytes = bytes;
  model.graph = graph;
  model.unbound = unbound;
  return model;
}

// A symbolic plan for the model's range, with what binds it: the source its nets are typed from.
struct PySymbolicPlan {
  std::shared_ptr<Source> source;
  tools::GraphAt graph_at;
  std::shared_ptr<const tools::CheckedRangePlan> checked;
  int64_t budget = -1;
  Optimizer optimizer = Optimizer::kNone;
};

PyPlan PlanOnce(const std::shared_ptr<Source>& source, std::atomic<bool>& stop) {
  const tools::Flags& flags = *source->flags;
  graph::Graph graph = ValueOrRaise(tools::MakeGraph(source->net));
  PlanOptions options = ValueOrRaise(tools::MakePlanOptions(flags, graph));
  options.stop = &stop;
  PyPlan result;
  result.budget = flags.budget;
  result.optimizer = flags.optimizer;
  result.model_bytes = source->net.model_bytes;
  if (flags.recompute != "none" && !graph::HasGradientOps(graph)) {
    throw Failure("recompute is for training nets: this net has no backward ops (mode='training')");
  }
  absl::StatusOr<Plan> plan = tools::PlanWithFlags(flags, options, graph);
  if (absl::IsResourceExhausted(plan.status())) {
    throw Failure(
        absl::StrCat("the budget is infeasible: ", tools::OneLine(plan.status().message())));
  }
  result.plan = ValueOrRaise(std::move(plan));
  RaiseIfError(tools::CheckPlannerPlan(graph, result.plan));
  result.graph = std::make_shared<const graph::Graph>(std::move(graph));
  return result;
}

PySymbolicPlan PlanRangeOf(const std::shared_ptr<Source>& source, std::atomic<bool>& stop) {
  const tools::Flags& flags = *source->flags;
  PySymbolicPlan result;
  result.source = source;
  result.budget = flags.budget;
  result.optimizer = flags.optimizer;
  result.graph_at = tools::RangeGraphAt(source->net);
  const graph::ShapeBindings fixed = ValueOrRaise(tools::RangeFixedBindings(source->net));
  // While planning, a Ctrl-C ends the search before the next binding is typed.
  const tools::GraphAt stoppable =
      [&](const graph::SymbolBindings& at) -> absl::StatusOr<graph::Graph> {
    if (stop.load()) return absl::CancelledError("stopped");
    return result.graph_at(at);
  };
  result.checked =
      std::make_shared<const tools::CheckedRangePlan>(ValueOrRaise(tools::PlanCheckedRange(
          flags, fixed, stoppable, [&](const graph::Graph& g) -> absl::StatusOr<PlanOptions> {
            MG_ASSIGN_OR_RETURN(PlanOptions options, tools::MakePlanOptions(flags, g));
            options.stop = &stop;
            return options;
          })));
  return result;
}

py::object PlanModel(const Model& model, const std::vector<std::string>& args) {
  std::shared_ptr<Source> source = MakeSource(model, args);
  if (!source->flags->fit.empty()) throw Failure("fit is memonger.fit's");
  std::atomic<bool> stop{false};
  if (!source->flags->ranges.empty()) {
    return py::cast(RunWithoutGil([&] { return PlanRangeOf(source, stop); }, &stop));
  }
  return py::cast(RunWithoutGil([&] { return PlanOnce(source, stop); }, &stop));
}

std::string Fit(const Model& model, const std::vector<std::string>& args) {
  std::shared_ptr<Source> source = MakeSource(model, args);
  const tools::Flags& flags = *source->flags;
  if (flags.fit.empty()) throw Failure("memonger.fit needs a symbol");
  if (flags.budget < 0) throw Failure("memonger.fit needs a budget");
  std::atomic<bool> stop{false};
  return RunWithoutGil(
      [&] {
        graph::Graph graph = ValueOrRaise(tools::MakeGraph(source->net));
        PlanOptions options = ValueOrRaise(tools::MakePlanOptions(flags, graph));
        options.stop = &stop;
        const FitResult fit =
            ValueOrRaise(tools::FindFit(source->net, options, graph::HasGradientOps(graph), {},
                                        &graph));
        return FitToJson(fit);
      },
      &stop);
}

PyPlan Bind(const PySymbolicPlan& splan, const std::map<std::string, int64_t>& dims) {
  return RunWithoutGil([&] {
    const SymbolicPlan& plan = splan.checked->range.plan;
    graph::SymbolBindings at(dims.begin(), dims.end());
    PyPlan result;
    result.budget = splan.budget;
    result.optimizer = splan.optimizer;
    result.model_bytes = splan.source->net.model_bytes;
    result.plan = ValueOrRaise(plan.Bind(at));
    graph::Graph typed = ValueOrRaise(splan.graph_at(at));
    if (absl::Status s = VerifyPlan(typed, result.plan); !s.ok()) {
      throw Failure(absl::StrCat("the symbolic plan bound at ",
                                 absl::StrJoin(at, ", ", absl::PairFormatter("=")),
                                 " is invalid: ", s.message()));
    }
    result.graph = std::make_shared<const graph::Graph>(std::move(typed));
    return result;
  });
}

// A tensor crossing the boundary: (name, dtype name, dims, bytes in C order).
using Tensor = std::tuple<std::string, std::string, std::vector<int64_t>, py::bytes>;

void CheckPlanFor(const Model& model, const PyPlan& plan);

std::vector<Tensor> Execute(const Model& model, const PyPlan& plan,
                            const std::vector<Tensor>& inputs, const std::string& device,
                            uint64_t seed, bool seed_missing, int threads) {
  CheckPlanFor(model, plan);
  if (threads < 1 || threads > 256) throw Failure("threads: 1 to 256");
  if (device != "host" && device != "cuda") {
    throw Failure(absl::StrCat("device '", device, "': expected 'host' or 'cuda'"));
  }
  alloc::HostRunOptions options;
  options.seed = seed;
  options.seed_missing = seed_missing;
  options.keep_outputs = true;
  options.threads = threads;
  if (!plan.graph->data_dependent_sizes().empty() && model.bytes != nullptr) {
    // The run measures the data-dependent sizes and retypes the model's bytes with them.
    std::shared_ptr<const tools::Flags> flags = ParseFlags(model.args);
    tools::NetSource source = ValueOrRaise(tools::MakeNetSource(*flags));
    source.model_bytes = model.bytes;
    options.retype = [flags, retype = tools::MeasuringRetype(std::move(source))](
                         const absl::flat_hash_map<std::string, std::vector<int64_t>>& measured) {
      return retype(measured);  // `flags` lives as long as the function
    };
  }
  std::map<std::string, graph::TensorData> data;
  for (const auto& [name, dtype, dims, bytes] : inputs) {
    graph::TensorData tensor;
    tensor.type.dtype = ValueOrRaise(graph::ParseDataType(dtype));
    tensor.type.dims = dims;
    tensor.bytes = std::string(bytes);
    const int64_t expected = ValueOrRaise(graph::ByteSize(tensor.type, name));
    if (expected != static_cast<int64_t>(tensor.bytes.size())) {
      throw Failure(absl::StrCat("input '", name, "': ", tensor.bytes.size(), " bytes for ",
                                 graph::TensorTypeToString(tensor.type)));
    }
    data.emplace(name, std::move(tensor));
  }
  // The plan's net with the model's tensor data (weights, constants), decoded once at load.
  // (A plan's own net holds at most the model's small constants: graph/onnx/onnx_import.h.)
  std::shared_ptr<const graph::Graph> net = plan.graph;
  if (model.graph != nullptr && model.graph->static_data() != nullptr &&
      net->shared_static_data() != model.graph->shared_static_data()) {
    auto with_data = std::make_shared<graph::Graph>(*net);
    with_data->set_static_data(model.graph->shared_static_data());
    net = std::move(with_data);
  }
  const alloc::HostRunReport report = RunWithoutGil([&] {
    RaiseIfError(alloc::CheckRunInputs(*net, data));
    for (auto& [name, tensor] : data) options.data.emplace(name, std::move(tensor));
    alloc::NetRunTarget target;
    alloc::CudaKernels cuda_kernels;
    if (device == "cuda") {
      alloc::CudaKernelOptions cuda_options;
      cuda_options.scratch_bytes = alloc::DeviceScratchBytes(*net);
      cuda_kernels = ValueOrRaise(alloc::MakeCudaKernels(cuda_options));
      target.device = alloc::Device::kCuda;
      target.kernels = &cuda_kernels.table;
      target.finish = cuda_kernels.synchronize;
    }
    return ValueOrRaise(alloc::RunNet(*net, plan.plan, options, target));
  });
  std::vector<Tensor> outputs;
  for (const alloc::HostRunOutput& out : report.outputs) {
    outputs.emplace_back(out.name, std::string(graph::DataTypeName(out.type.dtype)), out.type.dims,
                         py::bytes(out.bytes));
  }
  return outputs;
}

// memonger.execute(model, plan): the plan runs its own net (the model's at the plan's sizes,
// or the training or recomputed net made from it), so the model must be the one it was made for:
// the same bytes (a second load of the same file is the same model).
void CheckPlanFor(const Model& model, const PyPlan& plan) {
  if (model.bytes == plan.model_bytes) return;
  if (model.bytes == nullptr || plan.model_bytes == nullptr || *model.bytes != *plan.model_bytes) {
    throw Failure("the plan was made for another model");
  }
}

std::string Formula(const PySymbolicPlan& splan) {
  const SymbolicPlan& plan = splan.checked->range.plan;
  std::vector<std::string> pieces;
  for (int p = 0; p < static_cast<int>(plan.pieces.size()); ++p) {
    const std::string formula = ReadableFormula(ValueOrRaise(plan.Formula(p)));
    if (plan.pieces.size() == 1) return formula;
    pieces.push_back(absl::StrCat(plan.pieces[p].box.ToString(), ": ", formula));
  }
  return absl::StrJoin(pieces, "; ");
}

}  // namespace
}  // namespace memonger::python

PYBIND11_MODULE(_memonger, m) {
  using namespace memonger::python;  // NOLINT: the module's own names
  namespace mg = memonger;
  m.doc() = "memonger's library: load, plan, fit and execute (see the memonger package)";
  py::register_exception<Failure>(m, "Error", PyExc_ValueError);

  py::class_<Model>(m, "Model")
      .def_readonly("name", &Model::name)
      .def_readonly("ranged", &Model::ranged)
      .def_property_readonly("typed", [](const Model& model) { return model.graph != nullptr; })
      .def_property_readonly("num_ops", [](const Model& model) { return model.typed().num_ops(); })
      .def_property_readonly("num_values",
                             [](const Model& model) { return model.typed().num_values(); })
      .def_property_readonly(
          "outputs",
          [](const Model& model) {
            // The graph outputs: name, dtype, shape.
            std::vector<std::tuple<std::string, std::string, std::vector<int64_t>>> outputs;
            const mg::graph::Graph& g = model.typed();
            for (mg::graph::ValueId v : g.outputs()) {
              const mg::graph::Value& value = g.value(v);
              if (!value.type.has_value()) continue;
              outputs.emplace_back(value.name,
                                   std::string(mg::graph::DataTypeName(value.type->dtype)),
                                   value.type->dims);
            }
            return outputs;
          })
      .def_property_readonly("inputs", [](const Model& model) {
        // The graph inputs the caller gives (not weights or constants): name, dtype, shape.
        std::vector<std::tuple<std::string, std::string, std::vector<int64_t>>> inputs;
        const mg::graph::Graph& g = model.typed();
        for (mg::graph::ValueId v : g.inputs()) {
          const mg::graph::Value& value = g.value(v);
          if (value.role != mg::graph::Role::kInput || !value.type.has_value()) continue;
          inputs.emplace_back(value.name, std::string(mg::graph::DataTypeName(value.type->dtype)),
                              value.type->dims);
        }
        return inputs;
      });

  py::class_<PyPlan>(m, "Plan", py::dynamic_attr())
      .def_property_readonly("arena_bytes", [](const PyPlan& p) { return p.plan.arena_bytes; })
      .def_property_readonly("lower_bound_bytes",
                             [](const PyPlan& p) { return p.plan.lower_bound_bytes; })
      .def_property_readonly("naive_bytes", [](const PyPlan& p) { return p.plan.naive_bytes; })
      .def_property_readonly("static_bytes", [](const PyPlan& p) { return p.plan.static_bytes; })
      .def_property_readonly("trainable_bytes",
                             [](const PyPlan& p) { return p.plan.trainable_bytes; })
      .def_property_readonly(
          "optimizer_state_bytes",
          [](const PyPlan& p) { return mg::DeviceBytesOf(p.plan, p.optimizer).optimizer_state; })
      .def_property_readonly(
          "device_bytes",
          [](const PyPlan& p) { return mg::DeviceBytesOf(p.plan, p.optimizer).total(); })
      .def_property_readonly("proven_optimal",
                             [](const PyPlan& p) { return p.plan.proven_optimal; })
      .def_property_readonly("planner", [](const PyPlan& p) { return p.plan.planner; })
      .def_property_readonly(
          "order", [](const PyPlan& p) { return std::string(mg::OrderName(p.plan.order)); })
      .def_property_readonly("alignment", [](const PyPlan& p) { return p.plan.alignment; })
      .def_property_readonly("planning_seconds",
                             [](const PyPlan& p) { return p.plan.planning_seconds; })
      .def_property_readonly("budget_bytes",
                             [](const PyPlan& p) -> std::optional<int64_t> {
                               if (p.budget < 0) return std::nullopt;
                               return p.budget;
                             })
      .def_property_readonly(
          "num_steps", [](const PyPlan& p) { return static_cast<int64_t>(p.plan.steps.size()); })
      .def("to_json",
           [](const PyPlan& p) { return mg::PlanToJson(*p.graph, p.plan, p.optimizer); })
      .def(
          "_html",
          [](const PyPlan& p, std::optional<int64_t> budget,
             const std::vector<std::pair<std::string, std::vector<std::pair<double, int64_t>>>>&
                 measured) {
            mg::HtmlOptions options;
            const int64_t outside = mg::DeviceBytesOf(p.plan, p.optimizer).outside_arena();
            options.budget_bytes =
                mg::ArenaShare(budget.has_value() ? *budget : p.budget, outside);
            for (const auto& [name, points] : measured) options.measured.push_back({name, points});
            return mg::PlanToHtml(*p.graph, p.plan, options);
          },
          py::arg("budget") = py::none(), py::arg("measured") = py::list())
      .def("text",
           [](const PyPlan& p) { return mg::PlanToText(*p.graph, p.plan, p.optimizer); });

  py::class_<PySymbolicPlan>(m, "SymbolicPlan")
      .def_property_readonly("arena_formula", &Formula)
      .def_property_readonly(
          "box",
          [](const PySymbolicPlan& s) {
            std::map<std::string, std::pair<int64_t, int64_t>> box;
            for (const mg::graph::SymbolRange& r : s.checked->range.plan.box.ranges) {
              box[r.symbol] = {r.lo, r.hi};
            }
            return box;
          })
      .def_property_readonly(
          "max_arena_bytes",
          [](const PySymbolicPlan& s) { return ValueOrRaise(s.checked->range.plan.MaxArena()); })
      .def_property_readonly("notes", [](const PySymbolicPlan& s) { return s.checked->notes; })
      .def_property_readonly(
          "pieces",
          [](const PySymbolicPlan& s) {
            std::vector<std::tuple<std::string, std::string, double, double>> pieces;
            const mg::SymbolicPlan& plan = s.checked->range.plan;
            for (int p = 0; p < static_cast<int>(plan.pieces.size()); ++p) {
              pieces.emplace_back(plan.pieces[p].box.ToString(),
                                  mg::ReadableFormula(ValueOrRaise(plan.Formula(p))),
                                  plan.pieces[p].worst_ratio, plan.pieces[p].mean_ratio);
            }
            return pieces;
          })
      .def("measure",
           [](const PySymbolicPlan& s, const std::map<std::string, int64_t>& dims) {
             std::vector<int64_t> scratch;
             const mg::graph::SymbolBindings at(dims.begin(), dims.end());
             const mg::SymbolicPlan::Extent e =
                 ValueOrRaise(s.checked->range.plan.Measure(at, scratch));
             return std::make_pair(e.arena, e.lower_bound);
           })
      .def("bind", &Bind)
      .def(
          "html",
          [](const PySymbolicPlan& s, int samples) {
            if (samples < 1 || samples > 64) throw Failure("samples: 1 to 64");
            return RunWithoutGil([&] {
              return ValueOrRaise(mg::tools::RangePlanHtml(
                  *s.checked, s.graph_at, s.source->flags->model, s.budget, samples,
                  s.optimizer));
            });
          },
          py::arg("samples") = 9)
      .def("to_json",
           [](const PySymbolicPlan& s) {
             return mg::SymbolicPlanToJson(s.checked->range.reference, s.checked->range.plan);
           })
      .def("text", [](const PySymbolicPlan& s) {
        return ValueOrRaise(
            mg::SymbolicPlanToText(s.checked->range.reference, s.checked->range.plan, s.budget,
                                   s.optimizer));
      });

  m.def("load", &Load, py::arg("args"), py::arg("data") = py::none());
  m.def("plan", &PlanModel, py::arg("model"), py::arg("args"));
  m.def("fit", &Fit, py::arg("model"), py::arg("args"));
  m.def("execute", &Execute, py::arg("model"), py::arg("plan"), py::arg("inputs"),
        py::arg("device") = "host", py::arg("seed") = 0, py::arg("seed_missing") = false,
        py::arg("threads") = 1);
}
