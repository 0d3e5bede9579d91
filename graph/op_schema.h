// Op schemas: for each op type, how many inputs/outputs it takes and how its output types follow
// from its input types and attributes. The table is built once and immutable afterwards; it is
// passed to whoever needs it (no global registry).
//
//   const OpSchemaTable& table = OpSchemaTable::Builtin();
//   if (const OpSchema* s = table.Find("MatMul")) { ... s->infer(context) ... }
#ifndef MEMONGER_GRAPH_OP_SCHEMA_H_
#define MEMONGER_GRAPH_OP_SCHEMA_H_

#include <functional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "graph/attribute.h"
#include "graph/tensor_type.h"

namespace memonger::graph {

// What a shape function sees of one op.
struct ShapeContext {
  absl::string_view op_type;
  absl::string_view op_name;
  std::vector<TensorType> inputs;
  int num_outputs = 0;
  AttributeView attrs;

  // InvalidArgument "<type> op '<name>': <message>".
  absl::Status Error(absl::string_view message) const;
};

using ShapeFunction = std::function<absl::StatusOr<std::vector<TensorType>>(const ShapeContext&)>;

struct OpSchema {
  std::string type;
  int min_inputs = 0;
  int max_inputs = 0;   // -1: unbounded
  int min_outputs = 1;
  int max_outputs = 1;  // -1: unbounded
  ShapeFunction infer;  // returns exactly num_outputs types
  // May return a view of input 0 (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Expand).
  bool view_capable = false;
  // Inputs whose element type the op fixes (a label is int32, a condition bool), first the
  // type Caffe2 uses by default. Shape inference types an undeclared graph input from these
  // (graph/shape_inference.h); the shape function still checks every input it reads.
  struct TypedInput {
    int slot = 0;
    std::vector<DataType> allowed;  // non-empty; allowed[0] is the default
    // When non-empty: the types are fixed only while this int attribute is 0 or absent
    // (SoftmaxWithLoss's label_prob=1 takes float labels).
    std::string unless_attr;
  };
  std::vector<TypedInput> typed_inputs;
  // The allowed types of input `slot` of an op with `attrs`; nullptr when not fixed.
  const std::vector<DataType>* AllowedInputTypes(int slot, const AttributeView& attrs) const;
};

class OpSchemaTable {
 public:
  // The schemas memonger knows (see docs/ops.md). Built on first use, never changed.
  static const OpSchemaTable& Builtin();

  const OpSchema* Find(absl::string_view type) const;
  std::vector<std::string> Types() const;  // sorted

  // For building tables (tests may build their own).
  void Add(OpSchema schema);
  // Fixes the element types of input `slot` of each of `types` (already added; MG_CHECKed).
  void SetTypedInput(const std::vector<absl::string_view>& types, int slot,
                     std::vector<DataType> allowed, absl::string_view unless_attr = "");

 private:
  absl::flat_hash_map<std::string, OpSchema> schemas_;
};

// Registration helpers, one per family of ops; each file adds its family to a table.
void AddElementwiseSchemas(OpSchemaTable& table);  // graph/schemas_elementwise.cc
void AddTensorSchemas(OpSchemaTable& table);       // graph/schemas_tensor.cc
void AddNnSchemas(OpSchemaTable& table);           // graph/schemas_nn.cc
void AddLossSchemas(OpSchemaTable& table);         // graph/schemas_loss.cc
void AddGradientSchemas(OpSchemaTable& table);     // graph/schemas_gradient.cc
void AddAttentionSchemas(OpSchemaTable& table);    // graph/schemas_attention.cc

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_OP_SCHEMA_H_
