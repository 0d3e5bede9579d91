// ONNX SoftmaxCrossEntropyLoss (how torch.onnx.export writes F.cross_entropy) and its gradient:
//   SoftmaxCrossEntropyLoss(scores [N, C, d...], labels [N, d...], [weights [C]])
//       -> loss, [log_prob [N, C, d...]]
//   SoftmaxCrossEntropyLossGradient(dLoss, scores, labels, [weights]) -> dScores
// Per sample i = (n, d...) with label l != ignore_index: log_prob = scores - logsumexp over C,
// loss_i = -w_l log_prob_l (w = 1 without weights); an ignored sample has loss 0 and weight 0.
// reduction "none": loss [N, d...] = loss_i; "sum": the sum; "mean" (the default): the sum over
// the sum of the samples' weights (0 / 0 = NaN where every sample is ignored, as PyTorch).
// Gradient: dScores[i, c] = g_i w_l (softmax_c - [c == l]), g_i = dLoss[i] ("none"), dLoss
// ("sum"), dLoss / sum of weights ("mean"); 0 for an ignored sample. The softmax is recomputed
// from the scores (the rule keeps the scores, as PyTorch keeps its log-softmax: the same bytes).
// A label outside [0, C) that is not ignore_index is an InvalidArgument naming it. Storage
// float32, float16, bfloat16 (float64 passes through float32); sums in float64 in class order.
// Outputs must not overlap inputs.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/kernel_float_io.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/kernel_util.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

using graph::DataType;
using graph::TensorType;
using namespace kernel_internal;  // NOLINT: the helpers of every kernel file

enum class Reduction { kNone, kSum, kMean };

// The geometry and attributes both kernels read: scores at `scores`, labels at `labels`,
// weights at `weights` (-1: none).
struct Problem {
  int64_t n = 0, classes = 0, inner = 0;  // scores [n, classes, inner...]
  Reduction reduction = Reduction::kMean;
  std::optional<int64_t> ignore_index;
  std::vector<int64_t> labels;  // n * inner
  std::vector<double> weights;  // classes entries, or empty
};

absl::StatusOr<Problem> ReadProblem(const KernelArgs& args, int scores, int labels, int weights) {
  Problem p;
  const TensorType& s = *args.input_types[scores];
  const TensorType& l = *args.input_types[labels];
  if (s.dims.size() < 2) return KernelError(args, "scores must be [N, C, d...]");
  p.n = s.dims[0];
  p.classes = s.dims[1];
  p.inner = 1;
  for (size_t k = 2; k < s.dims.size(); ++k) p.inner *= s.dims[k];
  if (NumElements(l.dims) != p.n * p.inner ||
      (l.dtype != DataType::kInt64 && l.dtype != DataType::kInt32)) {
    return KernelError(args, absl::StrCat("labels must be int64 or int32 with ", p.n * p.inner,
                                          " elements; got ", graph::TensorTypeToString(l)));
  }
  MG_ASSIGN_OR_RETURN(const std::optional<std::string> reduction, StringAttr(args, "reduction"));
  const std::string r = reduction.value_or("mean");
  if (r == "none") {
    p.reduction = Reduction::kNone;
  } else if (r == "sum") {
    p.reduction = Reduction::kSum;
  } else if (r != "mean") {
    return KernelError(args, absl::StrCat("reduction '", r, "' (none, sum or mean)"));
  }
  MG_ASSIGN_OR_RETURN(const std::optional<int64_t> ignore, OptionalIntAttr(args, "ignore_index"));
  p.ignore_index = ignore;
  for (int64_t i = 0; i < p.n * p.inner; ++i) {
    const int64_t label = l.dtype == DataType::kInt64
                              ? reinterpret_cast<const int64_t*>(args.inputs[labels])[i]
                              : reinterpret_cast<const int32_t*>(args.inputs[labels])[i];
    if (label != ignore.value_or(std::numeric_limits<int64_t>::min()) &&
        (label < 0 || label >= p.classes)) {
      return KernelError(args, absl::StrCat("labels[", i, "] = ", label, " is outside [0, ",
                                            p.classes, ")"));
    }
    p.labels.push_back(label);
  }
  if (weights >= 0) {
    const TensorType& w = *args.input_types[weights];
    if (w.dtype != s.dtype || NumElements(w.dims) != p.classes) {
      return KernelError(args, absl::StrCat("weights must hold ", p.classes,
                                            " elements of the scores' type"));
    }
    MG_ASSIGN_OR_RETURN(const FloatLoader load, LoaderFor(args, w));
    for (int64_t c = 0; c < p.classes; ++c) p.weights.push_back(load.At(args.inputs[weights], c));
  }
  return p;
}

bool Ignored(const Problem& p, int64_t i) {
  return p.ignore_index.has_value() && p.labels[i] == *p.ignore_index;
}

double WeightOf(const Problem& p, int64_t i) {
  if (Ignored(p, i)) return 0;
  return p.weights.empty() ? 1.0 : p.weights[p.labels[i]];
}

// The scores of sample i = (n, s) as doubles, class by class.
std::vector<double> Row(const FloatLoader& load, const std::byte* scores, const Problem& p,
                        int64_t i) {
  const int64_t n = i / p.inner, s = i % p.inner;
  std::vector<double> row(p.classes);
  for (int64_t c = 0; c < p.classes; ++c) row[c] = load.At(scores, (n * p.classes + c) * p.inner + s);
  return row;
}

double LogSumExp(const std::vector<double>& row) {
  double m = -std::numeric_limits<double>::infinity();
  for (double v : row) m = std::max(m, v);
  if (!std::isfinite(m)) return m;
  double sum = 0;
  for (double v : row) sum += std::exp(v - m);
  return m + std::log(sum);
}

absl::Status SoftmaxCrossEntropyLoss(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 2, 3, 1, 2));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  MG_ASSIGN_OR_RETURN(const Problem p, ReadProblem(args, 0, 1, args.inputs.size() > 2 ? 2 : -1));
  const TensorType& s = *args.input_types[0];
  const int64_t samples = p.n * p.inner;
  const TensorType& loss = *args.output_types[0];
  const int64_t loss_count = p.reduction == Reduction::kNone ? samples : 1;
  if (loss.dtype != s.dtype || NumElements(loss.dims) != loss_count) {
    return KernelError(args, absl::StrCat("the loss must hold ", loss_count,
                                          " elements of the scores' type"));
  }
  if (args.outputs.size() > 1 && *args.output_types[1] != s) {
    return KernelError(args, "log_prob must have the scores' type");
  }
  MG_ASSIGN_OR_RETURN(const FloatLoader load, LoaderFor(args, s));
  MG_ASSIGN_OR_RETURN(const FloatStorer store, StorerFor(args, s));
  std::vector<float> per_sample(static_cast<size_t>(samples));
  const bool with_log_prob = args.outputs.size() > 1;
  double total = 0, weight_sum = 0;
  for (int64_t i = 0; i < samples; ++i) {
    const std::vector<double> row = Row(load, args.inputs[0], p, i);
    const double lse = LogSumExp(row);
    const double w = WeightOf(p, i);
    const double li = Ignored(p, i) ? 0.0 : -w * (row[p.labels[i]] - lse);
    per_sample[i] = static_cast<float>(li);
    total += li;
    weight_sum += w;
    if (with_log_prob) {
      const int64_t n = i / p.inner, sp = i % p.inner;
      for (int64_t c = 0; c < p.classes; ++c) {
        const float v = static_cast<float>(row[c] - lse);
        store.run(args.outputs[1], (n * p.classes + c) * p.inner + sp, 1, &v);
      }
    }
  }
  if (p.reduction == Reduction::kNone) {
    store.run(args.outputs[0], 0, samples, per_sample.data());
  } else {
    const float value = static_cast<float>(p.reduction == Reduction::kSum ? total
                                                                          : total / weight_sum);
    store.run(args.outputs[0], 0, 1, &value);
  }
  return absl::OkStatus();
}

absl::Status SoftmaxCrossEntropyLossGradient(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 3, 4, 1, 1));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  MG_ASSIGN_OR_RETURN(const Problem p, ReadProblem(args, 1, 2, args.inputs.size() > 3 ? 3 : -1));
  const TensorType& s = *args.input_types[1];
  const TensorType& dloss = *args.input_types[0];
  const int64_t samples = p.n * p.inner;
  const int64_t dloss_count = p.reduction == Reduction::kNone ? samples : 1;
  if (dloss.dtype != s.dtype || NumElements(dloss.dims) != dloss_count ||
      *args.output_types[0] != s) {
    return KernelError(args, absl::StrCat("dLoss must hold ", dloss_count,
                                          " elements of the scores' type, dScores their type"));
  }
  MG_ASSIGN_OR_RETURN(const FloatLoader load, LoaderFor(args, s));
  MG_ASSIGN_OR_RETURN(const FloatStorer store, StorerFor(args, s));
  double weight_sum = 0;
  for (int64_t i = 0; i < samples; ++i) weight_sum += WeightOf(p, i);
  for (int64_t i = 0; i < samples; ++i) {
    double g = load.At(args.inputs[0], p.reduction == Reduction::kNone ? i : 0);
    if (p.reduction == Reduction::kMean) g /= weight_sum;
    g *= WeightOf(p, i);
    const std::vector<double> row = Row(load, args.inputs[1], p, i);
    const double lse = LogSumExp(row);
    const int64_t n = i / p.inner, sp = i % p.inner;
    for (int64_t c = 0; c < p.classes; ++c) {
      const double d = Ignored(p, i) ? 0.0
                                     : g * (std::exp(row[c] - lse) - (c == p.labels[i] ? 1 : 0));
      const float v = static_cast<float>(d);
      store.run(args.outputs[0], (n * p.classes + c) * p.inner + sp, 1, &v);
    }
  }
  return absl::OkStatus();
}

}  // namespace

void AddCpuSoftmaxCrossEntropyKernels(KernelMap& kernels) {
  kernels["SoftmaxCrossEntropyLoss"] = SoftmaxCrossEntropyLoss;
  kernels["SoftmaxCrossEntropyLossGradient"] = SoftmaxCrossEntropyLossGradient;
}

}  // namespace memonger::alloc
