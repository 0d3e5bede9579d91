#include "kernels/cpu/rnn_cell.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/in_place.h"
#include "kernels/cpu/kernel_float_io.h"
#include "kernels/kernel_util.h"
#include "util/status_macros.h"

namespace memonger::alloc::rnn_internal {
namespace {

using graph::DataType;
using graph::TensorType;
using namespace kernel_internal;  // NOLINT: the helpers of every kernel file

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// Parameters: how many of alpha/beta an activation takes, and their ONNX defaults.
struct ActivationSpec {
  const char* name;
  Activation::Kind kind;
  int params;  // 0, 1 (alpha) or 2 (alpha, beta)
  float alpha, beta;
};
constexpr ActivationSpec kActivations[] = {
    {"Relu", Activation::kRelu, 0, 0, 0},
    {"Tanh", Activation::kTanh, 0, 0, 0},
    {"Sigmoid", Activation::kSigmoid, 0, 0, 0},
    {"Affine", Activation::kAffine, 2, 1.0f, 0.0f},
    {"LeakyRelu", Activation::kLeakyRelu, 1, 0.01f, 0},
    {"ThresholdedRelu", Activation::kThresholdedRelu, 1, 1.0f, 0},
    {"ScaledTanh", Activation::kScaledTanh, 2, 1.0f, 1.0f},
    {"HardSigmoid", Activation::kHardSigmoid, 2, 0.2f, 0.5f},
    {"Elu", Activation::kElu, 1, 1.0f, 0},
    {"Softsign", Activation::kSoftsign, 0, 0, 0},
    {"Softplus", Activation::kSoftplus, 0, 0, 0},
};

absl::StatusOr<std::vector<double>> FloatsAttr(const KernelArgs& args, absl::string_view name) {
  const graph::Attribute* a = FindAttr(args, name);
  if (a == nullptr) return std::vector<double>{};
  if (const auto* v = std::get_if<std::vector<double>>(&a->data)) return *v;
  if (const auto* v = std::get_if<double>(&a->data)) return std::vector<double>{*v};
  return KernelError(args, absl::StrCat("attribute '", name, "' must be a list of floats"));
}

// The activations of every direction: `per_direction` functions each (f, g[, h]), from
// `activations` (all directions' names, or one direction's repeated for both) or the defaults.
// alpha and beta are consumed in order by the functions that take them; a function without a
// given value takes its ONNX default.
absl::StatusOr<std::vector<Activation>> ReadActivations(const KernelArgs& args,
                                                        const std::vector<std::string>& defaults,
                                                        int directions) {
  std::vector<std::string> names;
  if (const graph::Attribute* a = FindAttr(args, "activations")) {
    if (const auto* v = std::get_if<std::vector<std::string>>(&a->data)) {
      names = *v;
    } else if (const auto* s = std::get_if<std::string>(&a->data)) {
      names = {*s};
    } else {
      return KernelError(args, "attribute 'activations' must be a list of strings");
    }
  }
  const size_t per_direction = defaults.size();
  if (names.empty()) {
    for (int d = 0; d < directions; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  } else if (names.size() == per_direction && directions == 2) {
    names.insert(names.end(), names.begin(), names.begin() + static_cast<long>(per_direction));
  }
  if (names.size() != per_direction * static_cast<size_t>(directions)) {
    return KernelError(args, absl::StrCat("attribute 'activations' names ", names.size(),
                                          " functions; ", per_direction * directions,
                                          " expected (", per_direction, " per direction)"));
  }
  MG_ASSIGN_OR_RETURN(const std::vector<double> alphas, FloatsAttr(args, "activation_alpha"));
  MG_ASSIGN_OR_RETURN(const std::vector<double> betas, FloatsAttr(args, "activation_beta"));
  size_t next_alpha = 0, next_beta = 0;
  std::vector<Activation> out;
  for (const std::string& name : names) {
    const ActivationSpec* spec = nullptr;
    for (const ActivationSpec& s : kActivations) {
      if (absl::EqualsIgnoreCase(name, s.name)) spec = &s;
    }
    if (spec == nullptr) {
      return KernelUnimplemented(args, absl::StrCat("activation '", name, "' is not supported"));
    }
    Activation act{spec->kind, spec->alpha, spec->beta};
    if (spec->params >= 1 && next_alpha < alphas.size()) act.alpha = alphas[next_alpha++];
    if (spec->params >= 2 && next_beta < betas.size()) act.beta = betas[next_beta++];
    out.push_back(act);
  }
  return out;
}

absl::Status CheckDims(const KernelArgs& args, const TensorType& t, const Dims& want,
                       absl::string_view what) {
  if (t.dims != want) {
    return KernelError(args, absl::StrCat(what, " has dims [", absl::StrJoin(t.dims, ", "),
                                          "]; [", absl::StrJoin(want, ", "), "] expected"));
  }
  return absl::OkStatus();
}

}  // namespace

int GateCount(Cell cell) { return cell == Cell::kRnn ? 1 : cell == Cell::kGru ? 3 : 4; }

float Activation::operator()(float x) const {
  switch (kind) {
    case kRelu: return std::max(x, 0.0f);
    case kTanh: return std::tanh(x);
    case kSigmoid: return Sigmoid(x);
    case kAffine: return alpha * x + beta;
    case kLeakyRelu: return x >= 0 ? x : alpha * x;
    case kThresholdedRelu: return x > alpha ? x : 0.0f;
    case kScaledTanh: return alpha * std::tanh(beta * x);
    case kHardSigmoid: return std::clamp(alpha * x + beta, 0.0f, 1.0f);
    case kElu: return x >= 0 ? x : alpha * (std::exp(x) - 1.0f);
    case kSoftsign: return x / (1.0f + std::abs(x));
    case kSoftplus: return std::log1p(std::exp(x));
  }
  return x;
}

float Activation::Derivative(float x) const {
  switch (kind) {
    case kRelu: return x > 0 ? 1.0f : 0.0f;
    case kTanh: {
      const float t = std::tanh(x);
      return 1.0f - t * t;
    }
    case kSigmoid: {
      const float s = Sigmoid(x);
      return s * (1.0f - s);
    }
    case kAffine: return alpha;
    case kLeakyRelu: return x >= 0 ? 1.0f : alpha;
    case kThresholdedRelu: return x > alpha ? 1.0f : 0.0f;
    case kScaledTanh: {
      const float t = std::tanh(beta * x);
      return alpha * beta * (1.0f - t * t);
    }
    case kHardSigmoid: {
      const float v = alpha * x + beta;
      return v > 0.0f && v < 1.0f ? alpha : 0.0f;
    }
    case kElu: return x >= 0 ? 1.0f : alpha * std::exp(x);
    case kSoftsign: {
      const float d = 1.0f + std::abs(x);
      return 1.0f / (d * d);
    }
    case kSoftplus: return Sigmoid(x);
  }
  return 1.0f;
}

absl::StatusOr<RnnSpec> ResolveRnn(const KernelArgs& args, Cell cell, bool gradient) {
  const int forward_inputs = cell == Cell::kLstm ? 8 : 6;
  const int state_outputs = cell == Cell::kLstm ? 3 : 2;
  if (gradient) {
    MG_RETURN_IF_ERROR(CheckArity(args, 5, 12, 1, 7));
  } else {
    MG_RETURN_IF_ERROR(CheckArity(args, 3, forward_inputs, 0, state_outputs));
  }
  RnnSpec s;
  s.cell = cell;
  s.gates = GateCount(cell);
  for (int slot = 0; slot < 3; ++slot) {
    if (FindInputSlot(args, slot) != slot) {
      return KernelError(args, "inputs X, W and R are required");
    }
  }
  s.b = FindInputSlot(args, 3);
  s.lens = FindInputSlot(args, 4);
  s.initial_h = FindInputSlot(args, 5);
  if (cell == Cell::kLstm) {
    s.initial_c = FindInputSlot(args, 6);
    s.peepholes = FindInputSlot(args, 7);
  }
  if (gradient) {
    // Positions the cell does not have (GRU's initial_c, ...) must be empty.
    for (const int64_t slot : InputSlots(args)) {
      if (slot >= forward_inputs && slot < 8) {
        return KernelError(args, absl::StrCat("input position ", slot, " is not an input of ",
                                              cell == Cell::kRnn ? "RNN" : "GRU"));
      }
    }
    for (const int64_t slot : OutputSlots(args)) {
      if ((slot == 5 || slot == 6) && cell != Cell::kLstm) {
        return KernelError(args, absl::StrCat("output position ", slot, " is not a gradient of ",
                                              cell == Cell::kRnn ? "RNN" : "GRU"));
      }
    }
    s.y = FindInputSlot(args, 8);
    if (s.y < 0) return KernelError(args, "input Y (position 8) is required");
    s.dy = FindInputSlot(args, 9);
    s.dy_h = FindInputSlot(args, 10);
    if (cell == Cell::kLstm) s.dy_c = FindInputSlot(args, 11);
    if (s.dy < 0 && s.dy_h < 0 && s.dy_c < 0) {
      return KernelError(args, "no incoming gradient (dY, dY_h or dY_c)");
    }
    s.dx = FindOutputSlot(args, 0);
    s.dw = FindOutputSlot(args, 1);
    s.dr = FindOutputSlot(args, 2);
    s.db = FindOutputSlot(args, 3);
    s.d_initial_h = FindOutputSlot(args, 4);
    s.d_initial_c = FindOutputSlot(args, 5);
    s.dp = FindOutputSlot(args, 6);
  } else {
    s.y = FindOutputSlot(args, 0);
    s.y_h = FindOutputSlot(args, 1);
    if (cell == Cell::kLstm) s.y_c = FindOutputSlot(args, 2);
  }

  MG_ASSIGN_OR_RETURN(const std::optional<std::string> direction, StringAttr(args, "direction"));
  const std::string dir = direction.value_or("forward");
  if (dir == "bidirectional") {
    s.directions = 2;
  } else if (dir == "reverse") {
    s.reverse_only = true;
  } else if (dir != "forward") {
    return KernelError(args, absl::StrCat("direction '", dir, "' is not forward, reverse or "
                                          "bidirectional"));
  }
  MG_ASSIGN_OR_RETURN(const int64_t layout, IntAttr(args, "layout", 0));
  if (layout != 0 && layout != 1) return KernelError(args, "layout must be 0 or 1");
  s.batch_major = layout == 1;
  MG_ASSIGN_OR_RETURN(const double clip, FloatAttr(args, "clip", 0.0));
  if (clip < 0) return KernelError(args, "clip must not be negative");
  s.clip = static_cast<float>(clip);
  if (cell == Cell::kGru) {
    MG_ASSIGN_OR_RETURN(const int64_t lbr, IntAttr(args, "linear_before_reset", 0));
    s.linear_before_reset = lbr != 0;
  }
  if (cell == Cell::kLstm) {
    MG_ASSIGN_OR_RETURN(const int64_t input_forget, IntAttr(args, "input_forget", 0));
    if (input_forget != 0) return KernelUnimplemented(args, "input_forget=1 is not supported");
  }

  const TensorType& x = *args.input_types[0];
  const TensorType& w = *args.input_types[1];
  const TensorType& r = *args.input_types[2];
  if (x.dims.size() != 3 || w.dims.size() != 3 || r.dims.size() != 3) {
    return KernelError(args, "X, W and R must have rank 3");
  }
  s.seq = x.dims[s.batch_major ? 1 : 0];
  s.batch = x.dims[s.batch_major ? 0 : 1];
  s.input = x.dims[2];
  s.hidden = r.dims[2];
  MG_ASSIGN_OR_RETURN(const std::optional<int64_t> hidden_size,
                      OptionalIntAttr(args, "hidden_size"));
  if (hidden_size.has_value() && *hidden_size != s.hidden) {
    return KernelError(args, absl::StrCat("hidden_size ", *hidden_size, " contradicts R's ",
                                          s.hidden));
  }
  const int64_t gh = s.GateWidth();
  const int64_t dirs = s.directions;
  MG_RETURN_IF_ERROR(CheckDims(args, w, {dirs, gh, s.input}, "W"));
  MG_RETURN_IF_ERROR(CheckDims(args, r, {dirs, gh, s.hidden}, "R"));
  if (s.b >= 0) MG_RETURN_IF_ERROR(CheckDims(args, *args.input_types[s.b], {dirs, 2 * gh}, "B"));
  if (s.lens >= 0) {
    const TensorType& lens = *args.input_types[s.lens];
    if (lens.dtype != DataType::kInt32 && lens.dtype != DataType::kInt64) {
      return KernelError(args, "sequence_lens must be int32");
    }
    MG_RETURN_IF_ERROR(CheckDims(args, lens, {s.batch}, "sequence_lens"));
  }
  const Dims state = s.batch_major ? Dims{s.batch, dirs, s.hidden} : Dims{dirs, s.batch, s.hidden};
  const Dims y_dims = s.batch_major ? Dims{s.batch, s.seq, dirs, s.hidden}
                                    : Dims{s.seq, dirs, s.batch, s.hidden};
  for (const auto& [index, what] : {std::pair{s.initial_h, "initial_h"},
                                    std::pair{s.initial_c, "initial_c"}}) {
    if (index >= 0) MG_RETURN_IF_ERROR(CheckDims(args, *args.input_types[index], state, what));
  }
  if (s.peepholes >= 0) {
    MG_RETURN_IF_ERROR(CheckDims(args, *args.input_types[s.peepholes], {dirs, 3 * s.hidden}, "P"));
  }
  if (gradient) {
    MG_RETURN_IF_ERROR(CheckDims(args, *args.input_types[s.y], y_dims, "Y"));
    if (s.dy >= 0) MG_RETURN_IF_ERROR(CheckDims(args, *args.input_types[s.dy], y_dims, "dY"));
    for (const auto& [index, what] : {std::pair{s.dy_h, "dY_h"}, std::pair{s.dy_c, "dY_c"}}) {
      if (index >= 0) MG_RETURN_IF_ERROR(CheckDims(args, *args.input_types[index], state, what));
    }
    // Each gradient has its forward input's dims (and needs that input present).
    const std::pair<int, int> pairs[] = {{s.dx, 0},         {s.dw, 1},           {s.dr, 2},
                                         {s.db, s.b},       {s.d_initial_h, s.initial_h},
                                         {s.d_initial_c, s.initial_c}, {s.dp, s.peepholes}};
    for (const auto& [out, in] : pairs) {
      if (out < 0) continue;
      if (in < 0) {
        return KernelError(args, absl::StrCat("output ", out, " is the gradient of an omitted "
                                              "input"));
      }
      MG_RETURN_IF_ERROR(CheckDims(args, *args.output_types[out], args.input_types[in]->dims,
                                   absl::StrCat("gradient output ", out)));
    }
  } else {
    if (s.y >= 0) MG_RETURN_IF_ERROR(CheckDims(args, *args.output_types[s.y], y_dims, "Y"));
    if (s.y_h >= 0) MG_RETURN_IF_ERROR(CheckDims(args, *args.output_types[s.y_h], state, "Y_h"));
    if (s.y_c >= 0) MG_RETURN_IF_ERROR(CheckDims(args, *args.output_types[s.y_c], state, "Y_c"));
  }
  for (int i = 0; i < static_cast<int>(args.inputs.size()); ++i) {
    if (i == s.lens) continue;
    if (!graph::IsFloatingPoint(args.input_types[i]->dtype)) {
      return UnsupportedDtype(args, args.input_types[i]->dtype,
                              "float32, float16, bfloat16, float64");
    }
  }
  for (const TensorType* t : args.output_types) {
    if (!graph::IsFloatingPoint(t->dtype)) {
      return UnsupportedDtype(args, t->dtype, "float32, float16, bfloat16, float64");
    }
  }
  const std::vector<std::string> defaults =
      cell == Cell::kRnn   ? std::vector<std::string>{"Tanh"}
      : cell == Cell::kGru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                           : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  MG_ASSIGN_OR_RETURN(s.activations, ReadActivations(args, defaults, s.directions));
  if (gradient) {
    // The gradient kernel reads every input before it writes any output, so a gradient may
    // sit exactly on its forward input where graph/in_place.h says so; nothing else overlaps.
    for (int in = 0; in < static_cast<int>(args.inputs.size()); ++in) {
      for (int out = 0; out < static_cast<int>(args.outputs.size()); ++out) {
        const int64_t bytes = ByteSizeOf(*args.output_types[out]);
        const bool in_place = args.inputs[in] == args.outputs[out] &&
                              ByteSizeOf(*args.input_types[in]) == bytes && args.op != nullptr &&
                              graph::MayWriteOverInput(*args.op, out, in);
        if (!in_place) MG_RETURN_IF_ERROR(CheckNoOverlap(args, in, out));
      }
    }
  } else {
    MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  }
  MG_RETURN_IF_ERROR(CheckOutputsApart(args));
  return s;
}

absl::StatusOr<std::vector<int64_t>> SequenceLengths(const KernelArgs& args, const RnnSpec& s) {
  std::vector<int64_t> lens(static_cast<size_t>(s.batch), s.seq);
  if (s.lens < 0) return lens;
  MG_ASSIGN_OR_RETURN(const Dims given, ReadInts(args, s.lens, "sequence_lens"));
  for (int64_t b = 0; b < s.batch; ++b) {
    if (given[b] < 0 || given[b] > s.seq) {
      return KernelError(args, absl::StrCat("sequence_lens[", b, "] = ", given[b],
                                            " is outside [0, ", s.seq, "]"));
    }
    lens[b] = given[b];
  }
  return lens;
}

absl::StatusOr<RnnInputs> LoadInputs(const KernelArgs& args, const RnnSpec& s) {
  const int64_t state = s.directions * s.batch * s.hidden;
  RnnInputs in;
  MG_ASSIGN_OR_RETURN(in.x, LoadAll(args, 0, 0));
  MG_ASSIGN_OR_RETURN(in.w, LoadAll(args, 1, 0));
  MG_ASSIGN_OR_RETURN(in.r, LoadAll(args, 2, 0));
  MG_ASSIGN_OR_RETURN(in.bias, LoadAll(args, s.b, s.directions * 2 * s.GateWidth()));
  MG_ASSIGN_OR_RETURN(in.initial_h, LoadAll(args, s.initial_h, state));
  MG_ASSIGN_OR_RETURN(in.initial_c, LoadAll(args, s.initial_c, state));
  MG_ASSIGN_OR_RETURN(in.peepholes, LoadAll(args, s.peepholes, s.directions * 3 * s.hidden));
  return in;
}

absl::StatusOr<std::vector<float>> LoadAll(const KernelArgs& args, int index, int64_t count) {
  if (index < 0) return std::vector<float>(static_cast<size_t>(count), 0.0f);
  MG_ASSIGN_OR_RETURN(FloatLoader load, LoaderFor(args, *args.input_types[index]));
  return load.Run(args.inputs[index], 0, NumElements(args.input_types[index]->dims));
}

absl::Status StoreAll(const KernelArgs& args, int index, const std::vector<float>& values) {
  if (index < 0) return absl::OkStatus();
  MG_ASSIGN_OR_RETURN(FloatStorer storer, StorerFor(args, *args.output_types[index]));
  storer.run(args.outputs[index], 0, static_cast<int64_t>(values.size()), values.data());
  return absl::OkStatus();
}

std::vector<float> StepMajorRows(const RnnSpec& s, const std::vector<float>& x) {
  std::vector<float> rows(static_cast<size_t>(s.seq * s.batch * s.input));
  for (int64_t t = 0; t < s.seq; ++t) {
    for (int64_t b = 0; b < s.batch; ++b) {
      std::copy_n(x.begin() + s.XAt(t, b), s.input, rows.begin() + (t * s.batch + b) * s.input);
    }
  }
  return rows;
}

}  // namespace memonger::alloc::rnn_internal
