#include "workloads/workload_randwire.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/gradient_builder.h"
#include "graph/net_writer.h"
#include "util/splitmix64.h"
#include "util/status_macros.h"

namespace memonger::graph {
namespace {

// The Watts-Strogatz edges of one stage, (lower, higher) pairs, ascending. O(n k (k + log n)):
// a rewired edge's new end is found among the node's non-neighbours by walking its sorted
// neighbours, not by scanning all n nodes (which made nodes=4096,k=256 take minutes).
std::vector<std::pair<int, int>> StageEdges(const RandWireWorkload& w, util::SplitMix64& rng) {
  const int n = static_cast<int>(w.nodes);
  std::set<std::pair<int, int>> edges;
  std::vector<std::set<int>> neighbours(n);
  auto key = [](int a, int b) { return std::make_pair(std::min(a, b), std::max(a, b)); };
  auto add = [&](int a, int b) {
    edges.insert(key(a, b));
    neighbours[a].insert(b);
    neighbours[b].insert(a);
  };
  auto remove = [&](int a, int b) {
    edges.erase(key(a, b));
    neighbours[a].erase(b);
    neighbours[b].erase(a);
  };
  for (int i = 0; i < n; ++i) {
    for (int j = 1; j <= w.k / 2; ++j) add(i, (i + j) % n);
  }
  // Rewire in a fixed order (node, then neighbour offset) so a seed gives one graph: the new end
  // is the r-th (ascending) node that is neither i nor a neighbour of i, r uniform.
  for (int i = 0; i < n; ++i) {
    for (int j = 1; j <= w.k / 2; ++j) {
      const int other = (i + j) % n;
      if (!rng.Percent(w.p) || edges.count(key(i, other)) == 0) continue;
      const int64_t free = n - 1 - static_cast<int64_t>(neighbours[i].size());
      if (free <= 0) continue;
      int64_t r = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(free)));
      // Walk the excluded nodes (i and its neighbours, ascending); the gaps between them hold
      // the free nodes in order.
      int t = 0;
      auto skip = [&](int excluded) {
        // Free nodes in [t, excluded): take the r-th if it is there.
        if (r < excluded - t) return true;
        r -= excluded - t;
        t = excluded + 1;
        return false;
      };
      bool found = false;
      bool i_done = false;
      for (int nb : neighbours[i]) {
        if (!i_done && i < nb) {
          i_done = true;
          if ((found = skip(i))) break;
        }
        if ((found = skip(nb))) break;
      }
      if (!found && !i_done) found = skip(i);
      const int target = static_cast<int>(t + r);
      remove(i, other);
      add(i, target);
    }
  }
  return {edges.begin(), edges.end()};
}

}  // namespace

absl::StatusOr<RandWireWorkload> ParseRandWireWorkload(const WorkloadSpec& spec) {
  WorkloadParams params(spec, WorkloadKeys("randwire"));
  RandWireWorkload w;
  MG_ASSIGN_OR_RETURN(w.nodes, params.Int("nodes", w.nodes, 3, 4096));
  MG_ASSIGN_OR_RETURN(w.k, params.Int("k", w.k, 2, 4094));
  MG_ASSIGN_OR_RETURN(w.p, params.Int("p", w.p, 0, 100));
  MG_ASSIGN_OR_RETURN(w.stages, params.Int("stages", w.stages, 1, 8));
  MG_ASSIGN_OR_RETURN(int64_t seed, params.Int("seed", static_cast<int64_t>(w.seed), 0));
  w.seed = static_cast<uint64_t>(seed);
  MG_ASSIGN_OR_RETURN(w.batch, params.Int("batch", w.batch, 1, int64_t{1} << 20));
  MG_ASSIGN_OR_RETURN(w.width, params.Int("width", w.width, 1, int64_t{1} << 16));
  MG_ASSIGN_OR_RETURN(w.dtype, params.FloatType("dtype", "fp32"));
  MG_ASSIGN_OR_RETURN(w.training, params.Training());
  MG_RETURN_IF_ERROR(params.Finish());
  if (w.k % 2 != 0 || w.k >= w.nodes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "randwire workload: k=", w.k, " must be even and below nodes=", w.nodes));
  }
  // Edges per stage: nodes * k / 2. 2^19 (nodes=4096, k=256) plans in 7 s, 18 s with 8 stages;
  // nodes=4096, k=4094 (8.4 million edges a stage) ran for minutes.
  if (w.nodes * w.k / 2 > (int64_t{1} << 19)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "randwire workload: nodes=", w.nodes, ", k=", w.k, " make ", w.nodes * w.k / 2,
        " edges a stage, more than 524288 (nodes * k / 2); lower k or nodes"));
  }
  return w;
}

absl::StatusOr<Graph> BuildRandWireGraph(const RandWireWorkload& w) {
  util::SplitMix64 rng(w.seed);
  NetWriter net(absl::StrCat("randwire_", w.stages, "x", w.nodes, "_k", w.k, "_p", w.p, "_s",
                             w.seed));
  net.Input("data", w.dtype, {w.batch, w.width}, Role::kInput);
  std::string stage_input = "data";
  int64_t in_width = w.width;
  for (int64_t s = 0; s < w.stages; ++s) {
    const int64_t width = w.width << s;
    const std::string prefix = absl::StrCat("s", s, "_");
    if (s > 0) {
      // The transition: an FC to the stage's width.
      const std::string t = prefix + "in";
      net.Input(t + "_w", w.dtype, {width, in_width}, Role::kParam);
      net.Input(t + "_b", w.dtype, {width}, Role::kParam);
      net.Op("FC", t, {stage_input, t + "_w", t + "_b"}, {t});
      stage_input = t;
    }
    const int n = static_cast<int>(w.nodes);
    std::vector<std::vector<int>> inputs(n);
    std::vector<bool> read(n, false);
    for (const auto& [from, to] : StageEdges(w, rng)) {
      inputs[to].push_back(from);
      read[from] = true;
    }
    auto node_out = [&](int i) { return absl::StrCat(prefix, "n", i); };
    for (int i = 0; i < n; ++i) {
      const std::string name = node_out(i);
      std::string x = stage_input;
      if (inputs[i].size() == 1) x = node_out(inputs[i][0]);
      if (inputs[i].size() > 1) {
        std::vector<std::string> summed;
        for (int from : inputs[i]) summed.push_back(node_out(from));
        x = name + "_sum";
        net.Op("Sum", x, std::move(summed), {x});
      }
      const std::string relu = name + "_relu";
      net.Op("Relu", relu, {x}, {relu});
      const int64_t fan_in = inputs[i].empty() ? (s > 0 ? width : in_width) : width;
      net.Input(name + "_w", w.dtype, {width, fan_in}, Role::kParam);
      net.Input(name + "_b", w.dtype, {width}, Role::kParam);
      net.Op("FC", name, {relu, name + "_w", name + "_b"}, {name});
    }
    std::vector<std::string> ends;
    for (int i = 0; i < n; ++i) {
      if (!read[i]) ends.push_back(node_out(i));
    }
    std::string out = ends.front();
    if (ends.size() > 1) {
      out = prefix + "out";
      net.Op("Sum", out, std::move(ends), {out});
    }
    stage_input = out;
    in_width = width;
  }
  net.Op("AveragedLoss", "loss", {stage_input}, {"loss"});
  net.builder().AddExternalOutput("loss");
  net.builder().AddLoss("loss");
  MG_ASSIGN_OR_RETURN(Graph graph, std::move(net).Finish());
  if (w.training) return AddGradientOps(graph, {"loss"});
  return graph;
}

}  // namespace memonger::graph
