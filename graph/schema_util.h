// Helpers shared by the op schema files (graph/schemas_*.cc): registration with argument
// checks, axis normalisation, numpy broadcasting, typed attribute reads, and the shape rules
// that a forward op and its gradient op both need (FC, MatMul, Conv/pooling windows, binary
// elementwise broadcasting, LayerNorm statistics).
//
// Nothing here is part of the library's interface: it lives in `schema_internal` so that the
// schema files can share it and tests can reach it without widening the public headers.
//
//   table.Add(schema_internal::MakeSchema("Relu", /*inputs=*/{1, 1}, /*outputs=*/{1, 1},
//       [](const ShapeContext& ctx) -> absl::StatusOr<std::vector<TensorType>> {
//         return std::vector<TensorType>{ctx.inputs[0]};
//       }));
//
// Every shape function registered through MakeSchema may rely on: the input and output counts
// lie within the schema's ranges, every input has a defined dtype, and no input dim is
// negative. Errors are InvalidArgument from ctx.Error naming the op, except shapes that depend
// on the *values* of an input tensor (an ONNX Reshape's shape input, say): those are
// Unimplemented (see ValueDependent), because no dtype/shape rule can answer them.
#ifndef MEMONGER_GRAPH_SCHEMA_UTIL_H_
#define MEMONGER_GRAPH_SCHEMA_UTIL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/op_schema.h"
#include "graph/tensor_type.h"

namespace memonger::graph::schema_internal {

using Dims = std::vector<int64_t>;
using TypeList = std::vector<TensorType>;

// An inclusive count range; max -1 is unbounded.
struct Arity {
  int min = 0;
  int max = 0;
};

// A schema whose shape function first checks the guarantees listed above, then calls `infer`,
// then checks that it returned exactly num_outputs types (Internal error otherwise: a bug here,
// not in the net).
OpSchema MakeSchema(absl::string_view type, Arity inputs, Arity outputs, ShapeFunction infer,
                    bool view_capable = false);

// Adds one schema per type name, all sharing `inputs`, `outputs` and `infer`.
void AddSchemas(OpSchemaTable& table, const std::vector<absl::string_view>& types,
                Arity inputs, Arity outputs, const ShapeFunction& infer,
                bool view_capable = false);

// Unimplemented "<type> op '<name>': <message>": the output shape depends on the values held by
// an input tensor, which shape inference does not know.
absl::Status ValueDependent(const ShapeContext& ctx, absl::string_view message);

// "float16[2,3]".
inline std::string Str(const TensorType& t) { return TensorTypeToString(t); }

// ---- attributes ---------------------------------------------------------------------------
// Present attributes of the wrong kind are errors ("attribute 'axis' must be an int"), not
// silently the default.
absl::StatusOr<int64_t> IntAttr(const ShapeContext& ctx, absl::string_view name,
                                int64_t fallback);
absl::StatusOr<std::optional<int64_t>> OptionalIntAttr(const ShapeContext& ctx,
                                                       absl::string_view name);
absl::StatusOr<std::optional<Dims>> IntsAttr(const ShapeContext& ctx, absl::string_view name);
absl::StatusOr<std::optional<std::string>> StringAttr(const ShapeContext& ctx,
                                                      absl::string_view name);

// How an integer dtype attribute is numbered.
enum class DtypeNumbering {
  kOnnx,    // ONNX TensorProto.DataType (FLOAT=1, ..., FLOAT16=10, BFLOAT16=16)
  kCaffe2,  // Caffe2 TensorProto.DataType (FLOAT=1, INT32=2, ..., FLOAT16=12, DOUBLE=13)
};
// Reads a dtype attribute given as an int (numbered as `numbering` says) or as a name
// ("float16", "FLOAT16", "fp16", "bf16", ...). nullopt when absent.
absl::StatusOr<std::optional<DataType>> DtypeAttr(const ShapeContext& ctx,
                                                  absl::string_view name,
                                                  DtypeNumbering numbering);
absl::StatusOr<DataType> Caffe2DataType(const ShapeContext& ctx, int64_t number);

// ---- axes, products, broadcasting -----------------------------------------------------------
// Maps `axis` in [-rank, rank-1] (or [-rank, rank] when `allow_end`, for axes that name a
// position between dims, as Flatten's does) to [0, rank-1] (or [0, rank]).
absl::StatusOr<int64_t> NormalizeAxis(const ShapeContext& ctx, int64_t axis, int64_t rank,
                                      absl::string_view what, bool allow_end = false);

// Product of dims[begin, end), overflow-checked.
absl::StatusOr<int64_t> Product(const ShapeContext& ctx, const Dims& dims, size_t begin,
                                size_t end);
inline absl::StatusOr<int64_t> Product(const ShapeContext& ctx, const Dims& dims) {
  return Product(ctx, dims, 0, dims.size());
}

// numpy multidirectional broadcasting. "inputs [2,3] and [4,3] do not broadcast".
absl::StatusOr<Dims> Broadcast(const ShapeContext& ctx, const Dims& a, const Dims& b);
// True when `from` broadcasts to exactly `to` (ONNX unidirectional broadcasting).
bool BroadcastsTo(const Dims& from, const Dims& to);

// ---- input checks ----------------------------------------------------------------------------
// `name` is the input's role in the op's signature ("X", "W", "dY").
absl::Status CheckRank(const ShapeContext& ctx, absl::string_view name, const TensorType& t,
                       int64_t min_rank, int64_t max_rank);  // max -1: unbounded
absl::Status CheckSameDtype(const ShapeContext& ctx, absl::string_view a_name,
                            const TensorType& a, absl::string_view b_name, const TensorType& b);
absl::Status CheckSameType(const ShapeContext& ctx, absl::string_view a_name,
                           const TensorType& a, absl::string_view b_name, const TensorType& b);
absl::Status CheckFloat(const ShapeContext& ctx, absl::string_view name, const TensorType& t);
absl::Status CheckDtypeIn(const ShapeContext& ctx, absl::string_view name, const TensorType& t,
                          const std::vector<DataType>& allowed);
absl::Status CheckOneElement(const ShapeContext& ctx, absl::string_view name,
                             const TensorType& t);

// ---- rules shared by forward and gradient ops -----------------------------------------------
// Add/Sub/Mul/Div output dims: numpy broadcasting, or Caffe2's legacy `broadcast`=1 (B matches
// a contiguous run of A's dims starting at `axis`, default: A's trailing dims; result: A's dims).
absl::StatusOr<Dims> BinaryElementwiseDims(const ShapeContext& ctx, const TensorType& a,
                                           const TensorType& b);

// Caffe2 FC: X flattened at `axis` to [M, K], W flattened at `axis_w` to [N, K] ([K, N] when
// transposed). Y = X.dims[:axis] + [N].
struct FcShape {
  Dims y;
  int64_t n = 0;
};
absl::StatusOr<FcShape> InferFc(const ShapeContext& ctx, const TensorType& x,
                                const TensorType& w, bool transposed);

// ONNX MatMul (numpy matmul: 1-D promotion, broadcast batch dims); Caffe2's `trans_a` and
// `trans_b` (BatchMatMul) swap the last two dims of an operand of rank >= 2 first.
absl::StatusOr<Dims> MatMulDims(const ShapeContext& ctx, const TensorType& a,
                                const TensorType& b);

// Conv (X, W) and pooling (X) output types, NCHW or NHWC (`order`), 1 to 3 spatial dims for
// Conv (any number for pooling), Caffe2 and ONNX attribute spellings.
absl::StatusOr<TensorType> InferConv(const ShapeContext& ctx, const TensorType& x,
                                     const TensorType& w);
absl::StatusOr<TensorType> InferPool(const ShapeContext& ctx, const TensorType& x);
// The same windows in closed form, for symbolic shapes (graph/symbolic_shapes.h): output
// spatial dim i is ceil((in_i + offsets[i]) / strides[i]) (floor((in + pads - dilated kernel) /
// stride) + 1; SAME padding: ceil(in / stride)), every spatial dim 1 for global pooling.
// `exact` is false when ceil_mode rounds (its last-window rule has no such form). The errors
// are InferConv's and InferPool's.
struct WindowMap {
  bool nchw = true;
  bool global = false;
  bool exact = true;
  int64_t maps = 0;  // Conv: output channels
  std::vector<int64_t> offsets;
  std::vector<int64_t> strides;
};
absl::StatusOr<WindowMap> ConvWindowMap(const ShapeContext& ctx, const TensorType& x,
                                        const TensorType& w);
absl::StatusOr<WindowMap> PoolWindowMap(const ShapeContext& ctx, const TensorType& x);
// The channel dim of X: 1 for NCHW, rank-1 for NHWC (`order` attribute, default NCHW).
absl::StatusOr<int64_t> ChannelAxis(const ShapeContext& ctx, const TensorType& x);

// Normalisation statistics dims for X normalised over axes >= axis: X.dims[:axis] followed by
// ones (`keep_rank`, ONNX LayerNormalization) or by one single 1 (Caffe2 LayerNorm).
Dims StatisticsDims(const Dims& x, int64_t axis, bool keep_rank);

// Caffe2 LabelCrossEntropy inputs: X [N, D] (or [D], N = 1), floating-point; label [N] or
// [N, 1], int32. Returns N.
absl::StatusOr<int64_t> CheckLabelCrossEntropy(const ShapeContext& ctx, const TensorType& x,
                                               const TensorType& label);
// Caffe2 CrossEntropy inputs: X [N, D] (or [D]) and a label of X's type. Returns N.
absl::StatusOr<int64_t> CheckCrossEntropy(const ShapeContext& ctx, const TensorType& x,
                                          const TensorType& label);
// Caffe2 SoftmaxWithLoss inputs: logits X flattened at `axis` (default 1) to [N, D]; labels
// [N] or [N, 1] int32, or with label_prob=1 X's dtype and [N, D]; optional weights [N].
absl::Status CheckSoftmaxWithLoss(const ShapeContext& ctx, const TensorType& x,
                                  const TensorType& labels, const TensorType* weights);

}  // namespace memonger::graph::schema_internal

#endif  // MEMONGER_GRAPH_SCHEMA_UTIL_H_
