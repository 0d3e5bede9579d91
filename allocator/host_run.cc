#include "allocator/host_run.h"

#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "allocator/arena.h"
#include "allocator/executor.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/npy.h"
#include "kernels/value_fill.h"
#include "util/limits.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

absl::Status CopyData(const graph::Value& v, const TensorData& data, std::byte* dst) {
  if (data.type != *v.type) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the data for '", v.DisplayName(), "' is ", graph::TensorTypeToString(data.type),
        " but the value is ", graph::TensorTypeToString(*v.type)));
  }
  if (!data.bytes.empty()) std::memcpy(dst, data.bytes.data(), data.bytes.size());
  return absl::OkStatus();
}

const TensorData* ModelData(const graph::StaticData* data, const std::string& name) {
  if (data == nullptr) return nullptr;
  auto it = data->find(name);
  return it == data->end() ? nullptr : &it->second;
}

}  // namespace

absl::StatusOr<HostRunReport> RunOnHost(const graph::Graph& graph, const Plan& plan,
                                        const HostRunOptions& options) {
  return RunNet(graph, plan, options, NetRunTarget{});
}

absl::StatusOr<HostRunReport> RunNet(const graph::Graph& graph, const Plan& plan,
                                     const HostRunOptions& options, const NetRunTarget& target) {
  const Device device = target.device;
  if (device != Device::kHost && target.kernels == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("running on ", DeviceName(device),
                                                   " needs that device's kernel table"));
  }
  if (device != Device::kHost && options.fp16_census != nullptr) {
    return absl::InvalidArgumentError("the float16 census runs on the host only");
  }
  std::optional<Arena> own;
  if (target.arena == nullptr) {
    MG_ASSIGN_OR_RETURN(own, Arena::Create(device, plan.arena_bytes,
                                           std::max<int64_t>(plan.alignment, 1)));
    // A new host arena's pages are touched once here, before any step: the kernels' time is
    // then the steps' own, as a framework's warm runs pay no first-touch page faults either.
    if (device == Device::kHost && own->size() > 0) {
      std::memset(own->base(), 0, static_cast<size_t>(own->size()));
    }
  } else if (target.arena->device() != device) {
    return absl::InvalidArgumentError(absl::StrCat("the arena is on ",
                                                   DeviceName(target.arena->device()),
                                                   ", the run on ", DeviceName(device)));
  }
  Arena& arena = target.arena != nullptr ? *target.arena : *own;
  MG_ASSIGN_OR_RETURN(Executor executor, Executor::Create(graph, plan, arena));
  const graph::StaticData* model_data = graph.static_data();
  if (model_data != nullptr && !options.seed_missing) {
    std::vector<std::string> missing;
    for (graph::ValueId id = 0; id < graph.num_values(); ++id) {
      const graph::Value& v = graph.value(id);
      if (v.producer != graph::kNone || !graph::IsStatic(v.role) ||
          options.data.contains(v.name) || model_data->contains(v.name)) {
        continue;
      }
      missing.push_back(v.DisplayName());
    }
    if (!missing.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the model holds no data for ", missing.size(), " of its weights and constants (",
          util::Quote(absl::StrJoin(missing.begin(),
                                    missing.begin() + std::min<size_t>(missing.size(), 5), ", ")),
          missing.size() > 5 ? ", ..." : "",
          "); running it on seeded values would compute something else: give --seed-missing "
          "to do so anyway"));
    }
  }

  HostRunReport report;
  std::vector<std::byte> staging;
  for (graph::ValueId id = 0; id < graph.num_values(); ++id) {
    const graph::Value& v = graph.value(id);
    if (v.producer != graph::kNone) continue;
    // Filled on the host (in place for a host arena, else staged and copied over).
    MG_ASSIGN_OR_RETURN(const int64_t bytes, graph::ByteSize(*v.type, v.DisplayName()));
    if (device != Device::kHost) staging.resize(static_cast<size_t>(bytes));
    std::byte* dst = device == Device::kHost ? executor.ValueAddress(id) : staging.data();
    if (auto it = options.data.find(v.name); it != options.data.end()) {
      MG_RETURN_IF_ERROR(CopyData(v, it->second, dst));
      ++report.from_caller;
    } else if (const TensorData* own = ModelData(model_data, v.name); own != nullptr) {
      MG_RETURN_IF_ERROR(CopyData(v, *own, dst));
      ++report.from_model;
    } else {
      FillSeeded(*v.type, v.name, options.seed, dst);
      ++report.seeded;
      if (graph::IsStatic(v.role)) report.seeded_statics.push_back(v.DisplayName());
    }
    if (device != Device::kHost) {
      MG_RETURN_IF_ERROR(CopyToDevice(device, executor.ValueAddress(id), dst, bytes));
    }
  }

  const auto start = std::chrono::steady_clock::now();
  // A net with data-dependent sizes runs measuring them; its outputs have the measured types.
  std::optional<graph::Graph> measured;
  if (!graph.data_dependent_sizes().empty() && options.retype) {
    if (target.kernels != nullptr) {
      return absl::UnimplementedError(
          "a net with data-dependent sizes runs on the host's CPU kernels only");
    }
    auto counting = [&](const auto& sizes) {
      const auto begin = std::chrono::steady_clock::now();
      ++report.retypes;
      auto typed = options.retype(sizes);
      report.retype_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
      return typed;
    };
    KernelTable kernels = MakeCpuKernelTable();
    MG_ASSIGN_OR_RETURN(measured, executor.RunMeasuring(kernels, options.threads, counting));
  } else if (target.kernels != nullptr) {
    MG_RETURN_IF_ERROR(executor.Run(*target.kernels, options.threads));
    if (target.finish) MG_RETURN_IF_ERROR(target.finish());
  } else {
    KernelTable kernels = MakeCpuKernelTable();
    if (options.fp16_census != nullptr) {
      kernels = WithFp16Census(std::move(kernels), options.fp16_census);
    }
    MG_RETURN_IF_ERROR(executor.Run(kernels, options.threads));
  }
  report.kernel_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() -
      report.retype_seconds;

  if (!options.outputs_dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(options.outputs_dir, error);
    if (error) {
      return absl::InvalidArgumentError(absl::StrCat(options.outputs_dir,
                                                     ": cannot create the directory: ",
                                                     error.message()));
    }
  }
  // File names. Two names may map to one file name (NpyFileName replaces what a file name
  // cannot hold): an output whose name is its file name already claims it first, and the others
  // take the first free numeric suffix, so that no suffix hands one output's own name to
  // another ('a/b' took a_b_1.npy's name from output 'a_b_1' when 'a_b' came between).
  absl::flat_hash_set<graph::ValueId> seen;
  std::vector<graph::ValueId> outputs;
  for (graph::ValueId id : graph.outputs()) {
    if (seen.insert(id).second) outputs.push_back(id);
  }
  absl::flat_hash_map<graph::ValueId, std::string> file_of;
  if (!options.outputs_dir.empty()) {
    absl::flat_hash_set<std::string> files;
    for (graph::ValueId id : outputs) {
      const std::string file = NpyFileName(graph.value(id).name);
      if (file == graph.value(id).name + ".npy" && files.insert(file).second) file_of[id] = file;
    }
    for (graph::ValueId id : outputs) {
      if (file_of.contains(id)) continue;
      const std::string file = NpyFileName(graph.value(id).name);
      const std::string stem = file.substr(0, file.size() - 4);
      std::string name = file;
      for (int k = 1; files.contains(name); ++k) name = absl::StrCat(stem, "_", k, ".npy");
      files.insert(name);
      file_of[id] = name;
    }
  }
  for (graph::ValueId id : outputs) {
    const graph::Value& planned = graph.value(id);
    const std::optional<graph::ValueId> now =
        measured.has_value() ? measured->FindValue(planned.name) : std::nullopt;
    const graph::Value& v = now.has_value() ? measured->value(*now) : planned;
    HostRunOutput out;
    out.name = v.name;
    out.type = *v.type;
    MG_ASSIGN_OR_RETURN(const int64_t bytes, graph::ByteSize(*v.type, v.DisplayName()));
    staging.resize(static_cast<size_t>(bytes));
    MG_RETURN_IF_ERROR(CopyToHost(device, staging.data(), executor.ValueAddress(id), bytes));
    if (options.keep_outputs) {
      out.bytes.assign(reinterpret_cast<const char*>(staging.data()), static_cast<size_t>(bytes));
    }
    if (!options.outputs_dir.empty()) {
      out.file = (std::filesystem::path(options.outputs_dir) / file_of.at(id)).string();
      MG_RETURN_IF_ERROR(WriteNpy(out.file, *v.type, staging.data()));
    }
    report.outputs.push_back(std::move(out));
  }
  return report;
}

}  // namespace memonger::alloc
