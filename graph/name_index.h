// The graph's index from blob names to their values (SSA versions), oldest first.
//
// It holds value ids only: the names are the values' own, read through the graph's value storage
// when an id is hashed or compared. A name with one version (most of them) costs one id in a
// hash set; a name with several also keeps the list of its versions, keyed by its first. On a
// million-value graph this is a tenth of a map from names (or views of them) to small vectors.
//
// The index reads the value storage it was made with: that storage must not move while the
// index is used (Graph reserves its values before adding any; a vector moved whole keeps its
// storage, so a moved graph keeps a valid index; a copied graph builds its own).
#ifndef MEMONGER_GRAPH_NAME_INDEX_H_
#define MEMONGER_GRAPH_NAME_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace memonger::graph {

struct Value;

class NameIndex {
 public:
  NameIndex() : NameIndex(nullptr, 0) {}
  // `values`: the graph's value storage; `capacity`: how many names to make room for.
  NameIndex(const Value* values, size_t capacity);

  // Adds value `id`, whose name is read from the storage, as the newest version of its name.
  // Returns its version: 0 for a new name, else the count of versions before it.
  int32_t Add(int32_t id);

  // Every version of `name`, oldest first; empty for a name not in the index. Valid until the
  // next Add.
  absl::Span<const int32_t> Versions(absl::string_view name) const;

 private:
  // Hash and equality on the names of ids, and of ids with names (heterogeneous lookup).
  struct NameHash {
    using is_transparent = void;
    const Value* values;
    size_t operator()(int32_t id) const;
    size_t operator()(absl::string_view name) const;
  };
  struct NameEq {
    using is_transparent = void;
    const Value* values;
    bool operator()(int32_t a, int32_t b) const;
    bool operator()(int32_t a, absl::string_view b) const;
    bool operator()(absl::string_view a, int32_t b) const { return (*this)(b, a); }
  };

  absl::flat_hash_set<int32_t, NameHash, NameEq> first_;  // each name's first version
  // Names with several versions: by the first version, all of them, oldest first.
  absl::flat_hash_map<int32_t, std::vector<int32_t>> several_;
};

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_NAME_INDEX_H_
