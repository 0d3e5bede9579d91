// Caffe2's SpatialBN on the CPU (NCHW: channel axis 1; NHWC is Unimplemented) and its gradient.
//   SpatialBN(X, scale, bias, mean, var) -> Y                                      (is_test=1)
//       Y = (X - mean) / sqrt(var + epsilon) * scale + bias, with the given statistics
//   SpatialBN(X, scale, bias, mean, var) -> Y, running_mean, running_var, saved_mean,
//       saved_var                                                     (is_test=0, training)
//       per channel c over N and the spatial dims: mu = mean(X), sigma2 = mean((X - mu)^2)
//       (biased); Y = (X - mu) * rstd * scale + bias with rstd = 1 / sqrt(sigma2 + epsilon);
//       running_mean = momentum * mean + (1 - momentum) * mu, running_var likewise with
//       sigma2 (momentum default 0.9); saved_mean = mu and saved_var = rstd: as in Caffe2's
//       implementation, the fifth output holds the inverse standard deviation (Caffe2 names it
//       SAVED_INV_STD), which is what the gradient needs.
//   SpatialBNGradient(X, scale, dY, saved_mean, saved_var = rstd) -> dX, dscale, dbias
//       dbias = sum dY, dscale = sum dY * xhat (xhat = (X - mu) * rstd), and
//       dX = scale * rstd / m * (m dY - dbias - xhat * dscale), m = N * spatial size.
// The 7-input forms (Caffe2's multi-device sums / aggregated gradients) are Unimplemented.
//
// X and dY: float32, float16, bfloat16, float64 storage (one type); the statistics may have
// another float type (fp16 activations, fp32 statistics). The per-channel sums accumulate in
// float64, in element order, so that statistics over many elements keep float32 precision;
// everything else is float32. Running statistics may be written in place over mean and var
// (the same address: each is read before it is written); any other overlap is refused.
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "allocator/kernel_float_io.h"
#include "allocator/kernel_util.h"
#include "allocator/kernels_cpu.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

using graph::TensorType;
using namespace kernel_internal;  // NOLINT: the helpers of every kernel file

struct BnShape {
  int64_t batch = 0, channels = 0, spatial = 0;
};

absl::StatusOr<BnShape> ReadBnShape(const KernelArgs& args, const TensorType& x) {
  MG_ASSIGN_OR_RETURN(std::optional<std::string> order, StringAttr(args, "order"));
  if (order.has_value() && *order != "NCHW" && *order != "nchw") {
    return KernelUnimplemented(args, absl::StrCat("order '", *order, "' (only NCHW is implemented)"));
  }
  if (x.dims.size() < 2) return KernelError(args, "X must have rank >= 2 (N, C, ...)");
  BnShape s;
  s.batch = x.dims[0];
  s.channels = x.dims[1];
  s.spatial = Product(x.dims, 2, x.dims.size());
  for (int in = 1; in < static_cast<int>(args.inputs.size()); ++in) {
    if (in == 2 && args.op->type == "SpatialBNGradient") continue;  // dY
    if (NumElements(args.input_types[in]->dims) != s.channels) {
      return KernelError(args, absl::StrCat("input ", in, " must hold one value per channel (",
                                            s.channels, ")"));
    }
  }
  return s;
}

// Output `out` may be input `in` exactly (running statistics over mean/var); no other overlap.
absl::Status CheckStatAlias(const KernelArgs& args) {
  for (int in = 0; in < static_cast<int>(args.inputs.size()); ++in) {
    for (int out = 0; out < static_cast<int>(args.outputs.size()); ++out) {
      if (args.inputs[in] == args.outputs[out] && (out == 1 || out == 2) && in == out + 2 &&
          ByteSizeOf(*args.input_types[in]) == ByteSizeOf(*args.output_types[out])) {
        continue;
      }
      MG_RETURN_IF_ERROR(CheckNoOverlap(args, in, out));
    }
  }
  return absl::OkStatus();
}

absl::Status SpatialBN(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 5, 7, 1, 5));
  if (args.inputs.size() != 5) {
    return KernelUnimplemented(args, "the 7-input form (sums, sumsq) is not implemented");
  }
  MG_RETURN_IF_ERROR(CheckStatAlias(args));
  const TensorType& x = *args.input_types[0];
  if (*args.output_types[0] != x) return KernelError(args, "Y must have X's type");
  MG_ASSIGN_OR_RETURN(const BnShape s, ReadBnShape(args, x));
  MG_ASSIGN_OR_RETURN(const int64_t is_test, IntAttr(args, "is_test", 0));
  MG_ASSIGN_OR_RETURN(const double epsilon, FloatAttr(args, "epsilon", 1e-5));
  MG_ASSIGN_OR_RETURN(const double momentum, FloatAttr(args, "momentum", 0.9));
  if ((is_test != 0 && args.outputs.size() != 1) || (is_test == 0 && args.outputs.size() != 5)) {
    return KernelError(args, "has 1 output with is_test=1, 5 in training mode");
  }
  for (int out = 1; out < static_cast<int>(args.outputs.size()); ++out) {
    if (NumElements(args.output_types[out]->dims) != s.channels) {
      return KernelError(args, "the statistics outputs must hold one value per channel");
    }
  }
  MG_ASSIGN_OR_RETURN(const std::vector<float> scale, LoadInput(args, 1));
  MG_ASSIGN_OR_RETURN(const std::vector<float> bias, LoadInput(args, 2));
  MG_ASSIGN_OR_RETURN(const std::vector<float> mean_in, LoadInput(args, 3));
  MG_ASSIGN_OR_RETURN(const std::vector<float> var_in, LoadInput(args, 4));
  MG_ASSIGN_OR_RETURN(const FloatLoader load, LoaderFor(args, x));
  MG_ASSIGN_OR_RETURN(const FloatStorer store, StorerFor(args, x));
  const int64_t m = s.batch * s.spatial;
  std::vector<float> mu(static_cast<size_t>(s.channels)), rstd(mu.size()), sigma2(mu.size());
  if (is_test != 0) {
    for (int64_t c = 0; c < s.channels; ++c) {
      mu[c] = mean_in[c];
      rstd[c] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(var_in[c]) + epsilon));
    }
  } else {
    std::vector<double> sum(mu.size(), 0.0), sq(mu.size(), 0.0);
    for (int64_t n = 0; n < s.batch; ++n) {
      for (int64_t c = 0; c < s.channels; ++c) {
        const std::vector<float> v = load.Run(args.inputs[0], (n * s.channels + c) * s.spatial, s.spatial);
        for (float e : v) sum[c] += e;
      }
    }
    for (int64_t c = 0; c < s.channels; ++c) sum[c] = m > 0 ? sum[c] / static_cast<double>(m) : 0.0;
    for (int64_t n = 0; n < s.batch; ++n) {
      for (int64_t c = 0; c < s.channels; ++c) {
        const std::vector<float> v = load.Run(args.inputs[0], (n * s.channels + c) * s.spatial, s.spatial);
        for (float e : v) sq[c] += (e - sum[c]) * (e - sum[c]);
      }
    }
    for (int64_t c = 0; c < s.channels; ++c) {
      const double var = m > 0 ? sq[c] / static_cast<double>(m) : 0.0;
      mu[c] = static_cast<float>(sum[c]);
      sigma2[c] = static_cast<float>(var);
      rstd[c] = static_cast<float>(1.0 / std::sqrt(var + epsilon));
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
  if (is_test == 0) {
    const float mo = static_cast<float>(momentum);
    std::vector<float> running_mean(mu.size()), running_var(mu.size());
    for (int64_t c = 0; c < s.channels; ++c) {
      running_mean[c] = mo * mean_in[c] + (1.0f - mo) * mu[c];
      running_var[c] = mo * var_in[c] + (1.0f - mo) * sigma2[c];
    }
    MG_RETURN_IF_ERROR(StoreOutput(args, 1, running_mean));
    MG_RETURN_IF_ERROR(StoreOutput(args, 2, running_var));
    MG_RETURN_IF_ERROR(StoreOutput(args, 3, mu));
    MG_RETURN_IF_ERROR(StoreOutput(args, 4, rstd));
  }
  return absl::OkStatus();
}

absl::Status SpatialBNGradient(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 5, 7, 3, 3));
  if (args.inputs.size() != 5) {
    return KernelUnimplemented(args, "the 7-input form (aggregated dscale, dbias) is not implemented");
  }
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  const TensorType& x = *args.input_types[0];
  const TensorType& dy = *args.input_types[2];
  if (dy != x || *args.output_types[0] != x) return KernelError(args, "dY and dX must have X's type");
  MG_ASSIGN_OR_RETURN(const BnShape s, ReadBnShape(args, x));
  for (int out : {1, 2}) {
    if (NumElements(args.output_types[out]->dims) != s.channels) {
      return KernelError(args, "dscale and dbias must hold one value per channel");
    }
  }
  MG_ASSIGN_OR_RETURN(const std::vector<float> scale, LoadInput(args, 1));
  MG_ASSIGN_OR_RETURN(const std::vector<float> mu, LoadInput(args, 3));
  MG_ASSIGN_OR_RETURN(const std::vector<float> rstd, LoadInput(args, 4));
  MG_ASSIGN_OR_RETURN(const FloatLoader load, LoaderFor(args, x));
  MG_ASSIGN_OR_RETURN(const FloatStorer store, StorerFor(args, x));
  const int64_t m = s.batch * s.spatial;
  std::vector<double> dbias(static_cast<size_t>(s.channels), 0.0), dscale(dbias.size(), 0.0);
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t c = 0; c < s.channels; ++c) {
      const int64_t base = (n * s.channels + c) * s.spatial;
      const std::vector<float> xv = load.Run(args.inputs[0], base, s.spatial);
      const std::vector<float> gv = load.Run(args.inputs[2], base, s.spatial);
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
      const std::vector<float> xv = load.Run(args.inputs[0], base, s.spatial);
      const std::vector<float> gv = load.Run(args.inputs[2], base, s.spatial);
      const float a = scale[c] * rstd[c] * inv_m;
      const float db = static_cast<float>(dbias[c]);
      const float ds = static_cast<float>(dscale[c]);
      for (int64_t i = 0; i < s.spatial; ++i) {
        const float xhat = (xv[i] - mu[c]) * rstd[c];
        row[i] = a * (static_cast<float>(m) * gv[i] - db - xhat * ds);
      }
      store.run(args.outputs[0], base, s.spatial, row.data());
    }
  }
  std::vector<float> ds(dscale.begin(), dscale.end()), db(dbias.begin(), dbias.end());
  MG_RETURN_IF_ERROR(StoreOutput(args, 1, ds));
  return StoreOutput(args, 2, db);
}

}  // namespace

void AddCpuBatchNormKernels(KernelMap& kernels) {
  kernels["SpatialBN"] = SpatialBN;
  kernels["SpatialBNGradient"] = SpatialBNGradient;
}

}  // namespace memonger::alloc
