// The recurrent ops RNN, GRU and LSTM (ONNX opsets 7-14, as torch.onnx.export writes nn.RNN,
// nn.GRU and nn.LSTM, one node per layer):
//
//   X [seq, batch, input] (layout 1: [batch, seq, input]), W [dirs, G*hidden, input],
//   R [dirs, G*hidden, hidden], optional B [dirs, 2*G*hidden] (W's biases, then R's),
//   sequence_lens [batch], initial_h (and LSTM's initial_c) [dirs, batch, hidden], LSTM's
//   peepholes P [dirs, 3*hidden]
//   -> Y [seq, dirs, batch, hidden] (layout 1: [batch, seq, dirs, hidden]), Y_h (and LSTM's
//   Y_c) [dirs, batch, hidden] (layout 1: [batch, dirs, hidden]); each output may be omitted.
//
// G is 1 (RNN), 3 (GRU: gates z, r, h) or 4 (LSTM: gates i, o, f, c), in ONNX's order. The
// equations are ONNX's (GRU's linear_before_reset both ways; LSTM's peepholes), with the
// activations of `activations` (default: Tanh; Sigmoid, Tanh; Sigmoid, Tanh, Tanh) and their
// `activation_alpha`/`activation_beta`, and `clip` bounding every gate's input. `direction`
// forward, reverse or bidirectional (two directions, each with its own weights, written side
// by side in Y). A batch row with sequence length L runs L steps (reverse: from step L-1 down
// to 0); Y is zero beyond L, and Y_h/Y_c hold the state after its last step.
//
// The algorithm: per direction, X x W^T (+ W's bias) for every step at once in one matrix
// product (GemmCpu); then per step one product H x R^T over the batch and the gate arithmetic.
// O(seq * batch * G * hidden * (input + hidden)). Storage float32, float16, bfloat16, float64;
// every product and gate in float32; outputs rounded once. The state lives outside the arena
// (O(batch * G * hidden) floats, plus seq * batch * G * hidden for X x W^T), as the matrix
// product's own packing does. LSTM's input_forget=1 is refused (Unimplemented); outputs must
// not overlap inputs or each other.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/gemm_cpu.h"
#include "kernels/cpu/kernel_float_io.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/kernel_util.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

using graph::DataType;
using graph::TensorType;
using namespace kernel_internal;  // NOLINT: the helpers of every kernel file

enum class Cell { kRnn, kGru, kLstm };

int GateCount(Cell cell) { return cell == Cell::kRnn ? 1 : cell == Cell::kGru ? 3 : 4; }

// One activation function of ONNX's recurrent ops, with its parameters.
struct Activation {
  enum Kind {
    kRelu, kTanh, kSigmoid, kAffine, kLeakyRelu, kThresholdedRelu, kScaledTanh, kHardSigmoid,
    kElu, kSoftsign, kSoftplus
  } kind = kTanh;
  float alpha = 0;
  float beta = 0;

  float operator()(float x) const {
    switch (kind) {
      case kRelu: return std::max(x, 0.0f);
      case kTanh: return std::tanh(x);
      case kSigmoid: return 1.0f / (1.0f + std::exp(-x));
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
};

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

// The op's geometry and options, checked against every present input and output.
struct RnnSpec {
  int gates = 1;
  int directions = 1;
  bool reverse_only = false;  // direction 'reverse'
  int64_t seq = 0, batch = 0, input = 0, hidden = 0;
  bool batch_major = false;  // layout 1
  float clip = 0;            // 0: no clip
  bool linear_before_reset = false;
  std::vector<Activation> activations;  // per direction: f, g[, h]
  // Positions in args.inputs / args.outputs; -1 when omitted.
  int b = -1, lens = -1, initial_h = -1, initial_c = -1, peepholes = -1;
  int y = -1, y_h = -1, y_c = -1;
};

absl::Status CheckDims(const KernelArgs& args, const TensorType& t, const Dims& want,
                       absl::string_view what) {
  if (t.dims != want) {
    return KernelError(args, absl::StrCat(what, " has dims [", absl::StrJoin(t.dims, ", "),
                                          "]; [", absl::StrJoin(want, ", "), "] expected"));
  }
  return absl::OkStatus();
}

absl::StatusOr<RnnSpec> ResolveRnn(const KernelArgs& args, Cell cell) {
  const int max_inputs = cell == Cell::kLstm ? 8 : 6;
  const int max_outputs = cell == Cell::kLstm ? 3 : 2;
  MG_RETURN_IF_ERROR(CheckArity(args, 3, max_inputs, 0, max_outputs));
  RnnSpec s;
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
  s.y = FindOutputSlot(args, 0);
  s.y_h = FindOutputSlot(args, 1);
  if (cell == Cell::kLstm) s.y_c = FindOutputSlot(args, 2);

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
  const int64_t gh = s.gates * s.hidden;
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
  for (const auto& [index, what] : {std::pair{s.initial_h, "initial_h"},
                                    std::pair{s.initial_c, "initial_c"}}) {
    if (index >= 0) MG_RETURN_IF_ERROR(CheckDims(args, *args.input_types[index], state, what));
  }
  if (s.peepholes >= 0) {
    MG_RETURN_IF_ERROR(CheckDims(args, *args.input_types[s.peepholes], {dirs, 3 * s.hidden}, "P"));
  }
  if (s.y >= 0) {
    const Dims y = s.batch_major ? Dims{s.batch, s.seq, dirs, s.hidden}
                                 : Dims{s.seq, dirs, s.batch, s.hidden};
    MG_RETURN_IF_ERROR(CheckDims(args, *args.output_types[s.y], y, "Y"));
  }
  if (s.y_h >= 0) MG_RETURN_IF_ERROR(CheckDims(args, *args.output_types[s.y_h], state, "Y_h"));
  if (s.y_c >= 0) MG_RETURN_IF_ERROR(CheckDims(args, *args.output_types[s.y_c], state, "Y_c"));
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
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  MG_RETURN_IF_ERROR(CheckOutputsApart(args));
  return s;
}

// All of input `index` as float32 (zeros of `count` elements when the input is omitted).
absl::StatusOr<std::vector<float>> LoadAll(const KernelArgs& args, int index, int64_t count) {
  if (index < 0) return std::vector<float>(static_cast<size_t>(count), 0.0f);
  MG_ASSIGN_OR_RETURN(FloatLoader load, LoaderFor(args, *args.input_types[index]));
  return load.Run(args.inputs[index], 0, NumElements(args.input_types[index]->dims));
}

absl::Status RunRecurrent(const KernelArgs& args, Cell cell) {
  MG_ASSIGN_OR_RETURN(const RnnSpec s, ResolveRnn(args, cell));
  const int64_t S = s.seq, B = s.batch, I = s.input, H = s.hidden, G = s.gates;
  const int64_t GH = G * H;
  const int64_t dirs = s.directions;
  const int per_direction = static_cast<int>(s.activations.size()) / s.directions;

  std::vector<int64_t> lens(static_cast<size_t>(B), S);
  if (s.lens >= 0) {
    MG_ASSIGN_OR_RETURN(const Dims given, ReadInts(args, s.lens, "sequence_lens"));
    for (int64_t b = 0; b < B; ++b) {
      if (given[b] < 0 || given[b] > S) {
        return KernelError(args, absl::StrCat("sequence_lens[", b, "] = ", given[b],
                                              " is outside [0, ", S, "]"));
      }
      lens[b] = given[b];
    }
  }
  MG_ASSIGN_OR_RETURN(const std::vector<float> x, LoadAll(args, 0, 0));
  MG_ASSIGN_OR_RETURN(const std::vector<float> w, LoadAll(args, 1, 0));
  MG_ASSIGN_OR_RETURN(const std::vector<float> r, LoadAll(args, 2, 0));
  MG_ASSIGN_OR_RETURN(const std::vector<float> bias, LoadAll(args, s.b, dirs * 2 * GH));
  MG_ASSIGN_OR_RETURN(const std::vector<float> h0, LoadAll(args, s.initial_h, dirs * B * H));
  MG_ASSIGN_OR_RETURN(const std::vector<float> c0, LoadAll(args, s.initial_c, dirs * B * H));
  MG_ASSIGN_OR_RETURN(const std::vector<float> peep, LoadAll(args, s.peepholes, dirs * 3 * H));

  // X's rows in step-major order: row t * B + b.
  std::vector<float> x_rows(static_cast<size_t>(S * B * I));
  for (int64_t t = 0; t < S; ++t) {
    for (int64_t b = 0; b < B; ++b) {
      const int64_t from = s.batch_major ? (b * S + t) * I : (t * B + b) * I;
      std::copy_n(x.begin() + from, I, x_rows.begin() + (t * B + b) * I);
    }
  }
  // Element offsets of Y and of the state outputs.
  auto y_at = [&](int64_t t, int64_t d, int64_t b) {
    return s.batch_major ? ((b * S + t) * dirs + d) * H : ((t * dirs + d) * B + b) * H;
  };
  auto state_at = [&](int64_t d, int64_t b) {
    return s.batch_major ? (b * dirs + d) * H : (d * B + b) * H;
  };
  std::vector<float> y;
  if (s.y >= 0) y.assign(static_cast<size_t>(S * dirs * B * H), 0.0f);
  std::vector<float> h_out(static_cast<size_t>(dirs * B * H)), c_out(h_out.size());

  std::vector<float> xw(static_cast<size_t>(S * B * GH));
  std::vector<float> hr(static_cast<size_t>(B * GH));
  std::vector<float> h(static_cast<size_t>(B * H)), c(h.size());
  std::vector<float> rh(static_cast<size_t>(H)), candidate(static_cast<size_t>(H));
  auto clip = [&](float v) { return s.clip > 0 ? std::clamp(v, -s.clip, s.clip) : v; };
  for (int64_t d = 0; d < dirs; ++d) {
    const bool reverse = s.reverse_only || d == 1;
    const float* wd = w.data() + d * GH * I;
    const float* rd = r.data() + d * GH * H;
    const float* wb = bias.data() + d * 2 * GH;
    const float* rb = wb + GH;
    const float* pd = peep.data() + d * 3 * H;
    const Activation* act = s.activations.data() + d * per_direction;
    // X x W^T + W's bias, for every step.
    MG_RETURN_IF_ERROR(GemmCpu(
        S * B, GH, I, GemmOperand{DataType::kFloat32, reinterpret_cast<const std::byte*>(x_rows.data()), I, false},
        GemmOperand{DataType::kFloat32, reinterpret_cast<const std::byte*>(wd), I, true},
        [&](int64_t row, int64_t col, int64_t count, const float* acc) {
          float* out = xw.data() + row * GH + col;
          for (int64_t j = 0; j < count; ++j) out[j] = acc[j] + wb[col + j];
        }));
    for (int64_t b = 0; b < B; ++b) {
      std::copy_n(h0.begin() + state_at(d, b), H, h.begin() + b * H);
      std::copy_n(c0.begin() + state_at(d, b), H, c.begin() + b * H);
    }
    for (int64_t k = 0; k < S; ++k) {
      // H x R^T over the batch (rows whose sequence has ended are computed and ignored).
      MG_RETURN_IF_ERROR(GemmCpu(
          B, GH, H, GemmOperand{DataType::kFloat32, reinterpret_cast<const std::byte*>(h.data()), H, false},
          GemmOperand{DataType::kFloat32, reinterpret_cast<const std::byte*>(rd), H, true},
          [&](int64_t row, int64_t col, int64_t count, const float* acc) {
            std::copy_n(acc, count, hr.begin() + row * GH + col);
          }));
      for (int64_t b = 0; b < B; ++b) {
        if (k >= lens[b]) continue;
        const int64_t t = reverse ? lens[b] - 1 - k : k;
        const float* xg = xw.data() + (t * B + b) * GH;
        const float* hg = hr.data() + b * GH;
        float* hb = h.data() + b * H;
        float* cb = c.data() + b * H;
        switch (cell) {
          case Cell::kRnn:
            for (int64_t j = 0; j < H; ++j) hb[j] = act[0](clip(xg[j] + hg[j] + rb[j]));
            break;
          case Cell::kGru: {
            // Gates z (0), r (1), h (2). rh = r (.) H_prev, needed before H is overwritten.
            for (int64_t j = 0; j < H; ++j) {
              const float rj = act[0](clip(xg[H + j] + hg[H + j] + rb[H + j]));
              rh[j] = s.linear_before_reset ? rj * (hg[2 * H + j] + rb[2 * H + j]) : rj * hb[j];
            }
            for (int64_t j = 0; j < H; ++j) {
              float pre = xg[2 * H + j];
              if (s.linear_before_reset) {
                pre += rh[j];
              } else {
                const float* row = rd + (2 * H + j) * H;  // R_h's row j
                float dot = 0;
                for (int64_t i = 0; i < H; ++i) dot += rh[i] * row[i];
                pre += dot + rb[2 * H + j];
              }
              candidate[j] = act[1](clip(pre));
            }
            for (int64_t j = 0; j < H; ++j) {
              const float z = act[0](clip(xg[j] + hg[j] + rb[j]));
              hb[j] = (1.0f - z) * candidate[j] + z * hb[j];
            }
            break;
          }
          case Cell::kLstm:
            // Gates i (0), o (1), f (2), c (3); peepholes i, o, f.
            for (int64_t j = 0; j < H; ++j) {
              const float c_prev = cb[j];
              const float i = act[0](clip(xg[j] + hg[j] + rb[j] + pd[j] * c_prev));
              const float f = act[0](clip(xg[2 * H + j] + hg[2 * H + j] + rb[2 * H + j] +
                                          pd[2 * H + j] * c_prev));
              const float g = act[1](clip(xg[3 * H + j] + hg[3 * H + j] + rb[3 * H + j]));
              const float c_new = f * c_prev + i * g;
              const float o = act[0](clip(xg[H + j] + hg[H + j] + rb[H + j] + pd[H + j] * c_new));
              cb[j] = c_new;
              hb[j] = o * act[2](c_new);
            }
            break;
        }
        if (!y.empty()) std::copy_n(hb, H, y.begin() + y_at(t, d, b));
      }
    }
    for (int64_t b = 0; b < B; ++b) {
      std::copy_n(h.begin() + b * H, H, h_out.begin() + state_at(d, b));
      std::copy_n(c.begin() + b * H, H, c_out.begin() + state_at(d, b));
    }
  }
  auto store = [&](int index, const std::vector<float>& values) -> absl::Status {
    if (index < 0) return absl::OkStatus();
    MG_ASSIGN_OR_RETURN(FloatStorer storer, StorerFor(args, *args.output_types[index]));
    storer.run(args.outputs[index], 0, static_cast<int64_t>(values.size()), values.data());
    return absl::OkStatus();
  };
  MG_RETURN_IF_ERROR(store(s.y, y));
  MG_RETURN_IF_ERROR(store(s.y_h, h_out));
  MG_RETURN_IF_ERROR(store(s.y_c, c_out));
  return absl::OkStatus();
}

}  // namespace

void AddCpuRnnKernels(KernelMap& kernels) {
  kernels["RNN"] = [](const KernelArgs& args) { return RunRecurrent(args, Cell::kRnn); };
  kernels["GRU"] = [](const KernelArgs& args) { return RunRecurrent(args, Cell::kGru); };
  kernels["LSTM"] = [](const KernelArgs& args) { return RunRecurrent(args, Cell::kLstm); };
}

}  // namespace memonger::alloc
