#include "graph/dim_expr.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "util/checked_math.h"
#include "util/limits.h"
#include "util/status_macros.h"

namespace memonger::graph {

// A compound atom: cdiv(args[0], divisor), min(args[0], args[1]) or max(args[0], args[1]).
struct DimExpr::Atom {
  enum class Kind { kCeilDiv, kMin, kMax };
  Kind kind = Kind::kCeilDiv;
  std::vector<DimExpr> args;
  int64_t divisor = 1;
};

namespace {

constexpr int kMaxExponent = 64;

using Monomial = DimExpr::Monomial;

int Degree(const Monomial& m) {
  int d = 0;
  for (const auto& [key, exponent] : m) d += exponent;
  return d;
}

absl::Status Overflow(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("size expression overflows int64: ", what));
}

std::optional<int64_t> CheckedPow(int64_t base, int exponent) {
  int64_t value = 1;
  for (int i = 0; i < exponent; ++i) {
    std::optional<int64_t> next = util::CheckedMul(value, base);
    if (!next.has_value()) return std::nullopt;
    value = *next;
  }
  return value;
}

// ceil(a / c) for c > 0, for either sign of a (C++ division truncates toward zero).
int64_t CeilDivide(int64_t a, int64_t c) { return a / c + (a % c > 0 ? 1 : 0); }

std::string Superscript(int n) {
  static const char* const kDigits[] = {"⁰", "¹", "²", "³", "⁴", "⁵", "⁶", "⁷", "⁸", "⁹"};
  std::string digits = absl::StrCat(n), out;
  for (char c : digits) out += kDigits[c - '0'];
  return out;
}

}  // namespace

DimExpr AtomExpr(std::shared_ptr<const DimExpr::Atom> atom);

namespace {

std::string AtomText(const DimExpr::Atom& atom, bool pretty) {
  switch (atom.kind) {
    case DimExpr::Atom::Kind::kCeilDiv:
      return absl::StrCat("cdiv(", atom.args[0].ToString(pretty), ", ", atom.divisor, ")");
    case DimExpr::Atom::Kind::kMin:
      return absl::StrCat("min(", atom.args[0].ToString(pretty), ", ", atom.args[1].ToString(pretty),
                          ")");
    case DimExpr::Atom::Kind::kMax:
      return absl::StrCat("max(", atom.args[0].ToString(pretty), ", ", atom.args[1].ToString(pretty),
                          ")");
  }
  return "";
}

}  // namespace

DimExpr DimExpr::Constant(int64_t value) {
  DimExpr e;
  if (value != 0) e.terms_[{}] = value;
  return e;
}

DimExpr DimExpr::Symbol(const std::string& name) {
  DimExpr e;
  e.terms_[{{name, 1}}] = 1;
  return e;
}

DimExpr AtomExpr(std::shared_ptr<const DimExpr::Atom> atom) {
  DimExpr e;
  const std::string key = AtomText(*atom, /*pretty=*/false);
  e.terms_[{{key, 1}}] = 1;
  e.atoms_[key] = std::move(atom);
  return e;
}

namespace {

// cdiv and min may be negative where an argument may; max only where both may.
bool AtomMayBeNegative(const DimExpr::Atom& a) {
  if (a.kind == DimExpr::Atom::Kind::kMax) {
    return a.args[0].MayBeNegative() && a.args[1].MayBeNegative();
  }
  return std::any_of(a.args.begin(), a.args.end(),
                     [](const DimExpr& e) { return e.MayBeNegative(); });
}

}  // namespace

bool DimExpr::MayBeNegative() const {
  for (const auto& [monomial, coefficient] : terms_) {
    if (coefficient < 0) return true;
    for (const auto& [key, exponent] : monomial) {
      auto atom = atoms_.find(key);  // a symbol (no entry) is >= 0
      if (atom != atoms_.end() && AtomMayBeNegative(*atom->second)) return true;
    }
  }
  return false;
}

bool DimExpr::IsConstant() const {
  return terms_.empty() || (terms_.size() == 1 && terms_.begin()->first.empty());
}

int64_t DimExpr::ConstantValue() const { return terms_.empty() ? 0 : terms_.begin()->second; }

std::vector<std::string> DimExpr::Symbols() const {
  std::vector<std::string> out;
  for (const auto& [monomial, coefficient] : terms_) {
    for (const auto& [key, exponent] : monomial) {
      auto atom = atoms_.find(key);
      if (atom == atoms_.end()) {
        out.push_back(key);
        continue;
      }
      for (const DimExpr& arg : atom->second->args) {
        const std::vector<std::string> inner = arg.Symbols();
        out.insert(out.end(), inner.begin(), inner.end());
      }
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

absl::StatusOr<int64_t> DimExpr::Evaluate(const SymbolBindings& bindings) const {
  int64_t total = 0;
  for (const auto& [monomial, coefficient] : terms_) {
    int64_t term = coefficient;
    for (const auto& [key, exponent] : monomial) {
      int64_t base = 0;
      if (auto atom = atoms_.find(key); atom != atoms_.end()) {
        const Atom& a = *atom->second;
        MG_ASSIGN_OR_RETURN(const int64_t first, a.args[0].Evaluate(bindings));
        if (a.kind == Atom::Kind::kCeilDiv) {
          base = CeilDivide(first, a.divisor);
        } else {
          MG_ASSIGN_OR_RETURN(const int64_t second, a.args[1].Evaluate(bindings));
          base = a.kind == Atom::Kind::kMin ? std::min(first, second) : std::max(first, second);
        }
      } else if (auto bound = bindings.find(key); bound != bindings.end()) {
        base = bound->second;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("size expression ", ToString(), ": symbol ", key, " is not bound"));
      }
      const std::optional<int64_t> power = CheckedPow(base, exponent);
      const std::optional<int64_t> next =
          power.has_value() ? util::CheckedMul(term, *power) : std::nullopt;
      if (!next.has_value()) return Overflow(ToString());
      term = *next;
    }
    const std::optional<int64_t> sum = util::CheckedAdd(total, term);
    if (!sum.has_value()) return Overflow(ToString());
    total = *sum;
  }
  return total;
}

std::string DimExpr::ToString(bool pretty) const {
  if (terms_.empty()) return "0";
  std::vector<std::pair<const Monomial*, int64_t>> ordered;
  for (const auto& [monomial, coefficient] : terms_) ordered.emplace_back(&monomial, coefficient);
  std::stable_sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) {
    return Degree(*a.first) > Degree(*b.first);
  });
  const std::string times = pretty ? "·" : "*";
  std::string out;
  for (size_t t = 0; t < ordered.size(); ++t) {
    const Monomial& monomial = *ordered[t].first;
    int64_t coefficient = ordered[t].second;
    if (t > 0) {
      absl::StrAppend(&out, coefficient < 0 ? " - " : " + ");
    } else if (coefficient < 0) {
      out += "-";
    }
    // The magnitude, printed without negating (INT64_MIN has no positive twin).
    std::string magnitude = absl::StrCat(coefficient);
    if (coefficient < 0) magnitude.erase(0, 1);
    std::vector<std::string> factors;
    if (monomial.empty() || magnitude != "1") factors.push_back(magnitude);
    for (const auto& [key, exponent] : monomial) {
      auto atom = atoms_.find(key);
      std::string text = atom == atoms_.end() ? key : AtomText(*atom->second, pretty);
      if (exponent > 1) {
        absl::StrAppend(&text, pretty ? Superscript(exponent) : absl::StrCat("^", exponent));
      }
      factors.push_back(std::move(text));
    }
    absl::StrAppend(&out, absl::StrJoin(factors, times));
  }
  return out;
}

absl::Status DimExpr::CheckMonotone() const {
  for (const auto& [monomial, coefficient] : terms_) {
    if (!monomial.empty() && coefficient < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "size expression ", ToString(), " has a negative coefficient: it is not "
          "non-decreasing in its symbols"));
    }
  }
  if (terms_.size() > kMaxDimExprTerms) {
    return absl::InvalidArgumentError(absl::StrCat("size expression has ", terms_.size(),
                                                   " terms, more than ", kMaxDimExprTerms));
  }
  return absl::OkStatus();
}

absl::StatusOr<DimExpr> Add(const DimExpr& a, const DimExpr& b) {
  DimExpr sum = a;
  sum.atoms_.insert(b.atoms_.begin(), b.atoms_.end());
  for (const auto& [monomial, coefficient] : b.terms_) {
    int64_t& c = sum.terms_[monomial];
    const std::optional<int64_t> next = util::CheckedAdd(c, coefficient);
    if (!next.has_value()) return Overflow(absl::StrCat(a.ToString(), " + ", b.ToString()));
    c = *next;
    if (c == 0) sum.terms_.erase(monomial);
  }
  MG_RETURN_IF_ERROR(sum.CheckMonotone());
  return sum;
}

absl::StatusOr<DimExpr> SubtractConstant(const DimExpr& a, int64_t b) {
  if (b == INT64_MIN) return Overflow(absl::StrCat(a.ToString(), " - ", b));
  return Add(a, DimExpr::Constant(-b));
}

absl::StatusOr<DimExpr> Mul(const DimExpr& a, const DimExpr& b) {
  if (a.terms_.size() * b.terms_.size() > kMaxDimExprTerms) {
    return absl::InvalidArgumentError(absl::StrCat(
        "size expression (", a.ToString(), ") * (", b.ToString(), ") has too many terms"));
  }
  DimExpr product;
  product.atoms_ = a.atoms_;
  product.atoms_.insert(b.atoms_.begin(), b.atoms_.end());
  for (const auto& [ma, ca] : a.terms_) {
    for (const auto& [mb, cb] : b.terms_) {
      // Merge the sorted factor lists, adding exponents.
      Monomial m;
      size_t i = 0, j = 0;
      while (i < ma.size() || j < mb.size()) {
        if (j == mb.size() || (i < ma.size() && ma[i].first < mb[j].first)) {
          m.push_back(ma[i++]);
        } else if (i == ma.size() || mb[j].first < ma[i].first) {
          m.push_back(mb[j++]);
        } else {
          m.emplace_back(ma[i].first, ma[i].second + mb[j].second);
          ++i;
          ++j;
        }
        if (m.back().second > kMaxExponent) {
          return absl::InvalidArgumentError(absl::StrCat(
              "size expression (", a.ToString(), ") * (", b.ToString(), "): an exponent above ",
              kMaxExponent));
        }
      }
      if (m.size() > kMaxMonomialFactors) {
        return absl::InvalidArgumentError(absl::StrCat(
            "size expression: a product of more than ", kMaxMonomialFactors,
            " different symbols or forms"));
      }
      // A product of non-negative factors is non-decreasing; one with a factor that may be
      // negative (N * cdiv(N - 7, 8) at N = 1) is not.
      if (m.size() > 1 || (m.size() == 1 && m[0].second > 1)) {
        for (const auto& [key, exponent] : m) {
          auto atom = product.atoms_.find(key);
          if (atom != product.atoms_.end() && AtomMayBeNegative(*atom->second)) {
            return absl::InvalidArgumentError(absl::StrCat(
                "size expression (", a.ToString(), ") * (", b.ToString(), "): ", key,
                " may be negative, so the product is not non-decreasing in its symbols"));
          }
        }
      }
      const std::optional<int64_t> c = util::CheckedMul(ca, cb);
      const std::optional<int64_t> sum =
          c.has_value() ? util::CheckedAdd(product.terms_[m], *c) : std::nullopt;
      if (!sum.has_value()) {
        return Overflow(absl::StrCat("(", a.ToString(), ") * (", b.ToString(), ")"));
      }
      if (*sum == 0) {
        product.terms_.erase(m);
      } else {
        product.terms_[m] = *sum;
      }
    }
  }
  MG_RETURN_IF_ERROR(product.CheckMonotone());
  return product;
}

absl::StatusOr<DimExpr> CeilDiv(const DimExpr& a, int64_t divisor) {
  if (divisor <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cdiv(", a.ToString(), ", ", divisor, "): the divisor must be positive"));
  }
  if (divisor == 1) return a;
  // Non-constant coefficients all multiples of the divisor: cdiv(P + k, c) = P / c + cdiv(k, c).
  bool exact = true;
  for (const auto& [monomial, coefficient] : a.terms_) {
    exact = exact && (monomial.empty() || coefficient % divisor == 0);
  }
  if (exact) {
    DimExpr folded = a;
    for (auto& [monomial, coefficient] : folded.terms_) {
      coefficient = monomial.empty() ? CeilDivide(coefficient, divisor) : coefficient / divisor;
    }
    if (auto constant = folded.terms_.find({}); constant != folded.terms_.end() &&
                                                constant->second == 0) {
      folded.terms_.erase(constant);
    }
    return folded;
  }
  auto atom = std::make_shared<DimExpr::Atom>();
  atom->kind = DimExpr::Atom::Kind::kCeilDiv;
  atom->args = {a};
  atom->divisor = divisor;
  return AtomExpr(std::move(atom));
}

absl::StatusOr<DimExpr> SubstituteExprs(const DimExpr& e,
                                        const std::map<std::string, DimExpr>& bindings) {
  DimExpr sum;
  for (const auto& [monomial, coefficient] : e.terms_) {
    DimExpr term = DimExpr::Constant(coefficient);
    for (const auto& [key, exponent] : monomial) {
      DimExpr factor;
      auto atom = e.atoms_.find(key);
      if (atom == e.atoms_.end()) {
        auto bound = bindings.find(key);
        factor = bound == bindings.end() ? DimExpr::Symbol(key) : bound->second;
      } else {
        const DimExpr::Atom& a = *atom->second;
        std::vector<DimExpr> args;
        for (const DimExpr& arg : a.args) {
          MG_ASSIGN_OR_RETURN(DimExpr substituted, SubstituteExprs(arg, bindings));
          args.push_back(std::move(substituted));
        }
        switch (a.kind) {
          case DimExpr::Atom::Kind::kCeilDiv: {
            MG_ASSIGN_OR_RETURN(factor, CeilDiv(args[0], a.divisor));
            break;
          }
          case DimExpr::Atom::Kind::kMin: factor = Min(args[0], args[1]); break;
          case DimExpr::Atom::Kind::kMax: factor = Max(args[0], args[1]); break;
        }
      }
      for (int i = 0; i < exponent; ++i) {
        MG_ASSIGN_OR_RETURN(term, Mul(term, factor));
      }
    }
    MG_ASSIGN_OR_RETURN(sum, Add(sum, term));
  }
  return sum;
}

absl::StatusOr<DimExpr> Substitute(const DimExpr& e, const SymbolBindings& bindings) {
  std::map<std::string, DimExpr> constants;
  for (const auto& [symbol, value] : bindings) constants[symbol] = DimExpr::Constant(value);
  return SubstituteExprs(e, constants);
}

absl::StatusOr<DimExpr> ShiftSymbols(const DimExpr& e, const SymbolBindings& low) {
  std::map<std::string, DimExpr> shifted;
  for (const auto& [symbol, value] : low) {
    MG_ASSIGN_OR_RETURN(shifted[symbol], Add(DimExpr::Symbol(symbol), DimExpr::Constant(value)));
  }
  return SubstituteExprs(e, shifted);
}

// WithoutRounding(e) = W, and S >= 0 with W <= e <= W + S at every binding (a friend of
// DimExpr, not declared for callers).
absl::StatusOr<std::pair<DimExpr, DimExpr>> Unrounded(const DimExpr& e) {
  DimExpr lower, slack;
  for (const auto& [monomial, coefficient] : e.terms_) {
    // c * cdiv(x, d) * rest, with d | c and rest a product of symbols (>= 0), lies in
    // [(c / d) * x * rest, (c / d) * x * rest + c * rest].
    const std::shared_ptr<const DimExpr::Atom>* rounding = nullptr;
    bool only_symbols = true;
    for (const auto& [key, exponent] : monomial) {
      auto atom = e.atoms_.find(key);
      if (atom == e.atoms_.end()) continue;
      const DimExpr::Atom& a = *atom->second;
      if (rounding == nullptr && exponent == 1 && a.kind == DimExpr::Atom::Kind::kCeilDiv &&
          coefficient > 0 && coefficient % a.divisor == 0) {
        rounding = &atom->second;
      } else {
        only_symbols = false;
      }
    }
    DimExpr term;
    term.terms_[monomial] = coefficient;
    for (const auto& [key, exponent] : monomial) {
      if (auto atom = e.atoms_.find(key); atom != e.atoms_.end()) term.atoms_.insert(*atom);
    }
    if (rounding == nullptr || !only_symbols) {
      MG_ASSIGN_OR_RETURN(lower, Add(lower, term));
      continue;
    }
    DimExpr rest = DimExpr::Constant(1);
    for (const auto& [key, exponent] : monomial) {
      if (e.atoms_.count(key) != 0) continue;
      for (int i = 0; i < exponent; ++i) {
        MG_ASSIGN_OR_RETURN(rest, Mul(rest, DimExpr::Symbol(key)));
      }
    }
    MG_ASSIGN_OR_RETURN(auto inner, Unrounded((*rounding)->args[0]));
    MG_ASSIGN_OR_RETURN(DimExpr scale, Mul(rest, DimExpr::Constant(coefficient / (*rounding)->divisor)));
    MG_ASSIGN_OR_RETURN(DimExpr low, Mul(scale, inner.first));
    MG_ASSIGN_OR_RETURN(DimExpr inner_slack, Mul(scale, inner.second));
    MG_ASSIGN_OR_RETURN(DimExpr own_slack, Mul(rest, DimExpr::Constant(coefficient)));
    MG_ASSIGN_OR_RETURN(lower, Add(lower, low));
    MG_ASSIGN_OR_RETURN(slack, Add(slack, inner_slack));
    MG_ASSIGN_OR_RETURN(slack, Add(slack, own_slack));
  }
  return std::make_pair(lower, slack);
}

absl::StatusOr<DimExpr> WithoutRounding(const DimExpr& e) {
  MG_ASSIGN_OR_RETURN(auto unrounded, Unrounded(e));
  return unrounded.first;
}

absl::StatusOr<RoundingBounds> BoundsWithoutRounding(const DimExpr& e) {
  MG_ASSIGN_OR_RETURN(auto unrounded, Unrounded(e));
  RoundingBounds bounds;
  bounds.lower = unrounded.first;
  MG_ASSIGN_OR_RETURN(bounds.upper, Add(unrounded.first, unrounded.second));
  return bounds;
}

bool Dominates(const DimExpr& a, const DimExpr& b) {
  // a - b >= 0 everywhere when every monomial's coefficient in a is at least its coefficient in
  // b and the monomial is >= 0 (symbols and atoms that cannot be negative); a monomial that may
  // be negative must have equal coefficients.
  auto may_be_negative = [](const DimExpr& e, const DimExpr::Monomial& m) {
    for (const auto& [key, exponent] : m) {
      auto atom = e.atoms_.find(key);
      if (atom != e.atoms_.end() && AtomMayBeNegative(*atom->second)) return true;
    }
    return false;
  };
  auto coefficient = [](const DimExpr& e, const DimExpr::Monomial& m) -> int64_t {
    auto it = e.terms_.find(m);
    return it == e.terms_.end() ? 0 : it->second;
  };
  for (const DimExpr* side : {&a, &b}) {
    for (const auto& [monomial, unused] : side->terms_) {
      const int64_t ca = coefficient(a, monomial), cb = coefficient(b, monomial);
      if (ca == cb) continue;
      if (ca < cb || may_be_negative(*side, monomial)) return false;
    }
  }
  return true;
}

namespace {

// Graded lexicographic order on monomials (atoms ordered by key): a monomial order, so the
// leading term of a product is the product of the leading terms.
bool MonomialLess(const Monomial& x, const Monomial& y) {
  const int dx = Degree(x), dy = Degree(y);
  if (dx != dy) return dx < dy;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    if (x[i].first != y[i].first) return x[i].first > y[i].first;  // y lacks x's smaller key
    if (x[i].second != y[i].second) return x[i].second < y[i].second;
  }
  return x.size() < y.size();
}

// x / y when y divides x; nullopt otherwise.
std::optional<Monomial> DivideMonomial(const Monomial& x, const Monomial& y) {
  Monomial rest;
  auto d = y.begin();
  for (const auto& [key, exponent] : x) {
    int left = exponent;
    if (d != y.end() && d->first == key) {
      left -= d->second;
      ++d;
    }
    if (left < 0) return std::nullopt;
    if (left > 0) rest.push_back({key, left});
  }
  if (d != y.end()) return std::nullopt;
  return rest;
}

Monomial MultiplyMonomials(const Monomial& x, const Monomial& y) {
  std::map<std::string, int> sum;
  for (const auto& [key, exponent] : x) sum[key] += exponent;
  for (const auto& [key, exponent] : y) sum[key] += exponent;
  return Monomial(sum.begin(), sum.end());
}

}  // namespace

absl::StatusOr<DimExpr> ExactDivide(const DimExpr& a, const DimExpr& b) {
  auto not_exact = [&] {
    return absl::InvalidArgumentError(absl::StrCat("(", a.ToString(), ") / (", b.ToString(),
                                                   ") is not exact"));
  };
  if (b.terms_.empty()) return not_exact();
  auto leading = [](const std::map<Monomial, int64_t>& terms) {
    return std::max_element(terms.begin(), terms.end(), [](const auto& x, const auto& y) {
      return MonomialLess(x.first, y.first);
    });
  };
  const auto divisor_lead = leading(b.terms_);
  // Long division: the leading term of the remainder strictly falls in a well-order, so the
  // loop ends; an exact quotient leaves no remainder.
  std::map<Monomial, int64_t> remainder = a.terms_;
  DimExpr quotient;
  for (size_t round = 0; !remainder.empty(); ++round) {
    if (round > kMaxDimExprTerms) return not_exact();
    const auto lead = leading(remainder);
    std::optional<Monomial> m = DivideMonomial(lead->first, divisor_lead->first);
    if (!m.has_value() || lead->second % divisor_lead->second != 0) return not_exact();
    const int64_t c = lead->second / divisor_lead->second;
    quotient.terms_[*m] += c;
    for (const auto& [monomial, coefficient] : b.terms_) {
      const std::optional<int64_t> product = util::CheckedMul(c, coefficient);
      if (!product.has_value()) return Overflow(a.ToString());
      const Monomial key = MultiplyMonomials(*m, monomial);
      const std::optional<int64_t> left = util::CheckedSub(remainder[key], *product);
      if (!left.has_value()) return Overflow(a.ToString());
      if (*left == 0) {
        remainder.erase(key);
      } else {
        remainder[key] = *left;
      }
    }
  }
  for (auto it = quotient.terms_.begin(); it != quotient.terms_.end();) {
    it = it->second == 0 ? quotient.terms_.erase(it) : std::next(it);
  }
  for (const auto& [monomial, coefficient] : quotient.terms_) {
    for (const auto& [key, exponent] : monomial) {
      if (auto atom = a.atoms_.find(key); atom != a.atoms_.end()) quotient.atoms_.insert(*atom);
      if (auto atom = b.atoms_.find(key); atom != b.atoms_.end()) quotient.atoms_.insert(*atom);
    }
  }
  MG_RETURN_IF_ERROR(quotient.CheckMonotone());
  return quotient;
}

namespace {

DimExpr MinOrMax(const DimExpr& a, const DimExpr& b, bool is_min) {
  if (a == b) return a;
  // One side at least the other everywhere: no atom needed (max(0, 24*N^2) is 24*N^2).
  if (Dominates(a, b)) return is_min ? b : a;
  if (Dominates(b, a)) return is_min ? a : b;
  if (a.IsConstant() && b.IsConstant()) {
    return DimExpr::Constant(is_min ? std::min(a.ConstantValue(), b.ConstantValue())
                                    : std::max(a.ConstantValue(), b.ConstantValue()));
  }
  auto atom = std::make_shared<DimExpr::Atom>();
  atom->kind = is_min ? DimExpr::Atom::Kind::kMin : DimExpr::Atom::Kind::kMax;
  // min and max commute: the arguments in text order make one key for both orders.
  atom->args = a.ToString() <= b.ToString() ? std::vector<DimExpr>{a, b}
                                            : std::vector<DimExpr>{b, a};
  return AtomExpr(std::move(atom));
}

}  // namespace

DimExpr Min(const DimExpr& a, const DimExpr& b) { return MinOrMax(a, b, /*is_min=*/true); }
DimExpr Max(const DimExpr& a, const DimExpr& b) { return MinOrMax(a, b, /*is_min=*/false); }

absl::StatusOr<std::pair<int64_t, int64_t>> Range(const DimExpr& e, const SymbolBindings& lo,
                                                  const SymbolBindings& hi) {
  MG_ASSIGN_OR_RETURN(const int64_t least, e.Evaluate(lo));
  MG_ASSIGN_OR_RETURN(const int64_t most, e.Evaluate(hi));
  return std::make_pair(least, most);
}

bool IsSymbolName(absl::string_view name) {
  if (name.empty() || name == "cdiv" || name == "min" || name == "max") return false;
  if (!absl::ascii_isalpha(name[0]) && name[0] != '_') return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return absl::ascii_isalnum(c) || c == '_'; });
}

namespace {

class Parser {
 public:
  explicit Parser(absl::string_view text) : text_(text) {}

  absl::StatusOr<DimExpr> Parse() {
    MG_ASSIGN_OR_RETURN(DimExpr e, Expr(0));
    Skip();
    if (pos_ != text_.size()) return Error("unexpected text");
    return e;
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("size expression '", util::Quote(text_),
                                                   "': ", what, " at offset ", pos_));
  }
  void Skip() {
    while (pos_ < text_.size() && absl::ascii_isspace(text_[pos_])) ++pos_;
  }
  bool Eat(char c) {
    Skip();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  absl::StatusOr<int64_t> Int() {
    Skip();
    const size_t start = pos_;
    int64_t value = 0;
    while (pos_ < text_.size() && absl::ascii_isdigit(text_[pos_])) {
      const std::optional<int64_t> times = util::CheckedMul(value, 10);
      const std::optional<int64_t> next =
          times.has_value() ? util::CheckedAdd(*times, text_[pos_] - '0') : std::nullopt;
      if (!next.has_value()) return Error("an integer overflows int64");
      value = *next;
      ++pos_;
    }
    if (pos_ == start) return Error("an integer expected");
    return value;
  }

  // After a '-': an integer that stands alone as the term, read as a negative number, so that
  // -9223372036854775808 (INT64_MIN, which ToString writes and whose magnitude is no int64)
  // reads back. nullopt, reading nothing, when the term is more than one integer.
  std::optional<int64_t> NegativeLiteral() {
    size_t p = pos_;
    while (p < text_.size() && absl::ascii_isspace(text_[p])) ++p;
    const size_t start = p;
    uint64_t magnitude = 0;
    constexpr uint64_t kLimit = uint64_t{1} << 63;
    while (p < text_.size() && absl::ascii_isdigit(text_[p])) {
      const uint64_t digit = static_cast<uint64_t>(text_[p] - '0');
      if (magnitude > (kLimit - digit) / 10) return std::nullopt;  // beyond 2^63
      magnitude = magnitude * 10 + digit;
      ++p;
    }
    if (p == start) return std::nullopt;
    size_t after = p;
    while (after < text_.size() && absl::ascii_isspace(text_[after])) ++after;
    if (after < text_.size() && (text_[after] == '*' || text_[after] == '^')) return std::nullopt;
    pos_ = p;
    return magnitude == kLimit ? INT64_MIN : -static_cast<int64_t>(magnitude);
  }

  absl::StatusOr<DimExpr> Expr(int depth) {
    if (depth > util::kMaxNestingDepth) return Error("nested too deeply");
    DimExpr sum;
    if (Eat('-')) {  // a negative constant ("-3": the form ToString gives one)
      if (std::optional<int64_t> literal = NegativeLiteral()) {
        sum = DimExpr::Constant(*literal);
      } else {
        MG_ASSIGN_OR_RETURN(DimExpr first, Term(depth));
        if (!first.IsConstant()) return Error("only a constant may be negated");
        MG_ASSIGN_OR_RETURN(sum, SubtractConstant(DimExpr(), first.ConstantValue()));
      }
    } else {
      MG_ASSIGN_OR_RETURN(sum, Term(depth));
    }
    while (true) {
      if (Eat('+')) {
        MG_ASSIGN_OR_RETURN(DimExpr next, Term(depth));
        MG_ASSIGN_OR_RETURN(sum, Add(sum, next));
      } else if (Eat('-')) {
        if (std::optional<int64_t> literal = NegativeLiteral()) {
          MG_ASSIGN_OR_RETURN(sum, Add(sum, DimExpr::Constant(*literal)));
          continue;
        }
        MG_ASSIGN_OR_RETURN(DimExpr next, Term(depth));
        if (!next.IsConstant()) return Error("only a constant may be subtracted");
        MG_ASSIGN_OR_RETURN(sum, SubtractConstant(sum, next.ConstantValue()));
      } else {
        return sum;
      }
    }
  }

  absl::StatusOr<DimExpr> Term(int depth) {
    MG_ASSIGN_OR_RETURN(DimExpr product, Factor(depth));
    while (Eat('*')) {
      MG_ASSIGN_OR_RETURN(DimExpr next, Factor(depth));
      MG_ASSIGN_OR_RETURN(product, Mul(product, next));
    }
    return product;
  }

  // factor := primary ('^' INT)?
  absl::StatusOr<DimExpr> Factor(int depth) {
    MG_ASSIGN_OR_RETURN(DimExpr base, Primary(depth));
    if (!Eat('^')) return base;
    MG_ASSIGN_OR_RETURN(const int64_t exponent, Int());
    if (exponent < 1 || exponent > kMaxExponent) return Error("an exponent from 1 to 64 expected");
    DimExpr power = base;
    for (int64_t k = 1; k < exponent; ++k) {
      MG_ASSIGN_OR_RETURN(power, Mul(power, base));
    }
    return power;
  }

  absl::StatusOr<DimExpr> Primary(int depth) {
    Skip();
    if (pos_ >= text_.size()) return Error("an operand expected");
    const char c = text_[pos_];
    if (absl::ascii_isdigit(c)) {
      MG_ASSIGN_OR_RETURN(const int64_t value, Int());
      return DimExpr::Constant(value);
    }
    if (Eat('(')) {
      MG_ASSIGN_OR_RETURN(DimExpr inner, Expr(depth + 1));
      if (!Eat(')')) return Error("')' expected");
      return inner;
    }
    if (!absl::ascii_isalpha(c) && c != '_') return Error("an operand expected");
    const size_t start = pos_;
    while (pos_ < text_.size() && (absl::ascii_isalnum(text_[pos_]) || text_[pos_] == '_')) {
      ++pos_;
    }
    const absl::string_view word = text_.substr(start, pos_ - start);
    if (word == "cdiv" || word == "min" || word == "max") {
      if (!Eat('(')) return Error("'(' expected");
      MG_ASSIGN_OR_RETURN(DimExpr first, Expr(depth + 1));
      if (!Eat(',')) return Error("',' expected");
      DimExpr result;
      if (word == "cdiv") {
        MG_ASSIGN_OR_RETURN(const int64_t divisor, Int());
        MG_ASSIGN_OR_RETURN(result, CeilDiv(first, divisor));
      } else {
        MG_ASSIGN_OR_RETURN(DimExpr second, Expr(depth + 1));
        result = word == "min" ? Min(first, second) : Max(first, second);
      }
      if (!Eat(')')) return Error("')' expected");
      return result;
    }
    return DimExpr::Symbol(std::string(word));
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<DimExpr> ParseDimExpr(absl::string_view text) {
  if (text.size() > (size_t{1} << 20)) {
    return absl::InvalidArgumentError("size expression longer than 1 MiB");
  }
  return Parser(text).Parse();
}

}  // namespace memonger::graph
