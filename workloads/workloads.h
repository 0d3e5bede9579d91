// workloads/: nets built from a spec instead of loaded from a file. Above graph/ only.
//
// Generated nets (`optimize-net --workload SPEC`): each is an ordinary, typed Graph that plans,
// exports (--net-out) and loads back like any model file.
//
//   MG_ASSIGN_OR_RETURN(WorkloadSpec spec, ParseWorkloadSpec("mlp:layers=3,batch=4"));
//   MG_ASSIGN_OR_RETURN(Graph graph, BuildWorkload(spec));
//
// Kinds:
//   attention  a long-sequence ViT encoder with an ALiBi bias (workloads/workload_attention.h)
//   mlp        memonger's FC test nets: layers x (FC, Relu), FC to classes, Softmax,
//              LabelCrossEntropy, AveragedLoss. Keys: layers (3), batch (4), dim (10),
//              classes (8), mode (inference | training). The loss is declared; fp32.
//   random     a seeded random DAG of real ops (workloads/workload_random.h). Keys: ops (1000),
//              seed (1), batch (32), width (256), branches (4), skip (10), reach (1000),
//              inplace (30), dead (5), dtype (fp32 | fp16 | bf16), mode (inference | training).
//   randwire   randomly wired nets (workloads/workload_randwire.h). Keys: nodes (32), k (4),
//              p (75), stages (3), seed (1), batch (8), width (64), dtype, mode.
//   resnet50   Caffe2's ResNet-50 (workloads/workload_resnet.h). Keys: batch (32), image (224),
//              classes (1000), mode (inference | training).
// mode=training appends the backward ops (graph/gradient_builder.h).
#ifndef MEMONGER_WORKLOADS_WORKLOADS_H_
#define MEMONGER_WORKLOADS_WORKLOADS_H_

#include "absl/status/statusor.h"
#include "graph/dim_expr.h"
#include "graph/graph.h"
#include "workloads/workload_spec.h"

namespace memonger::graph {

// InvalidArgument for an unknown kind (listing the known ones) or a bad parameter.
absl::StatusOr<Graph> BuildWorkload(const WorkloadSpec& spec);

// The workload with its inputs declared in its symbols, for plans over a range of them
// (graph/symbolic_shapes.h): attention declares n and batch (its keys). `values`, when given,
// receives the symbols' values in `spec`. Unimplemented for a kind without symbols.
absl::StatusOr<Graph> BuildSymbolicWorkload(const WorkloadSpec& spec, SymbolBindings* values);

}  // namespace memonger::graph

#endif  // MEMONGER_WORKLOADS_WORKLOADS_H_
