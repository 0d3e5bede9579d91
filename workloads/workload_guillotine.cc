#include "workloads/workload_guillotine.h"

#include <queue>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "graph/shape_inference.h"
#include "util/limits.h"
#include "util/splitmix64.h"
#include "util/status_macros.h"

namespace memonger::graph {
namespace {

// A piece: steps [t0, t1), units [a0, a1).
struct Piece {
  int64_t t0, t1, a0, a1;
  int64_t Width() const { return t1 - t0; }
  int64_t Height() const { return a1 - a0; }
  bool Cuttable() const { return Width() >= 2 || Height() >= 2; }
};

}  // namespace

absl::StatusOr<GuillotineWorkload> ParseGuillotineWorkload(const WorkloadSpec& spec) {
  WorkloadParams params(spec, WorkloadKeys("guillotine"));
  GuillotineWorkload w;
  MG_ASSIGN_OR_RETURN(w.records, params.Int("records", w.records, 1, util::kMaxValues));
  MG_ASSIGN_OR_RETURN(int64_t seed, params.Int("seed", static_cast<int64_t>(w.seed), 0));
  w.seed = static_cast<uint64_t>(seed);
  MG_ASSIGN_OR_RETURN(w.steps, params.Int("steps", w.steps, 1, int64_t{1} << 30));
  MG_ASSIGN_OR_RETURN(w.height, params.Int("height", w.height, 1, int64_t{1} << 30));
  MG_ASSIGN_OR_RETURN(w.unit, params.Int("unit", w.unit, 1, int64_t{1} << 20));
  MG_RETURN_IF_ERROR(params.Finish());
  if ((w.unit & (w.unit - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("guillotine workload: unit=", w.unit, " is not a power of two"));
  }
  // steps x height <= 2^60 cannot overflow; it bounds how many pieces the cuts can make.
  if (w.records > w.steps * w.height) {
    return absl::InvalidArgumentError(absl::StrCat(
        "guillotine workload: records=", w.records, " is more than steps x height = ",
        w.steps * w.height, " pieces of one step by one unit"));
  }
  return w;
}

GuillotineInstance MakeGuillotineInstance(const GuillotineWorkload& workload) {
  util::SplitMix64 rng(workload.seed);
  std::vector<Piece> pieces = {Piece{0, workload.steps, 0, workload.height}};
  pieces.reserve(static_cast<size_t>(workload.records));
  // Cuttable pieces: a max-heap by (area, earliest made) with stale entries skipped, and a list
  // for uniform draws (a piece that can no longer be cut is swapped out when drawn).
  using Entry = std::pair<int64_t, int64_t>;  // (area, -index)
  std::priority_queue<Entry> largest;
  std::vector<int64_t> cuttable;
  auto offer = [&](int64_t index) {
    const Piece& p = pieces[index];
    if (!p.Cuttable()) return;
    largest.emplace(p.Width() * p.Height(), -index);
    cuttable.push_back(index);
  };
  offer(0);
  while (static_cast<int64_t>(pieces.size()) < workload.records) {
    int64_t index = -1;
    if (rng.Below(2) == 0) {
      while (index < 0) {
        const auto [area, negative_index] = largest.top();
        largest.pop();
        const Piece& p = pieces[-negative_index];
        if (p.Cuttable() && p.Width() * p.Height() == area) index = -negative_index;
      }
    } else {
      while (index < 0) {
        const size_t k = rng.Below(cuttable.size());
        if (pieces[cuttable[k]].Cuttable()) {
          index = cuttable[k];
        } else {
          cuttable[k] = cuttable.back();
          cuttable.pop_back();
        }
      }
    }
    Piece& p = pieces[index];
    const bool across_time = p.Width() >= 2 && (p.Height() < 2 || rng.Below(2) == 0);
    Piece cut = p;
    if (across_time) {
      const int64_t at = p.t0 + 1 + static_cast<int64_t>(rng.Below(p.Width() - 1));
      p.t1 = at;
      cut.t0 = at;
    } else {
      const int64_t at = p.a0 + 1 + static_cast<int64_t>(rng.Below(p.Height() - 1));
      p.a1 = at;
      cut.a0 = at;
    }
    pieces.push_back(cut);
    if (p.Cuttable()) largest.emplace(p.Width() * p.Height(), -index);  // its new area
    offer(static_cast<int64_t>(pieces.size()) - 1);
  }
  GuillotineInstance instance;
  instance.optimum = workload.height * workload.unit;
  instance.records.reserve(pieces.size());
  for (size_t k = 0; k < pieces.size(); ++k) {
    const Piece& p = pieces[k];
    UsageRecord r;
    r.name = absl::StrCat("g", k);
    r.bytes = p.Height() * workload.unit;
    r.first_step = p.t0;
    r.last_step = p.t1 - 1;
    r.offset = p.a0 * workload.unit;
    instance.records.push_back(std::move(r));
  }
  return instance;
}

absl::StatusOr<Graph> BuildGuillotineGraph(const GuillotineWorkload& workload) {
  const GuillotineInstance instance = MakeGuillotineInstance(workload);
  MG_ASSIGN_OR_RETURN(Graph graph, GraphFromRecords(instance.records,
                                                    absl::StrCat("guillotine_", workload.records,
                                                                 "_", workload.seed)));
  MG_RETURN_IF_ERROR(InferShapes(graph, ShapeBindings{}));
  return graph;
}

}  // namespace memonger::graph
