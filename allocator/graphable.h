// Graphable sections: the longest runs of a plan's steps that a CUDA graph can capture once and
// replay. Capture needs every address fixed in advance and nothing in the run that waits for
// the device or asks for memory. The arena gives every value a fixed offset (static values a
// fixed block of their own), and the device kernels take their scratch from one allocation made
// before the first step (kernels/cuda/kernels_device.h), so a step breaks a section only when
// its kernel table has no kernel for the op, or its kernel reads device data on the host (a
// synchronisation and a host-side decision: KernelTable::CaptureBlocker). Graph inputs are
// copied in before the first step and outputs out after the last, outside every section.
//
//   MG_ASSIGN_OR_RETURN(Plan plan, PlanMemory(graph, options));
//   plan.graphable = FindGraphableSections(graph, plan, MakeDeviceKernelTableOnHost());
//   // plan.graphable->sections: [first_step, last_step] runs; ->boundaries: the steps between
//
// The device kernel table made on the host has the same ops and the same capture checks as the
// CUDA one, so the analysis needs no GPU. O(steps).
#ifndef MEMONGER_ALLOCATOR_GRAPHABLE_H_
#define MEMONGER_ALLOCATOR_GRAPHABLE_H_

#include "graph/graph.h"
#include "kernels/kernel.h"
#include "memonger/plan.h"

namespace memonger::alloc {

GraphableSections FindGraphableSections(const graph::Graph& graph, const Plan& plan,
                                        const KernelTable& device_kernels);

}  // namespace memonger::alloc

#endif  // MEMONGER_ALLOCATOR_GRAPHABLE_H_
