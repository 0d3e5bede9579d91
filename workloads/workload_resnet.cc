#include "workloads/workload_resnet.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/gradient_builder.h"
#include "graph/net_writer.h"
#include "util/status_macros.h"

namespace memonger::graph {
namespace {

// The ResNet's repeated unit on top of a NetWriter.
class ResnetWriter {
 public:
  ResnetWriter(NetWriter& net, bool training) : net_(net), training_(training) {}

  // conv (no bias) + SpatialBN [+ in-place Relu]; returns the output blob.
  std::string ConvBn(const std::string& in, const std::string& name, int64_t in_channels,
                     int64_t out_channels, int64_t kernel, int64_t stride, bool relu) {
    const std::string w = name + "_w";
    net_.Input(w, DataType::kFloat32, {out_channels, in_channels, kernel, kernel}, Role::kParam);
    net_.Op("Conv", name, {in, w}, {name},
       {Attribute{"kernel", kernel}, Attribute{"stride", stride},
        Attribute{"pad", (kernel - 1) / 2}, Attribute{"order", std::string("NCHW")}});
    const std::string bn = name + "_bn";
    std::vector<std::string> bn_inputs = {name};
    for (const char* p : {"_scale", "_bias", "_mean", "_var"}) {
      net_.Input(bn + p, DataType::kFloat32, {out_channels}, Role::kParam);
      bn_inputs.push_back(bn + p);
    }
    if (training_) {
      net_.Op("SpatialBN", bn, bn_inputs,
         {bn, bn + "_running_mean", bn + "_running_var", bn + "_saved_mean", bn + "_saved_var"},
         {Attribute{"is_test", int64_t{0}}, Attribute{"epsilon", 1e-5}});
    } else {
      net_.Op("SpatialBN", bn, bn_inputs, {bn},
         {Attribute{"is_test", int64_t{1}}, Attribute{"epsilon", 1e-5}});
    }
    if (relu) net_.Op("Relu", name + "_relu", {bn}, {bn});
    return bn;
  }

 private:
  NetWriter& net_;
  bool training_;
};

}  // namespace

absl::StatusOr<Graph> BuildResnet50(const WorkloadSpec& spec) {
  WorkloadParams params(spec, WorkloadKeys("resnet50"));
  MG_ASSIGN_OR_RETURN(int64_t batch, params.Int("batch", 32, 1, 1 << 16));
  MG_ASSIGN_OR_RETURN(int64_t image, params.Int("image", 224, 32, 1 << 14));
  MG_ASSIGN_OR_RETURN(int64_t classes, params.Int("classes", 1000, 1, 1 << 20));
  MG_ASSIGN_OR_RETURN(const bool training, params.Training());
  MG_RETURN_IF_ERROR(params.Finish());
  NetWriter writer(absl::StrCat("resnet50_b", batch));
  ResnetWriter resnet(writer, training);
  writer.Input("data", DataType::kFloat32, {batch, 3, image, image}, Role::kInput);
  writer.Input("label", DataType::kInt32, {batch}, Role::kInput);
  std::string x = resnet.ConvBn("data", "conv1", 3, 64, 7, 2, /*relu=*/true);
  writer.Op("MaxPool", "pool1", {x}, {"pool1"},
         {Attribute{"kernel", int64_t{3}}, Attribute{"stride", int64_t{2}},
          Attribute{"pad", int64_t{1}}, Attribute{"order", std::string("NCHW")}});
  x = "pool1";
  int64_t channels = 64;
  const int kBlocks[] = {3, 4, 6, 3};
  const int64_t kWidths[] = {64, 128, 256, 512};
  for (int stage = 0; stage < 4; ++stage) {
    for (int block = 0; block < kBlocks[stage]; ++block) {
      const std::string p = absl::StrCat("res", stage + 2, "_", block, "_");
      const int64_t width = kWidths[stage];
      const int64_t stride = block == 0 && stage > 0 ? 2 : 1;
      std::string b = resnet.ConvBn(x, p + "branch2a", channels, width, 1, 1, true);
      b = resnet.ConvBn(b, p + "branch2b", width, width, 3, stride, true);
      b = resnet.ConvBn(b, p + "branch2c", width, 4 * width, 1, 1, false);
      std::string shortcut = x;
      if (block == 0) {
        shortcut = resnet.ConvBn(x, p + "branch1", channels, 4 * width, 1, stride, false);
      }
      writer.Op("Sum", p + "sum", {b, shortcut}, {p + "sum"});
      writer.Op("Relu", p + "relu", {p + "sum"}, {p + "sum"});
      x = p + "sum";
      channels = 4 * width;
    }
  }
  const int64_t final_size = (image + 31) / 32;
  writer.Op("AveragePool", "pool5", {x}, {"pool5"},
         {Attribute{"kernel", final_size}, Attribute{"stride", int64_t{1}},
          Attribute{"order", std::string("NCHW")}});
  writer.Input("pred_w", DataType::kFloat32, {classes, channels}, Role::kParam);
  writer.Input("pred_b", DataType::kFloat32, {classes}, Role::kParam);
  writer.Op("FC", "pred", {"pool5", "pred_w", "pred_b"}, {"pred"});
  writer.Op("Softmax", "softmax", {"pred"}, {"softmax"});
  writer.Op("LabelCrossEntropy", "xent", {"softmax", "label"}, {"xent"});
  writer.Op("AveragedLoss", "loss", {"xent"}, {"loss"});
  writer.builder().AddExternalOutput("loss");
  writer.builder().AddLoss("loss");
  MG_ASSIGN_OR_RETURN(Graph graph, std::move(writer).Finish());
  if (training) return AddGradientOps(graph, {"loss"});
  return graph;
}

}  // namespace memonger::graph
