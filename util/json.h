// JSON documents read from files (usage records, saved plans): nlohmann's parser, refusing
// what it would take silently.
//
//   MG_ASSIGN_OR_RETURN(nlohmann::json doc, util::ParseJson(text, limits.max_nesting_depth));
//
// Checks, in order: nesting (CheckJsonNesting: the parser recurses once per level), the syntax,
// and keys given twice in one object: nlohmann keeps the last value of a repeated key without a
// word ({"bytes": 7, "bytes": 9000} read as 9000), so which one the file meant is a guess.
// O(bytes): repeated keys are found by a scan of the text after the parse (keys compared as
// written), with a linear look among an object's first 16 keys and a hash set beyond, so an
// object of a million keys costs linear time.
#ifndef MEMONGER_UTIL_JSON_H_
#define MEMONGER_UTIL_JSON_H_

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace memonger::util {

// InvalidArgument (without the file's name: the caller adds it) for nesting deeper than
// `max_depth`, text that is not JSON ("not valid JSON"), or a key given twice in one object
// ("the key "bytes" appears twice in one object").
absl::StatusOr<nlohmann::json> ParseJson(absl::string_view text, int max_depth);

}  // namespace memonger::util

#endif  // MEMONGER_UTIL_JSON_H_
