// Batch normalisation on the CPU, channel axis 1 (NCHW; Caffe2's NHWC is Unimplemented):
// Caffe2's SpatialBN, ONNX's BatchNormalization, and their gradients. Both ops compute, per
// channel c,
//   Y = (X - mu) * rstd * scale + bias,  rstd = 1 / sqrt(sigma2 + epsilon),
// with the given statistics (mu, sigma2 = mean, var inputs) in inference, and in training with
// the batch's, over N and the spatial dims: mu = mean(X), sigma2 = mean((X - mu)^2) (biased,
// as both Caffe2 and ONNX define it); training also gives running_mean = momentum * mean +
// (1 - momentum) * mu, running_var likewise with sigma2 (momentum default 0.9).
//
// The ops differ in wiring and in what they save:
//   SpatialBN(X, scale, bias, mean, var) -> Y                                      (is_test=1)
//   SpatialBN(...) -> Y, running_mean, running_var, saved_mean, saved_var      (is_test=0)
//       saved_var = rstd: Caffe2's implementation saves the inverse std under that name
//   SpatialBNGradient(X, scale, dY, saved_mean, saved_var = rstd) -> dX, dscale, dbias
//   BatchNormalization(X, scale, B, input_mean, input_var) -> Y, [running_mean, running_var,
//       saved_mean, saved_var]: the mode from graph/batch_normalization_mode.h; outputs after Y
//       in training only; saved_var = sigma2, as ONNX's reference implementation of the opset-9
//       form (what the name says; the gradient recomputes rstd from it and epsilon)
//   BatchNormalizationGradient(dY, X, scale, mean, var) -> dX, dscale, dB, [dmean, dvar]
//       training_mode=1: mean, var are the saved batch statistics; 0: the op's given ones
// Gradients, with xhat = (X - mu) * rstd and m = N * spatial size, per channel:
//   dbias = sum dY,  dscale = sum dY * xhat;
//   training (the statistics depend on X):
//       dX = scale * rstd / m * (m dY - dbias - xhat * dscale)
//   inference (the statistics are inputs of their own):
//       dX = scale * rstd * dY,  dmean = -scale * rstd * dbias,
//       dvar = -scale * rstd^2 * dscale / 2   (d rstd / d var = -rstd^3 / 2)
// The 7-input SpatialBN forms (Caffe2's multi-device sums / aggregated gradients) and ONNX's
// spatial=0 (opset <= 7: statistics per activation) are Unimplemented.
//
// X, Y, dY, dX: float32, float16, bfloat16, float64 storage (one type); the parameters and
// statistics may have other float types (fp16 activations, fp32 statistics). The per-channel
// sums accumulate in float64, in element order, so that statistics over many elements keep
// float32 precision; everything else is float32, rounded once into each output. Running
// statistics may be written in place over mean and var, and Y over X (the same address: each
// is read before it is written); any other overlap is refused.
#include <array>
#include <cmath>
#include <initializer_list>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/batch_normalization_mode.h"
#include "kernels/cpu/kernel_float_io.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/kernel_util.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

using graph::TensorType;
using namespace kernel_internal;  // NOLINT: the helpers of every kernel file

struct BnShape {
  int64_t batch = 0, channels = 0, spatial = 0;
  int64_t count() const { return batch * spatial; }  // elements per channel
};

// X [N, C, spatial...]; the inputs listed in `per_channel` hold C values each.
absl::StatusOr<BnShape> ReadBnShape(const KernelArgs& args, const TensorType& x,
                                    std::initializer_list<int> per_channel) {
  if (x.dims.size() < 2) return KernelError(args, "X must have rank >= 2 (N, C, ...)");
  BnShape s;
  s.batch = x.dims[0];
  s.channels = x.dims[1];
  s.spatial = Product(x.dims, 2, x.dims.size());
  for (int in : per_channel) {
    if (NumElements(args.input_types[in]->dims) != s.channels) {
      return KernelError(args, absl::StrCat("input ", in, " must hold one value per channel (",
                                            s.channels, ")"));
    }
  }
  return s;
}

// Caffe2's `order`: only NCHW is implemented.
absl::Status CheckNchwOrder(const KernelArgs& args) {
  MG_ASSIGN_OR_RETURN(std::optional<std::string> order, StringAttr(args, "order"));
  if (order.has_value() && *order != "NCHW" && *order != "nchw") {
    return KernelUnimplemented(args,
                               absl::StrCat("order '", *order, "' (only NCHW is implemented)"));
  }
  return absl::OkStatus();
}

// The forward outputs by position: Y, running_mean, running_var, saved_mean, saved_var; each
// the index into args.outputs, or -1 when the op does not have it.
using ForwardOutputs = std::array<int, 5>;

// Y may be X exactly (each row of X is read before Y's is written, and the batch statistics
// are computed before any row is); running statistics (positions 1, 2) may be mean/var
// (inputs 3, 4) exactly; no other overlap.
absl::Status CheckStatAlias(const KernelArgs& args, const ForwardOutputs& outputs) {
  for (int in = 0; in < static_cast<int>(args.inputs.size()); ++in) {
    for (int out = 0; out < static_cast<int>(args.outputs.size()); ++out) {
      const bool exact_allowed = (in == 0 && out == outputs[0]) ||
                                 (in == 3 && out == outputs[1]) || (in == 4 && out == outputs[2]);
      if (exact_allowed && args.inputs[in] == args.outputs[out] &&
          ByteSizeOf(*args.input_types[in]) == ByteSizeOf(*args.output_types[out])) {
        continue;
      }
      MG_RETURN_IF_ERROR(CheckNoOverlap(args, in, out));
    }
  }
  return absl::OkStatus();
}

// Per-channel mean and biased variance of X over N and the spatial dims, in float64.
void BatchStatistics(const KernelArgs& args, const FloatLoader& load, const BnShape& s,
                     std::vector<double>& mu, std::vector<double>& sigma2) {
  const auto m = static_cast<double>(s.count());
  mu.assign(static_cast<size_t>(s.channels), 0.0);
  sigma2.assign(mu.size(), 0.0);
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t c = 0; c < s.channels; ++c) {
      const std::vector<float> v =
          load.Run(args.inputs[0], (n * s.channels + c) * s.spatial, s.spatial);
      for (float e : v) mu[c] += e;
    }
  }
  for (double& v : mu) v = m > 0 ? v / m : 0.0;
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t c = 0; c < s.channels; ++c) {
      const std::vector<float> v =
          load.Run(args.inputs[0], (n * s.channels + c) * s.spatial, s.spatial);
      for (float e : v) sigma2[c] += (e - mu[c]) * (e - mu[c]);
    }
  }
  for (double& v : sigma2) v = m > 0 ? v / m : 0.0;
}

// The forward pass both ops share. REQUIRES: inputs X, scale, bias, mean, var; Y at output 0.
// `saved_var_is_rstd`: SpatialBN's fifth output holds rstd, BatchNormalization's sigma2.
absl::Status RunBatchNorm(const KernelArgs& args, const BnShape& s, bool training,
                          const ForwardOutputs& outputs, bool saved_var_is_rstd) {
  const TensorType& x = *args.input_types[0];
  if (*args.output_types[0] != x) return KernelError(args, "Y must have X's type");
  for (int out = 1; out < static_cast<int>(args.outputs.size()); ++out) {
    if (NumElements(args.output_types[out]->dims) != s.channels) {
      return KernelError(args, "the statistics outputs must hold one value per channel");
    }
  }
  MG_ASSIGN_OR_RETURN(const double epsilon, FloatAttr(args, "epsilon", 1e-5));
  MG_ASSIGN_OR_RETURN(const double momentum, FloatAttr(args, "momentum", 0.9));
  MG_ASSIGN_OR_RETURN(const std::vector<float> scale, LoadInput(args, 1));
  MG_ASSIGN_OR_RETURN(const std::vector<float> bias, LoadInput(args, 2));
  MG_ASSIGN_OR_RETURN(const std::vector<float> mean_in, LoadInput(args, 3));
  MG_ASSIGN_OR_RETURN(const std::vector<float> var_in, LoadInput(args, 4));
  MG_ASSIGN_OR_RETURN(const FloatLoader load, LoaderFor(args, x));
  MG_ASSIGN_OR_RETURN(const FloatStorer store, StorerFor(args, x));
  std::vector<float> mu(static_cast<size_t>(s.channels)), rstd(mu.size()), sigma2(mu.size());
  if (!training) {
    for (int64_t c = 0; c < s.channels; ++c) {
      mu[c] = mean_in[c];
      rstd[c] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(var_in[c]) + epsilon));
    }
  } else {
    std::vector<double> mu64, var64;
    BatchStatistics(args, load, s, mu64, var64);
    for (int64_t c = 0; c < s.channels; ++c) {
      mu[c] = static_cast<float>(mu64[c]);
      sigma2[c] = static_cast<float>(var64[c]);
      rstd[c] = static_cast<float>(1.0 / std::sqrt(var64[c] + epsilon));
    }
  }
  std::vector<float> row(static_cast<size_t>(s.spatial));
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t c = 0; c < s.channels; ++c) {
      const int64_t base = (n * s.channels + c) * s.spatial;
      const std::vector<float> v = load.Run(args.inputs[0], base, s.spatial);
      const float a = rstd[c] * scale[c];
      for (int64_t i = 0; i < s.spatial; ++i) row[i] = (v[i] - mu[c]) * a + bias[c];
      store.run(args.outputs[0], base, s.spatial, row.data());
    }
  }
  if (!training) return absl::OkStatus();
  const float mo = static_cast<float>(momentum);
  std::vector<float> running_mean(mu.size()), running_var(mu.size());
  for (int64_t c = 0; c < s.channels; ++c) {
    running_mean[c] = mo * mean_in[c] + (1.0f - mo) * mu[c];
    running_var[c] = mo * var_in[c] + (1.0f - mo) * sigma2[c];
  }
  const std::vector<float>* values[5] = {nullptr, &running_mean, &running_var, &mu,
                                         saved_var_is_rstd ? &rstd : &sigma2};
  for (int pos = 1; pos < 5; ++pos) {
    if (outputs[pos] >= 0) MG_RETURN_IF_ERROR(StoreOutput(args, outputs[pos], *values[pos]));
  }
  return absl::OkStatus();
}

// Where the backward pass finds its tensors (indices into args.inputs / args.outputs).
struct BackwardIo {
  int x = 0, dy = 0, scale = 0;
  int dx = 0, dscale = 1, dbias = 2;
  int dmean = -1, dvar = -1;  // inference only, when present
};

// The backward pass both gradient ops share, from the statistics the forward pass normalised
// with (mu, rstd). REQUIRES: no output overlaps an input.
absl::Status RunBatchNormBackward(const KernelArgs& args, const BnShape& s, const BackwardIo& io,
                                  const std::vector<float>& mu, const std::vector<float>& rstd,
                                  bool training) {
  const TensorType& x = *args.input_types[io.x];
  if (*args.input_types[io.dy] != x || *args.output_types[io.dx] != x) {
    return KernelError(args, "dY and dX must have X's type");
  }
  for (int out : {io.dscale, io.dbias, io.dmean, io.dvar}) {
    if (out >= 0 && NumElements(args.output_types[out]->dims) != s.channels) {
      return KernelError(args, "the parameter gradients must hold one value per channel");
    }
  }
  MG_ASSIGN_OR_RETURN(const std::vector<float> scale, LoadInput(args, io.scale));
  MG_ASSIGN_OR_RETURN(const FloatLoader load, LoaderFor(args, x));
  MG_ASSIGN_OR_RETURN(const FloatStorer store, StorerFor(args, x));
  const int64_t m = s.count();
  std::vector<double> dbias(static_cast<size_t>(s.channels), 0.0), dscale(dbias.size(), 0.0);
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t c = 0; c < s.channels; ++c) {
      const int64_t base = (n * s.channels + c) * s.spatial;
      const std::vector<float> xv = load.Run(args.inputs[io.x], base, s.spatial);
      const std::vector<float> gv = load.Run(args.inputs[io.dy], base, s.spatial);
      for (int64_t i = 0; i < s.spatial; ++i) {
        dbias[c] += gv[i];
        dscale[c] += static_cast<double>(gv[i]) * ((xv[i] - mu[c]) * rstd[c]);
      }
    }
  }
  std::vector<float> row(static_cast<size_t>(s.spatial));
  const float inv_m = m > 0 ? 1.0f / static_cast<float>(m) : 0.0f;
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t c = 0; c < s.channels; ++c) {
      const int64_t base = (n * s.channels + c) * s.spatial;
      const std::vector<float> gv = load.Run(args.inputs[io.dy], base, s.spatial);
      if (training) {
        const std::vector<float> xv = load.Run(args.inputs[io.x], base, s.spatial);
        const float a = scale[c] * rstd[c] * inv_m;
        const float db = static_cast<float>(dbias[c]);
        const float ds = static_cast<float>(dscale[c]);
        for (int64_t i = 0; i < s.spatial; ++i) {
          const float xhat = (xv[i] - mu[c]) * rstd[c];
          row[i] = a * (static_cast<float>(m) * gv[i] - db - xhat * ds);
        }
      } else {
        const float a = scale[c] * rstd[c];
        for (int64_t i = 0; i < s.spatial; ++i) row[i] = a * gv[i];
      }
      store.run(args.outputs[io.dx], base, s.spatial, row.data());
    }
  }
  std::vector<float> ds(dscale.begin(), dscale.end()), db(dbias.begin(), dbias.end());
  MG_RETURN_IF_ERROR(StoreOutput(args, io.dscale, ds));
  MG_RETURN_IF_ERROR(StoreOutput(args, io.dbias, db));
  if (io.dmean >= 0) {
    std::vector<float> dmean(ds.size());
    for (int64_t c = 0; c < s.channels; ++c) {
      dmean[c] = static_cast<float>(-static_cast<double>(scale[c]) * rstd[c] * dbias[c]);
    }
    MG_RETURN_IF_ERROR(StoreOutput(args, io.dmean, dmean));
  }
  if (io.dvar >= 0) {
    std::vector<float> dvar(ds.size());
    for (int64_t c = 0; c < s.channels; ++c) {
      const double r = rstd[c];
      dvar[c] = static_cast<float>(-0.5 * scale[c] * r * r * dscale[c]);
    }
    MG_RETURN_IF_ERROR(StoreOutput(args, io.dvar, dvar));
  }
  return absl::OkStatus();
}

// ---- Caffe2 SpatialBN ------------------------------------------------------------------------

absl::Status SpatialBN(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 5, 7, 1, 5));
  if (args.inputs.size() != 5) {
    return KernelUnimplemented(args, "the 7-input form (sums, sumsq) is not implemented");
  }
  MG_RETURN_IF_ERROR(CheckNchwOrder(args));
  MG_ASSIGN_OR_RETURN(const int64_t is_test, IntAttr(args, "is_test", 0));
  if ((is_test != 0 && args.outputs.size() != 1) || (is_test == 0 && args.outputs.size() != 5)) {
    return KernelError(args, "has 1 output with is_test=1, 5 in training mode");
  }
  const ForwardOutputs outputs =
      is_test != 0 ? ForwardOutputs{0, -1, -1, -1, -1} : ForwardOutputs{0, 1, 2, 3, 4};
  MG_RETURN_IF_ERROR(CheckStatAlias(args, outputs));
  MG_ASSIGN_OR_RETURN(const BnShape s, ReadBnShape(args, *args.input_types[0], {1, 2, 3, 4}));
  return RunBatchNorm(args, s, /*training=*/is_test == 0, outputs, /*saved_var_is_rstd=*/true);
}

absl::Status SpatialBNGradient(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 5, 7, 3, 3));
  if (args.inputs.size() != 5) {
    return KernelUnimplemented(args,
                               "the 7-input form (aggregated dscale, dbias) is not implemented");
  }
  MG_RETURN_IF_ERROR(CheckNchwOrder(args));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  MG_ASSIGN_OR_RETURN(const BnShape s, ReadBnShape(args, *args.input_types[0], {1, 3, 4}));
  MG_ASSIGN_OR_RETURN(const std::vector<float> mu, LoadInput(args, 3));
  MG_ASSIGN_OR_RETURN(const std::vector<float> rstd, LoadInput(args, 4));
  BackwardIo io;
  io.x = 0;
  io.scale = 1;
  io.dy = 2;
  return RunBatchNormBackward(args, s, io, mu, rstd, /*training=*/true);
}

// ---- ONNX BatchNormalization -----------------------------------------------------------------

absl::Status CheckSpatial(const KernelArgs& args) {
  MG_ASSIGN_OR_RETURN(const int64_t spatial, IntAttr(args, "spatial", 1));
  if (spatial == 0) {
    return KernelUnimplemented(args, "spatial=0 (statistics per activation, opset <= 7)");
  }
  return absl::OkStatus();
}

absl::Status BatchNormalization(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 5, 5, 1, 5));
  MG_RETURN_IF_ERROR(CheckSpatial(args));
  MG_ASSIGN_OR_RETURN(const std::optional<int64_t> training_mode,
                      OptionalIntAttr(args, "training_mode"));
  MG_ASSIGN_OR_RETURN(const std::optional<int64_t> is_test, OptionalIntAttr(args, "is_test"));
  // Omitted optional outputs: the importer records the kept outputs' positions.
  MG_ASSIGN_OR_RETURN(const std::optional<Dims> slots, IntsAttr(args, "onnx_output_slots"));
  const int num_outputs = static_cast<int>(args.outputs.size());
  if (slots.has_value() && static_cast<int>(slots->size()) != num_outputs) {
    return KernelError(args, "attribute 'onnx_output_slots' does not match the outputs");
  }
  ForwardOutputs outputs = {-1, -1, -1, -1, -1};
  for (int out = 0; out < num_outputs; ++out) {
    const int64_t pos = slots.has_value() ? (*slots)[out] : out;
    if (pos < 0 || pos > 4 || outputs[pos] >= 0 || (out == 0) != (pos == 0)) {
      return KernelError(args, "attribute 'onnx_output_slots' does not match the outputs");
    }
    outputs[pos] = out;
  }
  // The mode counts the node's outputs as written, omitted ones included.
  const int node_outputs = slots.has_value() ? static_cast<int>(slots->back()) + 1 : num_outputs;
  absl::StatusOr<bool> training =
      graph::BatchNormalizationTrains(training_mode, is_test, node_outputs);
  if (!training.ok()) return KernelError(args, training.status().message());
  MG_RETURN_IF_ERROR(CheckStatAlias(args, outputs));
  MG_ASSIGN_OR_RETURN(const BnShape s, ReadBnShape(args, *args.input_types[0], {1, 2, 3, 4}));
  return RunBatchNorm(args, s, *training, outputs, /*saved_var_is_rstd=*/false);
}

absl::Status BatchNormalizationGradient(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 5, 5, 3, 5));
  MG_RETURN_IF_ERROR(CheckSpatial(args));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  MG_ASSIGN_OR_RETURN(const int64_t training_mode, IntAttr(args, "training_mode", 0));
  MG_ASSIGN_OR_RETURN(const double epsilon, FloatAttr(args, "epsilon", 1e-5));
  if (args.outputs.size() == 4 || (training_mode != 0 && args.outputs.size() != 3)) {
    return KernelError(args, "has dX, dscale, dB, and dmean, dvar in inference mode only");
  }
  MG_ASSIGN_OR_RETURN(const BnShape s, ReadBnShape(args, *args.input_types[1], {2, 3, 4}));
  MG_ASSIGN_OR_RETURN(const std::vector<float> mu, LoadInput(args, 3));
  MG_ASSIGN_OR_RETURN(const std::vector<float> var, LoadInput(args, 4));
  std::vector<float> rstd(var.size());
  for (size_t c = 0; c < var.size(); ++c) {
    rstd[c] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(var[c]) + epsilon));
  }
  BackwardIo io;
  io.dy = 0;
  io.x = 1;
  io.scale = 2;
  if (args.outputs.size() == 5) {
    io.dmean = 3;
    io.dvar = 4;
  }
  return RunBatchNormBackward(args, s, io, mu, rstd, /*training=*/training_mode != 0);
}

}  // namespace

void AddCpuBatchNormKernels(KernelMap& kernels) {
  kernels["SpatialBN"] = SpatialBN;
  kernels["SpatialBNGradient"] = SpatialBNGradient;
  kernels["BatchNormalization"] = BatchNormalization;
  kernels["BatchNormalizationGradient"] = BatchNormalizationGradient;
}

}  // namespace memonger::alloc
