// Symbolic plans: one plan for a box of bindings, bound at many bindings and checked there by
// the independent verifier against the net typed at that binding; the checker's proof refuses
// a plan that is valid at sampled bindings but overlaps at another.
#include "memonger/symbolic/symbolic_plan.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "graph/net_writer.h"
#include "graph/symbolic_shapes.h"
#include "memonger/offsets/offset_problem.h"
#include "memonger/symbolic/symbolic_check.h"
#include "memonger/symbolic/symbolic_planner.h"
#include "memonger/verify_plan.h"
#include "workloads/workload_attention.h"

namespace memonger {
namespace {

using graph::DimExpr;
using graph::Graph;
using graph::SymbolBindings;
using graph::SymbolBox;

SymbolBox Box(const std::vector<std::string>& ranges) {
  SymbolBox box;
  for (const std::string& r : ranges) EXPECT_TRUE(graph::ParseDimRange(r, box).ok()) << r;
  return box;
}

// Random bindings of the box, its corners first.
std::vector<SymbolBindings> RandomBindings(const SymbolBox& box, int count, uint64_t seed) {
  std::vector<SymbolBindings> out{box.Low(), box.High()};
  std::mt19937_64 rng(seed);
  while (static_cast<int>(out.size()) < count) {
    SymbolBindings b;
    for (const graph::SymbolRange& r : box.ranges) {
      b[r.symbol] = std::uniform_int_distribution<int64_t>(r.lo, r.hi)(rng);
    }
    out.push_back(b);
  }
  return out;
}

// The plan bound at `at` passes the verifier on the net typed at `at`, and says what its
// expressions say: buffer sizes are the item sizes, the arena is the formula's value.
void ExpectBindsEverywhere(const SymbolicPlan& plan,
                           const std::function<absl::StatusOr<Graph>(const SymbolBindings&)>& at,
                           int count) {
  std::vector<ArenaFormula> formulas;
  for (int p = 0; p < static_cast<int>(plan.pieces.size()); ++p) {
    absl::StatusOr<ArenaFormula> f = plan.Formula(p);
    ASSERT_TRUE(f.ok()) << f.status();
    formulas.push_back(*f);
  }
  std::vector<int64_t> scratch;
  for (const SymbolBindings& b : RandomBindings(plan.box, count, 11)) {
    std::string where;
    for (const auto& [s, v] : b) where += s + "=" + std::to_string(v) + " ";
    absl::StatusOr<Graph> typed = at(b);
    ASSERT_TRUE(typed.ok()) << typed.status();
    absl::StatusOr<Plan> bound = plan.Bind(b);
    ASSERT_TRUE(bound.ok()) << bound.status();
    absl::Status verified = VerifyPlan(*typed, *bound);
    ASSERT_TRUE(verified.ok()) << where << verified;
    for (size_t i = 0; i < plan.items.size(); ++i) {
      ASSERT_EQ(bound->buffers[i].size, *plan.items[i].bytes.Evaluate(b)) << where;
    }
    absl::StatusOr<SymbolicPlan::Extent> e = plan.Measure(b, scratch);
    ASSERT_TRUE(e.ok());
    EXPECT_EQ(e->arena, bound->arena_bytes) << where;
    EXPECT_EQ(e->lower_bound, bound->lower_bound_bytes) << where;
    const ArenaFormula& f = formulas[*plan.PieceFor(b)];
    if (!f.too_long) {
      int64_t value = 0;
      for (const DimExpr& p : f.polynomials) value = std::max(value, *p.Evaluate(b));
      EXPECT_EQ(value, bound->arena_bytes) << where << f.ToString();
    }
  }
}

graph::AttentionWorkload SmallAttention(bool efficient, bool training) {
  graph::AttentionWorkload w;
  w.dim = 64;
  w.heads = 2;
  w.mlp = 128;
  w.depth = 2;
  w.efficient = efficient;
  w.training = training;
  w.symbolic = true;
  return w;
}

class SymbolicAttention : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(SymbolicAttention, OnePlanForEveryLength) {
  // (Not a structured binding: clang's C++17 cannot capture one in the lambda below.)
  const bool efficient = std::get<0>(GetParam());
  const bool training = std::get<1>(GetParam());
  const SymbolBox box = Box({"n=16..700"});
  auto at = [&](const SymbolBindings& b) -> absl::StatusOr<Graph> {
    graph::AttentionWorkload w = SmallAttention(efficient, training);
    w.n = b.at("n");
    w.batch = b.count("batch") ? b.at("batch") : 1;
    return graph::BuildAttentionGraph(w);
  };
  graph::ShapeBindings fixed;
  fixed.dims["batch"] = 1;
  PlanOptions options;
  options.planner = PlannerKind::kBestFit;
  absl::StatusOr<RangePlan> range =
      PlanRange(at, fixed, box, options, /*upper_bound_fallback=*/false);
  ASSERT_TRUE(range.ok()) << range.status();
  const Graph* reference = &range->reference;
  const SymbolicPlan* plan = &range->plan;
  EXPECT_TRUE(CheckSymbolicPlan(*reference, *plan).ok());
  ExpectBindsEverywhere(*plan, at, 50);
  for (const SymbolicPiece& p : plan->pieces) {
    EXPECT_GE(p.worst_ratio, 1.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, SymbolicAttention,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()));

// Random nets of real ops whose dims are expressions of N (and B): elementwise and broadcast
// adds, in-place ops, MatMul with weights and between activations (N x N products), Transpose,
// Softmax, Concat along the sequence (sums of lengths), Reshape with -1, Flatten and Split.
// The generator tracks every value's dims as expressions; the net is written at one binding
// with its inputs declared in the symbols, as a model file declares them.
class RandomSymbolicNet {
 public:
  RandomSymbolicNet(uint64_t seed, bool batch_symbol) : seed_(seed), batch_(batch_symbol) {}

  absl::StatusOr<Graph> At(const SymbolBindings& b) const {
    std::mt19937_64 rng(seed_);
    graph::NetWriter net("random_symbolic");
    std::vector<std::pair<std::string, std::vector<DimExpr>>> pool;
    auto eval = [&](const std::vector<DimExpr>& dims) {
      std::vector<int64_t> out;
      for (const DimExpr& d : dims) out.push_back(*d.Evaluate(b));
      return out;
    };
    const DimExpr n = DimExpr::Symbol("N");
    const DimExpr lead = batch_ ? DimExpr::Symbol("B") : DimExpr::Constant(2);
    std::vector<std::pair<std::string, std::vector<graph::DeclaredDim>>> declared;
    for (int i = 0; i < 2; ++i) {
      const std::string name = "x" + std::to_string(i);
      std::vector<DimExpr> dims{lead, n, DimExpr::Constant(8 << i)};
      net.Input(name, graph::DataType::kFloat32, eval(dims), graph::Role::kInput);
      declared.push_back({name, {{0, batch_ ? "B" : ""}, {0, "N"}, {8 << i, ""}}});
      if (!batch_) declared.back().second[0] = {2, ""};
      pool.push_back({name, dims});
    }
    int params = 0;
    auto weight = [&](int64_t rows, int64_t cols) {
      const std::string name = "w" + std::to_string(params++);
      net.Input(name, graph::DataType::kFloat32, {rows, cols}, graph::Role::kParam);
      return name;
    };
    const int ops = 8 + static_cast<int>(rng() % 18);
    for (int k = 0; k < ops; ++k) {
      const auto& [in, dims] = pool[rng() % pool.size()];
      const std::string out = "v" + std::to_string(k);
      const size_t rank = dims.size();
      std::vector<DimExpr> out_dims = dims;
      switch (rng() % 10) {
        case 0:
          net.Op("Relu", out, {in}, {out});
          break;
        case 1: {  // in place when the input is an activation, else a fresh value
          const bool inplace = in[0] == 'v';
          net.Op("Sigmoid", out, {in}, {inplace ? in : out});
          if (inplace) continue;
          break;
        }
        case 2: {  // elementwise with a value of the same dims, else broadcast with a weight row
          std::string other;
          for (const auto& [name, d] : pool) {
            if (d == dims && name != in) other = name;
          }
          if (other.empty()) {
            if (!dims.back().IsConstant()) continue;
            other = weight(1, dims.back().ConstantValue());
          }
          net.Op("Add", out, {in, other}, {out});
          break;
        }
        case 3: {
          if (rank < 2 || !dims.back().IsConstant()) continue;
          const int64_t cols = 4 << (rng() % 3);
          net.Op("MatMul", out, {in, weight(dims.back().ConstantValue(), cols)}, {out});
          out_dims.back() = DimExpr::Constant(cols);
          break;
        }
        case 4: {  // a product of two activations: [.., a, c] x [.., c, b]
          std::string other;
          std::vector<DimExpr> od;
          for (const auto& [name, d] : pool) {
            if (d.size() == rank && rank >= 2 && d[rank - 2] == dims[rank - 1] &&
                std::equal(d.begin(), d.end() - 2, dims.begin())) {
              other = name;
              od = d;
            }
          }
          if (other.empty()) continue;
          net.Op("MatMul", out, {in, other}, {out});
          out_dims.back() = od.back();
          break;
        }
        case 5: {
          if (rank < 2) continue;
          std::vector<int64_t> perm;
          for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(i));
          std::swap(perm[rank - 1], perm[rank - 2]);
          net.Op("Transpose", out, {in}, {out}, {graph::Attribute{"perm", perm}});
          std::swap(out_dims[rank - 1], out_dims[rank - 2]);
          break;
        }
        case 6:
          net.Op("Softmax", out, {in}, {out}, {graph::Attribute{"axis", int64_t{-1}}});
          break;
        case 7: {  // along the second-to-last axis, with a value that matches elsewhere
          if (rank < 2) continue;
          std::string other;
          std::vector<DimExpr> od;
          for (const auto& [name, d] : pool) {
            bool match = d.size() == rank;
            for (size_t i = 0; match && i < rank; ++i) match = i == rank - 2 || d[i] == dims[i];
            if (match) {
              other = name;
              od = d;
            }
          }
          net.Op("Concat", out, {in, other}, {out},
                 {graph::Attribute{"axis", static_cast<int64_t>(rank - 2)}});
          out_dims[rank - 2] = *graph::Add(dims[rank - 2], od[rank - 2]);
          break;
        }
        case 8: {  // [a, b, ..., c] -> [a, -1]
          if (rank < 3) continue;
          net.Op("Reshape", out, {in}, {out}, {graph::Attribute{"shape", std::vector<int64_t>{0, -1}}});
          DimExpr rest = DimExpr::Constant(1);
          for (size_t i = 1; i < rank; ++i) rest = *graph::Mul(rest, dims[i]);
          out_dims = {dims[0], rest};
          break;
        }
        case 9: {
          if (!dims.back().IsConstant() || dims.back().ConstantValue() % 2 != 0) continue;
          const std::string second = out + "_b";
          net.Op("Split", out, {in}, {out, second},
                 {graph::Attribute{"axis", static_cast<int64_t>(rank - 1)}});
          out_dims.back() = DimExpr::Constant(dims.back().ConstantValue() / 2);
          pool.push_back({second, out_dims});
          break;
        }
      }
      pool.push_back({out, out_dims});
    }
    net.builder().AddExternalOutput(pool.back().first);
    net.builder().AddExternalOutput(pool[pool.size() / 2].first);
    absl::StatusOr<Graph> g = std::move(net).Finish();
    if (!g.ok()) return g.status();
    for (const auto& [name, dims] : declared) {
      for (graph::ValueId id : g->FindVersions(name)) {
        if (g->value(id).producer == graph::kNone) {
          g->mutable_value(id).declared.dims = graph::DeclaredDims(dims.begin(), dims.end());
        }
      }
    }
    return g;
  }

 private:
  uint64_t seed_;
  bool batch_;
};

// At 50 bindings per net (corners included), the bound plan passes the verifier on the net
// typed there, and its sizes and arena are what the expressions say.
TEST(SymbolicPlan, RandomNetsWithOneOrTwoSymbols) {
  int planned = 0, pieces = 0;
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    const bool two = seed % 3 == 0;
    const SymbolBox box = two ? Box({"N=1..300", "B=1..6"}) : Box({"N=1..400"});
    RandomSymbolicNet net(seed, two);
    auto at = [&](const SymbolBindings& b) { return net.At(b); };
    PlanOptions options;
    options.planner = PlannerKind::kBestFit;
    options.time_limit_seconds = 0.5;
    absl::StatusOr<RangePlan> range =
        PlanRange(at, {}, box, options, /*upper_bound_fallback=*/false);
    ASSERT_TRUE(range.ok()) << "seed " << seed << ": " << range.status();
    const SymbolicPlan* plan = &range->plan;
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    ExpectBindsEverywhere(*plan, at, 50);
    ++planned;
    pieces += static_cast<int>(plan->pieces.size());
  }
  EXPECT_EQ(planned, 24);
  EXPECT_GE(pieces, 24);
}

// A hand-made plan for N = 1..64 without pieces: item 0 (256*N bytes) lives at step 0, item 1
// (4096 bytes) at step 2, item 2 (512 bytes) across all three steps.
SymbolicPlan ThreeItems() {
  SymbolicPlan plan;
  plan.box = Box({"N=1..64"});
  plan.reference = plan.box.High();
  plan.base.alignment = 256;
  plan.base.steps.assign(3, PlanStep{});
  plan.base.buffer_of_value = {0, 1, 2};
  plan.base.offset_of_value = {kNoOffset, kNoOffset, kNoOffset};
  plan.base.lifetime = {{0, 0}, {2, 2}, {0, 2}};
  auto item = [](graph::ValueId root, Lifetime life, const std::string& bytes) {
    SymbolicItem i;
    i.root = root;
    i.lifetime = life;
    i.alignment = 256;
    i.class_bytes = *graph::ParseDimExpr(bytes);
    i.bytes = i.class_bytes;
    return i;
  };
  plan.items = {item(0, {0, 0}, "256*N"), item(1, {2, 2}, "4096"), item(2, {0, 2}, "512")};
  plan.item_of_value = {0, 1, 2};
  return plan;
}

// A plan whose order leaves two conflicting items unordered: valid wherever N <= 16 (the
// first item ends below the constant offset the third sits at), overlapping above. Binding
// at sampled small N cannot tell; the checker's proof refuses it and finds the overlap.
TEST(CheckSymbolicPlan, RefusesAPlanValidOnlyAtTheSampledBindings) {
  SymbolicPlan plan = ThreeItems();
  SymbolicPiece piece;
  piece.box = plan.box;
  piece.order = {0, 1, 2};
  piece.below = {{}, {}, {1}};  // item 2 sits on item 1 only: item 0 is forgotten
  plan.pieces = {piece};
  // At the sampled bindings the bound plan is valid ...
  for (int64_t n : {1, 8, 16}) {
    absl::StatusOr<Plan> bound = plan.Bind({{"N", n}});
    ASSERT_TRUE(bound.ok()) << bound.status();
    OffsetProblem problem;
    problem.num_steps = 3;
    std::vector<int64_t> offsets;
    for (size_t i = 0; i < 3; ++i) {
      problem.items.push_back({plan.items[i].lifetime.first_step, plan.items[i].lifetime.last_step,
                               bound->buffers[i].size, 256});
      offsets.push_back(bound->buffers[i].offset);
    }
    EXPECT_TRUE(CheckOffsetSolution(problem, offsets).ok()) << "N=" << n;
  }
  // ... the proof is not.
  const absl::Status status = CheckSymbolicPlan(Graph(), plan);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("item 0 and item 2"), std::string::npos) << status;
  EXPECT_NE(status.message().find("they overlap at N="), std::string::npos) << status;
  // Ordering the pair mends it.
  plan.pieces[0].below[2] = {0, 1};
  EXPECT_TRUE(CheckSymbolicPlan(Graph(), plan).ok());
}

// Two pieces with different orders: the arena drops where the second begins. The arena for
// every binding is the largest piece's, and the largest fitting value stops at the first one
// over the budget, whatever fits again later.
TEST(SymbolicPlan, ArenaMayDropBetweenPiecesAndTheSearchesKnowIt) {
  SymbolicPlan plan = ThreeItems();
  SymbolicPiece stacked;  // N = 1..10: all three stacked, 256*N + 4608
  stacked.box = Box({"N=1..10"});
  stacked.order = {0, 1, 2};
  stacked.below = {{}, {0}, {1}};
  SymbolicPiece shared;  // N = 11..64: items 0 and 1 share, 2 above both: max(256*N, 4096) + 512
  shared.box = Box({"N=11..64"});
  shared.order = {0, 1, 2};
  shared.below = {{}, {}, {0, 1}};
  plan.pieces = {stacked, shared};
  ASSERT_TRUE(CheckSymbolicPlan(Graph(), plan).ok());
  std::vector<int64_t> scratch;
  EXPECT_EQ(plan.Measure({{"N", 10}}, scratch)->arena, 7168);
  EXPECT_EQ(plan.Measure({{"N", 11}}, scratch)->arena, 4608);
  EXPECT_EQ(*plan.MaxArena(), 256 * 64 + 512);
  auto arena = [&](const SymbolBindings& at) -> absl::StatusOr<int64_t> {
    return plan.Measure(at, scratch)->arena;
  };
  // 256*N + 4608 <= 6000 up to N = 5; N = 11..21 would fit again, but N = 6 does not.
  EXPECT_EQ(*plan.LargestFitting("N", {}, 6000, arena), std::optional<int64_t>(5));
  EXPECT_EQ(*plan.LargestFitting("N", {}, 1 << 20, arena), std::optional<int64_t>(64));
  EXPECT_EQ(*plan.LargestFitting("N", {}, 100, arena), std::nullopt);
  // Pieces must cover the box exactly: a gap, or an overlap, is refused.
  SymbolicPlan gap = plan;
  gap.pieces[1].box = Box({"N=12..64"});
  EXPECT_NE(CheckSymbolicPlan(Graph(), gap).message().find("uncovered"), std::string::npos);
  SymbolicPlan overlap = plan;
  overlap.pieces[1].box = Box({"N=10..64"});
  EXPECT_NE(CheckSymbolicPlan(Graph(), overlap).message().find("overlap"), std::string::npos);
  // Brute force agrees.
  for (int64_t budget : {4800, 6000, 7168, 9000, 16000, 16896}) {
    int64_t want = 0;
    for (int64_t n = 1; n <= 64 && *arena({{"N", n}}) <= budget; ++n) want = n;
    const std::optional<int64_t> got = *plan.LargestFitting("N", {}, budget, arena);
    EXPECT_EQ(got.value_or(0), want) << budget;
  }
}

}  // namespace
}  // namespace memonger
