// Internal to graph/onnx/: the helpers the constant evaluator's files share (const_tensor.cc,
// fold_eval.cc, fold_elementwise.cc, fold_shape_ops.cc), the folding driver onnx_fold.cc and
// the child process that both it and libonnx's inference run in (onnx_shape_inference.cc).
// Nothing outside this folder includes it (tools/check_layering.py), and it is not installed;
// the evaluator's interface is fold_eval.h.
#ifndef MEMONGER_GRAPH_ONNX_FOLD_INTERNAL_H_
#define MEMONGER_GRAPH_ONNX_FOLD_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/onnx/const_tensor.h"
#include "graph/onnx/fold_eval.h"
#include "onnx/onnx_pb.h"

namespace memonger::graph::onnx_fold {

using Dims = std::vector<int64_t>;
using onnx::TensorProto;
// What an evaluator returns: one tensor per output, or nullopt when it does not fold.
using Result = std::optional<std::vector<ConstTensor>>;

inline bool IsDefaultDomain(const std::string& domain) {
  return domain.empty() || domain == "ai.onnx";
}

// Element types (const_tensor.cc).
bool IsRealType(int32_t dtype);
// Wraps an integer to the range of `dtype` as a C cast would; bool becomes 0/1.
int64_t WrapInt(int32_t dtype, int64_t v);
// Number of elements of `dims`; nullopt for a negative dim or more than `max` elements.
std::optional<int64_t> CountElements(const Dims& dims, int64_t max);
int64_t Product(const Dims& dims, size_t begin, size_t end);
ConstTensor MakeTensor(int32_t dtype, Dims dims, int64_t n);
double RealAt(const ConstTensor& t, int64_t i);
// Copies element `from` of `src` to element `to` of `dst` (same dtype).
void CopyElement(const ConstTensor& src, int64_t from, ConstTensor& dst, int64_t to);
// Converts a real to an integer of `dtype`; nullopt when it does not fit int64 or is not finite.
std::optional<int64_t> RealToInt(int32_t dtype, double v);

// Node access (fold_eval.cc).
const onnx::AttributeProto* FindAttr(const onnx::NodeProto& node, absl::string_view name);
std::optional<int64_t> AttrInt(const onnx::NodeProto& node, absl::string_view name);
std::optional<Dims> AttrInts(const onnx::NodeProto& node, absl::string_view name);
const ConstTensor* ValueOf(const std::vector<FoldInput>& inputs, size_t i);
bool Present(const std::vector<FoldInput>& inputs, size_t i);
// The elements of an integer tensor of rank 0 or 1.
std::optional<Dims> IntList(const ConstTensor* t);
// Normalizes a possibly negative axis against `rank`; nullopt when out of [-rank, rank).
std::optional<int64_t> NormalizeAxis(int64_t axis, int64_t rank);
Result One(ConstTensor t);

// Graph edits (onnx_fold.cc): removes the nodes `removed` marks (by index) and the value_info
// of the names in `dropped` (a removed value's inferred type would shadow what replaces it).
void RemoveNodes(onnx::GraphProto& graph, const std::vector<bool>& removed,
                 const absl::flat_hash_set<std::string>& dropped);

// Broadcasting, numpy rules (fold_elementwise.cc).
std::optional<Dims> BroadcastShapes(const std::vector<const Dims*>& shapes);
// For each element of `out` (row-major), the index of the element of `in` broadcast to it.
std::vector<int64_t> BroadcastIndex(const Dims& in, const Dims& out, int64_t n);
// Visits every element of a row-major tensor of `dims`, passing its multi-index.
template <typename F>
void ForEachIndex(const Dims& dims, int64_t n, F&& f) {
  Dims idx(dims.size(), 0);
  for (int64_t e = 0; e < n; ++e) {
    f(e, idx);
    for (size_t k = dims.size(); k-- > 0;) {
      if (++idx[k] < dims[k]) break;
      idx[k] = 0;
    }
  }
}
Dims RowMajorStrides(const Dims& dims);

// Elementwise ops (fold_elementwise.cc).
bool IsComparison(const std::string& op);
bool IsLogical(const std::string& op);
bool IsArithmetic(const std::string& op);
std::optional<ConstTensor> Binary(const onnx::NodeProto& node, const ConstTensor& a,
                                  const ConstTensor& b, int64_t max);
std::optional<ConstTensor> Unary(const std::string& op, const ConstTensor& x);
std::optional<ConstTensor> CastTo(const ConstTensor& x, int32_t to);

// Shape and data movement ops, reductions (fold_shape_ops.cc).
Result EvalConstant(const onnx::NodeProto& node, int64_t max);
Result EvalShape(const onnx::NodeProto& node, const std::vector<FoldInput>& inputs);
Result EvalGather(const onnx::NodeProto& node, const ConstTensor& data, const ConstTensor& indices,
                  int64_t max);
Result EvalSlice(const onnx::NodeProto& node, const std::vector<FoldInput>& inputs,
                 const ConstTensor& data, int64_t max);
Result EvalConcat(const onnx::NodeProto& node, const std::vector<FoldInput>& inputs,
                  int64_t max);
Result EvalUnsqueeze(const onnx::NodeProto& node, const std::vector<FoldInput>& inputs,
                     const ConstTensor& data);
Result EvalSqueeze(const onnx::NodeProto& node, const std::vector<FoldInput>& inputs,
                   const ConstTensor& data);
Result EvalReshape(const onnx::NodeProto& node, const ConstTensor& data, const ConstTensor* shape);
Result EvalFlatten(const onnx::NodeProto& node, const ConstTensor& data);
Result EvalExpand(const ConstTensor& data, const ConstTensor* shape, int64_t max);
Result EvalTile(const ConstTensor& data, const ConstTensor* repeats, int64_t max);
Result EvalTranspose(const onnx::NodeProto& node, const ConstTensor& data);
Result EvalConstantOfShape(const onnx::NodeProto& node, const ConstTensor* shape, int64_t max);
Result EvalRange(const ConstTensor* start, const ConstTensor* limit, const ConstTensor* delta,
                 int64_t max);
Result EvalWhere(const ConstTensor& cond, const ConstTensor& x, const ConstTensor& y,
                 int64_t max);
Result EvalReduce(const onnx::NodeProto& node, const std::vector<FoldInput>& inputs,
                  const ConstTensor& data);

// The child process (onnx_shape_inference.cc). libonnx's shape functions crash on some
// malformed models, so whatever runs them runs in a forked child: `work` there, its reply sent
// back through a pipe. A child killed by a signal is an InvalidArgument; the child's error
// comes back with its code and message. Forking costs more than libonnx's inference of a
// model of a few hundred nodes (the child's copy-on-write faults), which is why the folding
// driver runs all its rounds in one child rather than one child per inference. Where fork or
// pipe fail, `work` runs in this process.
struct ChildReply {
  absl::Status status;
  std::string bytes;  // with an OK status: what the parent receives
};
absl::StatusOr<std::string> RunInChild(const std::function<ChildReply()>& work);

// RunOnnxShapeInference's work, in this process: only inside RunInChild's `work`.
absl::Status InferShapesInProcess(onnx::ModelProto& model, bool strict);

}  // namespace memonger::graph::onnx_fold

#endif  // MEMONGER_GRAPH_ONNX_FOLD_INTERNAL_H_
