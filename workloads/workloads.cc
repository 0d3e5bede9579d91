#include "workloads/workloads.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "graph/gradient_builder.h"
#include "graph/net_writer.h"
#include "util/status_macros.h"
#include "workloads/workload_attention.h"
#include "workloads/workload_guillotine.h"
#include "workloads/workload_random.h"
#include "workloads/workload_randwire.h"
#include "workloads/workload_resnet.h"

namespace memonger::graph {
namespace {

absl::StatusOr<Graph> BuildMlp(const WorkloadSpec& spec) {
  WorkloadParams params(spec, WorkloadKeys("mlp"));
  MG_ASSIGN_OR_RETURN(int64_t layers, params.Int("layers", 3, 1, 1 << 16));
  MG_ASSIGN_OR_RETURN(int64_t batch, params.Int("batch", 4, 1, 1 << 24));
  MG_ASSIGN_OR_RETURN(int64_t dim, params.Int("dim", 10, 1, 1 << 20));
  MG_ASSIGN_OR_RETURN(int64_t classes, params.Int("classes", 8, 1, 1 << 20));
  MG_ASSIGN_OR_RETURN(const bool training, params.Training());
  MG_RETURN_IF_ERROR(params.Finish());
  NetWriter net(absl::StrCat("mlp_", layers));
  auto input = [&](const std::string& name, DataType dtype, const std::vector<int64_t>& dims,
                   Role role) { net.Input(name, dtype, dims, role); };
  auto op = [&](const std::string& type, std::vector<std::string> inputs, std::string output) {
    net.Op(type, output, std::move(inputs), {output});
  };
  input("data", DataType::kFloat32, {batch, dim}, Role::kInput);
  input("label", DataType::kInt32, {batch}, Role::kInput);
  std::string x = "data";
  for (int64_t i = 0; i < layers; ++i) {
    const std::string w = absl::StrCat("fc", i, "_w"), b = absl::StrCat("fc", i, "_b");
    input(w, DataType::kFloat32, {dim, dim}, Role::kParam);
    input(b, DataType::kFloat32, {dim}, Role::kParam);
    op("FC", {x, w, b}, absl::StrCat("fc", i));
    op("Relu", {absl::StrCat("fc", i)}, absl::StrCat("relu", i));
    x = absl::StrCat("relu", i);
  }
  input("pred_w", DataType::kFloat32, {classes, dim}, Role::kParam);
  input("pred_b", DataType::kFloat32, {classes}, Role::kParam);
  op("FC", {x, "pred_w", "pred_b"}, "pred");
  op("Softmax", {"pred"}, "softmax");
  op("LabelCrossEntropy", {"softmax", "label"}, "xent");
  op("AveragedLoss", {"xent"}, "loss");
  net.builder().AddExternalOutput("loss");
  net.builder().AddLoss("loss");
  MG_ASSIGN_OR_RETURN(Graph graph, std::move(net).Finish());
  if (training) return AddGradientOps(graph, {"loss"});
  return graph;
}

}  // namespace

absl::StatusOr<Graph> BuildWorkload(const WorkloadSpec& spec) {
  if (spec.kind == "attention") {
    MG_ASSIGN_OR_RETURN(AttentionWorkload workload, ParseAttentionWorkload(spec));
    return BuildAttentionGraph(workload);
  }
  if (spec.kind == "mlp") return BuildMlp(spec);
  if (spec.kind == "guillotine") {
    MG_ASSIGN_OR_RETURN(GuillotineWorkload workload, ParseGuillotineWorkload(spec));
    return BuildGuillotineGraph(workload);
  }
  if (spec.kind == "resnet50") return BuildResnet50(spec);
  if (spec.kind == "random") {
    MG_ASSIGN_OR_RETURN(RandomWorkload workload, ParseRandomWorkload(spec));
    return BuildRandomGraph(workload);
  }
  if (spec.kind == "randwire") {
    MG_ASSIGN_OR_RETURN(RandWireWorkload workload, ParseRandWireWorkload(spec));
    return BuildRandWireGraph(workload);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown workload '", spec.kind,
                   "' (known: attention, guillotine, mlp, random, randwire, resnet50)"));
}

absl::StatusOr<Graph> BuildSymbolicWorkload(const WorkloadSpec& spec, SymbolBindings* values) {
  if (spec.kind != "attention") {
    MG_RETURN_IF_ERROR(BuildWorkload(spec).status());  // its own errors first
    return absl::UnimplementedError(absl::StrCat(
        "workload '", spec.kind, "' declares no symbols; a range (--dim KEY=LO..HI) works with "
        "the attention workload (n, batch) and with model files"));
  }
  MG_ASSIGN_OR_RETURN(AttentionWorkload workload, ParseAttentionWorkload(spec));
  workload.symbolic = true;
  if (values != nullptr) *values = {{"n", workload.n}, {"batch", workload.batch}};
  return BuildAttentionGraph(workload);
}

}  // namespace memonger::graph
