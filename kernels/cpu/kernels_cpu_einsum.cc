// ONNX Einsum on the CPU, over GemmCpu (gemm_cpu.h). The equation is resolved against the
// operands' dims by graph/einsum.h, then every operand is a strided view: one stride per label,
// a diagonal (a label repeated in a term) the sum of its dims' strides, a broadcast label
// (absent, or of size 1) stride 0. Operands are contracted left to right, two at a time:
//
//   labels of X or Y are batch (kept, in both), free of X or of Y (kept, in one), or contracted
//   (not kept: summed; stride 0 in an operand without it)
//   for each batch index: pack X as an M x K float32 matrix (free of X by contracted) and Y as
//   K x N, one GemmCpu product, each result stored at its place in the kept labels' layout.
//
// What is kept after a pair is what the output or a later operand names; the last pair writes
// the output. One operand is contracted with a scalar 1 (N = 1): that sums out and transposes.
// Each result is a float32 sum over the contracted labels (in label order, row-major), k
// ascending, as GemmCpu adds; rounded once to the output's element type (float32, float16,
// bfloat16). float64 is summed in double by a plain fma loop, k ascending (GemmCpu is single
// precision); other element types are refused. Cost: the products' multiply-adds plus one packed copy of each operand per batch
// index; a label summed in one operand alone is multiplied by 1s rather than summed first (K
// grows by its size). Memory: the packed operands and intermediates, allocated per call outside
// the arena. The output may share no byte with an input.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/einsum.h"
#include "kernels/cpu/gemm_cpu.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/kernel_util.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

using graph::DataType;
using namespace kernel_internal;  // NOLINT: the helpers of every kernel file

// An operand as the contraction reads it: element type, data, and a stride per label
// (elements); a label not in the map has stride 0.
struct View {
  DataType dtype = DataType::kFloat32;
  const std::byte* data = nullptr;
  std::map<int, int64_t> stride;
};

// Element i as the accumulator type: float32 for the float types, double for float64.
template <typename Acc>
Acc LoadAs(DataType dtype, const std::byte* data, int64_t i) {
  switch (dtype) {
    case DataType::kFloat16: return reinterpret_cast<const Half*>(data)[i].ToFloat();
    case DataType::kBFloat16: return reinterpret_cast<const BFloat16*>(data)[i].ToFloat();
    case DataType::kFloat64: return static_cast<Acc>(reinterpret_cast<const double*>(data)[i]);
    default: return reinterpret_cast<const float*>(data)[i];
  }
}

// Offsets of every index of `labels` (row-major over their sizes) under `stride`.
std::vector<int64_t> Offsets(const std::vector<int>& labels, const std::vector<int64_t>& size,
                             const std::map<int, int64_t>& stride) {
  std::vector<int64_t> offsets{0};
  for (int label : labels) {
    auto it = stride.find(label);
    const int64_t s = it == stride.end() ? 0 : it->second;
    std::vector<int64_t> next;
    next.reserve(offsets.size() * static_cast<size_t>(size[label]));
    for (int64_t o : offsets) {
      for (int64_t i = 0; i < size[label]; ++i) next.push_back(o + i * s);
    }
    offsets = std::move(next);
  }
  return offsets;
}

// Row-major strides of `labels` over their sizes.
std::map<int, int64_t> DenseStrides(const std::vector<int>& labels,
                                    const std::vector<int64_t>& size) {
  std::map<int, int64_t> stride;
  int64_t s = 1;
  for (size_t i = labels.size(); i-- > 0;) {
    stride[labels[i]] = size[labels[i]] == 1 ? 0 : s;
    s *= size[labels[i]];
  }
  return stride;
}

// Where a contraction writes: element type, data and the kept labels' strides.
struct Target {
  DataType dtype = DataType::kFloat32;
  std::byte* data = nullptr;
  std::map<int, int64_t> stride;
};

template <typename Acc>
void StoreAs(const Target& t, int64_t i, Acc v) {
  switch (t.dtype) {
    case DataType::kFloat16:
      reinterpret_cast<Half*>(t.data)[i] = Half::FromFloat(static_cast<float>(v));
      break;
    case DataType::kBFloat16:
      reinterpret_cast<BFloat16*>(t.data)[i] = BFloat16::FromFloat(static_cast<float>(v));
      break;
    case DataType::kFloat64: reinterpret_cast<double*>(t.data)[i] = static_cast<double>(v); break;
    default: reinterpret_cast<float*>(t.data)[i] = static_cast<float>(v);
  }
}

// Contracts x and y (labels xs, ys as in the terms) into `kept`, written through `target`.
template <typename Acc>
absl::Status Contract(const KernelArgs& args, const View& x, const std::vector<int>& xs,
                      const View& y, const std::vector<int>& ys, const std::vector<int>& kept,
                      const std::vector<int64_t>& size, const Target& target) {
  auto has = [](const std::vector<int>& labels, int l) {
    return std::find(labels.begin(), labels.end(), l) != labels.end();
  };
  std::vector<int> batch, free_x, free_y, contracted;
  for (int l : kept) {
    if (has(xs, l) && has(ys, l)) batch.push_back(l);
    else if (has(xs, l)) free_x.push_back(l);
    else free_y.push_back(l);
  }
  std::vector<int> all = xs;
  all.insert(all.end(), ys.begin(), ys.end());
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  for (int l : all) {
    if (!has(kept, l)) contracted.push_back(l);
  }
  const std::vector<int64_t> bx = Offsets(batch, size, x.stride);
  const std::vector<int64_t> by = Offsets(batch, size, y.stride);
  const std::vector<int64_t> bt = Offsets(batch, size, target.stride);
  const std::vector<int64_t> mx = Offsets(free_x, size, x.stride);
  const std::vector<int64_t> mt = Offsets(free_x, size, target.stride);
  const std::vector<int64_t> kx = Offsets(contracted, size, x.stride);
  const std::vector<int64_t> ky = Offsets(contracted, size, y.stride);
  const std::vector<int64_t> ny = Offsets(free_y, size, y.stride);
  const std::vector<int64_t> nt = Offsets(free_y, size, target.stride);
  const int64_t m = static_cast<int64_t>(mx.size());
  const int64_t n = static_cast<int64_t>(ny.size());
  const int64_t k = static_cast<int64_t>(kx.size());
  std::vector<Acc> a(static_cast<size_t>(m * k));
  std::vector<Acc> b(static_cast<size_t>(k * n));
  for (size_t bi = 0; bi < bx.size(); ++bi) {
    if (m == 0 || n == 0) break;
    const int64_t base = bt[bi];
    if (k == 0) {  // an empty sum: zeros
      for (int64_t r = 0; r < m; ++r) {
        for (int64_t c = 0; c < n; ++c) StoreAs<Acc>(target, base + mt[r] + nt[c], Acc(0));
      }
      continue;
    }
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t c = 0; c < k; ++c) a[r * k + c] = LoadAs<Acc>(x.dtype, x.data, bx[bi] + mx[r] + kx[c]);
    }
    for (int64_t r = 0; r < k; ++r) {
      for (int64_t c = 0; c < n; ++c) b[r * n + c] = LoadAs<Acc>(y.dtype, y.data, by[bi] + ky[r] + ny[c]);
    }
    if constexpr (std::is_same_v<Acc, double>) {
      // float64: GemmCpu is single precision; the plain loop, k ascending.
      for (int64_t r = 0; r < m; ++r) {
        for (int64_t c = 0; c < n; ++c) {
          double acc = 0;
          for (int64_t i = 0; i < k; ++i) acc = std::fma(a[r * k + i], b[i * n + c], acc);
          StoreAs<Acc>(target, base + mt[r] + nt[c], acc);
        }
      }
    } else {
      const GemmOperand ga{DataType::kFloat32, reinterpret_cast<const std::byte*>(a.data()), k,
                           false};
      const GemmOperand gb{DataType::kFloat32, reinterpret_cast<const std::byte*>(b.data()), n,
                           false};
      // The epilogue writes disjoint elements: safe on several threads.
      MG_RETURN_IF_ERROR(GemmCpu(
          m, n, k, ga, gb,
          [&](int64_t row, int64_t col, int64_t count, const float* acc) {
            const int64_t at = base + mt[row];
            for (int64_t j = 0; j < count; ++j) StoreAs<Acc>(target, at + nt[col + j], acc[j]);
          },
          args.threads, GemmKernel::kAuto, GemmScratch{args.scratch, 0}));
    }
  }
  return absl::OkStatus();
}

template <typename Acc>
absl::Status EinsumAs(const KernelArgs& args) {
  const DataType dtype = args.output_types[0]->dtype;
  constexpr DataType kHeld = std::is_same_v<Acc, double> ? DataType::kFloat64 : DataType::kFloat32;
  for (const graph::TensorType* t : args.input_types) {
    if (t->dtype != dtype) {
      return KernelError(args, absl::StrCat("every input must have the output's element type ",
                                            graph::DataTypeName(dtype), ", got ",
                                            graph::TensorTypeToString(*t)));
    }
  }
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  MG_ASSIGN_OR_RETURN(const std::optional<std::string> equation, StringAttr(args, "equation"));
  if (!equation.has_value()) return KernelError(args, "needs the attribute 'equation'");
  std::vector<Dims> dims;
  for (const graph::TensorType* t : args.input_types) dims.push_back(t->dims);
  absl::StatusOr<graph::EinsumSpec> resolved = graph::ResolveEinsum(*equation, dims);
  if (!resolved.ok()) return KernelError(args, resolved.status().message());
  const graph::EinsumSpec& spec = *resolved;
  if (spec.output_dims != args.output_types[0]->dims) {
    return KernelError(args, absl::StrCat("the output ",
                                          graph::TensorTypeToString(*args.output_types[0]),
                                          " is not the equation's [",
                                          absl::StrJoin(spec.output_dims, ","), "]"));
  }
  const std::vector<int64_t>& size = spec.label_size;
  // Each operand's view: a repeated label's strides add up (its diagonal); size 1 broadcasts.
  std::vector<View> views;
  std::vector<std::vector<int>> labels;
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    View v{dtype, args.inputs[i], {}};
    const Dims strides = Strides(dims[i]);
    std::vector<int> distinct;
    for (size_t d = 0; d < dims[i].size(); ++d) {
      const int l = spec.operands[i].labels[d];
      if (dims[i][d] != 1) v.stride[l] += strides[d];
      if (std::find(distinct.begin(), distinct.end(), l) == distinct.end()) distinct.push_back(l);
    }
    views.push_back(std::move(v));
    labels.push_back(std::move(distinct));
  }
  const Target output{dtype, args.outputs[0], DenseStrides(spec.output_labels, size)};
  if (views.size() == 1) {
    static const Acc kOne = Acc(1);
    const View one{kHeld, reinterpret_cast<const std::byte*>(&kOne), {}};
    return Contract<Acc>(args, views[0], labels[0], one, {}, spec.output_labels, size, output);
  }
  // Left to right; an intermediate keeps what the output or a later operand names, in label
  // order, as float32.
  View left = views[0];
  std::vector<int> left_labels = labels[0];
  std::vector<Acc> held;
  for (size_t i = 1; i < views.size(); ++i) {
    if (i + 1 == views.size()) {
      return Contract<Acc>(args, left, left_labels, views[i], labels[i], spec.output_labels, size,
                      output);
    }
    std::vector<int> kept;
    for (int l : left_labels) kept.push_back(l);
    for (int l : labels[i]) kept.push_back(l);
    std::sort(kept.begin(), kept.end());
    kept.erase(std::unique(kept.begin(), kept.end()), kept.end());
    kept.erase(std::remove_if(kept.begin(), kept.end(),
                              [&](int l) {
                                if (std::find(spec.output_labels.begin(), spec.output_labels.end(),
                                              l) != spec.output_labels.end()) {
                                  return false;
                                }
                                for (size_t j = i + 1; j < views.size(); ++j) {
                                  if (std::find(labels[j].begin(), labels[j].end(), l) !=
                                      labels[j].end()) {
                                    return false;
                                  }
                                }
                                return true;
                              }),
               kept.end());
    int64_t count = 1;
    for (int l : kept) count *= size[l];
    std::vector<Acc> next(static_cast<size_t>(count));
    const Target into{kHeld, reinterpret_cast<std::byte*>(next.data()),
                      DenseStrides(kept, size)};
    MG_RETURN_IF_ERROR(Contract<Acc>(args, left, left_labels, views[i], labels[i], kept, size, into));
    held = std::move(next);
    left = View{kHeld, reinterpret_cast<const std::byte*>(held.data()), into.stride};
    left_labels = kept;
  }
  return absl::OkStatus();
}

absl::Status Einsum(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, -1, 1, 1));
  switch (args.output_types[0]->dtype) {
    case DataType::kFloat32:
    case DataType::kFloat16:
    case DataType::kBFloat16: return EinsumAs<float>(args);
    case DataType::kFloat64: return EinsumAs<double>(args);
    default:
      return UnsupportedDtype(args, args.output_types[0]->dtype,
                              "float32, float16, bfloat16, float64");
  }
}

}  // namespace

void AddCpuEinsumKernels(KernelMap& kernels) { kernels["Einsum"] = Einsum; }

}  // namespace memonger::alloc
