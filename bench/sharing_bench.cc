// memonger-dp (and memonger-greedy) against exact-sharing on memonger's own benchmark shape:
// random values live 1-6 steps with sizes 1-100 (reference §7), fixed seeds, and on the
// 5-value counterexample. Counters: cost (sum of buffer sizes), cost / exact optimum,
// proven (exact-sharing finished), dp_deadline (memonger-dp hit its budget: no cost).
//
//   build-dir/bench/sharing_bench --benchmark_counters_tabular=true
#include <cstdint>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "memonger/sharing/exact_sharing.h"
#include "memonger/sharing/interference.h"
#include "util/check.h"

namespace memonger {
namespace {

constexpr double kDpTimeLimitSeconds = 20;
constexpr double kExactTimeLimitSeconds = 20;

// n values on n steps: starts uniform in [0, n), live 1-6 steps, sizes 1-100.
std::vector<SharingItem> RandomValues(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<SharingItem> items;
  for (int i = 0; i < n; ++i) {
    SharingItem item;
    item.root = i;
    item.lifetime.first_step = static_cast<int>(rng() % n);
    item.lifetime.last_step = item.lifetime.first_step + static_cast<int>(rng() % 6);
    item.bytes = 1 + static_cast<int64_t>(rng() % 100);
    items.push_back(item);
  }
  return items;
}

std::vector<SharingItem> Counterexample() {
  const int spans[5][3] = {{0, 1, 7}, {1, 3, 5}, {2, 3, 5}, {3, 5, 6}, {4, 5, 5}};
  std::vector<SharingItem> items;
  for (int i = 0; i < 5; ++i) {
    SharingItem item;
    item.root = i;
    item.lifetime = {spans[i][0], spans[i][1]};
    item.bytes = spans[i][2];
    items.push_back(item);
  }
  return items;
}

// n == 0: the counterexample.
std::vector<SharingItem> Problem(const benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  return n == 0 ? Counterexample() : RandomValues(n, static_cast<uint32_t>(state.range(1)));
}

int64_t GroupsCost(const std::vector<SharingItem>& items, const SharingGroups& groups) {
  int64_t cost = 0;
  for (const auto& group : groups) {
    int64_t largest = 0;
    for (graph::ValueId root : group) largest = std::max(largest, items[root].bytes);
    cost += largest;
  }
  return cost;
}

int64_t ExactCost(const std::vector<SharingItem>& items) {
  absl::StatusOr<ExactSharingResult> r = PlanExactSharing(items, kExactTimeLimitSeconds);
  MG_CHECK(r.ok());
  return r->cost;
}

void BM_ExactSharing(benchmark::State& state) {
  const std::vector<SharingItem> items = Problem(state);
  ExactSharingResult result;
  for (auto _ : state) {
    absl::StatusOr<ExactSharingResult> r = PlanExactSharing(items, kExactTimeLimitSeconds);
    MG_CHECK(r.ok());
    result = *std::move(r);
    benchmark::DoNotOptimize(result);
  }
  state.counters["cost"] = static_cast<double>(result.cost);
  state.counters["vs_exact"] = 1.0;
  state.counters["proven"] = result.proven_optimal ? 1 : 0;
  state.counters["lower_bound"] = static_cast<double>(result.lower_bound);
  state.counters["nodes"] = static_cast<double>(result.nodes);
}

void BM_MemongerDp(benchmark::State& state) {
  const std::vector<SharingItem> items = Problem(state);
  const int64_t exact = ExactCost(items);
  DpLimits limits;
  limits.time_limit_seconds = kDpTimeLimitSeconds;
  int64_t cost = -1;
  bool deadline = false;
  for (auto _ : state) {
    absl::StatusOr<SharingGroups> groups =
        AssignMemongerChains(items, /*dynamic_programming=*/true, limits);
    if (!groups.ok()) {
      MG_CHECK(groups.status().code() == absl::StatusCode::kDeadlineExceeded);
      deadline = true;
      continue;
    }
    cost = GroupsCost(items, *groups);
  }
  state.counters["dp_deadline"] = deadline ? 1 : 0;
  if (cost >= 0) {
    state.counters["cost"] = static_cast<double>(cost);
    state.counters["vs_exact"] = static_cast<double>(cost) / static_cast<double>(exact);
  }
}

void BM_MemongerGreedy(benchmark::State& state) {
  const std::vector<SharingItem> items = Problem(state);
  const int64_t exact = ExactCost(items);
  int64_t cost = 0;
  for (auto _ : state) {
    absl::StatusOr<SharingGroups> groups =
        AssignMemongerChains(items, /*dynamic_programming=*/false);
    MG_CHECK(groups.ok());
    cost = GroupsCost(items, *groups);
  }
  state.counters["cost"] = static_cast<double>(cost);
  state.counters["vs_exact"] = static_cast<double>(cost) / static_cast<double>(exact);
}

// {values, seed}; {0, 0} is the counterexample.
void Sizes(benchmark::internal::Benchmark* b) {
  b->Args({0, 0});
  for (int n : {20, 40, 60}) {
    for (int seed : {1, 2, 3}) b->Args({n, seed});
  }
  b->ArgNames({"values", "seed"})->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_MemongerGreedy)->Apply(Sizes);
BENCHMARK(BM_MemongerDp)->Apply(Sizes)->Iterations(1);
BENCHMARK(BM_ExactSharing)->Apply(Sizes);

}  // namespace
}  // namespace memonger

BENCHMARK_MAIN();
