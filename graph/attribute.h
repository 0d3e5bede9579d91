// Op attributes (Caffe2 Argument, ONNX AttributeProto), as plain values.
#ifndef MEMONGER_GRAPH_ATTRIBUTE_H_
#define MEMONGER_GRAPH_ATTRIBUTE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/string_view.h"

namespace memonger::graph {

// Nets an argument holds (Caffe2's Argument.n and .nets: a RecurrentNetwork's step nets, an
// AsyncIf's branches), each a serialized binary NetDef: the graph keeps them, unread, so that a
// rewritten net still has them (report/net_rewrite.h renames blobs inside).
struct Subnets {
  std::vector<std::string> serialized;
  bool repeated = false;  // Argument.nets; else Argument.n (exactly one net)
  friend bool operator==(const Subnets& a, const Subnets& b) {
    return a.serialized == b.serialized && a.repeated == b.repeated;
  }
};

struct Attribute {
  using Data = std::variant<std::monostate, int64_t, double, std::string, std::vector<int64_t>,
                            std::vector<double>, std::vector<std::string>, Subnets>;
  std::string name;
  Data data;
};

// Read-only lookups over an op's attributes. An attribute of the wrong kind reads as absent,
// except that an int reads as a float and a single int as a one-element list.
class AttributeView {
 public:
  explicit AttributeView(const std::vector<Attribute>& attrs) : attrs_(attrs) {}

  bool Has(absl::string_view name) const { return Find(name) != nullptr; }
  std::optional<int64_t> GetInt(absl::string_view name) const;
  std::optional<double> GetFloat(absl::string_view name) const;
  std::optional<std::string> GetString(absl::string_view name) const;
  std::optional<std::vector<int64_t>> GetInts(absl::string_view name) const;

  int64_t GetInt(absl::string_view name, int64_t fallback) const {
    return GetInt(name).value_or(fallback);
  }

 private:
  const Attribute* Find(absl::string_view name) const;
  const std::vector<Attribute>& attrs_;
};

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_ATTRIBUTE_H_
