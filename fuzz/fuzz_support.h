// What the libFuzzer harnesses of fuzz/ share: the oracle a plan must pass, and a cheap plan.
//
// A harness feeds its bytes to one byte-level entry point of the library (a loader, a parser,
// the planners). A returned error Status is a correct answer to malformed input; a crash, a
// sanitizer report, a hang, or a plan the independent verifier refuses is a finding:
//
//   extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
//     absl::StatusOr<graph::Graph> g = ...(std::string(data, data + size));
//     if (!g.ok()) return 0;                       // refused: fine
//     absl::StatusOr<Plan> plan = fuzz::PlanCheaply(*g, "greedy-by-size");
//     if (plan.ok()) fuzz::CheckPlanOrDie(*g, *plan, "greedy-by-size");
//     return 0;
//   }
//
// docs/fuzzing.md: the harnesses, the seed corpus, tools/fuzz.sh, and how a finding becomes a
// regression test.
#ifndef MEMONGER_FUZZ_FUZZ_SUPPORT_H_
#define MEMONGER_FUZZ_FUZZ_SUPPORT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"
#include "graph/net_def.h"
#include "memonger/plan.h"
#include "memonger/planner.h"

namespace memonger::fuzz {

// The harness input as a string (the loaders take their file's bytes as one).
inline std::string Bytes(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// Prints "fuzz finding: <what>: <status>" and aborts, so that libFuzzer saves the input.
[[noreturn]] void Fail(absl::string_view what, const absl::Status& status = absl::OkStatus());

// The oracle: `plan` passes VerifyPlan, and lower bound <= arena <= naive bytes (the arena of
// every planner lies between the most bytes live at one step and every value apart; the upper
// bound only where no value asks for more alignment than the plan's, as the naive sum counts
// no padding). Fails (aborts) naming `what` otherwise.
void CheckPlanOrDie(const graph::Graph& graph, const Plan& plan, absl::string_view what);

// An internal error from the library is a bug whatever the input: fails on one naming `what`;
// other statuses are correct answers to bad input.
void FailOnInternal(const absl::Status& status, absl::string_view what);

// PlanMemory with `planner` and a short time limit (the given order, serial execution): the
// plan, or why not. Fails on an internal error.
absl::StatusOr<Plan> PlanCheaply(const graph::Graph& graph, PlannerKind planner);

// The pipeline after a loader: shape inference (values already typed keep their types; each
// declared symbolic dim bound to 5), a cheap plan (greedy-by-size), and the oracle on it. Errors on the way are
// fine; an internal error or a plan the oracle refuses fails.
void InferPlanAndCheck(graph::Graph& graph, absl::string_view what);

// The NetDef harnesses (binary and text): ParseNetDef -> GraphFromNetDef -> InferPlanAndCheck.
// Also checks the round trip net_def.h promises: a graph that loads writes back
// (GraphToNetDef) to a NetDef that loads to as many ops and values.
void LoadNetDefAndCheck(const std::string& bytes, graph::NetFileFormat format);

}  // namespace memonger::fuzz

#endif  // MEMONGER_FUZZ_FUZZ_SUPPORT_H_
