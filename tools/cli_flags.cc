#include "tools/cli_flags.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "memonger/planner.h"
#include "memonger/symbolic/symbolic_planner.h"
#include "util/bytes.h"
#include "util/file_io.h"
#include "util/status_macros.h"
#include "workloads/workload_spec.h"

namespace memonger::tools {
namespace {

// The flags whose values are numbers are read as text and parsed here, so that an overflowing or
// odd number gets a short message naming the flag (CLI11 would clamp or print the largest double in
// full).
struct NumberTexts {
  std::string alignment = "256";
  std::string time_limit = "2";
  std::string threads;  // empty: every core
  std::string budget;
  std::string optimizer = "none";
  std::string update_in_backward;
  std::string max_input_bytes;
  std::string seed = "0";
};

absl::Status ParseNumbers(const NumberTexts& texts, Flags& flags) {
  if (!absl::SimpleAtoi(texts.alignment, &flags.alignment)) {
    return absl::InvalidArgumentError(absl::StrCat("--alignment ", util::Quote(texts.alignment),
                                                   ": not an integer that fits in 64 bits"));
  }
  if (absl::Status s = util::CheckAlignment(flags.alignment, "--alignment"); !s.ok()) return s;
  if (!absl::SimpleAtod(texts.time_limit, &flags.time_limit)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--time-limit ", util::Quote(texts.time_limit), ": not a number of seconds"));
  }
  if (auto d = util::CheckTimeLimit(flags.time_limit, "--time-limit"); !d.ok()) return d.status();
  if (texts.threads.empty()) {
    flags.threads = static_cast<int>(std::clamp<unsigned>(std::thread::hardware_concurrency(), 1,
                                                          util::kMaxThreads));
  } else {
    int64_t threads = 0;
    if (!absl::SimpleAtoi(texts.threads, &threads)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--threads ", util::Quote(texts.threads), ": not an integer"));
    }
    MG_RETURN_IF_ERROR(util::CheckThreads(threads, "--threads"));
    flags.threads = static_cast<int>(threads);
  }
  if (!texts.budget.empty()) {
    absl::StatusOr<int64_t> budget = util::ParseBytes(texts.budget);
    if (!budget.ok())
      return absl::InvalidArgumentError(absl::StrCat("--budget: ", budget.status().message()));
    flags.budget = *budget;
  }
  absl::StatusOr<Optimizer> optimizer = ParseOptimizer(texts.optimizer);
  if (!optimizer.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--optimizer: ", optimizer.status().message()));
  }
  flags.optimizer = *optimizer;
  if (!texts.update_in_backward.empty() &&
      (!absl::SimpleAtod(texts.update_in_backward, &flags.update_in_backward) ||
       !std::isfinite(flags.update_in_backward) || flags.update_in_backward <= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--update-in-backward ",
                                                   util::Quote(texts.update_in_backward),
                                                   ": not a learning rate (a number > 0)"));
  }
  if (!texts.max_input_bytes.empty()) {
    absl::StatusOr<int64_t> bytes = util::ParseBytes(texts.max_input_bytes);
    if (!bytes.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--max-input-bytes: ", bytes.status().message()));
    }
    if (*bytes < 1) return absl::InvalidArgumentError("--max-input-bytes: give at least 1 byte");
    flags.limits.max_input_bytes = *bytes;
  }
  // absl, not CLI11: CLI11 took 99999999999999999999 and -1 alike as 2^64 - 1, without a word.
  if (!absl::SimpleAtoi(texts.seed, &flags.seed) || absl::StartsWith(texts.seed, "-")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--seed ", util::Quote(texts.seed), ": not an integer in [0, 2^64)"));
  }
  return absl::OkStatus();
}

// A model or a workload, and the planner and order by name.
absl::Status CheckWhatToPlan(const Flags& flags) {
  if (flags.model.empty() && flags.workload.empty()) {
    return absl::InvalidArgumentError("give a MODEL file or --workload SPEC (see --help)");
  }
  if (auto p = ParsePlanner(flags.planner); !p.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--planner: ", p.status().message()));
  } else if (flags.execution == "parallel") {
    // Decided by the flags alone: a usage error, as the planner would refuse any model.
    if (absl::Status s = CheckServesParallelExecution(*p); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--planner ", flags.planner, " --execution parallel: ", s.message()));
    }
  }
  if (auto o = ParseOrder(flags.order); !o.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--order: ", o.status().message()));
  }
  return absl::OkStatus();
}

// What needs a run with real kernels, and the tolerance it is checked to.
absl::Status CheckExecuteFlags(const Flags& flags) {
  if (!flags.outputs_out.empty() && (flags.execute == "none" || flags.verify)) {
    return absl::InvalidArgumentError(
        "--outputs-out needs --execute host or cuda (without --verify)");
  }
  for (const auto& [flag, given] : {std::pair<const char*, bool>{"--inputs", !flags.inputs.empty()},
                                    {"--expect", !flags.expect.empty()},
                                    {"--seed-missing", flags.seed_missing}}) {
    if (given && (flags.execute == "none" || flags.verify)) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " needs --execute host or cuda (without --verify)"));
    }
  }
  if (!(flags.tolerance >= 0) || !std::isfinite(flags.tolerance)) {
    return absl::InvalidArgumentError("--tolerance must be a finite number >= 0");
  }
  return absl::OkStatus();
}

// Recomputation, --insert-free and --size-blind: what each needs and excludes.
absl::Status CheckRewriteFlags(const Flags& flags) {
  if (flags.update_in_backward > 0) {
    if (flags.mode != "training") {
      return absl::InvalidArgumentError("--update-in-backward needs --mode training");
    }
    if (flags.optimizer != Optimizer::kNone && flags.optimizer != Optimizer::kSgd) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--update-in-backward applies plain SGD; --optimizer ", OptimizerName(flags.optimizer),
          " keeps state it does not update"));
    }
  }
  if (flags.recompute == "auto" && flags.budget < 0) {
    return absl::InvalidArgumentError("--recompute auto needs --budget (the bytes to fit)");
  }
  if (flags.recompute != "none" && (!flags.plan_in.empty() || !flags.fit.empty() ||
                                    !flags.compare.empty() || !flags.variants.empty())) {
    return absl::InvalidArgumentError(
        "--recompute does not go with --plan-in, --fit, --compare or --variant (--fit tries "
        "recomputation by itself)");
  }
  if (flags.insert_free && flags.net_out.empty()) {
    return absl::InvalidArgumentError("--insert-free rewrites the net: it needs --net-out FILE");
  }
  if (flags.size_blind && !absl::StartsWith(flags.planner, "memonger-")) {
    return absl::InvalidArgumentError(
        "--size-blind is for the memonger baselines (memonger-dag, memonger-greedy, "
        "memonger-dp, memonger-fast), which Caffe2 ran without sizes");
  }
  return absl::OkStatus();
}

// --caffe2-bugs (Caffe2's own answer) and the activation heuristics.
absl::Status CheckCaffe2Flags(const Flags& flags) {
  if (flags.caffe2_bugs) {
    if (flags.planner != "memonger-dag" && flags.planner != "memonger-greedy" &&
        flags.planner != "memonger-dp" && flags.planner != "memonger-fast") {
      return absl::InvalidArgumentError(
          "--caffe2-bugs reproduces Caffe2's memonger: give --planner memonger-dag, "
          "memonger-greedy, memonger-dp or memonger-fast");
    }
    if (flags.model.empty()) {
      return absl::InvalidArgumentError(
          "--caffe2-bugs plans a Caffe2 net as written: give a NetDef file, not --workload");
    }
    if (flags.share_all_activations || flags.insert_free) {
      return absl::InvalidArgumentError(absl::StrCat(
          flags.insert_free ? "--insert-free" : "--share-all-activations",
          " is not part of Caffe2's memonger: it does not go with --caffe2-bugs"));
    }
    if (const std::string flag = FlagNeedingOffsets(flags); !flag.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, " does not go with --caffe2-bugs: Caffe2's answer is a renamed net "
          "(--net-out), not a plan with offsets, and it may overwrite live blobs"));
    }
  }
  if (flags.share_activations && flags.share_all_activations) {
    return absl::InvalidArgumentError(
        "--share-activations (Caffe2's heuristic) and --share-all-activations exclude each "
        "other");
  }
  return absl::OkStatus();
}

// --fit: its budget, its key, and what it does not go with.
absl::Status CheckFitFlags(const Flags& flags) {
  if (!flags.fit.empty() && flags.budget < 0) {
    return absl::InvalidArgumentError("--fit needs --budget");
  }
  if (!flags.fit.empty() && !flags.workload.empty()) {
    // A key the workload does not have would be refused at every size, which the search would
    // report as "nothing fits". (A bad spec is reported where it is built.)
    if (absl::StatusOr<graph::WorkloadSpec> spec = graph::ParseWorkloadSpec(flags.workload);
        spec.ok()) {
      if (absl::Status key = graph::CheckWorkloadKey(*spec, flags.fit); !key.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("--fit: ", key.message()));
      }
    }
  }
  if (!flags.fit.empty() && (!flags.compare.empty() || !flags.variants.empty() ||
                             !flags.plan_in.empty() || flags.execute != "none")) {
    return absl::InvalidArgumentError(
        "--fit plans many sizes: it does not go with --compare, --variant, --plan-in or "
        "--execute");
  }
  if (!flags.html.empty() && (!flags.compare.empty() || !flags.variants.empty())) {
    return absl::InvalidArgumentError(
        "--html draws one net's plans: it does not go with --compare or --variant");
  }
  return absl::OkStatus();
}

// --dim values and ranges into flags.bindings and flags.ranges.
absl::Status ParseDims(Flags& flags) {
  const bool plain_dims = std::any_of(flags.dims.begin(), flags.dims.end(),
                                      [](const std::string& d) { return !graph::IsDimRange(d); });
  if (!flags.workload.empty() &&
      (plain_dims || !flags.input_shapes.empty() || !flags.input_types.empty())) {
    return absl::InvalidArgumentError(
        "--dim, --input-shape and --input-type bind a model file's shapes and types; a --workload takes its sizes in "
        "its spec (e.g. attention:n=4096); only a range (--dim n=256..65536) goes with it");
  }
  for (const std::string& d : flags.dims) {
    if (graph::IsDimRange(d)) {
      if (absl::Status s = graph::ParseDimRange(d, flags.ranges); !s.ok()) return s;
    } else if (absl::Status s = graph::ParseDimBinding(d, flags.bindings); !s.ok()) {
      return s;
    }
  }
  for (const graph::SymbolRange& r : flags.ranges.ranges) {
    if (flags.bindings.dims.count(r.symbol) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--dim ", r.symbol, " is given both as a value and as a range"));
    }
  }
  return absl::OkStatus();
}

// A range (--dim S=LO..HI): what needs one concrete plan, and the planner it needs.
absl::Status CheckRangeFlags(const Flags& flags) {
  if (!flags.ranges.empty()) {
    // One plan for a box of bindings: what needs one concrete plan needs one binding.
    const std::vector<std::pair<bool, const char*>> concrete_only = {
        {!flags.fit.empty(), "--fit (the summary gives the largest value that fits --budget)"},
        {!flags.plan_in.empty(), "--plan-in (bind a plan with --dim N=VALUE)"},
        {flags.execute != "none", "--execute"},
        {!flags.net_out.empty(), "--net-out"},
        {!flags.plan_csv.empty(), "--plan-csv"},
        {flags.recompute != "none", "--recompute"},
        {flags.caffe2_bugs, "--caffe2-bugs"},
        {flags.cuda_graphs, "--cuda-graphs"},
        {flags.ascii, "--ascii"},
    };
    for (const auto& [given, what] : concrete_only) {
      if (given) {
        return absl::InvalidArgumentError(absl::StrCat(
            "a plan for a range of bindings (--dim ", flags.ranges.ranges.front().symbol,
            "=LO..HI) does not go with ", what));
      }
    }
    if ((!flags.compare.empty() || !flags.variants.empty()) && flags.format == "json") {
      return absl::InvalidArgumentError(
          "the what-if table over a range (--compare or --variant with --dim SYMBOL=LO..HI) "
          "has no JSON form: leave out --format json");
    }
    // The planner, order and executor a range plan needs (an execution left to the net's hint
    // is checked once the net is loaded).
    if (absl::Status range = CheckRangePlanOptions(
            *ParsePlanner(flags.planner), *ParseOrder(flags.order),
            flags.execution == "parallel" ? ExecutionModel::kParallel : ExecutionModel::kSerial);
        !range.ok()) {
      return absl::InvalidArgumentError(range.message());
    }
  }
  return absl::OkStatus();
}

// --input-shape and --input-type into flags.bindings; --net-out's format; --fit against --dim.
absl::Status ParseInputsAndNetOut(Flags& flags) {
  for (const std::string& s : flags.input_shapes) {
    if (absl::Status st = graph::ParseInputShapeBinding(s, flags.bindings); !st.ok()) return st;
  }
  for (const std::string& s : flags.input_types) {
    if (absl::Status st = graph::ParseInputTypeBinding(s, flags.bindings); !st.ok()) return st;
  }
  if (!flags.net_out.empty()) {
    const std::string ext =
        absl::AsciiStrToLower(std::filesystem::path(flags.net_out).extension().string());
    if (ext != ".pb" && ext != ".pbtxt" && ext != ".prototxt") {
      return absl::InvalidArgumentError(
          absl::StrCat("--net-out ", util::Quote(flags.net_out),
                       ": use the extension .pb (binary) or .pbtxt (text)"));
    }
  }
  for (const std::string& dim : flags.dims) {
    // The symbol searched is bound at every trial size: a --dim for it would be dropped.
    if (!flags.fit.empty() && dim.substr(0, dim.find('=')) == flags.fit) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--fit ", util::Quote(flags.fit), " searches its size: it does not go with --dim ",
          util::Quote(dim)));
    }
  }
  return absl::OkStatus();
}

// Checks that need no model: combinations of flags, names of planners and orders, bindings, output
// paths (writable directory, known extension). Each failure is a usage error; the groups run in
// this order, so that a run with several mistakes is told the first.
absl::Status CheckFlags(Flags& flags) {
  MG_RETURN_IF_ERROR(CheckWhatToPlan(flags));
  MG_RETURN_IF_ERROR(CheckExecuteFlags(flags));
  MG_RETURN_IF_ERROR(CheckRewriteFlags(flags));
  MG_RETURN_IF_ERROR(CheckCaffe2Flags(flags));
  MG_RETURN_IF_ERROR(CheckFitFlags(flags));
  MG_RETURN_IF_ERROR(ParseDims(flags));
  MG_RETURN_IF_ERROR(CheckRangeFlags(flags));
  MG_RETURN_IF_ERROR(ParseInputsAndNetOut(flags));
  // Every output file is checked before any work (a run of minutes must not end in "cannot write");
  // the outputs are written together at the end (util::OutputFiles).
  util::OutputFiles outputs;
  return DeclareOutputs(flags, outputs);
}

}  // namespace

std::string FlagNeedingOffsets(const Flags& flags) {
  for (const auto& [flag, used] : std::initializer_list<std::pair<const char*, bool>>{
           {"--plan-json", !flags.plan_json.empty()},
           {"--plan-csv", !flags.plan_csv.empty()},
           {"--html", !flags.html.empty()},
           {"--plan-in", !flags.plan_in.empty()},
           {"--execute", flags.execute != "none"},
           {"--budget", flags.budget >= 0},
           {"--fit", !flags.fit.empty()},
           {"--recompute", flags.recompute != "none"},
           {"--store-fp16", !flags.store_fp16.empty()},
           {"--format json", flags.format == "json"},
           {"--ascii", flags.ascii},
           {"--cuda-graphs", flags.cuda_graphs},
           {"--compare", !flags.compare.empty()},
           {"--variant", !flags.variants.empty()}}) {
    if (used) return flag;
  }
  return "";
}

namespace {

// An empty path (often an unset shell variable) would mean "not given" and write nothing
// without a word: refused, as a usage error.
const CLI::Validator kNonEmptyPath(
    [](std::string& path) { return path.empty() ? std::string("an empty path") : std::string(); },
    "PATH");

}  // namespace

absl::Status DeclareOutputs(const Flags& flags, util::OutputFiles& outputs) {
  outputs.AddInput("MODEL", flags.model);
  outputs.AddInput("--plan-in", flags.plan_in);
  for (const auto& [flag, path] :
       {std::pair<const char*, const std::string*>{"--plan-json", &flags.plan_json},
        {"--plan-csv", &flags.plan_csv},
        {"--html", &flags.html},
        {"--net-out", &flags.net_out}}) {
    if (path->empty()) continue;
    if (absl::Status s = outputs.Add(flag, *path); !s.ok()) return s;
  }
  return absl::OkStatus();
}

namespace {

// The model and its bindings: MODEL or --workload, the what-if variants, shapes and types.
void AddModelOptions(CLI::App& app, Flags& flags) {
  CLI::Option* model =
      app.add_option("model", flags.model,
                     "model file: .onnx, .pb (binary NetDef), .pbtxt (text NetDef), .json (usage "
                     "records, memonger.records/v1), .csv (MiniMalloc trace)");
  CLI::Option* workload =
      app.add_option("--workload", flags.workload,
                     "a generated net instead of MODEL: attention:n=18000,kernel=math,..., "
                     "resnet50:batch=32, mlp:layers=3,... or random:ops=100000,seed=1,... "
                     "(docs/workloads.md)");
  model->excludes(workload);
  workload->excludes(model);
  app.add_option("--compare", flags.compare,
                 "KEY=V1,V2,... : plan the --workload once per value and print a what-if "
                 "table (repeatable: every combination)")
      ->allow_extra_args(false)
      ->needs(workload);
  app.add_option("--store-fp16", flags.store_fp16,
                 "NAME: keep this float32/bfloat16 value in float16 between its uses, cast back "
                 "at each reader (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--variant", flags.variants,
                 "KEY=V,KEY=V : one what-if variant of the --workload (repeatable)")
      ->allow_extra_args(false)
      ->needs(workload);
  app.add_option("--input-shape", flags.input_shapes,
                 "NAME=D0,D1,... : the shape of a graph input (repeatable, once per input)")
      ->allow_extra_args(false);
  app.add_option("--input-type", flags.input_types,
                 "NAME=DTYPE : the element type of a graph input (int32, float16, ...; "
                 "repeatable); default: its declaration, else what its readers take, else "
                 "float32")
      ->allow_extra_args(false);
  app.add_option("--dim", flags.dims,
                 "SYMBOL=VALUE : binds a symbolic dimension of the model (repeatable, once per "
                 "symbol); SYMBOL=LO..HI plans once for every value in the range (a symbolic "
                 "plan: --plan-json writes memonger.plan/v2; with --workload attention the "
                 "symbols are n and batch)")
      ->allow_extra_args(false);
}

// How to plan: planner, order, executor, training.
void AddPlanningOptions(CLI::App& app, Flags& flags) {
  app.add_option("--planner", flags.planner,
                 "auto, best-fit, greedy-by-size, exact, exact-sharing, memonger-dag, "
                 "memonger-greedy, memonger-dp, memonger-fast, none")
      ->capture_default_str();
  app.add_option("--order", flags.order, "given, topological, longest-path, memory-aware")
      ->capture_default_str();
  app.add_option("--execution", flags.execution,
                 "serial or parallel (default: the net's hint, else serial)")
      ->check(CLI::IsMember({"serial", "parallel"}));
  app.add_option("--mode", flags.mode, "inference or training")
      ->check(CLI::IsMember({"inference", "training"}))
      ->capture_default_str();
}

// The memonger baselines' own options: what Caffe2's share_grad_blobs and
// optimize_inference_for_dag are given, and Caffe2's static blobs.
void AddMemongerOptions(CLI::App& app, Flags& flags) {
  app.add_option("--loss", flags.losses, "a loss to start gradient sharing from (training)")
      ->allow_extra_args(false);
  app.add_flag("--share-activations", flags.share_activations,
               "memonger-dag training: share activations as well as gradients, found as Caffe2 "
               "does (an output b of an op reading b_w, the last two left out)");
  app.add_flag("--share-all-activations", flags.share_all_activations,
               "memonger-dag training: share every activation as well as gradients (not "
               "Caffe2's heuristic)");
  app.add_option("--namescope", flags.namescope,
                 "memonger-dag: Caffe2's namescope (training: gradients are the names under it "
                 "ending in _grad; shared buffers are named <namescope>__m<k>_shared)");
  app.add_option("--param-grad", flags.param_grads,
                 "memonger-dag training: a parameter gradient, never shared (repeatable; "
                 "default: the net's declared ones, else P_grad for each graph input P no op "
                 "reads as its first input)")
      ->allow_extra_args(false);
  app.add_option("--static", flags.static_names,
                 "a value kept for the whole run and never shared, like graph inputs and "
                 "outputs (Caffe2's static_blobs; repeatable)")
      ->allow_extra_args(false);
  app.add_flag("--recycle-inputs", flags.recycle_inputs,
               "let planners reuse a graph input's memory after its last reader (by default "
               "inputs, like outputs, are kept for the whole run)");
  app.add_flag("--insert-free", flags.insert_free,
               "with --net-out: a Free op after the last reader of each blob (Caffe2's "
               "release_blobs_when_used, for caching allocators); --static names are kept");
  app.add_flag("--caffe2-bugs", flags.caffe2_bugs,
               "memonger baselines: Caffe2's answer exactly, the deviations of "
               "docs/memonger.md undone (it may share across devices or overwrite live blobs: "
               "each such read is reported); a renamed net (--net-out) and a summary only");
  app.add_flag("--size-blind", flags.size_blind,
               "memonger baselines: plan without sizes, as Caffe2's memonger does without blob "
               "shapes (automatic when the graph inputs' shapes are unknown)");
  app.add_option("--dont-share", flags.dont_share, "a value name never shared (memonger-dag)")
      ->allow_extra_args(false);
  app.add_option("--head", flags.heads,
                 "memonger-dag inference: a value to start from (default: the graph inputs)")
      ->allow_extra_args(false);
}

// Limits, static placement, views, the budget and its cures.
void AddLimitOptions(CLI::App& app, Flags& flags, NumberTexts& numbers) {
  app.add_option("--alignment", numbers.alignment,
                 "byte alignment of every offset (a power of two, at most 2^30)")
      ->capture_default_str();
  app.add_option("--time-limit", numbers.time_limit,
                 "seconds a searching planner may take (> 0, at most a week); it then returns "
                 "the best found")
      ->capture_default_str();
  app.add_option("--threads", numbers.threads,
                 "threads of the offset planners' portfolio and of --execute host's matrix "
                 "products (default: every core; the outputs are the same bytes for any count, "
                 "and so is the plan, unless a clock cuts a search: --time-limit, or auto's "
                 "local search, which stops at a quarter of it)");
  app.add_option("--max-input-bytes", numbers.max_input_bytes,
                 "the largest input file read (default 2GiB, protobuf's own limit; 512MiB, "
                 "4GiB, ...)");
  app.add_flag("--plan-static", flags.plan_static, "place params and constants in the arena too");
  app.add_flag("--views,!--no-views", flags.views,
               "ops marked `view` (ONNX Reshape, Flatten, Squeeze, Unsqueeze, Identity; `view: "
               "true` in a net file) alias their input instead of copying, where that is safe; "
               "default on, --no-views copies");
  app.add_flag("--in-place,!--no-in-place", flags.in_place,
               "an op's output may take the bytes of an input that dies there, where its kernel "
               "computes in place (Relu, Add, Softmax, ...: docs/in_place.md); default on, "
               "--no-in-place plans every output apart from its inputs");
  app.add_option("--budget", numbers.budget,
                 "device bytes available (80GiB, 512MiB, ...): the arena, the params and "
                 "constants outside it, and --optimizer's state; exit 3 if over");
  app.add_option("--optimizer", numbers.optimizer,
                 "training: count the optimizer's state in device bytes: sgd (none), momentum "
                 "(one tensor per trainable param), adam (two)")
      ->capture_default_str();
  app.add_option("--update-in-backward", numbers.update_in_backward,
                 "training: apply SGD with this learning rate to each param as soon as its "
                 "gradient is complete (p -= LR * grad), so gradients do not all live to the end; "
                 "the updated params are the outputs (docs/cures.md)");
  app.add_option("--recompute", flags.recompute,
                 "training: rerun forward ops in the backward pass to lower the peak: sqrt "
                 "(Chen's sqrt(n) segments), cheap (only pointwise, normalisation, pooling and "
                 "data-movement ops, to the lowest peak they reach) or auto (the fewest FLOPs "
                 "that fit --budget)")
      ->check(CLI::IsMember({"none", "sqrt", "cheap", "auto"}))
      ->capture_default_str();
  app.add_flag("--cuda-graphs", flags.cuda_graphs,
               "report the runs of steps a CUDA graph could capture with the device kernels, "
               "and why each step between them cannot be (also with --execute cuda)");
  app.add_option("--fit", flags.fit,
                 "with --budget: the largest value of SYMBOL (a --dim symbol of the model, or a "
                 "workload key such as n or batch) whose plan fits, for the given and the "
                 "memory-aware order");
}

// What to write and run: plan files, the rewritten net, execution, the report.
void AddOutputOptions(CLI::App& app, Flags& flags, NumberTexts& numbers) {
  app.add_option("--plan-json", flags.plan_json, "write the plan (memonger.plan/v1) to FILE")
      ->check(kNonEmptyPath);
  app.add_option("--plan-csv", flags.plan_csv,
                 "write the plan as a MiniMalloc CSV (id,lower,upper,size,alignment,offset) to FILE")
      ->check(kNonEmptyPath);
  app.add_option("--plan-in", flags.plan_in,
                 "read a saved plan (memonger.plan/v1) instead of planning, and verify it")
      ->check(kNonEmptyPath);
  app.add_option("--net-out", flags.net_out,
                 "write the rewritten net (shared values renamed) to FILE (.pb or .pbtxt)")
      ->check(kNonEmptyPath);
  app.add_option("--execute", flags.execute,
                 "none, host or cuda: run the net in the arena (host: the CPU kernels; "
                 "cuda: the CUDA kernels on the current device)")
      ->check(CLI::IsMember({"none", "host", "cuda"}))
      ->capture_default_str();
  app.add_flag("--verify", flags.verify,
               "with --execute: verify mode (ops fill outputs with patterns, check inputs); "
               "without it, --execute runs the real kernels");
  app.add_option("--outputs-out", flags.outputs_out,
                 "with --execute host|cuda: write every graph output as DIR/<name>.npy")
      ->check(kNonEmptyPath);
  app.add_option("--inputs", flags.inputs,
                 "with --execute: the graph inputs' data, a folder of NAME.npy files or an .npz "
                 "archive (every input, each of its planned dtype and shape)")
      ->check(kNonEmptyPath);
  app.add_option("--expect", flags.expect,
                 "with --execute: reference outputs (a folder of NAME.npy or an .npz): prints "
                 "each output's error and exits 1 beyond --tolerance")
      ->check(kNonEmptyPath);
  app.add_option("--tolerance", flags.tolerance,
                 "with --expect: the largest relative error max|out - ref| / max|ref| accepted")
      ->capture_default_str();
  app.add_flag("--seed-missing", flags.seed_missing,
               "with --execute: run even where the model holds no data for some weights, "
               "giving them seeded values (the report names them)");
  app.add_option(
         "--seed", numbers.seed,
         "with --execute host|cuda: seed of the values given to inputs and params the model "
         "has no data for (uniform [-1, 1) per value name)")
      ->capture_default_str();
  app.add_option("--html", flags.html,
                 "write a picture of the plan (steps x addresses, one HTML file) to FILE")
      ->check(kNonEmptyPath);
  app.add_flag("--ascii", flags.ascii, "add a small time x address map to the text report");
  app.add_option("--format", flags.format, "text or json (the plan document)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  app.add_flag("--timings", flags.timings,
               "print the wall time of each phase (load, plan, verify, outputs, report) on stderr");
  app.add_option("--top", flags.top, "how many of the largest values to list")
      ->check(CLI::Range(0, 1000000));
}

}  // namespace

std::variant<Flags, int> ParseCommandLine(int argc, const char* const* argv, std::ostream& out,
                                          std::ostream& err) {
  CLI::App app{
      "optimize-net: plans the memory of a neural-network graph.\n"
      "Loads MODEL, infers every value's dtype and shape, works out lifetimes, lets values\n"
      "whose lifetimes do not overlap share memory, verifies the plan and reports it."};
  app.set_version_flag("--version", "optimize-net 0.1.0");
  Flags flags;
  NumberTexts numbers;
  AddModelOptions(app, flags);
  AddPlanningOptions(app, flags);
  AddMemongerOptions(app, flags);
  AddLimitOptions(app, flags, numbers);
  AddOutputOptions(app, flags, numbers);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e, out, err);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e, out, err);
  } catch (const CLI::ParseError& e) {
    // One line, as every usage error (CLI11's own exit() adds a second, unprefixed).
    err << "optimize-net: " << util::EscapeAsText(e.what()) << " (see --help)\n";
    return kExitUsage;
  }
  if (!flags.plan_in.empty()) {
    for (const char* flag : {"--planner", "--order", "--alignment"}) {
      if (app.count(flag) > 0) flags.plan_in_overrides.emplace_back(flag);
    }
  }
  absl::Status status = ParseNumbers(numbers, flags);
  if (status.ok()) status = CheckFlags(flags);
  if (!status.ok()) {
    err << "optimize-net: " << util::EscapeAsText(status.message()) << "\n";
    return kExitUsage;
  }
  return flags;
}

}  // namespace memonger::tools
