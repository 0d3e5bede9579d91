// The resnet50 workload: Caffe2's ResNet-50 (the net memonger's paper measured: training at batch
// 32, 7497 MiB without sharing, 5010 MiB with gradient sharing, 4330 MiB with activations too).
//
//   optimize-net --workload resnet50:batch=32,mode=training --planner memonger-dag --mode training
//
// Keys: batch (32), image (224: input [batch, 3, image, image], NCHW), classes (1000), mode
// (inference | training). float32. The net: conv1 7x7/2 (64), SpatialBN, Relu (in place),
// MaxPool 3x3/2; four stages of 3, 4, 6, 3 bottlenecks (1x1, 3x3 with the stage's stride on its
// first block, 1x1 to 4x the width; BN and in-place Relu after each; a 1x1 projection with BN
// on each stage's first shortcut), Sum of branch and shortcut, in-place Relu; global
// AveragePool, FC to classes, Softmax, LabelCrossEntropy, AveragedLoss. Convolutions have no
// bias (as in Caffe2's model). Inference uses SpatialBN with is_test=1; training keeps the saved
// statistics (5 outputs; the running statistics are written to new values, not over the
// parameters, which are static) and appends the backward ops (graph/gradient_builder.h).
#ifndef MEMONGER_WORKLOADS_WORKLOAD_RESNET_H_
#define MEMONGER_WORKLOADS_WORKLOAD_RESNET_H_

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "workloads/workload_spec.h"

namespace memonger::graph {

// InvalidArgument for unknown keys or values out of range (image must be at least 32).
absl::StatusOr<Graph> BuildResnet50(const WorkloadSpec& spec);

}  // namespace memonger::graph

#endif  // MEMONGER_WORKLOADS_WORKLOAD_RESNET_H_
