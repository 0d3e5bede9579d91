#include "util/csv.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace memonger::util {

std::string CsvCell(absl::string_view text) {
  const bool needs_quotes =
      text.find_first_of(",\"\r\n") != absl::string_view::npos ||
      (!text.empty() && (absl::ascii_isspace(static_cast<unsigned char>(text.front())) ||
                         absl::ascii_isspace(static_cast<unsigned char>(text.back()))));
  if (!needs_quotes) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

CsvReader::CsvReader(absl::string_view text) : text_(text) {
  if (absl::StartsWith(text_, "\xEF\xBB\xBF")) pos_ = 3;
}

bool CsvReader::Next(std::vector<std::string>& cells) {
  if (!status_.ok()) return false;
  while (pos_ < text_.size()) {
    cells.clear();
    row_line_ = line_;
    std::string cell;
    bool quoted = false;        // the current cell was quoted
    bool row_has_text = false;  // anything but spaces on this row
    bool end_of_row = false;
    while (!end_of_row) {
      if (pos_ >= text_.size()) break;
      const char c = text_[pos_];
      if (c == '"' && absl::StripAsciiWhitespace(cell).empty() && !quoted) {
        // A quoted cell: up to the closing quote, doubled quotes for one.
        cell.clear();
        quoted = true;
        row_has_text = true;
        ++pos_;
        while (true) {
          if (pos_ >= text_.size()) {
            status_ = absl::InvalidArgumentError(absl::StrCat(
                "line ", row_line_, ": a quoted cell is not closed before the end of the file"));
            return false;
          }
          const char q = text_[pos_++];
          if (q == '"') {
            if (pos_ < text_.size() && text_[pos_] == '"') {
              cell += '"';
              ++pos_;
              continue;
            }
            break;
          }
          if (q == '\n') ++line_;
          cell += q;
        }
        // Only spaces may follow the closing quote before the separator.
        while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
        if (pos_ < text_.size() && text_[pos_] != ',' && text_[pos_] != '\n' &&
            text_[pos_] != '\r') {
          status_ = absl::InvalidArgumentError(
              absl::StrCat("line ", line_, ": text after the closing quote of a cell"));
          return false;
        }
        continue;
      }
      ++pos_;
      if (c == ',') {
        cells.push_back(quoted ? std::move(cell) : std::string(absl::StripAsciiWhitespace(cell)));
        cell.clear();
        quoted = false;
        row_has_text = true;
      } else if (c == '\n' || c == '\r') {
        if (c == '\r' && pos_ < text_.size() && text_[pos_] == '\n') ++pos_;
        ++line_;
        end_of_row = true;
      } else {
        if (!quoted) {
          cell += c;
          if (c != ' ' && c != '\t') row_has_text = true;
        } else {
          status_ = absl::InvalidArgumentError(
              absl::StrCat("line ", line_, ": text after the closing quote of a cell"));
          return false;
        }
      }
    }
    if (!row_has_text) continue;  // a blank line
    cells.push_back(quoted ? std::move(cell) : std::string(absl::StripAsciiWhitespace(cell)));
    return true;
  }
  return false;
}

}  // namespace memonger::util
