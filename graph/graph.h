// graph/: the model every other layer reads, and everything that builds it: loaders (NetDef and
// Caffe2 nets, usage records, ONNX in graph/onnx/), op schemas, shape inference, the gradient
// builder. This header is its centre.
//
// The graph model: ops in program order, values (SSA tensor versions), and the edges between
// them. Everything downstream (shape inference, liveness, planners, the executor) reads this.
//
// Values are SSA versions of blob names. A name written by an op that does not read it starts a
// new value (version 0, 1, ...). An op whose output name equals one of its input names writes in
// place: the output is a new value whose `inplace_of` is that input, and the two occupy the same
// memory (one alias class). An input name is resolved to the latest version written before the
// op in program order; if the name is written only later (and by exactly one op), the input
// refers to that value, so nets whose ops are not listed in dependency order still load, and a
// cycle among them is reported.
//
//   GraphBuilder b("net");
//   b.AddExternalInput("x");
//   b.AddOp({.type = "Relu", .inputs = {"x"}, .outputs = {"y"}});
//   b.AddExternalOutput("y");
//   absl::StatusOr<Graph> g = std::move(b).Build();
#ifndef MEMONGER_GRAPH_GRAPH_H_
#define MEMONGER_GRAPH_GRAPH_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "graph/attribute.h"
#include "graph/name_index.h"
#include "graph/tensor_data.h"
#include "graph/tensor_type.h"
#include "util/boxed.h"

namespace memonger::graph {

struct UsageRecord;  // graph/records.h

using ValueId = int32_t;
using OpId = int32_t;
inline constexpr int32_t kNone = -1;

// An op's inputs or outputs: a handful each, so held inline (as small as a std::vector, without
// its heap array: on a million-value graph those arrays, each a cache miss away, were most of
// the time liveness took).
using ValueIdList = absl::InlinedVector<ValueId, 4>;

enum class Role : uint8_t { kInput, kOutput, kParam, kActivation, kGradient, kWorkspace, kConstant };

absl::string_view RoleName(Role role);  // "input", "output", ...
absl::StatusOr<Role> ParseRole(absl::string_view name);

// Static values (params, constants) are not placed in the arena unless asked.
inline bool IsStatic(Role role) { return role == Role::kParam || role == Role::kConstant; }

// Caffe2 device types: 0 CPU, 1 CUDA, 6 HIP, ...; the device's index. Two bytes each (a net
// file's values beyond util::kMaxDeviceField are refused where it is read): one per op, and
// one per value in a liveness.
struct Device {
  int16_t type = 0;
  int16_t id = 0;
  friend bool operator==(const Device& a, const Device& b) {
    return a.type == b.type && a.id == b.id;
  }
  friend bool operator!=(const Device& a, const Device& b) { return !(a == b); }
};
std::string DeviceToString(const Device& device);  // "cpu", "cuda:1"

// A dimension as declared by a net: a number, or a symbol bound later. The symbol may be an
// expression of symbols in graph/dim_expr.h's grammar ("n + 1"); text that is neither is one
// opaque symbol, as an ONNX dim_param may be anything. Every parameter of a big net declares
// its shape, and the symbol is empty on almost all: a RareString (a dim takes 16 bytes, not 40).
struct DeclaredDim {
  DeclaredDim() = default;
  DeclaredDim(int64_t size, std::string symbol) : size(size), symbol(std::move(symbol)) {}

  int64_t size = 0;
  util::RareString symbol;  // non-empty: a symbolic dim
};

// A declared shape: two dims inline (what most parameters declare), so that a declaration is
// one heap block (a vector in a box was two, 64-80 bytes against 48).
using DeclaredDims = absl::InlinedVector<DeclaredDim, 2>;

// What the net file says about a value (memonger.proto ValueInfo, ONNX value_info).
struct Declaration {
  DataType dtype = DataType::kUndefined;
  // nullopt: shape not declared. Boxed: most values of a big graph declare nothing.
  util::Boxed<DeclaredDims> dims;
};

// A million-value graph holds a million of these: fields are ordered to pad as little as they
// can (two bytes after role_declared).
struct Value {
  std::string name;  // the blob name (shared by all versions)
  int32_t version = 0;
  OpId producer = kNone;         // kNone for external inputs, params, constants
  ValueId inplace_of = kNone;    // the value this one overwrites in place, if any
  Role role = Role::kActivation;
  bool role_declared = false;  // the file states the role (value_info, DeclareRole)
  int64_t alignment = 0;           // extra byte alignment required (0: the plan's default)
  Declaration declared;
  std::optional<TensorType> type;  // set by shape inference or an importer

  // "x" for version 0, "x@1" for later versions: unique within a graph.
  std::string DisplayName() const;
};

// A static value with storage of its own: an external param or constant. A later version an op
// writes in place over it (a param's update, graph/update_in_backward.h) shares that storage.
inline bool OwnsStaticStorage(const Value& v) { return IsStatic(v.role) && v.producer == kNone; }

// ByteSize of a typed value, its errors naming the value. The name is built only for an error:
// a million values each formatting it were a tenth of a planning run. REQUIRES: v.type.
absl::StatusOr<int64_t> ValueByteSize(const Value& v);

// A value whose size depends on tensor values (NonZero's count, NonMaxSuppression's
// selections): the importer sizes it at an upper bound its op's inputs give
// (graph/onnx/size_bounds.h), and every value computed from it at the size that bound gives.
// A plan then holds any run within the bounds; an executor must size such values at run time.
struct DataDependentSize {
  std::string value;  // the op's output
  std::string why;    // "NonZero: at most the 3234 elements of 'x'"
};
struct DataDependentSizes {
  std::vector<DataDependentSize> bounded;
  // Every value whose size or data follows from a bound: the bounded outputs, what ops compute
  // from them, and the constants the importer folded from their shapes (a TopK's k).
  absl::flat_hash_set<std::string> derived;
};

struct Op {
  std::string name;  // may be empty in the file; Build() names it "<type>_<index>"
  std::string type;
  util::RareString domain;  // ONNX domain; empty for ours (and so a pointer's worth)
  ValueIdList inputs;   // in the op's order; may repeat a value
  ValueIdList outputs;  // in the op's order
  util::RareVector<ValueId> control_inputs;  // ordering only, not read; on few ops
  std::vector<Attribute> attrs;
  Device device;
  util::RareString engine;  // Caffe2's engine ("CUDNN"); empty on most ops
  bool is_gradient_op = false;
  bool view = false;  // may return a view of its first input

  AttributeView attributes() const { return AttributeView(attrs); }
  // "FC 'fc1'" for messages.
  std::string Label() const;
};

class Graph {
 public:
  Graph() = default;
  // The name index reads the values' own names: a copy builds its own (O(values)); a move keeps
  // the values' storage, and so the index, in place.
  Graph(const Graph& other);
  Graph& operator=(const Graph& other);
  Graph(Graph&&) noexcept = default;
  Graph& operator=(Graph&&) noexcept = default;

  const std::string& name() const { return name_; }
  const std::vector<Value>& values() const { return values_; }
  const std::vector<Op>& ops() const { return ops_; }
  const Value& value(ValueId id) const { return values_[id]; }
  const Op& op(OpId id) const { return ops_[id]; }
  Value& mutable_value(ValueId id) { return values_[id]; }
  int num_values() const { return static_cast<int>(values_.size()); }
  int num_ops() const { return static_cast<int>(ops_.size()); }

  // External inputs (including params and constants) and external outputs, as declared.
  const std::vector<ValueId>& inputs() const { return inputs_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  const std::vector<ValueId>& losses() const { return losses_; }
  // (param, gradient) pairs declared by the net.
  const std::vector<std::pair<ValueId, ValueId>>& param_grads() const { return param_grads_; }
  bool prefers_parallel() const { return prefers_parallel_; }
  // Caffe2's NetDef `type` ("simple", "dag", "async_scheduling", ...; "" when not given).
  const std::string& net_type() const { return net_type_; }

  // The latest version of `name` (the one a reader after the last op sees); nullopt if absent.
  std::optional<ValueId> FindValue(absl::string_view name) const;
  // Every version of `name`, oldest first.
  std::vector<ValueId> FindVersions(absl::string_view name) const;
  // The same, without a copy (empty for an unknown name); valid while the graph is.
  absl::Span<const ValueId> Versions(absl::string_view name) const;

  // The ops reading `id`, ascending, each op once (control inputs are not reads). Held for all
  // values in one array (4 bytes a reader): a list in every Value took 24 bytes of each of a
  // 4M-op net's 7M values.
  absl::Span<const OpId> consumers(ValueId id) const {
    return absl::MakeConstSpan(consumer_ops_.data() + consumer_starts_[id],
                               consumer_starts_[id + 1] - consumer_starts_[id]);
  }

  // Ops in a dependency order: program order when that is already one, else the order Kahn's
  // algorithm gives when it always takes the ready op listed first. Build() guarantees a DAG.
  const std::vector<OpId>& TopologicalOrder() const { return topological_order_; }

  // True when every value has a type (shape inference done).
  bool AllTypesKnown() const;

  // The data the model file holds for its static values (graph/tensor_data.h); null when the
  // format carries none (a NetDef). Shared: copies and rewrites of the graph keep it.
  const StaticData* static_data() const { return static_data_.get(); }
  const std::shared_ptr<const StaticData>& shared_static_data() const { return static_data_; }
  void set_static_data(std::shared_ptr<const StaticData> data) { static_data_ = std::move(data); }

  // The values an importer sized at an upper bound (DataDependentSize); empty for most nets.
  // Shared: copies and rewrites keep them.
  const std::vector<DataDependentSize>& data_dependent_sizes() const;
  // Whether value `name`'s size or data follows from a bound (DataDependentSizes::derived).
  bool SizedFromBound(absl::string_view name) const;
  void set_data_dependent_sizes(DataDependentSizes sizes);

  // Per value, the first value of its in-place chain (itself when it overwrites nothing), the
  // chain's memory. O(values): a value overwrites one created before it.
  std::vector<ValueId> InPlaceRoots() const;

 private:
  friend class GraphBuilder;
  // Records need no names resolved (one value each, ops at their step boundaries): their graph
  // is assembled directly, a million records in a fraction of what GraphBuilder takes.
  friend absl::StatusOr<Graph> GraphFromRecords(const std::vector<UsageRecord>& records,
                                                const std::string& name);
  std::string name_;
  std::vector<Value> values_;
  std::vector<Op> ops_;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
  std::vector<ValueId> losses_;
  std::vector<std::pair<ValueId, ValueId>> param_grads_;
  // Sets consumer_starts_ and consumer_ops_ from the ops' inputs. O(values + inputs).
  void IndexConsumers();

  std::vector<OpId> topological_order_;
  // consumers(v) is consumer_ops_[consumer_starts_[v], consumer_starts_[v + 1]).
  std::vector<int32_t> consumer_starts_;
  std::vector<OpId> consumer_ops_;
  bool prefers_parallel_ = false;
  std::string net_type_;
  std::shared_ptr<const StaticData> static_data_;
  std::shared_ptr<const DataDependentSizes> data_dependent_sizes_;
  // Per name, its versions in order. It reads the names in values_, whose storage never moves
  // once a graph is built (graph/name_index.h).
  NameIndex versions_;
};

// What an importer hands the builder for one op: names, not ids.
struct OpSpec {
  std::string name;
  std::string type;
  std::string domain;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::vector<std::string> control_inputs;
  std::vector<Attribute> attrs;
  Device device;
  std::string engine;
  bool is_gradient_op = false;
  bool view = false;
};

// Collects a net's parts in any order, then resolves names to SSA values and validates.
class GraphBuilder {
 public:
  explicit GraphBuilder(std::string name) : name_(std::move(name)) {}

  void AddExternalInput(std::string name) { external_inputs_.push_back(std::move(name)); }
  void AddExternalOutput(std::string name) { external_outputs_.push_back(std::move(name)); }
  void AddOp(OpSpec op);
  // Room for `count` ops, for a caller that knows how many it will add: the ops' storage then
  // holds no slack (a vector grown by doubling held up to twice a million-op net's ops).
  void ReserveOps(size_t count) {
    ops_.reserve(count);
    op_name_counts_.reserve(count);
  }
  // A role from the file (ROLE_UNSPECIFIED is simply not declared). Applies to every version.
  void DeclareRole(std::string name, Role role) { facts_[std::move(name)].role = role; }
  void Declare(std::string name, Declaration declaration, int64_t alignment = 0) {
    NameFacts& facts = facts_[std::move(name)];
    facts.declaration = std::move(declaration);
    facts.declared = true;
    if (alignment > 0) facts.alignment = alignment;
  }
  void AddLoss(std::string name) { losses_.push_back(std::move(name)); }
  void AddParamGrad(std::string param, std::string grad) {
    param_grads_.emplace_back(std::move(param), std::move(grad));
  }
  void SetPrefersParallel(bool parallel) { prefers_parallel_ = parallel; }
  void SetNetType(std::string type) { net_type_ = std::move(type); }
  // The model's static data (Graph::static_data), handed to the built graph.
  void SetStaticData(std::shared_ptr<const StaticData> data) { static_data_ = std::move(data); }
  // The source graph's data-dependent sizes (Graph::data_dependent_sizes), for a rewrite.
  void SetDataDependentSizes(const Graph& source) {
    data_dependent_sizes_ = source.data_dependent_sizes_;
  }

  // Resolves and validates. InvalidArgument, naming the op and value, for: an empty value or op
  // type name, an input neither produced by an op nor external, an op listing one output twice,
  // an input written later by several ops (ambiguous), an external input also written by an op
  // before it is read... (see graph.cc), an unknown loss or param-grad name, and a cycle (the
  // message names a value on it).
  absl::StatusOr<Graph> Build() &&;

 private:
  std::string name_;
  std::vector<std::string> external_inputs_;
  std::vector<std::string> external_outputs_;
  // Each spec is held as the op it becomes, less its value ids, beside the names it reads and
  // writes: Build() hands the ops to the graph as they are and fills in the ids, so a big net's
  // specs and ops are never both held at full size (that was a million-value graph's peak).
  // The names are one buffer of characters and each name's end, in the order added (an op's
  // inputs, outputs, control inputs): three vectors of strings per op were a quarter of a
  // 4M-op net's load peak, and the millions of small blocks they freed stayed in its resident
  // size as holes.
  struct OpNameCounts {
    uint32_t inputs = 0;
    uint32_t outputs = 0;
    uint32_t control_inputs = 0;
  };
  uint32_t AddNames(const std::vector<std::string>& names);
  absl::string_view Name(size_t k) const {
    const size_t begin = k == 0 ? 0 : name_ends_[k - 1];
    return absl::string_view(name_chars_).substr(begin, name_ends_[k] - begin);
  }
  std::vector<Op> ops_;
  std::vector<OpNameCounts> op_name_counts_;  // op_name_counts_[i]: ops_[i]'s
  std::string name_chars_;
  std::vector<size_t> name_ends_;
  // What the file says of a name, in one map: a net declaring every parameter's role and shape
  // (the workload generators) held each name in three maps, 130 MB for a million-op net.
  struct NameFacts {
    Declaration declaration;  // for the name's first version (later ones copy it)
    int64_t alignment = 0;    // 0: not declared
    std::optional<Role> role;  // for every version
    bool declared = false;     // `declaration` was given
  };
  absl::flat_hash_map<std::string, NameFacts> facts_;
  std::vector<std::string> losses_;
  std::vector<std::pair<std::string, std::string>> param_grads_;
  bool prefers_parallel_ = false;
  std::string net_type_;
  std::shared_ptr<const StaticData> static_data_;
  std::shared_ptr<const DataDependentSizes> data_dependent_sizes_;

  // Build()'s steps, in order (graph.cc says what each checks).
  // A read of a name no op has written yet in program order, resolved once all ops are read.
  struct PendingRead {
    OpId op;
    size_t slot;
    bool control;
    std::string name;  // a copy: the builder's names are released after the first pass
  };
  absl::Status CheckOpNames();
  ValueId NewValue(Graph& g, std::string name, OpId producer);
  absl::Status ResolveInProgramOrder(Graph& g, std::vector<PendingRead>& pending);
  static absl::Status ResolveLaterWrites(Graph& g, const std::vector<PendingRead>& pending);
  absl::Status ResolveNamedValues(Graph& g) const;
  absl::Status AssignRoles(Graph& g) const;
  static absl::Status OrderOps(Graph& g);
};

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_GRAPH_H_
