#include "tests/training_support.h"

#include <cstring>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/value_fill.h"
#include "tests/kernel_test_support.h"
#include "util/status_macros.h"

namespace memonger::testing {
namespace {

uint64_t Fnv1a(const std::byte* data, int64_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int64_t i = 0; i < n; ++i) {
    h ^= static_cast<uint64_t>(data[i]);
    h *= 0x100000001b3ull;
  }
  return h;
}

int64_t ByteCount(const graph::TensorType& t) {
  int64_t n = graph::DataTypeSize(t.dtype);
  for (int64_t d : t.dims) n *= d;
  return n;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TrainingRunner>> TrainingRunner::Create(
    const graph::Graph& graph, const Plan& plan, std::vector<graph::ValueId> watch) {
  MG_ASSIGN_OR_RETURN(alloc::Arena arena,
                      alloc::Arena::Create(alloc::Device::kHost, plan.arena_bytes,
                                           std::max<int64_t>(plan.alignment, 1)));
  std::unique_ptr<TrainingRunner> runner(new TrainingRunner(graph, std::move(arena)));
  MG_ASSIGN_OR_RETURN(alloc::Executor executor,
                      alloc::Executor::Create(graph, plan, runner->arena_));
  runner->executor_ = std::make_unique<alloc::Executor>(std::move(executor));
  runner->watched_.assign(graph.num_values(), false);
  for (graph::ValueId id : watch) runner->watched_[id] = true;
  runner->bytes_.assign(graph.num_values(), "");
  runner->hashes_.assign(graph.num_values(), 0);

  // Every op type of the net, its CPU kernel wrapped to capture the outputs it wrote.
  const alloc::KernelTable cpu = alloc::MakeCpuKernelTable();
  absl::flat_hash_map<std::string, alloc::Kernel> wrapped;
  TrainingRunner* self = runner.get();
  for (const graph::Op& op : graph.ops()) {
    const alloc::Kernel* inner = cpu.Find(op.type);
    if (inner == nullptr || wrapped.contains(op.type)) continue;
    wrapped[op.type] = [self, inner = *inner](const alloc::KernelArgs& args) -> absl::Status {
      MG_RETURN_IF_ERROR(inner(args));
      for (size_t i = 0; i < args.outputs.size(); ++i) {
        const graph::ValueId id = args.op->outputs[i];
        const int64_t n = ByteCount(*args.output_types[i]);
        self->hashes_[id] = Fnv1a(args.outputs[i], n);
        if (self->watched_[id]) {
          self->bytes_[id].assign(reinterpret_cast<const char*>(args.outputs[i]),
                                  static_cast<size_t>(n));
        }
      }
      return absl::OkStatus();
    };
  }
  runner->kernels_ = alloc::KernelTable(std::move(wrapped));
  return runner;
}

absl::Status TrainingRunner::Run(const ValueData& data, uint64_t seed) {
  for (graph::ValueId id = 0; id < graph_->num_values(); ++id) {
    const graph::Value& v = graph_->value(id);
    if (v.producer != graph::kNone) continue;
    std::byte* dst = executor_->ValueAddress(id);
    const int64_t n = ByteCount(*v.type);
    if (auto it = data.find(v.name); it != data.end()) {
      const int64_t count = n / graph::DataTypeSize(v.type->dtype);
      if (static_cast<int64_t>(it->second.size()) != count) {
        return absl::InvalidArgumentError(absl::StrCat("data for '", v.name, "' has ",
                                                       it->second.size(), " values, want ", count));
      }
      const TestTensor t = MakeTensor(v.type->dtype, v.type->dims, it->second);
      if (n > 0) std::memcpy(dst, t.bytes(), static_cast<size_t>(n));
    } else if (const graph::StaticData* s = graph_->static_data();
               s != nullptr && s->contains(v.name) &&
               static_cast<int64_t>(s->at(v.name).bytes.size()) == n) {
      // The model's own data (its initializers), as a run of the model reads them.
      if (n > 0) std::memcpy(dst, s->at(v.name).bytes.data(), static_cast<size_t>(n));
    } else {
      alloc::FillSeeded(*v.type, v.name, seed, dst);
    }
    hashes_[id] = Fnv1a(dst, n);
    if (watched_[id]) bytes_[id].assign(reinterpret_cast<const char*>(dst), static_cast<size_t>(n));
  }
  return executor_->Run(kernels_);
}

std::vector<double> TrainingRunner::Doubles(graph::ValueId id) const {
  const graph::TensorType& t = *graph_->value(id).type;
  TestTensor tensor = MakeTensor(t.dtype, t.dims, {});
  std::memcpy(tensor.bytes(), bytes_[id].data(), bytes_[id].size());
  return ToDoubles(tensor);
}

}  // namespace memonger::testing
