#include "workloads/workload_random.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "graph/gradient_builder.h"
#include "graph/net_writer.h"
#include "util/splitmix64.h"
#include "util/status_macros.h"

namespace memonger::graph {
namespace {

constexpr int64_t kUnitsPerWidth = 4;  // the base width is 4 units
constexpr int64_t kMaxUnits = 16;
constexpr int64_t kMinNormWidth = 4;
// New widths, in units: the base width most often, then its neighbours.
constexpr int64_t kWidthUnits[] = {1, 2, 3, 4, 4, 4, 4, 6, 8, 8, 12, 16};
// Chances per step, in percent (the knobs' defaults aside): a fork while there are fewer heads
// than `branches`; a join of two heads when there are more, and a stray join otherwise (paths
// that merge and fork again); a Split rather than a fan-out when a fork can split.
constexpr int64_t kForkPercent = 25;
constexpr int64_t kJoinPercent = 40;
constexpr int64_t kStrayJoinPercent = 3;
constexpr int64_t kSplitPercent = 60;

// A blob name on the net (readers see its latest version).
struct Blob {
  std::string name;
  int64_t width = 0;  // activations are [batch, width]; internal motif values have other dims
  // The latest version may be overwritten in place: training stays exact and no view sees it.
  bool overwritable = true;
  int64_t published = -1;  // its latest position in the history of path values; -1: none
};
using BlobId = int;

// Whose gradient rule reads the op's inputs (so their versions must survive to the backward
// pass), and whose rule reads its output (graph/gradient_builder.h).
bool RuleReadsInputs(absl::string_view type) {
  return type == "FC" || type == "MatMul" || type == "Gelu" || type == "LayerNormalization";
}
bool RuleReadsOutput(absl::string_view type) {
  return type == "Relu" || type == "Sigmoid" || type == "Tanh" || type == "Softmax";
}

Attribute Int(const char* name, int64_t value) { return Attribute{name, value}; }
Attribute Ints(const char* name, std::vector<int64_t> values) {
  return Attribute{name, std::move(values)};
}

// Generates one net step by step (the algorithm of workload_random.h).
class RandomNet {
 public:
  explicit RandomNet(const RandomWorkload& w)
      : w_(w),
        rng_(w.seed),
        unit_(w.width / kUnitsPerWidth),
        net_(absl::StrCat("random_ops", w.ops, "_seed", w.seed)) {}

  absl::StatusOr<Graph> Build() && {
    net_.builder().ReserveOps(static_cast<size_t>(w_.ops));
    net_.Input("data", w_.dtype, {w_.batch, w_.width}, Role::kInput);
    const BlobId data = NewBlob("data", w_.width);
    blobs_[data].overwritable = false;  // a graph input is the caller's
    Publish(data);
    heads_.push_back(data);
    const int64_t body = w_.ops - 2;  // the loss head is the last two
    while (emitted_ < body) Step(body - emitted_);

    std::vector<BlobId> distinct;
    for (BlobId b : heads_) {
      if (std::find(distinct.begin(), distinct.end(), b) == distinct.end()) distinct.push_back(b);
    }
    int64_t width = 0;
    for (BlobId b : distinct) width += blobs_[b].width;
    const BlobId output = NewBlob("output", width);
    Emit("Concat", "output", distinct, {}, {output}, {Int("axis", 1)});
    const BlobId loss = NewBlob("loss", 0);
    Emit("AveragedLoss", "loss", {output}, {}, {loss});
    net_.builder().AddExternalOutput("output");
    net_.builder().AddExternalOutput("loss");
    net_.builder().AddLoss("loss");
    // The generator's bookkeeping is spent: released before the graph is built, whose peak it
    // would add to (some 60 MB on a million values).
    blobs_ = std::vector<Blob>();
    heads_ = std::vector<BlobId>();
    history_ = std::vector<BlobId>();
    all_positions_ = std::vector<int64_t>();
    by_width_ = decltype(by_width_)();
    MG_ASSIGN_OR_RETURN(Graph graph, std::move(net_).Finish());
    if (w_.training) return AddGradientOps(graph, {"loss"});
    return graph;
  }

 private:
  // ---- bookkeeping ----------------------------------------------------------------------------

  BlobId NewBlob(std::string name, int64_t width) {
    blobs_.push_back(Blob{std::move(name), width, true});
    return static_cast<BlobId>(blobs_.size() - 1);
  }

  // A new value on a path (a new version when written in place): skip connections may reach
  // back to it. Every head update publishes once, in place or not, so the history's positions
  // and widths, and hence every random draw, do not depend on the in-place choices.
  void Publish(BlobId b) {
    const int64_t position = static_cast<int64_t>(history_.size());
    blobs_[b].published = position;
    history_.push_back(b);
    all_positions_.push_back(position);
    by_width_[blobs_[b].width].push_back(position);
  }

  std::string Name(absl::string_view prefix) const { return absl::StrCat(prefix, emitted_); }

  void Param(const std::string& name, std::vector<int64_t> dims, Role role = Role::kParam) {
    net_.Input(name, w_.dtype, dims, role);
  }

  // Adds one op reading blobs `in` then the static inputs `statics`, writing blobs `out` (an
  // output that is also an input is written in place), and keeps the in-place rules' flags.
  void Emit(const std::string& type, const std::string& name, const std::vector<BlobId>& in,
            const std::vector<std::string>& statics, const std::vector<BlobId>& out,
            std::vector<Attribute> attrs = {}, bool view = false) {
    OpSpec op;
    op.type = type;
    op.name = name;
    for (BlobId b : in) op.inputs.push_back(blobs_[b].name);
    for (const std::string& s : statics) op.inputs.push_back(s);
    for (BlobId b : out) op.outputs.push_back(blobs_[b].name);
    op.attrs = std::move(attrs);
    op.view = view;
    net_.builder().AddOp(std::move(op));
    ++emitted_;
    for (BlobId b : in) {
      if (RuleReadsInputs(type) || view) blobs_[b].overwritable = false;
    }
    // Each output is a fresh version: nothing has read it yet.
    for (BlobId b : out) blobs_[b].overwritable = !RuleReadsOutput(type) && !view;
  }

  // Whether to overwrite `b` in place. The draw is made whatever the answer, so `inplace`
  // changes only which ops write in place, never the net's shape. Never over a value that
  // another path still heads (a fan-out): it would change what that path reads.
  bool InPlace(BlobId b) {
    const bool chosen = rng_.Percent(w_.inplace);
    return chosen && blobs_[b].overwritable &&
           std::count(heads_.begin(), heads_.end(), b) <= 1;
  }

  // An index into a list of n, counted back from the end by a log-uniform distance: each band
  // of distances [2^k - 1, 2^(k+1) - 1) that fits is equally likely, and uniform within.
  // REQUIRES: n > 0.
  size_t RecentBiased(size_t n) {
    int levels = 0;
    while (levels < 63 && (uint64_t{1} << levels) - 1 < n) ++levels;
    const uint64_t k = rng_.Below(static_cast<uint64_t>(levels));
    const uint64_t lo = (uint64_t{1} << k) - 1;
    const uint64_t hi = std::min<uint64_t>(n, (uint64_t{1} << (k + 1)) - 1);
    return n - 1 - static_cast<size_t>(lo + rng_.Below(hi - lo));
  }

  // A history position from `positions` (ascending) within `reach` of the newest and other
  // than `exclude`, recent-biased; -1 when there is none.
  int64_t PickBack(const std::vector<int64_t>& positions, int64_t exclude) {
    const int64_t oldest = static_cast<int64_t>(history_.size()) - w_.reach;
    const auto first = std::lower_bound(positions.begin(), positions.end(), oldest);
    size_t n = static_cast<size_t>(positions.end() - first);
    if (n > 0 && positions.back() == exclude) --n;  // a head is usually the newest of its width
    if (n == 0) return -1;
    const int64_t p = *(first + static_cast<std::ptrdiff_t>(RecentBiased(n)));
    return p == exclude ? -1 : p;
  }

  // The value at a history position (its latest version, as a reader sees it).
  BlobId At(int64_t position) const { return history_[static_cast<size_t>(position)]; }

  int64_t SampleWidth() {
    constexpr size_t kCount = sizeof(kWidthUnits) / sizeof(kWidthUnits[0]);
    return kWidthUnits[rng_.Below(kCount)] * unit_;
  }

  // A head dim d for viewing [batch, width] as [batch, width / d, d] with at least two rows:
  // 8..64 when one divides, else 2 or 4; 0 when none does.
  int64_t HeadDim(int64_t width) {
    for (const std::vector<int64_t>& choices :
         {std::vector<int64_t>{8, 16, 32, 64}, std::vector<int64_t>{2, 4}}) {
      std::vector<int64_t> fit;
      for (int64_t d : choices) {
        if (width % d == 0 && width / d >= 2) fit.push_back(d);
      }
      if (!fit.empty()) return fit[rng_.Below(fit.size())];
    }
    return 0;
  }

  size_t AnyHead() { return static_cast<size_t>(rng_.Below(heads_.size())); }

  // ---- steps ----------------------------------------------------------------------------------

  void Step(int64_t left) {
    const int64_t heads = static_cast<int64_t>(heads_.size());
    if (heads < w_.branches && rng_.Percent(kForkPercent)) return Fork();
    if (heads > 1 && rng_.Percent(heads > w_.branches ? kJoinPercent : kStrayJoinPercent) &&
        JoinHeads(left)) {
      return;
    }
    if (rng_.Percent(w_.skip) && Skip(left)) return;
    if (rng_.Percent(w_.dead)) return Dead();
    Layer(left);
  }

  // Split a head along its width, or fan it out (no op: a second path reads the same value).
  void Fork() {
    const size_t slot = AnyHead();
    const BlobId x = heads_[slot];
    const int64_t units = blobs_[x].width / unit_;
    if (units < 2 || rng_.Percent(100 - kSplitPercent)) {  // fan out
      heads_.push_back(x);
      return;
    }
    // Cut points in (0, units): 1 or 2 of them, distinct.
    std::vector<int64_t> cuts = {1 + static_cast<int64_t>(rng_.Below(units - 1))};
    if (units >= 3 && rng_.Percent(50)) {
      int64_t c = 1 + static_cast<int64_t>(rng_.Below(units - 2));
      if (c >= cuts[0]) ++c;  // skip the first cut
      cuts.push_back(c);
      std::sort(cuts.begin(), cuts.end());
    }
    cuts.push_back(units);
    const std::string name = Name("split");
    std::vector<BlobId> parts;
    std::vector<int64_t> sizes;
    int64_t start = 0;
    for (int64_t cut : cuts) {
      sizes.push_back((cut - start) * unit_);
      parts.push_back(NewBlob(absl::StrCat(name, "_", parts.size()), sizes.back()));
      start = cut;
    }
    Emit("Split", name, {x}, {}, parts, {Int("axis", 1), Ints("split", sizes)});
    heads_[slot] = parts[0];
    for (size_t i = 1; i < parts.size(); ++i) heads_.push_back(parts[i]);
    for (BlobId p : parts) Publish(p);
  }

  // Two distinct head slots into one.
  bool JoinHeads(int64_t left) {
    const size_t a = AnyHead();
    size_t b = static_cast<size_t>(rng_.Below(heads_.size() - 1));
    if (b >= a) ++b;
    if (!Join(a, blobs_[heads_[b]].published, left)) return false;
    heads_.erase(heads_.begin() + static_cast<std::ptrdiff_t>(b));
    return true;
  }

  // A head with an earlier value: the same width first, else any.
  bool Skip(int64_t left) {
    const size_t slot = AnyHead();
    const BlobId head = heads_[slot];
    const int64_t at = blobs_[head].published;
    int64_t other = -1;
    auto same = by_width_.find(blobs_[head].width);
    if (same != by_width_.end()) other = PickBack(same->second, at);
    if (other < 0) other = PickBack(all_positions_, at);
    return other >= 0 && Join(slot, other, left);
  }

  // Head `slot` joined with the value at history position `at` becomes the head's new value:
  // Add or Sum for equal widths, Concat when the sum fits, else the other value projected to
  // the head's width by an FC and added. False when that needs more ops than are left.
  bool Join(size_t slot, int64_t at, int64_t left) {
    const BlobId head = heads_[slot];
    const BlobId other = At(at);
    const int64_t width = blobs_[head].width;
    const int64_t other_width = blobs_[other].width;
    BlobId result = -1;
    if (width == other_width) {
      std::vector<BlobId> in = {head, other};
      std::string type = "Add";
      if (rng_.Percent(50)) {
        type = "Sum";
        const int64_t third = PickBack(by_width_[width], -1);
        const bool three = rng_.Percent(40);  // drawn even when `third` does not qualify
        if (three && third >= 0 && third != blobs_[head].published && third != at) {
          in.push_back(At(third));
        }
      }
      result = Elementwise(type, in);
    } else if (width + other_width <= kMaxUnits * unit_) {
      const std::string name = Name("concat");
      result = NewBlob(name, width + other_width);
      Emit("Concat", name, {head, other}, {}, {result}, {Int("axis", 1)});
    } else {
      if (left < 2) return false;
      const std::string name = Name("project");
      Param(name + "_w", {width, other_width});
      Param(name + "_b", {width});
      const BlobId projected = NewBlob(name, width);
      Emit("FC", name, {other}, {name + "_w", name + "_b"}, {projected});
      result = Elementwise("Add", {head, projected});
    }
    Publish(result);
    heads_[slot] = result;
    return true;
  }

  // Add or Sum of equal-width blobs, in place over the first when allowed; returns the result.
  BlobId Elementwise(const std::string& type, const std::vector<BlobId>& in) {
    const std::string name = Name(type == "Add" ? "add" : "sum");
    const bool repeated = std::count(in.begin(), in.end(), in[0]) > 1;
    const bool in_place = InPlace(in[0]) && !repeated;  // drawn whatever `repeated` is
    const BlobId out = in_place ? in[0] : NewBlob(name, blobs_[in[0]].width);
    Emit(type, name, in, {}, {out});
    return out;
  }

  // A pointwise function of some value that nothing reads afterwards.
  void Dead() {
    static constexpr const char* kTypes[] = {"Relu", "Sigmoid", "Tanh", "Gelu"};
    const BlobId x = At(PickBack(all_positions_, -1));  // history is never empty, reach >= 1
    const std::string type = kTypes[rng_.Below(4)];
    const std::string name = Name("dead");
    Emit(type, name, {x}, {}, {NewBlob(name, blobs_[x].width)});
  }

  enum class Kind { kFc, kLinear, kActivation, kNorm, kSoftmax, kScale, kGroupedSoftmax, kMixer };
  struct Choice {
    Kind kind;
    int weight;
    int64_t ops;
  };

  // One layer on a head; a motif with more ops than are left, or that the head's width does
  // not suit, becomes an activation.
  void Layer(int64_t left) {
    static constexpr Choice kChoices[] = {
        {Kind::kFc, 14, 1},   {Kind::kLinear, 12, 2},        {Kind::kActivation, 24, 1},
        {Kind::kNorm, 10, 1}, {Kind::kSoftmax, 6, 1},        {Kind::kScale, 10, 1},
        {Kind::kGroupedSoftmax, 6, 3}, {Kind::kMixer, 6, 6},
    };
    int total = 0;
    for (const Choice& c : kChoices) total += c.weight;
    int r = static_cast<int>(rng_.Below(static_cast<uint64_t>(total)));
    Choice chosen = kChoices[0];
    for (const Choice& c : kChoices) {
      if (r < c.weight) {
        chosen = c;
        break;
      }
      r -= c.weight;
    }
    const size_t slot = AnyHead();
    const BlobId x = heads_[slot];
    const int64_t width = blobs_[x].width;
    const int64_t d = chosen.kind == Kind::kGroupedSoftmax || chosen.kind == Kind::kMixer
                          ? HeadDim(width)
                          : 1;
    // LayerNormalization over fewer than 4 features, or Softmax over 1, is degenerate (over 2
    // features the normalised output is +-1 whatever the input, Softmax over 1 is 1: no
    // gradient reaches what came before).
    const bool too_narrow = (chosen.kind == Kind::kNorm && width < kMinNormWidth) ||
                            (chosen.kind == Kind::kSoftmax && width < 2);
    if (chosen.ops > left || d == 0 || too_narrow) chosen = Choice{Kind::kActivation, 0, 1};
    BlobId y = -1;
    switch (chosen.kind) {
      case Kind::kFc: y = Fc(x); break;
      case Kind::kLinear: y = Linear(x); break;
      case Kind::kActivation: y = Activation(x); break;
      case Kind::kNorm: y = Norm(x); break;
      case Kind::kSoftmax: {
        const std::string name = Name("softmax");
        y = NewBlob(name, width);
        Emit("Softmax", name, {x}, {}, {y}, {Int("axis", -1)});
        break;
      }
      case Kind::kScale: {
        const std::string name = Name("scale");
        Param(name + "_c", {width}, Role::kConstant);
        y = InPlace(x) ? x : NewBlob(name, width);
        Emit("Mul", name, {x}, {name + "_c"}, {y});
        break;
      }
      case Kind::kGroupedSoftmax: y = GroupedSoftmax(x, d); break;
      case Kind::kMixer: y = Mixer(x, d); break;
    }
    Publish(y);
    heads_[slot] = y;
  }

  BlobId Fc(BlobId x) {
    const std::string name = Name("fc");
    const int64_t out = SampleWidth();
    Param(name + "_w", {out, blobs_[x].width});
    Param(name + "_b", {out});
    const BlobId y = NewBlob(name, out);
    Emit("FC", name, {x}, {name + "_w", name + "_b"}, {y});
    return y;
  }

  // MatMul by a [in, out] weight, then the bias added (in place or not).
  BlobId Linear(BlobId x) {
    const std::string name = Name("matmul");
    const int64_t out = SampleWidth();
    Param(name + "_w", {blobs_[x].width, out});
    Param(name + "_b", {out});
    const BlobId product = NewBlob(name, out);
    Emit("MatMul", name, {x}, {name + "_w"}, {product});
    const std::string bias = Name("bias");
    const BlobId y = InPlace(product) ? product : NewBlob(bias, out);
    Emit("Add", bias, {product}, {name + "_b"}, {y});
    return y;
  }

  BlobId Activation(BlobId x) {
    static constexpr const char* kTypes[] = {"Relu", "Relu", "Sigmoid", "Tanh", "Gelu"};
    const std::string type = kTypes[rng_.Below(5)];
    const std::string name = Name(absl::AsciiStrToLower(type));
    // Gelu's rule reads its input: never in place.
    const BlobId y = InPlace(x) && type != "Gelu" ? x : NewBlob(name, blobs_[x].width);
    Emit(type, name, {x}, {}, {y});
    return y;
  }

  BlobId Norm(BlobId x) {
    const std::string name = Name("ln");
    const int64_t width = blobs_[x].width;
    Param(name + "_scale", {width});
    Param(name + "_bias", {width});
    const BlobId y = NewBlob(name, width);
    const BlobId mean = NewBlob(name + "_mean", 0);
    const BlobId inv_std = NewBlob(name + "_inv_std_dev", 0);
    Emit("LayerNormalization", name, {x}, {name + "_scale", name + "_bias"}, {y, mean, inv_std},
         {Int("axis", -1)});
    return y;
  }

  // [batch, w] viewed as [batch, w / d, d], Softmax over each row of d, viewed back.
  BlobId GroupedSoftmax(BlobId x, int64_t d) {
    const std::string name = Name("grouped");
    const int64_t width = blobs_[x].width;
    const BlobId rows = NewBlob(name + "_rows", 0);
    Emit("Reshape", name + "_rows", {x}, {}, {rows}, {Ints("shape", {w_.batch, width / d, d})},
         /*view=*/true);
    const BlobId probs = NewBlob(name + "_softmax", 0);
    Emit("Softmax", name + "_softmax", {rows}, {}, {probs}, {Int("axis", -1)});
    const BlobId y = NewBlob(name, width);
    Emit("Reshape", name, {probs}, {}, {y}, {Ints("shape", {w_.batch, width})}, /*view=*/true);
    return y;
  }

  // Parameter-free self-attention over t = w / d tokens of d features:
  //   q = view [batch, t, d]; kT = Transpose(q) [batch, d, t]; scores = q kT [batch, t, t];
  //   probs = Softmax(scores); mixed = probs q [batch, t, d]; y = view [batch, w].
  BlobId Mixer(BlobId x, int64_t d) {
    const std::string name = Name("mixer");
    const int64_t width = blobs_[x].width;
    const int64_t t = width / d;
    const BlobId q = NewBlob(name + "_q", 0);
    Emit("Reshape", name + "_q", {x}, {}, {q}, {Ints("shape", {w_.batch, t, d})}, true);
    const BlobId kt = NewBlob(name + "_kT", 0);
    Emit("Transpose", name + "_kT", {q}, {}, {kt}, {Ints("perm", {0, 2, 1})});
    const BlobId scores = NewBlob(name + "_scores", 0);
    Emit("MatMul", name + "_scores", {q, kt}, {}, {scores});
    const BlobId probs = NewBlob(name + "_probs", 0);
    Emit("Softmax", name + "_probs", {scores}, {}, {probs}, {Int("axis", -1)});
    const BlobId mixed = NewBlob(name + "_mixed", 0);
    Emit("MatMul", name + "_mixed", {probs, q}, {}, {mixed});
    const BlobId y = NewBlob(name, width);
    Emit("Reshape", name, {mixed}, {}, {y}, {Ints("shape", {w_.batch, width})}, true);
    return y;
  }

  const RandomWorkload& w_;
  util::SplitMix64 rng_;
  const int64_t unit_;
  NetWriter net_;
  int64_t emitted_ = 0;
  std::vector<Blob> blobs_;
  std::vector<BlobId> heads_;    // one per path; a value may head several paths (fan-out)
  std::vector<BlobId> history_;         // position -> the value published there, oldest first
  std::vector<int64_t> all_positions_;  // 0, 1, ... (PickBack over the whole history)
  absl::flat_hash_map<int64_t, std::vector<int64_t>> by_width_;  // positions, by width
};

}  // namespace

absl::StatusOr<RandomWorkload> ParseRandomWorkload(const WorkloadSpec& spec) {
  WorkloadParams params(spec, WorkloadKeys("random"));
  RandomWorkload w;
  // Bounds keep every element count far from int64 overflow (the widest value, an attention
  // mixer's [batch, t, t] scores, stays below 2^56 bytes); bytes are checked again by shape
  // inference.
  // 2^22 ops take about 2.9 GB and 18 s to load and plan (BENCHMARKS.md). A training net is
  // about three times the ops and values of its forward pass: it stops at 2^20 forward ops,
  // beyond which its memory would be an out-of-memory death on most machines, not an answer.
  MG_ASSIGN_OR_RETURN(w.ops, params.Int("ops", w.ops, 3, kMaxRandomOps));
  MG_ASSIGN_OR_RETURN(int64_t seed, params.Int("seed", static_cast<int64_t>(w.seed), 0));
  w.seed = static_cast<uint64_t>(seed);
  MG_ASSIGN_OR_RETURN(w.batch, params.Int("batch", w.batch, 1, int64_t{1} << 20));
  MG_ASSIGN_OR_RETURN(w.width, params.Int("width", w.width, kUnitsPerWidth, int64_t{1} << 16));
  MG_ASSIGN_OR_RETURN(w.branches, params.Int("branches", w.branches, 1, int64_t{1} << 16));
  MG_ASSIGN_OR_RETURN(w.skip, params.Int("skip", w.skip, 0, 100));
  MG_ASSIGN_OR_RETURN(w.reach, params.Int("reach", w.reach, 1, int64_t{1} << 22));
  MG_ASSIGN_OR_RETURN(w.inplace, params.Int("inplace", w.inplace, 0, 100));
  MG_ASSIGN_OR_RETURN(w.dead, params.Int("dead", w.dead, 0, 100));
  MG_ASSIGN_OR_RETURN(w.dtype, params.FloatType("dtype", "fp32"));
  MG_ASSIGN_OR_RETURN(w.training, params.Training());
  MG_RETURN_IF_ERROR(params.Finish());
  if (w.training && w.ops > kMaxRandomTrainingOps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "random workload: ops=", w.ops, " is out of range for mode=training (3 to ",
        kMaxRandomTrainingOps, ": the backward pass triples the net)"));
  }
  if (w.width % kUnitsPerWidth != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("random workload: width=", w.width, " is not a multiple of 4"));
  }
  return w;
}

absl::StatusOr<Graph> BuildRandomGraph(const RandomWorkload& workload) {
  return RandomNet(workload).Build();
}

}  // namespace memonger::graph
