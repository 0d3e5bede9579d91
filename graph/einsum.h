// An Einsum equation (ONNX Einsum, numpy's einsum) resolved against its operands' dims: one place
// for the importer's check, the shape rule libonnx lacks (libonnx 1.12 types an Einsum's output
// by its rank only, every dim unknown) and the CPU kernel.
//
//   MG_ASSIGN_OR_RETURN(EinsumSpec spec, ResolveEinsum("bhid,bhjd->bhij", {q_dims, k_dims}));
//   // spec.output_dims: [b, h, i, j]; spec.operands[0].labels: b, h, i, d as label ids
//
// Grammar: one term per operand, separated by commas, then optionally "->" and the output's
// term; spaces are ignored; a term is letters (case matters) with at most one "...". A letter
// repeated inside a term takes that operand's diagonal. Without "->" (implicit mode) the output
// is the ellipsis dims, then the letters that occur once in all terms, in ASCII order.
//
// Sizes: a label's size is the one its occurrences agree on, where an occurrence of size 1
// broadcasts (numpy's rule, which PyTorch follows) except within one term, whose repeats must be
// equal. The "..." dims broadcast right-aligned as numpy's. Labels of the output that are
// summed nowhere and labels summed out are both allowed. O(rank) per operand.
#ifndef MEMONGER_GRAPH_EINSUM_H_
#define MEMONGER_GRAPH_EINSUM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace memonger::graph {

// Labels are small integers: a letter's ASCII code, or kEinsumEllipsisLabel + j for the j-th
// (from the left) of the broadcast "..." dims.
inline constexpr int kEinsumEllipsisLabel = 128;

struct EinsumOperand {
  std::vector<int> labels;  // one per dim of the operand, repeats for diagonals
};

struct EinsumSpec {
  std::vector<EinsumOperand> operands;
  std::vector<int> output_labels;     // distinct
  std::vector<int64_t> label_size;    // by label id (0 for labels not used)
  std::vector<int64_t> output_dims;   // label_size of each output label
};

// The syntax alone, for a model whose operand ranks are not known yet: InvalidArgument naming
// what is wrong (more than one "->" or "...", a character that is no letter, a term count other
// than `operands`, an output letter no input has or named twice).
absl::Status CheckEinsumSyntax(absl::string_view equation, int operands);

// The equation resolved against every operand's dims. InvalidArgument for the syntax errors
// above, an operand whose rank its term cannot name (letters more than dims, or fewer without
// "..."), and sizes that do not agree.
absl::StatusOr<EinsumSpec> ResolveEinsum(absl::string_view equation,
                                         const std::vector<std::vector<int64_t>>& operand_dims);

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_EINSUM_H_
