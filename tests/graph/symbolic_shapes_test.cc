// Symbolic shape inference: the rules and the probe give each value the expression concrete
// inference gives at every binding; what has no expression is an error naming the value, or
// with the fallback its size at the box's high corner.
#include "graph/symbolic_shapes.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "graph/net_writer.h"

namespace memonger::graph {
namespace {

SymbolBox Box(const std::vector<std::string>& ranges) {
  SymbolBox box;
  for (const std::string& r : ranges) EXPECT_TRUE(ParseDimRange(r, box).ok()) << r;
  return box;
}

// A net written by `write` at `at`, its graph inputs then declared with `declared`.
using Writer = std::function<void(NetWriter&, const SymbolBindings&)>;
absl::StatusOr<Graph> Build(const Writer& write, const SymbolBindings& at,
                            const std::map<std::string, std::vector<DeclaredDim>>& declared) {
  NetWriter net("net");
  write(net, at);
  absl::StatusOr<Graph> g = std::move(net).Finish();
  if (!g.ok()) return g;
  for (const auto& [name, dims] : declared) {
    for (ValueId id : g->FindVersions(name)) {
      if (g->value(id).producer == kNone) {
        g->mutable_value(id).declared.dims = DeclaredDims(dims.begin(), dims.end());
      }
    }
  }
  return g;
}

// The net `write` writes, typed at the box's high corner, and its symbolic shapes (no
// fallback unless `upper_bound`).
struct Inferred {
  Graph graph;
  absl::StatusOr<SymbolicShapes> shapes;
};
Inferred Infer(const Writer& write, const SymbolBox& box,
               const std::map<std::string, std::vector<DeclaredDim>>& declared,
               bool upper_bound = false) {
  absl::StatusOr<Graph> g = Build(write, box.High(), declared);
  EXPECT_TRUE(g.ok()) << g.status();
  Inferred out{g.ok() ? *std::move(g) : Graph(), absl::UnknownError("not built")};
  if (!g.ok()) return out;
  SymbolicShapeOptions options;
  options.box = box;
  options.reference = box.High();
  if (upper_bound) options.upper_bound = &out.graph;
  out.shapes = InferSymbolicShapes(out.graph, {}, options);
  return out;
}

std::string Dims(const SymbolicShapes& s, const Graph& g, const std::string& name) {
  const ValueId id = *g.FindValue(name);
  std::string out;
  for (const DimExpr& d : s.dims[id]) out += (out.empty() ? "" : ", ") + d.ToString();
  return "[" + out + "]";
}

// Every value's bytes at `bindings` equal what concrete inference gives there.
void ExpectAgreesWithConcrete(const Writer& write, const SymbolBox& box,
                              const std::map<std::string, std::vector<DeclaredDim>>& declared,
                              const SymbolicShapes& shapes) {
  for (const SymbolBindings& at : {box.Low(), box.High()}) {
    absl::StatusOr<Graph> g = Build(write, at, declared);
    ASSERT_TRUE(g.ok()) << g.status();
    for (ValueId id = 0; id < g->num_values(); ++id) {
      EXPECT_EQ(*ByteSize(*g->value(id).type, ""), *shapes.bytes[id].Evaluate(at))
          << g->value(id).DisplayName();
    }
  }
}

TEST(SymbolicShapes, ProbedOpsCopyTheirInputsDims) {
  const SymbolBox box = Box({"N=2..4096", "B=1..16"});
  const std::map<std::string, std::vector<DeclaredDim>> declared = {
      {"x", {{0, "B"}, {0, "N + 1"}, {64, ""}}}};
  auto write = [](NetWriter& net, const SymbolBindings& at) {
    net.Input("x", DataType::kFloat16, {at.at("B"), at.at("N") + 1, 64}, Role::kInput);
    net.Input("w", DataType::kFloat16, {64, 32}, Role::kParam);
    net.Input("row", DataType::kFloat16, {32}, Role::kParam);
    net.Op("MatMul", "proj", {"x", "w"}, {"proj"});                  // [B, N+1, 32]
    net.Op("Add", "bias", {"proj", "row"}, {"proj"});                // broadcast, in place
    net.Op("Transpose", "t", {"proj"}, {"t"}, {Attribute{"perm", std::vector<int64_t>{0, 2, 1}}});
    net.Op("MatMul", "scores", {"proj", "t"}, {"scores"});           // [B, N+1, N+1]
    net.Op("Softmax", "probs", {"scores"}, {"probs"}, {Attribute{"axis", int64_t{-1}}});
    net.Op("ReduceSum", "sum", {"probs"}, {"sum"}, {Attribute{"axes", std::vector<int64_t>{1}}});
    net.builder().AddExternalOutput("sum");
  };
  Inferred inferred = Infer(write, box, declared);
  const Graph* g = &inferred.graph;
  ASSERT_TRUE(inferred.shapes.ok()) << inferred.shapes.status();
  const SymbolicShapes* s = &*inferred.shapes;
  EXPECT_EQ(Dims(*s, *g, "proj"), "[B, N + 1, 32]");
  EXPECT_EQ(Dims(*s, *g, "t"), "[B, 32, N + 1]");
  EXPECT_EQ(Dims(*s, *g, "scores"), "[B, N + 1, N + 1]");
  EXPECT_EQ(Dims(*s, *g, "sum"), "[B, 1, N + 1]");
  EXPECT_EQ(s->bytes[*g->FindValue("probs")].ToString(), "2*B*N^2 + 4*B*N + 2*B");
  EXPECT_EQ(s->symbols, (std::vector<std::string>{"B", "N"}));
  ExpectAgreesWithConcrete(write, box, declared, *s);
}

TEST(SymbolicShapes, RulesForOpsThatComputeDims) {
  const SymbolBox box = Box({"N=1..1000"});
  const std::map<std::string, std::vector<DeclaredDim>> declared = {
      {"x", {{4, ""}, {0, "N"}, {6, ""}}}, {"y", {{4, ""}, {0, "2*N"}, {6, ""}}}};
  auto write = [](NetWriter& net, const SymbolBindings& at) {
    const int64_t n = at.at("N");
    net.Input("x", DataType::kFloat32, {4, n, 6}, Role::kInput);
    net.Input("y", DataType::kFloat32, {4, 2 * n, 6}, Role::kInput);
    net.Op("Concat", "cat", {"x", "y"}, {"cat", "cat_info"}, {Attribute{"axis", int64_t{1}}});
    net.Op("Flatten", "flat", {"cat"}, {"flat"}, {Attribute{"axis", int64_t{2}}});
    net.Op("Reshape", "back", {"flat"}, {"back"},
           {Attribute{"shape", std::vector<int64_t>{4, -1, 3}}});
    net.Op("Split", "halves", {"back"}, {"h0", "h1", "h2"}, {Attribute{"axis", int64_t{2}}});
    net.Op("PadLastDim", "pad", {"cat"}, {"padded"}, {Attribute{"multiple", int64_t{8}}});
    net.builder().AddExternalOutput("h0");
    net.builder().AddExternalOutput("padded");
  };
  Inferred inferred = Infer(write, box, declared);
  const Graph* g = &inferred.graph;
  ASSERT_TRUE(inferred.shapes.ok()) << inferred.shapes.status();
  const SymbolicShapes* s = &*inferred.shapes;
  EXPECT_EQ(Dims(*s, *g, "cat"), "[4, 3*N, 6]");
  EXPECT_EQ(Dims(*s, *g, "cat_info"), "[2]");
  EXPECT_EQ(Dims(*s, *g, "flat"), "[12*N, 6]");
  EXPECT_EQ(Dims(*s, *g, "back"), "[4, 6*N, 3]");
  EXPECT_EQ(Dims(*s, *g, "h2"), "[4, 6*N, 1]");
  EXPECT_EQ(Dims(*s, *g, "padded"), "[4, 3*N, 8]");
  ExpectAgreesWithConcrete(write, box, declared, *s);
}

// Strided, padded windows over symbolic image sizes: ceil-divisions (ResNet's stem).
TEST(SymbolicShapes, ConvAndPoolingWindowsAreCeilDivisions) {
  const SymbolBox box = Box({"H=16..512", "B=1..8"});
  const std::map<std::string, std::vector<DeclaredDim>> declared = {
      {"x", {{0, "B"}, {3, ""}, {0, "H"}, {0, "H + 16"}}}};
  auto write = [](NetWriter& net, const SymbolBindings& at) {
    net.Input("x", DataType::kFloat32, {at.at("B"), 3, at.at("H"), at.at("H") + 16}, Role::kInput);
    net.Input("w", DataType::kFloat32, {8, 3, 7, 7}, Role::kParam);
    net.Op("Conv", "stem", {"x", "w"}, {"c"},
           {Attribute{"strides", std::vector<int64_t>{2, 2}},
            Attribute{"pads", std::vector<int64_t>{3, 3, 3, 3}}});
    net.Op("MaxPool", "pool", {"c"}, {"p"},
           {Attribute{"kernel_shape", std::vector<int64_t>{3, 3}},
            Attribute{"strides", std::vector<int64_t>{2, 2}},
            Attribute{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
    net.Op("GlobalAveragePool", "gap", {"p"}, {"g"});
    net.builder().AddExternalOutput("g");
  };
  Inferred inferred = Infer(write, box, declared);
  const Graph* g = &inferred.graph;
  ASSERT_TRUE(inferred.shapes.ok()) << inferred.shapes.status();
  const SymbolicShapes* s = &*inferred.shapes;
  EXPECT_EQ(Dims(*s, *g, "c"), "[B, 8, cdiv(H, 2), cdiv(H + 16, 2)]");
  EXPECT_EQ(Dims(*s, *g, "p"), "[B, 8, cdiv(cdiv(H, 2), 2), cdiv(cdiv(H + 16, 2), 2)]");
  EXPECT_EQ(Dims(*s, *g, "g"), "[B, 8, 1, 1]");
  ExpectAgreesWithConcrete(write, box, declared, *s);
}

// A dim computed from a symbol by an op with no rule (pooling's ceil-division) is refused,
// naming the value; with the fallback it is sized at the high corner, and so is what reads it.
TEST(SymbolicShapes, NoExpressionIsAnErrorOrTheUpperBound) {
  const SymbolBox box = Box({"N=8..512"});
  const std::map<std::string, std::vector<DeclaredDim>> declared = {
      {"x", {{1, ""}, {3, ""}, {0, "N"}, {0, "N"}}}};
  auto write = [](NetWriter& net, const SymbolBindings& at) {
    const int64_t n = at.at("N");
    net.Input("x", DataType::kFloat32, {1, 3, n, n}, Role::kInput);
    net.Op("MaxPool", "pool", {"x"}, {"pooled"},
           {Attribute{"kernel_shape", std::vector<int64_t>{2, 2}},
            Attribute{"strides", std::vector<int64_t>{2, 2}}});
    net.Op("Relu", "relu", {"pooled"}, {"out"});
    net.builder().AddExternalOutput("out");
  };
  absl::StatusOr<Graph> g = Build(write, box.High(), declared);
  ASSERT_TRUE(g.ok()) << g.status();
  SymbolicShapeOptions options;
  options.box = box;
  options.reference = box.High();
  absl::StatusOr<SymbolicShapes> s = InferSymbolicShapes(*g, {}, options);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("value 'pooled'"), std::string::npos) << s.status();
  options.upper_bound = &*g;
  s = InferSymbolicShapes(*g, {}, options);
  ASSERT_TRUE(s.ok()) << s.status();
  const ValueId pooled = *g->FindValue("pooled");
  const ValueId out = *g->FindValue("out");
  EXPECT_EQ(s->bytes[pooled].ToString(), std::to_string(3 * 256 * 256 * 4));
  EXPECT_FALSE(s->fallback[pooled].empty());
  EXPECT_FALSE(s->fallback[out].empty());
  EXPECT_TRUE(s->fallback[*g->FindValue("x")].empty());
}

// A declared shape that the typed graph contradicts at the reference binding is refused.
TEST(SymbolicShapes, DeclarationMustMatchTheReferenceTypes) {
  const SymbolBox box = Box({"N=1..64"});
  auto write = [](NetWriter& net, const SymbolBindings& at) {
    net.Input("x", DataType::kFloat32, {at.at("N"), 4}, Role::kInput);
    net.Op("Relu", "r", {"x"}, {"y"});
    net.builder().AddExternalOutput("y");
  };
  absl::StatusOr<Graph> g = Build(write, box.High(), {{"x", {{0, "N + 1"}, {4, ""}}}});
  ASSERT_TRUE(g.ok());
  SymbolicShapeOptions options;
  options.box = box;
  options.reference = box.High();
  absl::StatusOr<SymbolicShapes> s = InferSymbolicShapes(*g, {}, options);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("graph input 'x'"), std::string::npos) << s.status();
}

TEST(SymbolBox, ParsesRanges) {
  SymbolBox box;
  EXPECT_TRUE(ParseDimRange("N=256..65536", box).ok());
  EXPECT_TRUE(ParseDimRange("B=1..64", box).ok());
  EXPECT_EQ(box.ToString(), "B=1..64, N=256..65536");
  EXPECT_FALSE(ParseDimRange("N=1..2", box).ok());       // twice
  EXPECT_FALSE(ParseDimRange("M=9..2", box).ok());       // empty
  EXPECT_FALSE(ParseDimRange("M=-1..2", box).ok());      // negative
  EXPECT_FALSE(ParseDimRange("2M=1..2", box).ok());      // not a symbol
  EXPECT_FALSE(ParseDimRange("M=1..x", box).ok());
  // A range quotes its text on one line (a fuzzed --dim held newlines).
  const absl::Status newline = ParseDimRange("a\nb=1..2", box);
  EXPECT_FALSE(newline.ok());
  EXPECT_EQ(newline.message().find('\n'), absl::string_view::npos) << newline;
  EXPECT_NE(newline.message().find("a\\nb"), absl::string_view::npos) << newline;
  EXPECT_TRUE(IsDimRange("N=1..2"));
  EXPECT_FALSE(IsDimRange("N=12"));
  EXPECT_TRUE(box.Contains({{"N", 256}, {"B", 64}}));
  EXPECT_FALSE(box.Contains({{"N", 255}, {"B", 64}}));
  EXPECT_NE(box.CheckContains({{"N", 70000}, {"B", 1}}).message().find("outside"),
            std::string::npos);
}

}  // namespace
}  // namespace memonger::graph
