// CSV as RFC 4180 writes it: cells separated by commas, rows by CRLF or LF; a cell holding a comma,
// a quote, a line break or outer spaces is quoted, with quotes doubled inside. What CsvCell writes,
// CsvReader reads back unchanged, whatever characters a name holds.
//
//   CsvReader reader(text);
//   std::vector<std::string> cells;
//   while (reader.Next(cells)) { ... reader.line() ... }
//   MG_RETURN_IF_ERROR(reader.status());
//
// A UTF-8 byte order mark at the start is skipped (spreadsheets write one). Unquoted cells lose
// their outer spaces and tabs (hand-written files align columns); quoted cells keep everything.
// Blank lines are skipped. O(bytes); one row in memory at a time.
#ifndef MEMONGER_UTIL_CSV_H_
#define MEMONGER_UTIL_CSV_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace memonger::util {

// One cell, quoted when it must be.
std::string CsvCell(absl::string_view text);

class CsvReader {
 public:
  explicit CsvReader(absl::string_view text);
  // The next non-blank row; false at the end or at an error (then status() says what).
  bool Next(std::vector<std::string>& cells);
  // The line the last row started on (1-based).
  int64_t line() const { return row_line_; }
  const absl::Status& status() const { return status_; }

 private:
  absl::string_view text_;
  size_t pos_ = 0;
  int64_t line_ = 1;
  int64_t row_line_ = 0;
  absl::Status status_;
};

}  // namespace memonger::util

#endif  // MEMONGER_UTIL_CSV_H_
