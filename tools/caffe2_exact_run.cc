#include "tools/caffe2_exact_run.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "graph/net_def.h"
#include "graph/tensor_type.h"
#include "memonger/caffe2_exact.h"
#include "report/net_rewrite.h"
#include "util/status_macros.h"

namespace memonger::tools {
namespace {

constexpr size_t kMaxWarningsShown = 10;

std::vector<std::string> Names(const graph::Graph& graph, const std::vector<graph::ValueId>& ids) {
  std::vector<std::string> names;
  for (graph::ValueId v : ids) {
    const std::string& name = graph.value(v).name;
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

// Per name, the dims of its last version (Caffe2's shape inference keeps one shape per blob).
caffe2::BlobShapes Shapes(const graph::Graph& graph) {
  caffe2::BlobShapes shapes;
  for (const graph::Value& value : graph.values()) {
    if (value.type.has_value()) shapes[value.name] = value.type->dims;
  }
  return shapes;
}

absl::StatusOr<std::map<std::string, int64_t>> ByteSizes(const graph::Graph& graph) {
  std::map<std::string, int64_t> sizes;
  for (const graph::Value& value : graph.values()) {
    if (value.type.has_value()) {
      MG_ASSIGN_OR_RETURN(sizes[value.name], graph::ByteSize(*value.type, value.name));
    }
  }
  return sizes;
}

// The static blobs Caffe2's callers pass to optimize_interference and optimize_inference_fast:
// the external inputs (unless --recycle-inputs) and outputs, and --static names.
std::set<std::string> StaticBlobs(const caffe2::NameNet& net, const PlanOptions& options) {
  const LivenessOptions& liveness = options.liveness;
  std::set<std::string> names(liveness.static_names.begin(), liveness.static_names.end());
  if (!liveness.recycle_inputs) names.insert(net.external_inputs.begin(), net.external_inputs.end());
  names.insert(net.external_outputs.begin(), net.external_outputs.end());
  return names;
}

absl::StatusOr<caffe2::Renames> Plan(const Flags& flags, const graph::Graph& graph,
                                     const caffe2::NameNet& net, const PlanOptions& options,
                                     bool sized) {
  const std::set<std::string> dont_share(flags.dont_share.begin(), flags.dont_share.end());
  if (flags.planner == "memonger-dag" && options.memonger.mode == Mode::kTraining) {
    std::vector<std::string> losses = flags.losses;
    if (losses.empty()) losses = Names(graph, graph.losses());
    if (losses.empty()) losses = caffe2::AutogenLosses(net);
    if (losses.empty()) {
      return absl::InvalidArgumentError(
          "share_grad_blobs starts from the losses, and the net seeds no 'X_autogen_grad': name "
          "them (--loss NAME)");
    }
    std::set<std::string> param_grads(flags.param_grads.begin(), flags.param_grads.end());
    if (param_grads.empty()) param_grads = caffe2::DefaultParamGrads(graph);
    return caffe2::ShareGradBlobs(net, losses, param_grads, options.memonger.namescope, dont_share,
                                  flags.share_activations,
                                  sized ? Shapes(graph) : caffe2::BlobShapes());
  }
  if (flags.planner == "memonger-dag") {
    std::vector<std::string> heads = flags.heads;
    if (heads.empty()) {
      for (graph::ValueId v : graph.inputs()) {
        if (!graph::IsStatic(graph.value(v).role)) heads.push_back(graph.value(v).name);
      }
    }
    return caffe2::OptimizeInferenceForDag(net, heads, options.memonger.namescope);
  }
  if (flags.planner == "memonger-fast") {
    return caffe2::OptimizeInferenceFast(net, StaticBlobs(net, options));
  }
  std::map<std::string, int64_t> sizes;
  if (sized) {
    MG_ASSIGN_OR_RETURN(sizes, ByteSizes(graph));
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(options.time_limit_seconds);
  return caffe2::OptimizeInterference(net, StaticBlobs(net, options), sizes,
                                      flags.planner == "memonger-dp", deadline);
}

}  // namespace

absl::StatusOr<Caffe2ExactReport> RunCaffe2Exact(const Flags& flags, const graph::Graph& graph,
                                                 const PlanOptions& options, bool sized,
                                                 util::OutputFiles& outputs) {
  const std::string ext =
      absl::AsciiStrToLower(std::filesystem::path(flags.model).extension().string());
  if (ext != ".pb" && ext != ".pbtxt" && ext != ".prototxt") {
    return absl::InvalidArgumentError(
        "--caffe2-bugs plans a Caffe2 NetDef (.pb, .pbtxt): Caffe2's memonger had no other input");
  }
  MG_ASSIGN_OR_RETURN(
      proto::NetDef original,
      graph::ReadNetDef(flags.model,
                        ext == ".pb" ? graph::NetFileFormat::kBinary : graph::NetFileFormat::kText,
                        flags.limits));
  if (original.op_size() != graph.num_ops()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--caffe2-bugs plans the net as written, and this one has ", original.op_size(),
        " ops where the plan would need ", graph.num_ops(),
        " (--mode training on a net without gradient ops adds them: Caffe2's memonger never "
        "saw those)"));
  }
  const caffe2::NameNet net = caffe2::NameNetOf(graph);
  MG_ASSIGN_OR_RETURN(caffe2::Renames renames, Plan(flags, graph, net, options, sized));

  proto::NetDef renamed = original;
  ApplyRenames(renamed, renames);
  // share_grad_blobs and optimize_inference_for_dag assert their own checks (memonger.py).
  if (flags.planner == "memonger-dag") {
    absl::Status equal = VerifyGraphEquality(original, renamed);
    if (equal.ok()) equal = VerifyInplaceBlobs(original, renamed);
    if (!equal.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Caffe2's memonger refuses its own answer for this net (its verifier: ",
          equal.message(), ")"));
    }
  }

  Caffe2ExactReport report;
  const caffe2::Hazards hazards = caffe2::SimulateRenamedNet(net, renames);
  auto warn = [&](const std::vector<std::string>& lines, const std::string& what) {
    for (size_t i = 0; i < lines.size() && i < kMaxWarningsShown; ++i) {
      report.warnings.push_back(absl::StrCat(what, lines[i]));
    }
    if (lines.size() > kMaxWarningsShown) {
      report.warnings.push_back(
          absl::StrCat(what, "... and ", lines.size() - kMaxWarningsShown, " more"));
    }
  };
  warn(hazards.clobbered_reads, "Caffe2's answer overwrites a live blob: ");
  warn(hazards.cross_device, "Caffe2's answer mixes devices: ");

  if (!flags.net_out.empty()) {
    const std::string out_ext =
        absl::AsciiStrToLower(std::filesystem::path(flags.net_out).extension().string());
    MG_ASSIGN_OR_RETURN(std::string bytes,
                        graph::SerializeNetDef(renamed, out_ext == ".pb"
                                                            ? graph::NetFileFormat::kBinary
                                                            : graph::NetFileFormat::kText));
    outputs.Set(flags.net_out, std::move(bytes));
  }

  std::map<std::string, std::vector<std::string>> groups;  // new name -> old names
  for (const auto& [from, to] : renames) groups[to].push_back(from);
  std::string& text = report.text;
  absl::StrAppend(&text, "model           ", flags.model, "\n");
  absl::StrAppend(&text, "planner         ", flags.planner,
                  ", Caffe2's answer exactly (--caffe2-bugs; ",
                  sized ? "with sizes" : "size-blind", ")\n");
  absl::StrAppend(&text, "blobs           ", CountBlobs(original), " names in the net, ",
                  CountBlobs(renamed), " after renaming (memonger's count_blobs)\n");
  absl::StrAppend(&text, "renamed         ", renames.size(), " names onto ", groups.size(),
                  " blobs\n");
  for (const auto& [to, from] : groups) {
    absl::StrAppend(&text, "  ", to, ": ", absl::StrJoin(from, ", "), "\n");
  }
  absl::StrAppend(&text, "hazards         ", hazards.clobbered_reads.size(),
                  " read(s) of an overwritten blob, ", hazards.cross_device.size(),
                  " blob(s) on two devices (serial replay of the renamed net)\n");
  return report;
}

}  // namespace memonger::tools
