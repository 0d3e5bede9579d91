#include "graph/onnx/fold_eval.h"

#include "absl/container/flat_hash_set.h"
#include "graph/onnx/fold_internal.h"

namespace memonger::graph::onnx_fold {

// Node access.

const onnx::AttributeProto* FindAttr(const onnx::NodeProto& node, absl::string_view name) {
  for (const onnx::AttributeProto& a : node.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

std::optional<int64_t> AttrInt(const onnx::NodeProto& node, absl::string_view name) {
  const onnx::AttributeProto* a = FindAttr(node, name);
  if (a == nullptr || (a->type() != onnx::AttributeProto::INT && !a->has_i())) return std::nullopt;
  return a->i();
}

std::optional<Dims> AttrInts(const onnx::NodeProto& node, absl::string_view name) {
  const onnx::AttributeProto* a = FindAttr(node, name);
  if (a == nullptr) return std::nullopt;
  return Dims(a->ints().begin(), a->ints().end());
}

const ConstTensor* ValueOf(const std::vector<FoldInput>& inputs, size_t i) {
  return i < inputs.size() && inputs[i].present ? inputs[i].value : nullptr;
}

bool Present(const std::vector<FoldInput>& inputs, size_t i) {
  return i < inputs.size() && inputs[i].present;
}

// The elements of an integer tensor of rank 0 or 1.
std::optional<Dims> IntList(const ConstTensor* t) {
  if (t == nullptr || t->is_real() || t->dims.size() > 1) return std::nullopt;
  return t->ints;
}

// Normalizes a possibly negative axis against `rank`; nullopt when out of [-rank, rank).
std::optional<int64_t> NormalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

Result One(ConstTensor t) {
  std::vector<ConstTensor> out;
  out.push_back(std::move(t));
  return out;
}

bool IsFoldableOp(const onnx::NodeProto& node) {
  static const absl::flat_hash_set<std::string>* const kOps = new absl::flat_hash_set<std::string>{
      "Constant", "Shape", "Size", "Identity", "Cast", "Gather", "Slice", "Concat", "Unsqueeze",
      "Squeeze", "Reshape", "Flatten", "Expand", "Tile", "Transpose", "ConstantOfShape", "Range",
      "Where", "Add", "Sub", "Mul", "Div", "Mod", "Pow", "Min", "Max", "Sum", "Equal", "Less",
      "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Not", "Neg", "Abs",
      "Floor", "Ceil", "Sqrt", "Reciprocal", "Sign", "ReduceProd", "ReduceSum", "ReduceMin",
      "ReduceMax", "ReduceMean"};
  return IsDefaultDomain(node.domain()) && kOps->contains(node.op_type());
}

std::optional<std::vector<ConstTensor>> EvaluateNode(const onnx::NodeProto& node,
                                                     const std::vector<FoldInput>& inputs,
                                                     int64_t max_elements) {
  if (!IsFoldableOp(node)) return std::nullopt;
  const std::string& op = node.op_type();
  const int64_t max = max_elements;
  if (op == "Constant") return EvalConstant(node, max);
  if (node.output_size() != 1) return std::nullopt;  // every op below has one output
  if (op == "Shape" || op == "Size") return EvalShape(node, inputs);

  const ConstTensor* x = ValueOf(inputs, 0);
  if (op == "ConstantOfShape") return EvalConstantOfShape(node, x, max);
  if (op == "Range") return EvalRange(x, ValueOf(inputs, 1), ValueOf(inputs, 2), max);
  if (op == "Concat") return EvalConcat(node, inputs, max);
  if (x == nullptr) return std::nullopt;
  if (op == "Identity" || op == "Not" || op == "Neg" || op == "Abs" || op == "Floor" ||
      op == "Ceil" || op == "Sqrt" || op == "Reciprocal" || op == "Sign") {
    auto r = Unary(op, *x);
    if (!r) return std::nullopt;
    return One(std::move(*r));
  }
  if (op == "Cast") {
    const auto to = AttrInt(node, "to");
    if (!to) return std::nullopt;
    auto r = CastTo(*x, static_cast<int32_t>(*to));
    if (!r) return std::nullopt;
    return One(std::move(*r));
  }
  if (op == "Gather") {
    const ConstTensor* indices = ValueOf(inputs, 1);
    if (indices == nullptr) return std::nullopt;
    return EvalGather(node, *x, *indices, max);
  }
  if (op == "Slice") return EvalSlice(node, inputs, *x, max);
  if (op == "Unsqueeze") return EvalUnsqueeze(node, inputs, *x);
  if (op == "Squeeze") return EvalSqueeze(node, inputs, *x);
  if (op == "Reshape") return EvalReshape(node, *x, ValueOf(inputs, 1));
  if (op == "Flatten") return EvalFlatten(node, *x);
  if (op == "Expand") return EvalExpand(*x, ValueOf(inputs, 1), max);
  if (op == "Tile") return EvalTile(*x, ValueOf(inputs, 1), max);
  if (op == "Transpose") return EvalTranspose(node, *x);
  if (op == "Where") {
    const ConstTensor* a = ValueOf(inputs, 1);
    const ConstTensor* b = ValueOf(inputs, 2);
    if (a == nullptr || b == nullptr) return std::nullopt;
    return EvalWhere(*x, *a, *b, max);
  }
  if (op == "ReduceProd" || op == "ReduceSum" || op == "ReduceMin" || op == "ReduceMax" ||
      op == "ReduceMean") {
    return EvalReduce(node, inputs, *x);
  }
  if (IsComparison(op) || IsLogical(op) || IsArithmetic(op)) {
    // Variadic Min, Max, Sum fold pairwise; the binary ops take exactly two inputs.
    std::optional<ConstTensor> acc = *x;
    size_t count = 1;
    for (size_t i = 1; i < inputs.size(); ++i) {
      const ConstTensor* next = ValueOf(inputs, i);
      if (next == nullptr) return std::nullopt;
      acc = Binary(node, *acc, *next, max);
      if (!acc) return std::nullopt;
      ++count;
    }
    const bool variadic = op == "Min" || op == "Max" || op == "Sum";
    if (count < (variadic ? 1u : 2u) || (!variadic && count != 2)) return std::nullopt;
    return One(std::move(*acc));
  }
  return std::nullopt;
}

}  // namespace memonger::graph::onnx_fold
