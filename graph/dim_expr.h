// Dimensions and byte sizes as expressions of named symbols (issue #13's first piece: the
// arithmetic a symbolic plan is written in).
//
//   MG_ASSIGN_OR_RETURN(DimExpr rows, Add(DimExpr::Symbol("N"), DimExpr::Constant(1)));
//   MG_ASSIGN_OR_RETURN(DimExpr scores, Mul(rows, rows));           // N^2 + 2*N + 1
//   MG_ASSIGN_OR_RETURN(int64_t at_5000, scores.Evaluate({{"N", 5000}}));
//   scores.ToString();                                              // "N^2 + 2*N + 1"
//   MG_ASSIGN_OR_RETURN(DimExpr again, ParseDimExpr("N^2 + 2*N + 1"));
//
// An expression is an integer polynomial over *atoms*: a symbol, or one of the non-polynomial
// forms shapes need, cdiv(e, c) (ceil(e / c) for an integer c > 0: strides, padding to a
// multiple), min(a, b) and max(a, b), whose arguments are expressions again. Every non-constant
// term has a non-negative coefficient, and symbols stand for sizes (>= 0), so an expression is
// non-decreasing in every symbol: over a box of bindings its least and greatest values are its
// values at the box's lowest and highest corners (Range). Only the constant term may be
// negative (L - 1), and an atom that may be negative (cdiv(N - 7, 8)) may only stand alone in its
// term; an operation that would give a non-constant term a negative coefficient (a product
// (N - 1) * (N - 1)) or multiply a possibly negative atom by anything but a constant is an
// InvalidArgument: such a size is not monotone, and the caller falls back to its range's upper
// bound.
//
// The form is canonical: terms are kept by monomial (sorted atom keys with exponents), atoms by
// a key that is their printed form (min and max order their arguments), so equal expressions
// compare equal and print alike. Every coefficient operation and every evaluation is checked:
// an overflow of int64 is an error naming the expression, never a wrap.
//
// Grammar (ToString writes it, ParseDimExpr reads it; whitespace between tokens is free):
//   expr    := '-'? term (('+' | '-') term)*      (a leading '-' and '-' apply to constants only)
//   term    := factor ('*' factor)*
//   factor  := primary ('^' INT)?                  (1 <= INT <= 64)
//   primary := INT | SYMBOL | '(' expr ')' | 'cdiv(' expr ',' INT ')'
//            | 'min(' expr ',' expr ')' | 'max(' expr ',' expr ')'
//   SYMBOL  := [A-Za-z_][A-Za-z0-9_]* other than cdiv, min, max;  INT := [0-9]+
// Parsing is linear in the text; nesting is bounded by util::kMaxNestingDepth and the number of
// terms of one expression by kMaxDimExprTerms.
//
// Costs: Add O(t log t), Mul O(t1 t2 log t), Evaluate O(size of the expression) for t terms.
#ifndef MEMONGER_GRAPH_DIM_EXPR_H_
#define MEMONGER_GRAPH_DIM_EXPR_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace memonger::graph {

// The most terms one expression may hold (a product of two sums multiplies their counts).
inline constexpr size_t kMaxDimExprTerms = 4096;
// The most different atoms one term may multiply (a product of that many distinct symbols);
// bounds the cost of parsing a long product (each factor merges the term so far).
inline constexpr size_t kMaxMonomialFactors = 64;

using SymbolBindings = std::map<std::string, int64_t>;

class DimExpr {
 public:
  DimExpr() = default;  // 0
  static DimExpr Constant(int64_t value);
  // REQUIRES: a name the grammar's SYMBOL accepts (IsSymbolName).
  static DimExpr Symbol(const std::string& name);

  // The value at `bindings`; InvalidArgument naming a symbol it lacks, or an overflow.
  absl::StatusOr<int64_t> Evaluate(const SymbolBindings& bindings) const;

  bool IsConstant() const;
  // Whether some binding of its symbols (all >= 0) could make it negative: a negative constant
  // term, or a cdiv, min or max whose arguments could be.
  bool MayBeNegative() const;
  // The constant's value. REQUIRES: IsConstant().
  int64_t ConstantValue() const;
  // The symbols it mentions, sorted.
  std::vector<std::string> Symbols() const;

  // Canonical text in the grammar above ("2*H*N^2 + 3072*N - 1"); `pretty` writes a middle dot
  // for '*' and superscript exponents ("2·H·N² + 3072·N - 1") for people, not for parsing.
  std::string ToString(bool pretty = false) const;

  friend bool operator==(const DimExpr& a, const DimExpr& b) { return a.terms_ == b.terms_; }
  friend bool operator!=(const DimExpr& a, const DimExpr& b) { return !(a == b); }

  // A factor of a monomial: an atom's key and its exponent (>= 1).
  using Factor = std::pair<std::string, int>;
  using Monomial = std::vector<Factor>;  // sorted by key; empty for the constant term
  struct Atom;

 private:
  friend absl::StatusOr<DimExpr> Add(const DimExpr& a, const DimExpr& b);
  friend absl::StatusOr<DimExpr> Mul(const DimExpr& a, const DimExpr& b);
  friend absl::StatusOr<DimExpr> CeilDiv(const DimExpr& a, int64_t divisor);
  friend bool Dominates(const DimExpr& a, const DimExpr& b);
  friend absl::StatusOr<std::pair<DimExpr, DimExpr>> Unrounded(const DimExpr& e);
  friend absl::StatusOr<DimExpr> SubstituteExprs(const DimExpr& e,
                                                 const std::map<std::string, DimExpr>& bindings);
  friend absl::StatusOr<DimExpr> ExactDivide(const DimExpr& a, const DimExpr& b);
  friend DimExpr Min(const DimExpr& a, const DimExpr& b);
  friend DimExpr Max(const DimExpr& a, const DimExpr& b);
  friend DimExpr AtomExpr(std::shared_ptr<const Atom> atom);

  absl::Status CheckMonotone() const;

  std::map<Monomial, int64_t> terms_;  // no zero coefficients
  // The compound atoms (cdiv, min, max) the monomials name, by key; symbols need no entry.
  std::map<std::string, std::shared_ptr<const Atom>> atoms_;
};

// Sum, difference (a - b where b is a constant), product; InvalidArgument on overflow, on a
// negative coefficient of a non-constant term, or beyond kMaxDimExprTerms terms.
absl::StatusOr<DimExpr> Add(const DimExpr& a, const DimExpr& b);
absl::StatusOr<DimExpr> SubtractConstant(const DimExpr& a, int64_t b);
absl::StatusOr<DimExpr> Mul(const DimExpr& a, const DimExpr& b);
// ceil(a / divisor); InvalidArgument unless divisor > 0. Folds to a polynomial when every
// coefficient is a multiple of the divisor (then exact), to a constant when `a` is one.
absl::StatusOr<DimExpr> CeilDiv(const DimExpr& a, int64_t divisor);
// `e` with the symbols `bindings` names replaced by their values (the others kept);
// InvalidArgument on overflow.
absl::StatusOr<DimExpr> Substitute(const DimExpr& e, const SymbolBindings& bindings);
// The same with expressions for symbols (each symbol replaced at once, not repeatedly).
absl::StatusOr<DimExpr> SubstituteExprs(const DimExpr& e,
                                        const std::map<std::string, DimExpr>& bindings);
// `e` with each symbol s of `low` replaced by s + low[s]: e over the box s >= low[s], written
// in symbols that start at 0, where the coefficient tests (Dominates) see more.
absl::StatusOr<DimExpr> ShiftSymbols(const DimExpr& e, const SymbolBindings& low);
// `e` with every rounding up to a multiple, k*d*cdiv(x, d), replaced by k*x: the size before
// alignment, for people ("24*N^2 + 48*N + 24" where the exact form is
// "256*cdiv(24*N^2 + 48*N + 24, 256)"). Each replaced term is within k*d of the exact value.
absl::StatusOr<DimExpr> WithoutRounding(const DimExpr& e);
// Bounds of `e` without its roundings: lower = WithoutRounding(e) <= e <= upper = lower plus
// the most the roundings add. Path sums of aligned sizes (each 256*cdiv(x, 256)) compare by
// their x's: Dominates(a.lower, b.upper) proves a >= b where Dominates(a, b) cannot.
struct RoundingBounds {
  DimExpr lower;
  DimExpr upper;
};
absl::StatusOr<RoundingBounds> BoundsWithoutRounding(const DimExpr& e);
// True when a >= b at every binding (symbols >= 0), by a sufficient test: coefficient by
// coefficient (a false answer proves nothing). O(terms log terms).
bool Dominates(const DimExpr& a, const DimExpr& b);
// a / b when b divides a as polynomials (atoms taken as variables): (64*N + 64) / (2*N + 2)
// is 32. Long division in graded lexicographic order; InvalidArgument when a remainder is
// left, a coefficient does not divide, or the quotient is not monotone (a Reshape's -1 whose
// element count the other dims do not divide symbolically).
absl::StatusOr<DimExpr> ExactDivide(const DimExpr& a, const DimExpr& b);
DimExpr Min(const DimExpr& a, const DimExpr& b);
DimExpr Max(const DimExpr& a, const DimExpr& b);

// The least and greatest values over the box lo <= symbols <= hi (both bindings name every
// symbol of `e`): its values at the corners, as `e` is non-decreasing in every symbol.
// REQUIRES: 0 <= lo[s] <= hi[s] for every symbol s.
absl::StatusOr<std::pair<int64_t, int64_t>> Range(const DimExpr& e, const SymbolBindings& lo,
                                                  const SymbolBindings& hi);

bool IsSymbolName(absl::string_view name);

// Parses the grammar above; InvalidArgument naming the position of the first error.
absl::StatusOr<DimExpr> ParseDimExpr(absl::string_view text);

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_DIM_EXPR_H_
