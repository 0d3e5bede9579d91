#include "graph/fp16_storage.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "graph/rebuild.h"
#include "graph/shape_inference.h"
#include "util/status_macros.h"

namespace memonger::graph {
namespace {

OpSpec CastSpec(const std::string& name, const std::string& in, const std::string& out,
                DataType to) {
  OpSpec spec;
  spec.type = "Cast";
  spec.name = name;
  spec.inputs = {in};
  spec.outputs = {out};
  spec.attrs = {Attribute{"to", std::string(DataTypeName(to))}};
  return spec;
}

}  // namespace

absl::StatusOr<Graph> StoreInFp16(const Graph& graph, const std::vector<std::string>& names) {
  absl::flat_hash_set<std::string> used;
  for (const Value& v : graph.values()) used.insert(v.name);
  auto fresh = [&](const std::string& base) {
    std::string name = base;
    for (int k = 1; !used.insert(name).second; ++k) name = absl::StrCat(base, "_", k);
    return name;
  };
  // Stored blob name -> its original type and the stored copy's name.
  struct Stored {
    DataType dtype;
    std::string half;
  };
  absl::flat_hash_map<std::string, Stored> stored;
  for (const std::string& name : names) {
    const std::vector<ValueId> versions = graph.FindVersions(name);
    if (versions.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--store-fp16: no value '", name, "'"));
    }
    if (versions.size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--store-fp16: '", name, "' is written ", versions.size(),
          " times (updated in place); only a value written once can be stored in float16"));
    }
    const Value& v = graph.value(versions[0]);
    if (v.type->dtype != DataType::kFloat32 && v.type->dtype != DataType::kBFloat16) {
      return absl::InvalidArgumentError(absl::StrCat("--store-fp16: '", name, "' is ",
                                                     DataTypeName(v.type->dtype),
                                                     "; only float32 and bfloat16 values are "
                                                     "stored in float16"));
    }
    if (std::find(graph.outputs().begin(), graph.outputs().end(), versions[0]) !=
        graph.outputs().end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--store-fp16: '", name, "' is a graph output, read outside the net in its own type"));
    }
    if (stored.contains(name)) {
      return absl::InvalidArgumentError(absl::StrCat("--store-fp16: '", name, "' given twice"));
    }
    stored[name] = Stored{v.type->dtype, fresh(name + "_fp16")};
  }

  GraphBuilder out(graph.name());
  CopyInterface(graph, out);
  // Graph inputs stored in float16: cast before the first op.
  for (ValueId id : graph.inputs()) {
    auto it = stored.find(graph.value(id).name);
    if (it == stored.end()) continue;
    out.AddOp(CastSpec(it->second.half, it->first, it->second.half, DataType::kFloat16));
  }
  for (const Op& op : graph.ops()) {
    OpSpec spec = SpecOf(graph, op);
    spec.inputs.clear();
    // Each read of a stored value gets its own restored copy (one per op, even when the op
    // reads the value twice).
    absl::flat_hash_map<std::string, std::string> restored;
    for (ValueId in : op.inputs) {
      const std::string& name = graph.value(in).name;
      auto it = stored.find(name);
      if (it == stored.end()) {
        spec.inputs.push_back(name);
        continue;
      }
      auto [r, fresh_read] = restored.emplace(name, "");
      if (fresh_read) {
        r->second = fresh(name + "_restored");
        out.AddOp(CastSpec(r->second, it->second.half, r->second, it->second.dtype));
      }
      spec.inputs.push_back(r->second);
    }
    std::vector<std::string> produced_stored;
    for (const std::string& name : spec.outputs) {
      if (stored.contains(name)) produced_stored.push_back(name);
    }
    out.AddOp(std::move(spec));
    for (const std::string& name : produced_stored) {
      const Stored& s = stored[name];
      out.AddOp(CastSpec(s.half, name, s.half, DataType::kFloat16));
    }
  }
  MG_ASSIGN_OR_RETURN(Graph result, std::move(out).Build());
  MG_RETURN_IF_ERROR(InferShapes(result, ShapeBindings{}));
  return result;
}

}  // namespace memonger::graph
