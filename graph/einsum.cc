#include "graph/einsum.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "util/limits.h"
#include "util/status_macros.h"

namespace memonger::graph {
namespace {

struct Term {
  std::string letters;     // without the "..."
  int ellipsis_at = -1;    // how many letters precede the "...", -1 without one
};

struct Parsed {
  std::vector<Term> inputs;
  bool explicit_output = false;
  Term output;
};

absl::Status Bad(absl::string_view equation, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("equation '", util::Quote(equation), "' ", why));
}

absl::StatusOr<Term> ParseTerm(absl::string_view equation, absl::string_view text) {
  Term term;
  for (size_t i = 0; i < text.size();) {
    if (text.substr(i, 3) == "...") {
      if (term.ellipsis_at >= 0) {
        return Bad(equation, absl::StrCat("has more than one '...' in the term '", text, "'"));
      }
      term.ellipsis_at = static_cast<int>(term.letters.size());
      i += 3;
      continue;
    }
    const char c = text[i];
    if (!absl::ascii_isalpha(static_cast<unsigned char>(c))) {
      return Bad(equation, absl::StrCat("has the character '", std::string(1, c),
                                        "' in a term (terms hold letters and one '...')"));
    }
    term.letters.push_back(c);
    ++i;
  }
  return term;
}

absl::StatusOr<Parsed> Parse(absl::string_view raw, int operands) {
  std::string equation(raw);
  equation.erase(std::remove(equation.begin(), equation.end(), ' '), equation.end());
  if (equation.empty()) return Bad(equation, "is empty");
  const size_t arrow = equation.find("->");
  if (arrow != std::string::npos && equation.find("->", arrow + 2) != std::string::npos) {
    return Bad(equation, "has more than one '->'");
  }
  Parsed parsed;
  const std::string lhs = equation.substr(0, arrow);
  const std::vector<std::string> terms = absl::StrSplit(lhs, ',');
  if (static_cast<int>(terms.size()) != operands) {
    return Bad(equation, absl::StrCat("has ", terms.size(), " input terms for ", operands,
                                      " inputs"));
  }
  std::set<char> seen;
  for (const std::string& text : terms) {
    MG_ASSIGN_OR_RETURN(Term term, ParseTerm(equation, text));
    seen.insert(term.letters.begin(), term.letters.end());
    parsed.inputs.push_back(std::move(term));
  }
  if (arrow != std::string::npos) {
    parsed.explicit_output = true;
    MG_ASSIGN_OR_RETURN(parsed.output, ParseTerm(equation, equation.substr(arrow + 2)));
    std::set<char> out;
    for (char c : parsed.output.letters) {
      if (!seen.count(c)) {
        return Bad(equation, absl::StrCat("outputs '", std::string(1, c), "', which no input has"));
      }
      if (!out.insert(c).second) {
        return Bad(equation, absl::StrCat("outputs '", std::string(1, c), "' twice"));
      }
    }
  }
  return parsed;
}

// The size two occurrences of one label agree on (1 broadcasts), or -1.
int64_t Combine(int64_t a, int64_t b) {
  if (a == b || b == 1) return a;
  if (a == 1) return b;
  return -1;
}

}  // namespace

absl::Status CheckEinsumSyntax(absl::string_view equation, int operands) {
  return Parse(equation, operands).status();
}

absl::StatusOr<EinsumSpec> ResolveEinsum(absl::string_view equation,
                                         const std::vector<std::vector<int64_t>>& operand_dims) {
  MG_ASSIGN_OR_RETURN(const Parsed parsed,
                      Parse(equation, static_cast<int>(operand_dims.size())));
  // How many dims each operand's "..." covers, and the most of them.
  int broadcast_rank = 0;
  std::vector<int> covered(operand_dims.size(), 0);
  for (size_t i = 0; i < operand_dims.size(); ++i) {
    const Term& term = parsed.inputs[i];
    const int rank = static_cast<int>(operand_dims[i].size());
    const int letters = static_cast<int>(term.letters.size());
    if (term.ellipsis_at < 0 ? rank != letters : rank < letters) {
      return Bad(equation, absl::StrCat("names ", letters, " dims", term.ellipsis_at < 0 ? "" : " and '...'",
                                        " of input ", i, ", which has rank ", rank));
    }
    covered[i] = rank - letters;
    broadcast_rank = std::max(broadcast_rank, covered[i]);
  }
  EinsumSpec spec;
  spec.label_size.assign(kEinsumEllipsisLabel + broadcast_rank, 0);
  std::vector<bool> sized(spec.label_size.size(), false);
  std::map<int, int> occurrences;
  for (size_t i = 0; i < operand_dims.size(); ++i) {
    const Term& term = parsed.inputs[i];
    EinsumOperand operand;
    for (int d = 0, letter = 0; d < static_cast<int>(operand_dims[i].size()); ++d) {
      const bool in_ellipsis =
          term.ellipsis_at >= 0 && d >= term.ellipsis_at && d < term.ellipsis_at + covered[i];
      const int label =
          in_ellipsis ? kEinsumEllipsisLabel + broadcast_rank - covered[i] + (d - term.ellipsis_at)
                      : static_cast<unsigned char>(term.letters[letter++]);
      operand.labels.push_back(label);
    }
    // Within one term a repeated label takes a diagonal: its dims must be equal.
    std::map<int, int64_t> own;
    for (size_t d = 0; d < operand.labels.size(); ++d) {
      const int label = operand.labels[d];
      const int64_t size = operand_dims[i][d];
      auto [it, first] = own.emplace(label, size);
      if (!first && it->second != size) {
        return Bad(equation, absl::StrCat("repeats '", std::string(1, static_cast<char>(label)),
                                          "' in input ", i, " over dims ", it->second, " and ",
                                          size, " (a diagonal needs equal dims)"));
      }
      if (label < kEinsumEllipsisLabel) ++occurrences[label];
    }
    for (const auto& [label, size] : own) {
      const int64_t agreed = sized[label] ? Combine(spec.label_size[label], size) : size;
      if (agreed < 0) {
        const std::string name = label < kEinsumEllipsisLabel
                                     ? absl::StrCat("'", std::string(1, static_cast<char>(label)), "'")
                                     : absl::StrCat("'...' dim ", label - kEinsumEllipsisLabel);
        return Bad(equation, absl::StrCat("gives ", name, " the sizes ", spec.label_size[label],
                                          " and ", size, " (input ", i, "), which do not broadcast"));
      }
      spec.label_size[label] = agreed;
      sized[label] = true;
    }
    spec.operands.push_back(std::move(operand));
  }
  auto broadcast_labels = [&]() {
    std::vector<int> labels;
    for (int j = 0; j < broadcast_rank; ++j) labels.push_back(kEinsumEllipsisLabel + j);
    return labels;
  };
  if (parsed.explicit_output) {
    const Term& out = parsed.output;
    for (int l = 0; l <= static_cast<int>(out.letters.size()); ++l) {
      if (l == out.ellipsis_at) {
        for (int label : broadcast_labels()) spec.output_labels.push_back(label);
      }
      if (l < static_cast<int>(out.letters.size())) {
        spec.output_labels.push_back(static_cast<unsigned char>(out.letters[l]));
      }
    }
    if (out.ellipsis_at < 0 && broadcast_rank > 0) {
      return Bad(equation, absl::StrCat("gives '...' ", broadcast_rank,
                                        " dims, which its output does not name (no '...')"));
    }
  } else {
    spec.output_labels = broadcast_labels();
    for (const auto& [label, count] : occurrences) {  // std::map: ASCII order
      if (label < kEinsumEllipsisLabel && count == 1) spec.output_labels.push_back(label);
    }
  }
  for (int label : spec.output_labels) spec.output_dims.push_back(spec.label_size[label]);
  return spec;
}

}  // namespace memonger::graph
