// The library calls a user makes before running a net, in order:
//   load the model, infer shapes, plan memory, verify the plan, create one arena, and run the
//   executor (verify mode: no kernels needed) in that arena.
// Then it prints where every value lives: its name, its offset in the arena and its address.
//
//   plan_and_run examples/transformer_block_fp16.pbtxt L=129
//
// Exit codes: 0 success; 1 bad arguments, or the model, plan or run failed (message on stderr).
#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "allocator/arena.h"
#include "allocator/executor.h"
#include "graph/model_loader.h"
#include "graph/shape_inference.h"
#include "memonger/planner.h"
#include "memonger/verify_plan.h"
#include "util/status_macros.h"

namespace {

using namespace memonger;  // NOLINT: an example, kept short

absl::Status PlanAndRun(const std::string& model, int argc, char** argv) {
  graph::LoadOptions load;
  for (int i = 0; i < argc; ++i) MG_RETURN_IF_ERROR(graph::ParseDimBinding(argv[i], load.bindings));

  MG_ASSIGN_OR_RETURN(graph::Graph graph, graph::LoadModel(model, load));
  MG_RETURN_IF_ERROR(graph::InferShapes(graph, load.bindings));

  PlanOptions options;  // the default planner and order, serial, 256-byte alignment
  options.model_name = model;
  MG_ASSIGN_OR_RETURN(Plan plan, PlanMemory(graph, options));
  MG_RETURN_IF_ERROR(VerifyPlan(graph, plan));

  MG_ASSIGN_OR_RETURN(alloc::Arena arena,
                      alloc::Arena::Create(alloc::Device::kHost, plan.arena_bytes));
  MG_ASSIGN_OR_RETURN(alloc::Executor executor, alloc::Executor::Create(graph, plan, arena));
  MG_RETURN_IF_ERROR(executor.RunVerify());

  std::printf("model %s: %d ops, %d values\n", model.c_str(), graph.num_ops(),
              graph.num_values());
  std::printf("planner %s: arena %lld bytes at %p (lower bound %lld, naive %lld)\n",
              plan.planner.c_str(), static_cast<long long>(plan.arena_bytes),
              static_cast<void*>(arena.base()), static_cast<long long>(plan.lower_bound_bytes),
              static_cast<long long>(plan.naive_bytes));
  std::printf("%-32s %12s %12s  %s\n", "value", "offset", "bytes", "address");
  for (graph::ValueId id = 0; id < graph.num_values(); ++id) {
    const graph::Value& v = graph.value(id);
    const std::string offset = executor.InArena(id)
                                   ? std::to_string(plan.offset_of_value[id])
                                   : std::string("static");
    const auto bytes = graph::ByteSize(*v.type, v.DisplayName());
    std::printf("%-32s %12s %12lld  %p\n", v.DisplayName().c_str(), offset.c_str(),
                static_cast<long long>(bytes.ok() ? *bytes : -1),
                static_cast<void*>(executor.ValueAddress(id)));
  }
  std::printf("verify run: OK (every value kept its bytes while live)\n");
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fprintf(stderr, "usage: plan_and_run MODEL [SYMBOL=VALUE...]\n");
    return 1;
  }
  const absl::Status status = PlanAndRun(argv[1], argc - 2, argv + 2);
  if (!status.ok()) {
    std::fprintf(stderr, "plan_and_run: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
