#include "allocator/executor.h"

#include <optional>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "graph/in_place.h"
#include "kernels/verify_kernels.h"
#include "memonger/liveness.h"
#include "memonger/schedule.h"
#include "util/check.h"
#include "util/checked_math.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

using graph::kNone;
using graph::OpId;
using graph::ValueId;

std::string Range(int64_t begin, int64_t bytes) {
  return absl::StrCat("[", begin, ", ", begin + bytes, ")");
}

// The op's inputs, each once, in first-appearance order.
std::vector<ValueId> DistinctInputs(const graph::Op& op) {
  std::vector<ValueId> out;
  for (ValueId v : op.inputs) {
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  return out;
}

// `args` for `op`, its values typed by `types` and found at address(value).
template <typename Address>
void SetOperands(KernelArgs& args, const graph::Op& op, const graph::Graph& types,
                 const Address& address) {
  args.op = &op;
  args.inputs.clear();
  args.input_types.clear();
  args.outputs.clear();
  args.output_types.clear();
  for (ValueId in : op.inputs) {
    args.inputs.push_back(address(in));
    args.input_types.push_back(&*types.value(in).type);
  }
  for (ValueId out : op.outputs) {
    args.outputs.push_back(address(out));
    args.output_types.push_back(&*types.value(out).type);
  }
}

// A kernel's error, with the op and its step in front.
absl::Status StepError(const graph::Op& op, size_t step, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat(op.Label(), " (step ", step, "): ", status.message()));
}

}  // namespace

absl::StatusOr<Executor> Executor::Create(const graph::Graph& graph, const Plan& plan,
                                          Arena& arena) {
  const int n = graph.num_values();
  for (const graph::Value& v : graph.values()) {
    if (!v.type.has_value()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "value '", v.DisplayName(), "' has no type: run shape inference before executing"));
    }
  }
  if (static_cast<int>(plan.offset_of_value.size()) != n ||
      static_cast<int>(plan.lifetime.size()) != n ||
      static_cast<int>(plan.steps.size()) != graph.num_ops()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the plan is for another net: it has ", plan.offset_of_value.size(), " values and ",
        plan.steps.size(), " steps; net '", graph.name(), "' has ", n, " values and ",
        graph.num_ops(), " ops"));
  }

  // Liveness computed with the plan's options: alias classes and which values belong in the
  // arena, and the lifetimes the plan states (per name for the memonger baselines).
  if (plan.liveness.size_blind) {
    return absl::InvalidArgumentError(
        "a size-blind plan says which values share a buffer, not where they live: it cannot "
        "be executed (plan with the graph inputs' shapes)");
  }
  MG_ASSIGN_OR_RETURN(Liveness liveness,
                      LivenessOfPlan(graph, plan, PlanLifetimes::kPerVersion));
  std::optional<Liveness> by_name;
  if (plan.liveness.blob_per_name || plan.liveness.in_place) {
    MG_ASSIGN_OR_RETURN(by_name, LivenessOfPlan(graph, plan));
  }
  const Liveness& stated = by_name.has_value() ? *by_name : liveness;

  if (plan.arena_bytes > arena.size()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the plan needs an arena of ", plan.arena_bytes, " bytes; this arena has ",
        arena.size()));
  }
  for (ValueId id = 0; id < n; ++id) {
    const graph::Value& v = graph.value(id);
    const int64_t offset = plan.offset_of_value[id];
    const int64_t bytes = liveness.bytes[id];
    if (liveness.planned[id] != (offset != kNoOffset)) {
      return absl::InvalidArgumentError(absl::StrCat(
          graph::RoleName(v.role), " '", v.DisplayName(), "' ",
          liveness.planned[id] ? "belongs in the arena but the plan gives it no offset"
                               : "is static and not planned, but the plan gives it an offset",
          " (plan_static: ", plan.liveness.plan_static ? "true" : "false", ")"));
    }
    if (offset == kNoOffset) continue;
    const auto end = util::CheckedAdd(offset, bytes);
    if (offset < 0 || !end || *end > arena.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "value '", v.DisplayName(), "' at ", Range(offset, bytes),
          " lies outside the arena [0, ", arena.size(), ")"));
    }
    if (plan.lifetime[id].first_step != stated.lifetime[id].first_step ||
        plan.lifetime[id].last_step != stated.lifetime[id].last_step) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the plan is for another net or schedule: it gives '", v.DisplayName(),
          "' the lifetime [", plan.lifetime[id].first_step, ",", plan.lifetime[id].last_step,
          "], the net and schedule give [", stated.lifetime[id].first_step, ",",
          stated.lifetime[id].last_step, "]"));
    }
    const ValueId root = liveness.alias_root[id];
    if (plan.offset_of_value[root] != offset) {
      return absl::InvalidArgumentError(absl::StrCat(
          "value '", v.DisplayName(), "' at offset ", offset, " must share the bytes of '",
          graph.value(root).DisplayName(), "' at offset ", plan.offset_of_value[root],
          " (one alias class: in place or a view)"));
    }
  }

  // Static values outside the arena: one block per alias class, each aligned to 256 bytes.
  std::vector<int64_t> static_offset(n, kNoOffset);
  int64_t static_total = 0;
  for (ValueId id = 0; id < n; ++id) {
    if (plan.offset_of_value[id] != kNoOffset || liveness.alias_root[id] != id) continue;
    const int64_t alignment =
        std::max<int64_t>(kMinArenaAlignment, graph.value(id).alignment);
    const auto start = util::CheckedAlignUp(static_total, alignment);
    const auto end = start ? util::CheckedAdd(*start, liveness.class_bytes[id]) : std::nullopt;
    if (!end) {
      return absl::ResourceExhaustedError("the net's static values need more than 2^63 bytes");
    }
    static_offset[id] = *start;
    static_total = *end;
  }
  for (ValueId id = 0; id < n; ++id) {
    if (plan.offset_of_value[id] == kNoOffset) {
      static_offset[id] = static_offset[liveness.alias_root[id]];
    }
  }
  MG_ASSIGN_OR_RETURN(Arena static_arena, Arena::Create(arena.device(), static_total));

  Executor executor(graph, arena, std::move(static_arena));
  executor.schedule_ = std::move(liveness.schedule.ops);
  if (graph::HasControlRegions(graph)) {
    MG_ASSIGN_OR_RETURN(executor.regions_, graph::FindControlRegions(graph));
    MG_RETURN_IF_ERROR(graph::CheckRegionSchedule(graph, executor.regions_, executor.schedule_));
    executor.step_of_op_.assign(graph.num_ops(), -1);
    for (size_t s = 0; s < executor.schedule_.size(); ++s) {
      executor.step_of_op_[executor.schedule_[s]] = static_cast<int>(s);
    }
    executor.region_at_step_.assign(executor.schedule_.size(), -1);
    for (size_t r = 0; r < executor.regions_.size(); ++r) {
      const graph::ControlRegion& region = executor.regions_[r];
      for (OpId marker : {region.begin, region.middle, region.end}) {
        if (marker != kNone) executor.region_at_step_[executor.step_of_op_[marker]] = static_cast<int>(r);
      }
    }
  }
  executor.offset_of_value_ = plan.offset_of_value;
  executor.static_offset_ = std::move(static_offset);
  executor.bytes_ = liveness.bytes;
  executor.alias_root_ = liveness.alias_root;
  executor.recycle_inputs_ = plan.liveness.recycle_inputs;
  executor.view_output_.assign(n, false);
  executor.key_.resize(n);
  for (ValueId id = 0; id < n; ++id) executor.key_[id] = static_cast<uint64_t>(id) + 1;
  // A view output is in the alias class of its op's input 0 without writing it in place: it
  // reads as that input. Keys follow the schedule so that views of views resolve.
  for (OpId op_id : executor.schedule_) {
    const graph::Op& op = graph.op(op_id);
    if (!op.view || op.inputs.empty() || op.outputs.empty()) continue;
    const ValueId in = op.inputs[0];
    const ValueId out = op.outputs[0];
    if (graph.value(out).inplace_of == kNone && in != out &&
        liveness.alias_root[in] == liveness.alias_root[out]) {
      executor.view_output_[out] = true;
      executor.key_[out] = executor.key_[in];
    }
  }
  return executor;
}

bool Executor::TakesBytesOf(const graph::Op& op, ValueId in) const {
  if (!InArena(in)) return false;
  for (int k = 0; k < static_cast<int>(op.outputs.size()); ++k) {
    const ValueId out = op.outputs[k];
    if (!InArena(out) || offset_of_value_[out] != offset_of_value_[in] || Bytes(out) != Bytes(in)) {
      continue;
    }
    for (int slot = 0; slot < static_cast<int>(op.inputs.size()); ++slot) {
      if (op.inputs[slot] == in && graph::MayWriteOverInput(op, k, slot)) return true;
    }
  }
  return false;
}

std::byte* Executor::ValueAddress(ValueId id) const {
  MG_CHECK(id >= 0 && id < static_cast<ValueId>(offset_of_value_.size()));
  if (InArena(id)) return arena_->base() + offset_of_value_[id];
  return static_arena_.base() + static_offset_[id];
}

absl::Status Executor::Fill(ValueId id, int step, OpId op, std::vector<Write>& log) {
  if (Bytes(id) == 0) return absl::OkStatus();
  MG_RETURN_IF_ERROR(FillPattern(device(), ValueAddress(id), Bytes(id), key_[id]));
  log.push_back(Write{step, op, id});
  return absl::OkStatus();
}

absl::Status Executor::Check(ValueId id, const std::vector<Write>& log,
                             const std::string& context) const {
  if (Bytes(id) == 0) return absl::OkStatus();
  MG_ASSIGN_OR_RETURN(const int64_t bad,
                      FindPatternMismatch(device(), ValueAddress(id), Bytes(id), key_[id]));
  if (bad < 0) return absl::OkStatus();

  const graph::Value& v = graph_->value(id);
  std::string where;
  std::string culprit;
  if (InArena(id)) {
    const int64_t offset = offset_of_value_[id];
    const int64_t at = offset + bad;
    where = absl::StrCat("arena bytes ", Range(offset, Bytes(id)), "; byte ", bad,
                         " (arena offset ", at, ")");
    // The latest write covering that byte is the one that left it there.
    for (auto it = log.rbegin(); it != log.rend(); ++it) {
      if (!InArena(it->value)) continue;
      const int64_t begin = offset_of_value_[it->value];
      if (at < begin || at >= begin + Bytes(it->value)) continue;
      if (key_[it->value] == key_[id]) break;  // its own write: changed outside the run
      const graph::Value& w = graph_->value(it->value);
      const std::string writer =
          it->op == kNone ? std::string("the fill of the graph's inputs before step 0")
                          : absl::StrCat(graph_->op(it->op).Label(), " (step ", it->step, ")");
      culprit = absl::StrCat("; ", writer, " wrote '", w.DisplayName(), "' over arena bytes ",
                             Range(begin, Bytes(it->value)), " while '", v.DisplayName(),
                             "' was live");
      break;
    }
    if (culprit.empty()) culprit = "; no write of this run covers that byte";
  } else {
    where = absl::StrCat("static memory of ", Bytes(id), " bytes; byte ", bad);
  }
  return absl::DataLossError(absl::StrCat("verify run: value '", v.DisplayName(),
                                          "' was clobbered (", where,
                                          " no longer holds its pattern) when ", context,
                                          culprit));
}

absl::Status Executor::RunVerify() {
  std::vector<Write> log;
  log.reserve(graph_->num_values());
  for (ValueId id = 0; id < graph_->num_values(); ++id) {
    if (graph_->value(id).producer == kNone) MG_RETURN_IF_ERROR(Fill(id, -1, kNone, log));
  }
  std::vector<bool> jumped(regions_.size(), false);  // a Loop's body ran its second time
  for (int step = 0; step < static_cast<int>(schedule_.size()); ++step) {
    const OpId op_id = schedule_[step];
    const graph::Op& op = graph_->op(op_id);
    const int region = region_at_step_.empty() ? -1 : region_at_step_[step];
    if (region >= 0 && op_id == regions_[region].end &&
        regions_[region].kind == graph::ControlRegion::Kind::kLoop && !jumped[region]) {
      // The jump back: LoopEnd writes the iteration number, the condition and the carried
      // values, and the body runs again reading them and the values from before the Loop.
      jumped[region] = true;
      for (ValueId in : DistinctInputs(op)) {
        MG_RETURN_IF_ERROR(Check(in, log, absl::StrCat(op.Label(), " (step ", step,
                                                       ") reads it before the jump back")));
      }
      const OpId begin = regions_[region].begin;
      for (ValueId v : graph_->op(begin).outputs) MG_RETURN_IF_ERROR(Fill(v, step, op_id, log));
      step = step_of_op_[begin];  // the loop's ++step goes on at the body's first op
      continue;
    }
    const std::vector<ValueId> inputs = DistinctInputs(op);
    for (ValueId in : inputs) {
      MG_RETURN_IF_ERROR(
          Check(in, log, absl::StrCat(op.Label(), " (step ", step, ") reads it")));
    }
    bool wrote = false;
    for (ValueId out : op.outputs) {
      if (view_output_[out]) continue;
      MG_RETURN_IF_ERROR(Fill(out, step, op_id, log));
      wrote = true;
    }
    if (!wrote) continue;
    // The op's outputs must have left its inputs alone, except what it overwrites in place:
    // a value written in place (one alias class), or an input whose exact bytes an output
    // takes where graph/in_place.h allows it. That such an input is read by nothing later
    // is proven by the later reads (and the end's checks) finding the output's pattern.
    for (ValueId in : inputs) {
      const bool shares_an_output =
          std::any_of(op.outputs.begin(), op.outputs.end(),
                      [&](ValueId out) { return alias_root_[out] == alias_root_[in]; });
      if (shares_an_output || TakesBytesOf(op, in)) continue;
      MG_RETURN_IF_ERROR(Check(in, log,
                               absl::StrCat(op.Label(), " (step ", step,
                                            "), which reads it, has written its outputs")));
    }
  }
  std::vector<ValueId> checked;
  for (ValueId out : graph_->outputs()) {
    if (std::find(checked.begin(), checked.end(), out) != checked.end()) continue;
    checked.push_back(out);
    MG_RETURN_IF_ERROR(Check(out, log, "the run ends (it is a graph output)"));
  }
  // The caller owns the graph inputs (unless it let the plan recycle them): nothing may have
  // written over them, except where the net itself writes the input's name again (Caffe2's
  // in-place `Relu(x) -> x`, or a later version of the blob).
  if (!recycle_inputs_) {
    for (ValueId in : graph_->inputs()) {
      if (graph_->Versions(graph_->value(in).name).size() > 1) continue;
      if (std::find(checked.begin(), checked.end(), in) != checked.end()) continue;
      checked.push_back(in);
      MG_RETURN_IF_ERROR(Check(in, log, "the run ends (it is a graph input, the caller's)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<const Kernel*>> Executor::KernelsOfSteps(
    const KernelTable& kernels) const {
  std::vector<const Kernel*> kernel_of_step(schedule_.size(), nullptr);
  // Every op type without a kernel is named at once, before any op runs: a user adding
  // kernels (or choosing another runtime) learns the whole list from one run.
  struct Missing {
    std::string type;
    std::string first_op;
    size_t first_step = 0;
    int ops = 0;
  };
  std::vector<Missing> missing;
  for (size_t step = 0; step < schedule_.size(); ++step) {
    const graph::Op& op = graph_->op(schedule_[step]);
    if (!region_at_step_.empty() && region_at_step_[step] >= 0) continue;  // the executor's own
    kernel_of_step[step] = kernels.Find(op.type);
    if (kernel_of_step[step] != nullptr) continue;
    auto it = std::find_if(missing.begin(), missing.end(),
                           [&](const Missing& m) { return m.type == op.type; });
    if (it == missing.end()) {
      missing.push_back({op.type, op.Label(), step, 1});
    } else {
      ++it->ops;
    }
  }
  if (!missing.empty()) {
    std::string list;
    for (const Missing& m : missing) {
      absl::StrAppend(&list, list.empty() ? "" : "; ", "'", m.type, "' (", m.ops,
                      m.ops == 1 ? " op: " : " ops, first ", m.first_op, ", step ",
                      m.first_step, ")");
    }
    return absl::UnimplementedError(absl::StrCat(
        "no kernel for ", missing.size() == 1 ? "op type " : "op types ", list,
        "; the kernel table has ", kernels.size(), " kernels"));
  }
  return kernel_of_step;
}

absl::Status Executor::Run(const KernelTable& kernels, int threads) {
  // The kernels run at the types the plan holds: at an upper bound they would compute over
  // elements a run does not have and hand on wrong values (RunMeasuring runs such a net).
  if (const auto& sizes = graph_->data_dependent_sizes(); !sizes.empty()) {
    return absl::UnimplementedError(absl::StrCat(
        "the net has ", sizes.size(),
        " values whose sizes depend on tensor values (first '", sizes[0].value, "': ",
        sizes[0].why, "), planned at upper bounds; the executor runs fixed sizes only"));
  }
  if (!regions_.empty() && device() != Device::kHost) {
    return absl::UnimplementedError(absl::StrCat(
        "the net has control flow decided at run time (", graph_->op(regions_[0].begin).Label(),
        "): it runs on the host executor only, which reads the conditions between its ops"));
  }
  MG_ASSIGN_OR_RETURN(const std::vector<const Kernel*> kernel_of_step, KernelsOfSteps(kernels));
  KernelArgs args;
  args.device = device();
  args.threads = std::max(threads, 1);
  KernelScratch scratch(args.threads);  // kept from op to op (kernels/kernel_scratch.h)
  args.scratch = &scratch;
  std::vector<bool> skipped(regions_.size(), false);
  std::vector<std::byte> staging;
  for (size_t step = 0; step < schedule_.size();) {
    const graph::Op& op = graph_->op(schedule_[step]);
    if (!region_at_step_.empty() && region_at_step_[step] >= 0) {
      absl::StatusOr<size_t> next = RunMarker(step, skipped, staging);
      if (!next.ok()) return StepError(op, step, next.status());
      step = *next;
      continue;
    }
    SetOperands(args, op, *graph_, [this](ValueId v) { return ValueAddress(v); });
    const absl::Status status = (*kernel_of_step[step])(args);
    if (!status.ok()) return StepError(op, step, status);
    ++step;
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> Executor::RunMarker(size_t step, std::vector<bool>& skipped,
                                           std::vector<std::byte>& staging) {
  const int r = region_at_step_[step];
  const graph::ControlRegion& region = regions_[r];
  const OpId id = schedule_[step];
  const graph::Op& op = graph_->op(id);
  auto truth = [&](ValueId v) { return *reinterpret_cast<const uint8_t*>(ValueAddress(v)) != 0; };
  auto int64_at = [&](ValueId v) {
    int64_t x;
    std::memcpy(&x, ValueAddress(v), sizeof(x));
    return x;
  };
  // Copies values[k] into targets[k] for every k, through `staging` (a carried value may be
  // another's next: a swap).
  auto copy_all = [&](const std::vector<ValueId>& values, const std::vector<ValueId>& targets) {
    staging.clear();
    for (ValueId v : values) {
      const std::byte* from = ValueAddress(v);
      staging.insert(staging.end(), from, from + Bytes(v));
    }
    size_t at = 0;
    for (size_t k = 0; k < targets.size(); ++k) {
      if (Bytes(targets[k]) > 0) std::memcpy(ValueAddress(targets[k]), staging.data() + at, Bytes(targets[k]));
      at += Bytes(values[k]);
    }
  };
  const size_t begin_step = step_of_op_[region.begin];
  const size_t end_step = step_of_op_[region.end];
  const size_t n = static_cast<size_t>(region.carried);
  if (region.kind == graph::ControlRegion::Kind::kIf) {
    if (id == region.begin) return truth(op.inputs[0]) ? step + 1 : step_of_op_[region.middle] + 1;
    if (id == region.middle) return end_step;  // the then-branch ran: the else-branch does not
    const bool cond = truth(op.inputs[0]);
    std::vector<ValueId> from, to;
    for (size_t k = 0; k < n; ++k) {
      from.push_back(op.inputs[(cond ? 1 : 1 + n) + k]);
      to.push_back(op.outputs[k]);
    }
    copy_all(from, to);
    return step + 1;
  }
  const graph::Op& begin = graph_->op(region.begin);
  const size_t given = (region.has_trip_count ? 1 : 0) + (region.has_condition ? 1 : 0);
  const int64_t trips = region.has_trip_count ? int64_at(begin.inputs[0])
                                              : std::numeric_limits<int64_t>::max();
  std::vector<ValueId> in(begin.outputs.begin() + 2, begin.outputs.end());
  if (id == region.begin) {
    const bool cond = region.has_condition ? truth(begin.inputs[given - 1]) : true;
    const int64_t zero = 0;
    std::memcpy(ValueAddress(begin.outputs[0]), &zero, sizeof(zero));
    *reinterpret_cast<uint8_t*>(ValueAddress(begin.outputs[1])) = cond ? 1 : 0;
    copy_all(std::vector<ValueId>(begin.inputs.begin() + given, begin.inputs.end()), in);
    skipped[r] = !(cond && trips > 0);
    return skipped[r] ? end_step : step + 1;
  }
  const std::vector<ValueId> finals(op.outputs.begin(), op.outputs.end());
  if (skipped[r]) {
    skipped[r] = false;
    copy_all(in, finals);
    return step + 1;
  }
  const size_t m = region.has_trip_count ? 1 : 0;
  const ValueId cond_out = op.inputs[m + 2 + n];
  const std::vector<ValueId> out(op.inputs.begin() + m + 3 + n, op.inputs.begin() + m + 3 + 2 * n);
  const int64_t next = int64_at(begin.outputs[0]) + 1;
  const bool cond = region.has_condition ? truth(cond_out) : true;
  if (next < trips && cond) {
    std::memcpy(ValueAddress(begin.outputs[0]), &next, sizeof(next));
    *reinterpret_cast<uint8_t*>(ValueAddress(begin.outputs[1])) = cond ? 1 : 0;
    copy_all(out, in);
    return begin_step + 1;
  }
  copy_all(out, finals);
  return step + 1;
}

absl::Status Executor::CheckTyping(const graph::Graph& typing, std::vector<ValueId>& id_of,
                                   std::vector<std::byte*>& address,
                                   std::vector<Arena>& extras) const {
  id_of.assign(typing.num_values(), kNone);
  address.assign(typing.num_values(), nullptr);
  auto other_way = [&](const graph::Value& value, absl::string_view what) {
    return absl::FailedPreconditionError(absl::StrCat(
        "at the sizes this run measured, ", graph::RoleName(value.role), " '", value.name, "' ",
        what, " in the plan (made at the upper bounds): an If on a size took the other branch, "
        "or folding went another way"));
  };
  for (ValueId v = 0; v < typing.num_values(); ++v) {
    const graph::Value& value = typing.value(v);
    MG_ASSIGN_OR_RETURN(const int64_t bytes, graph::ValueByteSize(value));
    const std::optional<ValueId> planned = graph_->FindValue(value.name);
    if (!planned.has_value()) {
      const graph::StaticData* all = typing.static_data();
      auto data = all != nullptr ? all->find(value.name) : graph::StaticData::const_iterator();
      if (value.producer != kNone || all == nullptr || data == all->end() ||
          static_cast<int64_t>(data->second.bytes.size()) != bytes) {
        return other_way(value, "is not");
      }
      MG_ASSIGN_OR_RETURN(Arena own, Arena::Create(Device::kHost, bytes));
      if (bytes > 0) std::memcpy(own.base(), data->second.bytes.data(), bytes);
      address[v] = own.base();
      extras.push_back(std::move(own));
      continue;
    }
    // The same kind of value, made by the same kind of op, as the plan holds.
    const graph::Value& was = graph_->value(*planned);
    if ((value.producer == kNone) != (was.producer == kNone) ||
        (value.producer != kNone &&
         (typing.op(value.producer).type != graph_->op(was.producer).type ||
          typing.op(value.producer).inputs.size() != graph_->op(was.producer).inputs.size()))) {
      return other_way(value, "is computed otherwise than");
    }
    id_of[v] = *planned;
    address[v] = ValueAddress(*planned);
    if (bytes > Bytes(*planned)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "value '", value.name, "' needs ", bytes, " bytes (",
          graph::TensorTypeToString(*value.type), ") at the sizes this run measured; the plan, "
          "made at the upper bounds, gives it ", Bytes(*planned), " (",
          graph::TensorTypeToString(*was.type), ")"));
    }
  }
  // An output planned over one of its op's inputs (in place, or taking a dying input's bytes)
  // is safe only while the two have the same dims: at other sizes a broadcast would read what
  // the op already wrote.
  for (const graph::Op& op : typing.ops()) {
    if (op.view) continue;
    for (ValueId out : op.outputs) {
      for (ValueId in : op.inputs) {
        if (id_of[out] == kNone || id_of[in] == kNone || in == out || !InArena(id_of[in]) ||
            !InArena(id_of[out]) || offset_of_value_[id_of[in]] != offset_of_value_[id_of[out]] ||
            typing.value(in).type->dims == typing.value(out).type->dims) {
          continue;
        }
        return absl::FailedPreconditionError(absl::StrCat(
            op.Label(), " writes '", typing.value(out).name, "' over '", typing.value(in).name,
            "' as the plan made at the upper bounds says, but at the sizes this run measured "
            "their dims differ (", graph::TensorTypeToString(*typing.value(out).type), ", ",
            graph::TensorTypeToString(*typing.value(in).type),
            "): plan without in-place reuse (--no-in-place)"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<graph::Graph> Executor::RunMeasuring(const KernelTable& kernels, int threads,
                                                    const Retype& retype) {
  if (device() != Device::kHost) {
    return absl::UnimplementedError(
        "a net with data-dependent sizes runs on the host only (its sizes are read back "
        "between its ops)");
  }
  if (!regions_.empty()) {  // the importer writes regions only where no size is data-dependent
    return absl::UnimplementedError(absl::StrCat(
        "the net has both data-dependent sizes and control flow decided at run time (",
        graph_->op(regions_[0].begin).Label(), "): a run measures sizes or takes branches, "
        "not both"));
  }
  MG_ASSIGN_OR_RETURN(const std::vector<const Kernel*> kernel_of_step, KernelsOfSteps(kernels));
  // A constant folded from a bound is rewritten when the sizes are measured: in the arena
  // (plan_static) its bytes may by then belong to another value.
  for (ValueId v = 0; v < graph_->num_values(); ++v) {
    const graph::Value& value = graph_->value(v);
    if (value.producer == kNone && InArena(v) && graph_->SizedFromBound(value.name)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "constant '", value.name, "' follows from a data-dependent size and is planned in the "
          "arena: a run that measures sizes needs static values outside it (no plan_static)"));
    }
  }
  graph::Graph typing = *graph_;
  std::vector<ValueId> id_of;          // typing's value -> the planned net's
  std::vector<std::byte*> address;     // typing's value -> its memory
  std::vector<Arena> extras;           // constants the plan does not hold
  MG_RETURN_IF_ERROR(CheckTyping(typing, id_of, address, extras));
  absl::flat_hash_map<std::string, std::vector<int64_t>> measured;
  size_t measured_at_typing = 0;
  std::vector<bool> computed(graph_->num_values(), false);
  for (ValueId v = 0; v < graph_->num_values(); ++v) {
    computed[v] = graph_->value(v).producer == kNone;
  }
  std::vector<std::vector<int64_t>> dims;
  KernelArgs args;
  args.device = device();
  args.threads = std::max(threads, 1);
  KernelScratch scratch(args.threads);  // kept from op to op (kernels/kernel_scratch.h)
  args.scratch = &scratch;
  absl::flat_hash_set<std::string> bounded;
  auto note_bounded = [&] {
    bounded.clear();
    for (const graph::DataDependentSize& d : typing.data_dependent_sizes()) bounded.insert(d.value);
  };
  note_bounded();
  // Types the net at the sizes measured so far, checks it against the plan, and rewrites the
  // constants folded from a bound (a TopK's k) with the new typing's numbers.
  auto retype_now = [&]() -> absl::Status {
    MG_ASSIGN_OR_RETURN(typing, retype(measured));
    measured_at_typing = measured.size();
    MG_RETURN_IF_ERROR(CheckTyping(typing, id_of, address, extras));
    note_bounded();
    for (ValueId v = 0; v < typing.num_values(); ++v) {
      const graph::Value& value = typing.value(v);
      if (value.producer != kNone || !graph::IsStatic(value.role) || id_of[v] == kNone ||
          InArena(id_of[v]) || !graph_->SizedFromBound(value.name)) {
        continue;
      }
      const graph::TensorData* data = nullptr;
      if (const graph::StaticData* all = typing.static_data(); all != nullptr) {
        if (auto it = all->find(value.name); it != all->end()) data = &it->second;
      }
      if (data == nullptr || data->type != *value.type) {
        return absl::FailedPreconditionError(absl::StrCat(
            "the net retyped at the measured sizes holds no data of its type for constant '",
            value.name, "'"));
      }
      if (!data->bytes.empty()) {
        std::memcpy(address[v], data->bytes.data(), data->bytes.size());
      }
    }
    return absl::OkStatus();
  };
  // Strictly in schedule order: the plan's lifetimes are the schedule's, so an op run early or
  // late could find its memory given to another value.
  for (size_t step = 0; step < schedule_.size();) {
    const graph::Op& planned_op = graph_->op(schedule_[step]);
    // The op in this typing, found by its first output.
    const std::optional<ValueId> first =
        planned_op.outputs.empty() ? std::nullopt
                                   : typing.FindValue(graph_->value(planned_op.outputs[0]).name);
    if (!first.has_value() || typing.value(*first).producer == kNone) {
      ++step;  // gone at these sizes (folded, or a branch not taken)
      continue;
    }
    const graph::Op& op = typing.op(typing.value(*first).producer);
    bool ready = true;
    for (ValueId in : op.inputs) {
      ready = ready && (id_of[in] == kNone || computed[id_of[in]]) &&
              !typing.SizedFromBound(typing.value(in).name);
    }
    bool measures = false;
    for (ValueId out : op.outputs) {
      const std::string& name = typing.value(out).name;
      measures = measures || bounded.contains(name);
      // A value derived from a bound without reading one: an If's branch a bound chose.
      ready = ready && (bounded.contains(name) || !typing.SizedFromBound(name));
    }
    if (!ready) {
      if (measured.size() == measured_at_typing) {
        return absl::FailedPreconditionError(absl::StrCat(
            op.Label(), " (step ", step, ") cannot run: what it reads or writes is sized by "
            "bounds that nothing before it in the schedule measures (plan with the order given)"));
      }
      MG_RETURN_IF_ERROR(retype_now());
      continue;  // this step again, in the new typing
    }
    SetOperands(args, op, typing, [&address](ValueId v) { return address[v]; });
    dims.assign(op.outputs.size(), {});
    args.measured_dims = measures ? &dims : nullptr;
    const absl::Status status = (*kernel_of_step[step])(args);
    if (!status.ok()) return StepError(op, step, status);
    for (size_t k = 0; k < op.outputs.size(); ++k) {
      const std::string& name = typing.value(op.outputs[k]).name;
      computed[id_of[op.outputs[k]]] = true;
      if (measures && bounded.contains(name)) measured[name] = dims[k];
    }
    ++step;
  }
  // Sizes measured after the last typing (an output of NonMaxSuppression itself) type the
  // outputs.
  if (measured.size() > measured_at_typing) MG_RETURN_IF_ERROR(retype_now());
  return typing;
}

}  // namespace memonger::alloc
