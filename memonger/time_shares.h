// How planning divides a time limit: every share of a limit that a planning step hands to the
// steps below it, in one place, each with the reason for its size. The call that owns a limit
// (PlanMemory, PlanWithRecomputation, SolveOffsetProblem, ...) holds it as a util::Deadline
// (util/deadline.h) and hands the steps it runs their shares of it; the steps themselves invent
// no share.
//
// A share of "the limit" is measured from the owner's start; a share of "what is left" from
// the moment the step begins. The sizes were chosen on the planning corpus and the scale
// benchmarks (BENCHMARKS.md); what a cut search returns is always a valid plan, so a share
// trades quality against time, never safety.
#ifndef MEMONGER_MEMONGER_TIME_SHARES_H_
#define MEMONGER_MEMONGER_TIME_SHARES_H_

namespace memonger::time_shares {

// PlanMemory with the memory-aware order: the order search gets this share of the limit and
// the planner what the search and liveness leave. Both improve the arena; neither can use the
// other's time once it has ended.
inline constexpr double kOrderSearch = 0.5;

// PlanWithRecomputation: choosing the forward ops to rerun gets this share of the limit, the
// plan of the rewritten net the rest. The plan's own searches need as much.
inline constexpr double kRecomputeChoice = 0.5;  // "half of --time-limit" in its refusal

// Offset searches that end in a plan (the best-fit portfolio, local search, peak windows,
// window repair) stop at this share of their limit: applying the offsets and checking them
// after them is O(n log n) work that takes about the rest on a million items.
inline constexpr double kOffsetSearches = 0.95;

// A time-limited first greedy pass that is on course to end within this share of its limit past
// it is let finish rather than cut and completed quickly: a pass that nearly fits is worth far
// more than the quick completion.
inline constexpr double kFinishingPassOverrun = 0.1;

// PlaceOffsets: applying and checking the offsets costs about this many times what building the
// problems did (0.73 s against 0.15 s on a 2^22-op graph's 4.4M items), so the searches get the
// limit less the building time times (1 + this).
inline constexpr double kApplyPerBuild = 5;

// Local search (best-fit+local-search, and auto's), and exact where peak windows follow: the
// best-fit portfolio starts no run after this share of the limit. On a large problem one greedy
// pass takes about that long, and the climber, the windows and window repair do more with the
// time than another order.
inline constexpr double kPortfolioStarts = 0.25;

// auto where peak windows follow: local search gets this share of the limit (its portfolio
// and first pass keep the whole limit's deadlines). The windows need the time more: with half,
// S_1 stayed above its bound at 2 s; with a quarter its windows prove the bound.
inline constexpr double kLocalSearchBeforeWindows = 0.25;

// Local search: the hill climber gets this share of what the portfolio left, window repair the
// rest. On a small problem the climber ends at its iteration cap long before.
inline constexpr double kHillClimb = 0.5;

// exact and auto: peak windows get this share of what is left where the branch and bound
// follows (else all of it), so that a window it cannot settle leaves the whole problem's search
// its time.
inline constexpr double kWindowsBeforeBranchAndBound = 0.5;

// A peak window's branch and bound gets at most this share of what is left when it starts: one
// it cannot settle must leave time for the next window, or a plan from elsewhere.
inline constexpr double kWindowSearch = 0.5;

// exact's branch and bound at zero slack: the perfect-packing search decides the bound first
// with this share of what is left; an exhausted search proves the bound unreachable, and the
// branch and bound gets the rest.
inline constexpr double kPerfectPacking = 0.5;

// The memory-aware order: local search over orders gets this share of what the portfolio of
// orders left, the exact search of the busiest segments the rest.
inline constexpr double kOrderLocalSearch = 0.5;

}  // namespace memonger::time_shares

#endif  // MEMONGER_MEMONGER_TIME_SHARES_H_
