// util/: the bottom layer, with no project dependencies: status macros, checks, checked
// arithmetic, byte formatting, a seeded generator. Every other folder may include it.
//
// Small status macros. abseil 20220623 (Debian 12) ships neither absl/log nor status_macros.h,
// so we keep these two here.
//
//   MG_RETURN_IF_ERROR(graph.Validate());
//   MG_ASSIGN_OR_RETURN(Graph g, LoadModel(path, options));
#ifndef MEMONGER_UTIL_STATUS_MACROS_H_
#define MEMONGER_UTIL_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define MG_STATUS_CONCAT_INNER_(a, b) a##b
#define MG_STATUS_CONCAT_(a, b) MG_STATUS_CONCAT_INNER_(a, b)

// Returns the status of `expr` from the current function when it is not OK.
#define MG_RETURN_IF_ERROR(expr)                 \
  do {                                           \
    const ::absl::Status mg_status_ = (expr);    \
    if (!mg_status_.ok()) return mg_status_;     \
  } while (false)

// Evaluates `rexpr` (a StatusOr); returns its status when not OK, else moves its value into
// `lhs` (which may be a declaration).
#define MG_ASSIGN_OR_RETURN(lhs, rexpr) \
  MG_ASSIGN_OR_RETURN_IMPL_(MG_STATUS_CONCAT_(mg_statusor_, __LINE__), lhs, rexpr)

#define MG_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                              \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // MEMONGER_UTIL_STATUS_MACROS_H_
