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

// The Watts-Strogatz edges of one stage, (lower, higher) pairs, ascending.
std::vector<std::pair<int, int>> StageEdges(const RandWireWorkload& w, util::SplitMix64& rng) {
  const int n = static_cast<int>(w.nodes);
  std::set<std::pair<int, int>> edges;
  auto key = [](int a, int b) { return std::make_pair(std::min(a, b), std::max(a, b)); };
  for (int i = 0; i < n; ++i) {
    for (int j = 1; j <= w.k / 2; ++j) edges.insert(key(i, (i + j) % n));
  }
  // Rewire in a fixed order (node, then neighbour offset) so a seed gives one graph.
  for (int i = 0; i < n; ++i) {
    for (int j = 1; j <= w.k / 2; ++j) {
      const auto edge = key(i, (i + j) % n);
      if (!rng.Percent(w.p) || edges.count(edge) == 0) continue;
      std::vector<int> free;
      for (int t = 0; t < n; ++t) {
        if (t != i && edges.count(key(i, t)) == 0) free.push_back(t);
      }
      if (free.empty()) continue;
      edges.erase(edge);
      edges.insert(key(i, free[rng.Below(free.size())]));
    }
  }
  return {edges.begin(), edges.end()};
}

}  // namespace

absl::StatusOr<RandWireWorkload> ParseRandWireWorkload(const WorkloadSpec& spec) {
  WorkloadParams params(spec, {"nodes", "k", "p", "stages", "seed", "batch", "width", "dtype",
                               "mode"});
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
