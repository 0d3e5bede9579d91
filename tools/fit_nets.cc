#include "tools/fit_nets.h"

#include <utility>

#include "graph/model_loader.h"
#include "graph/retype.h"
#include "util/status_macros.h"

namespace memonger::tools {
namespace {

// The nets kept, by their values in all.
constexpr int64_t kMaxKeptValues = int64_t{1} << 22;

}  // namespace

FitNets::FitNets(const NetSource& source)
    : source_(source), state_(source.workload.has_value() ? State::kImport : State::kUnknown) {}

absl::StatusOr<graph::Graph> FitNets::Import(int64_t value) {
  GraphRequest at_value;
  at_value.fit_value = value;
  ++imports_;
  return LoadTypedNet(source_, at_value);
}

void FitNets::Keep(int64_t value, graph::Graph net) {
  if (kept_values_ + net.num_values() > kMaxKeptValues) {
    nets_.clear();  // retyped_ stays: Confirm retypes an evicted value again
    kept_values_ = 0;
  }
  kept_values_ += net.num_values();
  nets_.insert_or_assign(value, std::move(net));
}

absl::StatusOr<const graph::Graph*> FitNets::At(int64_t value) {
  if (auto it = nets_.find(value); it != nets_.end()) return &it->second;
  graph::ShapeBindings bindings = source_.load.bindings;
  bindings.dims[source_.flags->fit] = value;
  if (state_ == State::kRetype) {
    absl::StatusOr<graph::Graph> typed = retyper_->At(bindings);
    absl::StatusOr<graph::Graph> finished =
        typed.ok() ? FinishNet(source_, *std::move(typed)) : typed.status();
    if (finished.ok()) {
      ++retypes_;
      retyped_.insert(value);
      Keep(value, *std::move(finished));
      return &nets_.at(value);
    }
    // The import decides what this value is (and says why it is refused, if it is); the
    // retyper stays for Confirm.
    state_ = State::kImport;
  }
  MG_ASSIGN_OR_RETURN(graph::Graph typed, Import(value));
  if (state_ == State::kUnknown) {
    if (!first_.has_value()) {
      first_ = typed;
      first_value_ = value;
    } else {
      absl::StatusOr<graph::Retyper> retyper = graph::Retyper::Make(
          *std::move(first_), typed, source_.flags->fit, first_value_, value, bindings);
      first_.reset();
      state_ = retyper.ok() ? State::kRetype : State::kImport;
      if (retyper.ok()) retyper_.emplace(*std::move(retyper));
    }
  }
  MG_ASSIGN_OR_RETURN(graph::Graph finished, FinishNet(source_, std::move(typed)));
  Keep(value, std::move(finished));
  return &nets_.at(value);
}

absl::StatusOr<bool> FitNets::Confirm(int64_t value) {
  if (retyped_.count(value) == 0) return true;
  if (nets_.count(value) == 0) {
    // Evicted since: the same retyping again (it is deterministic), to compare.
    graph::ShapeBindings bindings = source_.load.bindings;
    bindings.dims[source_.flags->fit] = value;
    absl::StatusOr<graph::Graph> again =
        retyper_.has_value() ? retyper_->At(bindings) : absl::InternalError("no retyper");
    if (again.ok()) again = FinishNet(source_, *std::move(again));
    if (!again.ok()) again = graph::Graph();  // compared below: differs from any import
    Keep(value, *std::move(again));
  }
  absl::StatusOr<graph::Graph> typed = Import(value);
  absl::StatusOr<graph::Graph> imported =
      typed.ok() ? FinishNet(source_, *std::move(typed)) : typed.status();
  const graph::Graph& retyped = nets_.at(value);
  if (imported.ok() && graph::SamePlanningGraph(retyped, *imported) &&
      graph::SameNetButTypes(retyped, *imported)) {
    retyped_.erase(value);
    nets_.insert_or_assign(value, *std::move(imported));
    return true;
  }
  state_ = State::kImport;
  retyper_.reset();
  nets_.clear();
  retyped_.clear();
  kept_values_ = 0;
  return false;
}

}  // namespace memonger::tools
