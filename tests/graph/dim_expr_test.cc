// Size expressions (graph/dim_expr.h): canonical form, folding, printing and parsing, and
// property tests of the arithmetic against direct evaluation of random expression trees, with
// every overflow an error.
#include "graph/dim_expr.h"

#include <cstdint>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memonger::graph {
namespace {

using ::testing::HasSubstr;

}  // namespace

void PrintTo(const DimExpr& e, std::ostream* os) { *os << e.ToString(); }

namespace {

DimExpr Must(absl::StatusOr<DimExpr> e) {
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *std::move(e) : DimExpr();
}

DimExpr P(const std::string& text) { return Must(ParseDimExpr(text)); }

TEST(DimExprTest, CanonicalFormPrintsAndEvaluates) {
  const DimExpr n = DimExpr::Symbol("N");
  const DimExpr rows = Must(Add(n, DimExpr::Constant(1)));
  const DimExpr square = Must(Mul(rows, rows));
  EXPECT_EQ(square.ToString(), "N^2 + 2*N + 1");
  EXPECT_EQ(square.Evaluate({{"N", 5000}}).value(), 5001 * 5001);
  EXPECT_EQ(square, P("(N + 1) * (1 + N)"));
  EXPECT_EQ(P("2*H*N^2 + 3072*N + 17").ToString(/*pretty=*/true), "2·H·N² + 3072·N + 17");
  EXPECT_EQ(P("N - 1").ToString(), "N - 1");
  EXPECT_EQ(P("0").ToString(), "0");
  EXPECT_EQ(P("3 - 5").ToString(), "-2");
  EXPECT_EQ(P("-2 + N"), P("N - 2"));
  EXPECT_EQ(P("max(-3, N)").Evaluate({{"N", 0}}).value(), 0);
  EXPECT_EQ(P("B*N*H + N*B*H"), P("2*B*H*N"));
  EXPECT_THAT(P("B*N^2 + cdiv(N, 8)").Symbols(), ::testing::ElementsAre("B", "N"));
  EXPECT_TRUE(P("4 * 8").IsConstant());
  EXPECT_EQ(P("4 * 8").ConstantValue(), 32);
}

TEST(DimExprTest, NonPolynomialFormsFoldWhereExact) {
  EXPECT_EQ(P("cdiv(2*N + 1, 2)"), P("N + 1"));   // 2N/2 + ceil(1/2)
  EXPECT_EQ(P("cdiv(8*N, 8)"), P("N"));
  EXPECT_EQ(P("cdiv(17, 8)"), P("3"));
  EXPECT_EQ(P("cdiv(N + 1, 2)").ToString(), "cdiv(N + 1, 2)");
  EXPECT_EQ(P("cdiv(N - 7, 8)").Evaluate({{"N", 3}}).value(), 0);  // ceil(-4 / 8)
  EXPECT_EQ(P("cdiv(N - 7, 8)").Evaluate({{"N", 16}}).value(), 2);
  EXPECT_EQ(P("min(N, M)"), P("min(M, N)"));
  EXPECT_EQ(P("max(N, N)"), P("N"));
  EXPECT_EQ(P("min(3, 5)"), P("3"));
  EXPECT_EQ(P("8 * max(N, 64)").Evaluate({{"N", 10}}).value(), 512);
  EXPECT_EQ(P("cdiv(N, 4)^1 * cdiv(N, 4)"), P("cdiv(N,4)*cdiv(N,4)"));
}

TEST(DimExprTest, OverflowIsAnErrorNeverAWrap) {
  EXPECT_FALSE(Add(DimExpr::Constant(INT64_MAX), DimExpr::Constant(1)).ok());
  EXPECT_FALSE(Mul(DimExpr::Constant(INT64_MAX / 2 + 1), DimExpr::Constant(2)).ok());
  EXPECT_FALSE(SubtractConstant(DimExpr::Constant(0), INT64_MIN).ok());
  const absl::StatusOr<int64_t> huge = P("N^3").Evaluate({{"N", 3000000}});
  ASSERT_FALSE(huge.ok());
  EXPECT_THAT(huge.status().message(), HasSubstr("overflows"));
  EXPECT_EQ(P("N^3").Evaluate({{"N", 2000000}}).value(), int64_t{8000000000000000000});
  EXPECT_FALSE(ParseDimExpr("99999999999999999999").ok());
  EXPECT_FALSE(P("N").Evaluate({}).ok());  // unbound symbol
}

TEST(DimExprTest, NegativeCoefficientsAreRefused) {
  const absl::StatusOr<DimExpr> square = Mul(P("N - 1"), P("N - 1"));  // N^2 - 2N + 1
  ASSERT_FALSE(square.ok());
  EXPECT_THAT(square.status().message(), HasSubstr("negative coefficient"));
  EXPECT_FALSE(ParseDimExpr("N - M").ok());  // only constants are subtracted
  // A factor that may be negative makes a product that is not monotone (N * cdiv(N - 17, 8) is
  // -2 at N = 2 and -3 at N = 3); alone it is fine.
  EXPECT_FALSE(ParseDimExpr("N * cdiv(N - 17, 8)").ok());
  EXPECT_FALSE(ParseDimExpr("cdiv(N - 7, 8)^2").ok());
  EXPECT_TRUE(ParseDimExpr("3 * cdiv(N - 7, 8) + N").ok());
  EXPECT_TRUE(ParseDimExpr("N * max(N - 7, 0)").ok());  // max with a non-negative argument
  EXPECT_TRUE(P("max(N - 7, 0)").MayBeNegative() == false);
  EXPECT_TRUE(P("min(N - 7, 0)").MayBeNegative());
}

TEST(DimExprTest, ParseErrorsNameTheOffset) {
  for (const char* bad : {"", "N +", "N * * 2", "(N", "cdiv(N, 0)", "cdiv(N)", "min(N)",
                          "N^0", "N^65", "foo(N)", "N $ 2", "cdiv(N, M)", "3N", "-N", "--3"}) {
    SCOPED_TRACE(bad);
    const absl::StatusOr<DimExpr> e = ParseDimExpr(bad);
    EXPECT_FALSE(e.ok());
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_THAT(ParseDimExpr("N + $").status().message(), HasSubstr("at offset 4"));
  const std::string deep = std::string(100, '(') + "N" + std::string(100, ')');
  EXPECT_THAT(ParseDimExpr(deep).status().message(), HasSubstr("nested too deeply"));
}

// ---- property tests --------------------------------------------------------------------------

// A random expression tree, evaluated directly (in __int128, so that an overflow of int64 is
// seen, not wrapped) and through DimExpr.
struct Tree {
  enum Kind { kConst, kSym, kAdd, kMul, kSub, kCdiv, kMin, kMax } kind = kConst;
  int64_t value = 0;  // kConst, kSub's constant, kCdiv's divisor
  std::string symbol;
  std::vector<std::unique_ptr<Tree>> kids;
};

std::unique_ptr<Tree> RandomTree(std::mt19937_64& rng, int depth) {
  auto t = std::make_unique<Tree>();
  const int pick = depth == 0 ? static_cast<int>(rng() % 2) : static_cast<int>(rng() % 8);
  t->kind = static_cast<Tree::Kind>(pick);
  switch (t->kind) {
    case Tree::kConst: t->value = static_cast<int64_t>(rng() % 50); break;
    case Tree::kSym: t->symbol = rng() % 2 ? "N" : "B"; break;
    case Tree::kSub:
    case Tree::kCdiv:
      t->value = 1 + static_cast<int64_t>(rng() % 9);
      t->kids.push_back(RandomTree(rng, depth - 1));
      break;
    default:
      t->kids.push_back(RandomTree(rng, depth - 1));
      t->kids.push_back(RandomTree(rng, depth - 1));
  }
  return t;
}

__int128 Direct(const Tree& t, const SymbolBindings& b) {
  switch (t.kind) {
    case Tree::kConst: return t.value;
    case Tree::kSym: return b.at(t.symbol);
    case Tree::kAdd: return Direct(*t.kids[0], b) + Direct(*t.kids[1], b);
    case Tree::kMul: return Direct(*t.kids[0], b) * Direct(*t.kids[1], b);
    case Tree::kSub: return Direct(*t.kids[0], b) - t.value;
    case Tree::kCdiv: {
      const __int128 a = Direct(*t.kids[0], b);
      return a / t.value + (a % t.value > 0 ? 1 : 0);
    }
    case Tree::kMin: return std::min(Direct(*t.kids[0], b), Direct(*t.kids[1], b));
    case Tree::kMax: return std::max(Direct(*t.kids[0], b), Direct(*t.kids[1], b));
  }
  return 0;
}

// Through the API; nullopt where it refuses (a negative coefficient: not monotone).
std::optional<DimExpr> Build(const Tree& t) {
  auto kid = [&](int i) { return Build(*t.kids[i]); };
  switch (t.kind) {
    case Tree::kConst: return DimExpr::Constant(t.value);
    case Tree::kSym: return DimExpr::Symbol(t.symbol);
    default: break;
  }
  std::optional<DimExpr> a = kid(0);
  if (!a.has_value()) return std::nullopt;
  absl::StatusOr<DimExpr> r;
  if (t.kind == Tree::kSub) {
    r = SubtractConstant(*a, t.value);
  } else if (t.kind == Tree::kCdiv) {
    r = CeilDiv(*a, t.value);
  } else {
    std::optional<DimExpr> b = kid(1);
    if (!b.has_value()) return std::nullopt;
    if (t.kind == Tree::kAdd) r = Add(*a, *b);
    if (t.kind == Tree::kMul) r = Mul(*a, *b);
    if (t.kind == Tree::kMin) r = Min(*a, *b);
    if (t.kind == Tree::kMax) r = Max(*a, *b);
  }
  if (!r.ok()) {
    EXPECT_THAT(r.status().message(), HasSubstr("negative")) << r.status();
    return std::nullopt;
  }
  return *std::move(r);
}

TEST(DimExprPropertyTest, MatchesDirectEvaluationParsesBackAndIsMonotone) {
  std::mt19937_64 rng(13);
  int built = 0, refused = 0;
  for (int round = 0; round < 2000; ++round) {
    const std::unique_ptr<Tree> tree = RandomTree(rng, 4);
    const std::optional<DimExpr> e = Build(*tree);
    if (!e.has_value()) {
      ++refused;
      continue;
    }
    ++built;
    // Canonical text parses back to the same expression.
    const absl::StatusOr<DimExpr> again = ParseDimExpr(e->ToString());
    ASSERT_TRUE(again.ok()) << e->ToString() << ": " << again.status();
    EXPECT_EQ(*again, *e) << e->ToString() << " vs " << again->ToString();
    // Equal to the direct value at 8 random bindings, within [Range at the box's corners].
    const SymbolBindings lo = {{"B", 0}, {"N", 0}}, hi = {{"B", 40}, {"N", 1000}};
    const absl::StatusOr<std::pair<int64_t, int64_t>> range = Range(*e, lo, hi);
    for (int k = 0; k < 8; ++k) {
      const SymbolBindings b = {{"B", static_cast<int64_t>(rng() % 41)},
                                {"N", static_cast<int64_t>(rng() % 1001)}};
      const __int128 want = Direct(*tree, b);
      const absl::StatusOr<int64_t> got = e->Evaluate(b);
      if (want > INT64_MAX || want < INT64_MIN) {
        EXPECT_FALSE(got.ok()) << e->ToString();  // an overflow is an error
        continue;
      }
      ASSERT_TRUE(got.ok()) << e->ToString() << ": " << got.status();
      EXPECT_EQ(*got, static_cast<int64_t>(want)) << e->ToString();
      if (range.ok()) {
        EXPECT_LE(range->first, *got) << e->ToString();
        EXPECT_GE(range->second, *got) << e->ToString();
      }
    }
  }
  EXPECT_GT(built, 1000);  // most trees are monotone: the properties were exercised
  EXPECT_GT(refused, 0);   // and the refusal was too
}

// The operations symbolic plans build on, against evaluation at random bindings: exact
// division undoes a product, dominance is never wrong where it answers, the bounds without
// rounding enclose the value, shifting and substituting agree with evaluating.
TEST(DimExprPropertyTest, DivisionDominanceBoundsAndShifts) {
  std::mt19937_64 rng(29);
  int divided = 0, dominated = 0;
  for (int round = 0; round < 1500; ++round) {
    const std::unique_ptr<Tree> ta = RandomTree(rng, 3), tb = RandomTree(rng, 2);
    const std::optional<DimExpr> a = Build(*ta), b = Build(*tb);
    if (!a.has_value() || !b.has_value()) continue;
    const absl::StatusOr<DimExpr> product = Mul(*a, *b);
    if (product.ok() && !(*b == DimExpr())) {
      const absl::StatusOr<DimExpr> quotient = ExactDivide(*product, *b);
      ASSERT_TRUE(quotient.ok()) << product->ToString() << " / " << b->ToString() << ": "
                                 << quotient.status();
      EXPECT_EQ(*quotient, *a) << product->ToString() << " / " << b->ToString();
      ++divided;
    }
    const bool a_over_b = Dominates(*a, *b);
    dominated += a_over_b ? 1 : 0;
    const absl::StatusOr<RoundingBounds> bounds = BoundsWithoutRounding(*a);
    const SymbolBindings low = {{"B", static_cast<int64_t>(rng() % 5)},
                                {"N", static_cast<int64_t>(rng() % 50)}};
    const absl::StatusOr<DimExpr> shifted = ShiftSymbols(*a, low);
    const absl::StatusOr<DimExpr> partial = Substitute(*a, {{"N", low.at("N")}});
    for (int k = 0; k < 6; ++k) {
      const SymbolBindings at = {{"B", static_cast<int64_t>(rng() % 41)},
                                 {"N", static_cast<int64_t>(rng() % 1001)}};
      const absl::StatusOr<int64_t> va = a->Evaluate(at), vb = b->Evaluate(at);
      if (!va.ok() || !vb.ok()) continue;
      if (a_over_b) {
        EXPECT_GE(*va, *vb) << a->ToString() << " >= " << b->ToString();
      }
      if (bounds.ok()) {
        const absl::StatusOr<int64_t> lo = bounds->lower.Evaluate(at);
        const absl::StatusOr<int64_t> hi = bounds->upper.Evaluate(at);
        if (lo.ok() && hi.ok()) {
          EXPECT_LE(*lo, *va) << a->ToString() << " lower " << bounds->lower.ToString();
          EXPECT_GE(*hi, *va) << a->ToString() << " upper " << bounds->upper.ToString();
        }
      }
      const SymbolBindings moved = {{"B", at.at("B") + low.at("B")},
                                    {"N", at.at("N") + low.at("N")}};
      const absl::StatusOr<int64_t> v_moved = a->Evaluate(moved);
      if (shifted.ok() && v_moved.ok()) {
        const absl::StatusOr<int64_t> vs = shifted->Evaluate(at);
        if (vs.ok()) {
          EXPECT_EQ(*vs, *v_moved) << a->ToString();
        }
      }
      if (partial.ok()) {
        const absl::StatusOr<int64_t> vp = partial->Evaluate({{"B", at.at("B")}});
        const absl::StatusOr<int64_t> want = a->Evaluate({{"B", at.at("B")}, {"N", low.at("N")}});
        if (vp.ok() && want.ok()) {
          EXPECT_EQ(*vp, *want) << a->ToString();
        }
      }
    }
  }
  EXPECT_GT(divided, 500);
  EXPECT_GT(dominated, 100);
}

// The fuzzer's finding: min(N, -8) folds to -8, whose 21st power is INT64_MIN; its text
// "-9223372036854775808" must read back (its magnitude is no int64), as a lone constant and
// subtracted in a sum.
TEST(DimExprTest, Int64MinReadsBack) {
  const DimExpr e = P("min(N, -8)^21");
  EXPECT_EQ(e.ToString(), "-9223372036854775808");
  EXPECT_EQ(P(e.ToString()), e);
  const DimExpr sum = Must(Add(P("N"), e));
  EXPECT_EQ(sum.ToString(), "N - 9223372036854775808");
  EXPECT_EQ(P(sum.ToString()), sum);
  EXPECT_FALSE(ParseDimExpr("-9223372036854775809").ok());
  EXPECT_FALSE(ParseDimExpr("-9223372036854775808*2").ok());
}

TEST(DimExprTest, ExactDivisionAndRounding) {
  EXPECT_EQ(Must(ExactDivide(P("64*n + 64"), P("2*n + 2"))).ToString(), "32");
  EXPECT_EQ(Must(ExactDivide(P("6*B*N^2 + 6*B*N"), P("3*N"))).ToString(), "2*B*N + 2*B");
  EXPECT_FALSE(ExactDivide(P("N + 1"), P("2")).ok());
  EXPECT_FALSE(ExactDivide(P("N^2 + 1"), P("N + 1")).ok());
  EXPECT_EQ(Must(WithoutRounding(P("256*cdiv(24*N^2 + 48*N + 24, 256) + 512"))).ToString(),
            "24*N^2 + 48*N + 536");
  EXPECT_EQ(Max(P("0"), P("24*N^2")).ToString(), "24*N^2");  // dominated: no atom
  EXPECT_TRUE(Dominates(P("2*N^2 + N + 3"), P("N^2 + 3")));
  EXPECT_FALSE(Dominates(P("N^2"), P("N + 5")));  // true only from N = 3 on
  EXPECT_TRUE(Dominates(Must(ShiftSymbols(P("N^2"), {{"N", 3}})),
                        Must(ShiftSymbols(P("N + 5"), {{"N", 3}}))));
}

}  // namespace
}  // namespace memonger::graph
