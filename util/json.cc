#include "util/json.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "util/limits.h"
#include "util/status_macros.h"

namespace memonger::util {
namespace {

// The keys of one open object: a short list, then a set.
struct ObjectKeys {
  static constexpr size_t kListed = 16;
  std::vector<std::string> list;
  absl::flat_hash_set<std::string> set;

  void Clear() {
    list.clear();
    set.clear();
  }
  // False where `key` was seen before in this object.
  bool Add(std::string key) {
    if (!set.empty()) return set.insert(std::move(key)).second;
    if (std::find(list.begin(), list.end(), key) != list.end()) return false;
    list.push_back(std::move(key));
    if (list.size() > kListed) {
      set.insert(list.begin(), list.end());
      list.clear();
    }
    return true;
  }
};

}  // namespace

// The first key given twice in one object of `text`, valid JSON, or "" where none is: a scan of
// the text (a parser callback took 27 times the parse itself on 300,000 records). Keys are
// compared as written, escapes and all: "a" and "\u0061" count as two (nlohmann would take
// them as one; such a file gets no error, as before).
std::string FirstRepeatedKey(absl::string_view text) {
  std::vector<ObjectKeys> objects;  // reused from object to object
  std::vector<bool> is_object;      // per open bracket
  size_t open_objects = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '{') {
      if (open_objects == objects.size()) objects.emplace_back();
      objects[open_objects++].Clear();
      is_object.push_back(true);
    } else if (c == '[') {
      is_object.push_back(false);
    } else if (c == '}' || c == ']') {
      if (!is_object.empty()) {
        if (is_object.back()) --open_objects;
        is_object.pop_back();
      }
    } else if (c == '"') {
      const size_t begin = i + 1;
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\') ++i;  // an escaped character, '"' included
      }
      const size_t end = i;  // the closing quote
      size_t next = end + 1;
      while (next < text.size() && absl::ascii_isspace(static_cast<unsigned char>(text[next]))) {
        ++next;
      }
      // A string followed by ':' directly inside an object is a key.
      if (next < text.size() && text[next] == ':' && !is_object.empty() && is_object.back() &&
          !objects[open_objects - 1].Add(std::string(text.substr(begin, end - begin)))) {
        return std::string(text.substr(begin, end - begin));
      }
    }
  }
  return "";
}

absl::StatusOr<nlohmann::json> ParseJson(absl::string_view text, int max_depth) {
  MG_RETURN_IF_ERROR(CheckJsonNesting(text, max_depth));
  nlohmann::json doc = nlohmann::json::parse(text.begin(), text.end(), nullptr,
                                             /*allow_exceptions=*/false);
  if (doc.is_discarded()) return absl::InvalidArgumentError("not valid JSON");
  if (const std::string repeated = FirstRepeatedKey(text); !repeated.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the key \"", Quote(repeated), "\" appears twice in one object"));
  }
  return doc;
}

}  // namespace memonger::util
