// Imports every model of libonnx's test data (Debian package libonnx-testdata) with empty
// bindings: none may crash; each either loads with every value typed or is refused with a status
// whose reason we count. Prints a summary table and asserts floors below what we measured.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "graph/model_loader.h"
#include "graph/onnx/onnx_import.h"
#include "graph/shape_inference.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"

namespace memonger::graph {
namespace {

namespace fs = std::filesystem;

constexpr char kCorpusRoot[] = "/usr/share/libonnx-testdata/data";
constexpr const char* kSuites[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};

// Measured with libonnx 1.12 (Debian 12): 1072 models, 993 loaded and fully typed, 79 refused
// (22 control flow, 15 sequence/optional, 35 string/uint16/uint32/uint64 element types, 6 window
// functions whose length is a graph input's value, 1 unbound symbol); 44 of the typed models
// need our folding. The floors sit a little below.
constexpr int kMinModels = 1050;
constexpr int kMinTyped = 970;
constexpr int kMaxInternalErrors = 0;

// A short key for why a model was refused: the status code and the kind of problem.
std::string ReasonKey(const absl::Status& status) {
  const absl::string_view m = status.message();
  std::string kind;
  if (absl::StrContains(m, "control flow") ||
      absl::StrContains(m, "depends on tensor values, not only on shapes")) {
    kind = "control flow subgraph (If/Loop/Scan)";
  } else if (absl::StrContains(m, "not a tensor")) {
    kind = "non-tensor value (sequence/map/optional)";
  } else if (absl::StrContains(m, "element type")) {
    const size_t at = m.find("element type ");
    const absl::string_view rest = m.substr(at + 13);
    kind = absl::StrCat("element type ", rest.substr(0, rest.find(' ')));
  } else if (absl::StrContains(m, "has no schema")) {
    kind = "op without libonnx schema";
  } else if (absl::StrContains(m, "is unbound")) {
    kind = "unbound symbolic dim";
  } else if (absl::StrContains(m, "has no size")) {
    kind = "graph input dim without size";
  } else if (absl::StrContains(m, "declares no shape")) {
    kind = "graph input without shape";
  } else if (absl::StrContains(m, "ONNX shape inference failed")) {
    kind = "libonnx inference error";
  } else if (absl::StrContains(m, "stays unknown")) {
    kind = "dim unknown after inference + folding";
  } else if (absl::StrContains(m, "no shape") || absl::StrContains(m, "no type") ||
             absl::StrContains(m, "no element type")) {
    kind = "type unknown after inference + folding";
  } else {
    kind = std::string(m.substr(0, 60));
  }
  return absl::StrCat(absl::StatusCodeToString(status.code()), ": ", kind);
}

struct Outcome {
  std::string model;  // "node/test_abs"
  absl::Status status;
  bool loaded = false;  // LoadModel succeeded (InferShapes may still fail)
  double seconds = 0;
  int outputs_checked = 0;  // graph outputs compared with the reference outputs
  std::vector<std::string> mismatches;
};

// The suites ship reference outputs (test_data_set_0/output_K.pb, one TensorProto per graph
// output, in order): the types we infer must match them.
void CompareWithReference(const std::string& path, const Graph& g, Outcome& outcome) {
  const fs::path data = fs::path(path).parent_path() / "test_data_set_0";
  for (size_t k = 0; k < g.outputs().size(); ++k) {
    std::ifstream in(data / absl::StrCat("output_", k, ".pb"), std::ios::binary);
    if (!in) continue;
    std::ostringstream bytes;
    bytes << in.rdbuf();
    onnx::TensorProto reference;
    if (!reference.ParseFromString(bytes.str())) continue;
    const Value& v = g.value(g.outputs()[k]);
    const std::vector<int64_t> dims(reference.dims().begin(), reference.dims().end());
    ++outcome.outputs_checked;
    // numpy has no bfloat16: the suites store bfloat16 references as uint16 bit patterns.
    const bool bf16_as_uint16 = v.type->dtype == DataType::kBFloat16 &&
                                reference.data_type() == onnx::TensorProto::UINT16;
    if ((static_cast<int>(v.type->dtype) != reference.data_type() && !bf16_as_uint16) ||
        v.type->dims != dims) {
      outcome.mismatches.push_back(absl::StrCat(
          v.name, ": inferred ", TensorTypeToString(*v.type), ", reference has type ",
          reference.data_type(), " and dims ", DimsToString(dims)));
    }
  }
}

std::vector<std::string> CorpusModels() {
  std::vector<std::string> models;
  for (const char* suite : kSuites) {
    const fs::path dir = fs::path(kCorpusRoot) / suite;
    std::error_code error;
    if (!fs::is_directory(dir, error)) continue;
    for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
      const fs::path model = entry.path() / "model.onnx";
      if (fs::exists(model, error)) models.push_back(model.string());
    }
  }
  std::sort(models.begin(), models.end());
  return models;
}

std::string ShortName(const std::string& path) {
  const fs::path p(path);
  return absl::StrCat(p.parent_path().parent_path().filename().string(), "/",
                      p.parent_path().filename().string());
}

Outcome ImportOne(const std::string& path) {
  Outcome outcome;
  outcome.model = ShortName(path);
  const auto start = std::chrono::steady_clock::now();
  LoadOptions options;
  absl::StatusOr<Graph> g = LoadModel(path, options);
  if (!g.ok()) {
    outcome.status = g.status();
  } else {
    outcome.loaded = true;
    outcome.status = InferShapes(*g, options.bindings);
    if (outcome.status.ok() && !g->AllTypesKnown()) {
      outcome.status = absl::InternalError("InferShapes succeeded but a value has no type");
    }
    if (outcome.status.ok()) CompareWithReference(path, *g, outcome);
  }
  outcome.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return outcome;
}

TEST(OnnxCorpusTest, EveryModelLoadsOrIsRefusedWithAReason) {
  if (!fs::is_directory(kCorpusRoot)) {
    GTEST_SKIP() << kCorpusRoot << " is missing (install Debian's libonnx-testdata)";
  }
  const std::vector<std::string> models = CorpusModels();
  std::vector<Outcome> outcomes;
  for (const std::string& path : models) {
    SCOPED_TRACE(path);
    outcomes.push_back(ImportOne(path));
  }

  int loaded = 0;
  int typed = 0;
  int internal_errors = 0;
  int outputs_checked = 0;
  int mismatched_models = 0;
  double total_seconds = 0;
  std::map<std::string, std::vector<std::string>> refused;  // reason -> models
  std::map<std::string, std::pair<int, int>> per_suite;      // suite -> (typed, total)
  const Outcome* slowest = nullptr;
  for (const Outcome& o : outcomes) {
    total_seconds += o.seconds;
    if (slowest == nullptr || o.seconds > slowest->seconds) slowest = &o;
    auto& suite = per_suite[o.model.substr(0, o.model.find('/'))];
    ++suite.second;
    loaded += o.loaded;
    outputs_checked += o.outputs_checked;
    if (!o.mismatches.empty()) {
      ++mismatched_models;
      ADD_FAILURE() << o.model << ": " << o.mismatches.front();
    }
    if (o.status.ok()) {
      ++typed;
      ++suite.first;
      continue;
    }
    if (o.status.code() == absl::StatusCode::kInternal) {
      ++internal_errors;
      ADD_FAILURE() << o.model << ": " << o.status;
    }
    refused[ReasonKey(o.status)].push_back(o.model);
  }

  std::printf(
      "\nONNX corpus (%s): %zu models, %d loaded, %d fully typed, %zu refused, %.1f s\n",
      kCorpusRoot, outcomes.size(), loaded, typed, outcomes.size() - typed, total_seconds);
  for (const auto& [suite, counts] : per_suite) {
    std::printf("  %-20s %4d / %4d typed\n", suite.c_str(), counts.first, counts.second);
  }
  std::printf("  %-62s %5s  examples\n", "refused: reason", "count");
  for (const auto& [reason, names] : refused) {
    std::string examples;
    for (size_t i = 0; i < names.size() && i < 3; ++i) {
      absl::StrAppend(&examples, i > 0 ? ", " : "", names[i]);
    }
    std::printf("  %-62s %5zu  %s\n", reason.c_str(), names.size(), examples.c_str());
  }
  std::printf("  graph outputs compared with the reference outputs: %d, models mismatching: %d\n",
              outputs_checked, mismatched_models);
  if (slowest != nullptr) {
    std::printf("  slowest: %s (%.2f s)\n", slowest->model.c_str(), slowest->seconds);
  }
  if (const char* verbose = std::getenv("MEMONGER_CORPUS_VERBOSE"); verbose != nullptr) {
    for (const Outcome& o : outcomes) {
      if (!o.status.ok()) std::printf("%s: %s\n", o.model.c_str(), o.status.ToString().c_str());
    }
  }
  std::fflush(stdout);

  EXPECT_GE(static_cast<int>(outcomes.size()), kMinModels);
  EXPECT_GE(typed, kMinTyped);
  EXPECT_EQ(loaded, typed) << "an imported ONNX model must come out fully typed";
  EXPECT_EQ(mismatched_models, 0);
  EXPECT_LE(internal_errors, kMaxInternalErrors);
}

// Named models that must resolve: CNNs and a transformer building block.
TEST(OnnxCorpusTest, CnnAndNormalizationModelsResolve) {
  if (!fs::is_directory(kCorpusRoot)) {
    GTEST_SKIP() << kCorpusRoot << " is missing (install Debian's libonnx-testdata)";
  }
  for (const char* name :
       {"pytorch-converted/test_Conv2d", "pytorch-converted/test_Conv2d_groups",
        "pytorch-converted/test_BatchNorm2d_eval", "pytorch-converted/test_MaxPool2d",
        "pytorch-operator/test_operator_conv", "node/test_layer_normalization_4d_axis1_expanded",
        "node/test_softmax_axis_1_expanded", "node/test_matmul_3d"}) {
    SCOPED_TRACE(name);
    const Outcome o = ImportOne(absl::StrCat(kCorpusRoot, "/", name, "/model.onnx"));
    EXPECT_TRUE(o.status.ok()) << o.status;
  }
}

// The corpus has no attention model (libonnx 1.12 predates the Attention op), so we build one:
// a two-head self-attention block as PyTorch exports it, head split computed from Shape(x).
onnx::ModelProto AttentionBlock() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto& g = *m.mutable_graph();
  g.set_name("attention_block");
  auto input = [&](const std::string& name, std::vector<std::string> dims) {
    onnx::ValueInfoProto* vi = g.add_input();
    vi->set_name(name);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    auto* shape = vi->mutable_type()->mutable_tensor_type()->mutable_shape();
    for (const std::string& d : dims) {
      if (std::isdigit(d[0])) {
        shape->add_dim()->set_dim_value(std::stoll(d));
      } else {
        shape->add_dim()->set_dim_param(d);
      }
    }
  };
  auto init = [&](const std::string& name, int32_t type, std::vector<int64_t> dims,
                  std::vector<double> values) {
    onnx::TensorProto* t = g.add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    for (int64_t d : dims) t->add_dims(d);
    for (double v : values) {
      if (type == onnx::TensorProto::INT64) {
        t->add_int64_data(static_cast<int64_t>(v));
      } else {
        t->add_float_data(static_cast<float>(v));
      }
    }
  };
  auto node = [&](const std::string& op, std::vector<std::string> in, std::string out) {
    onnx::NodeProto* n = g.add_node();
    n->set_op_type(op);
    for (const std::string& i : in) n->add_input(i);
    n->add_output(out);
    return n;
  };
  auto ints = [](onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(v.size() == 1 && name != "perm" ? onnx::AttributeProto::INT
                                                : onnx::AttributeProto::INTS);
    if (a->type() == onnx::AttributeProto::INT) {
      a->set_i(v[0]);
    } else {
      for (int64_t x : v) a->add_ints(x);
    }
  };
  input("x", {"batch", "seq", "16"});
  for (const char* w : {"Wq", "Wk", "Wv", "Wo"}) {
    init(w, onnx::TensorProto::FLOAT, {16, 16}, std::vector<double>(256, 0.01));
  }
  init("i0", onnx::TensorProto::INT64, {}, {0});
  init("i1", onnx::TensorProto::INT64, {}, {1});
  init("axes0", onnx::TensorProto::INT64, {1}, {0});
  init("heads", onnx::TensorProto::INT64, {2}, {2, 8});
  init("hidden", onnx::TensorProto::INT64, {1}, {16});
  init("scale", onnx::TensorProto::FLOAT, {}, {2.828427});
  node("Shape", {"x"}, "xs");
  node("Gather", {"xs", "i0"}, "b");
  node("Gather", {"xs", "i1"}, "s");
  node("Unsqueeze", {"b", "axes0"}, "b1");
  node("Unsqueeze", {"s", "axes0"}, "s1");
  ints(node("Concat", {"b1", "s1", "heads"}, "split"), "axis", {0});
  ints(node("Concat", {"b1", "s1", "hidden"}, "merge"), "axis", {0});
  for (const std::string p : {"q", "k", "v"}) {
    node("MatMul", {"x", "W" + p}, p + "_proj");
    node("Reshape", {p + "_proj", "split"}, p + "_heads");
  }
  ints(node("Transpose", {"q_heads"}, "qt"), "perm", {0, 2, 1, 3});
  ints(node("Transpose", {"k_heads"}, "kt"), "perm", {0, 2, 3, 1});
  ints(node("Transpose", {"v_heads"}, "vt"), "perm", {0, 2, 1, 3});
  node("MatMul", {"qt", "kt"}, "scores");
  node("Div", {"scores", "scale"}, "scaled");
  ints(node("Softmax", {"scaled"}, "probs"), "axis", {-1});
  node("MatMul", {"probs", "vt"}, "ctx");
  ints(node("Transpose", {"ctx"}, "ctx_t"), "perm", {0, 2, 1, 3});
  node("Reshape", {"ctx_t", "merge"}, "merged");
  node("MatMul", {"merged", "Wo"}, "out");
  g.add_output()->set_name("out");
  return m;
}

TEST(OnnxCorpusTest, TransformerAttentionBlockResolves) {
  ShapeBindings bindings;
  ASSERT_TRUE(ParseDimBinding("batch=4", bindings).ok());
  ASSERT_TRUE(ParseDimBinding("seq=128", bindings).ok());
  absl::StatusOr<Graph> g =
      ImportOnnxBytes(AttentionBlock().SerializeAsString(), bindings, "attention_block.onnx");
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(InferShapes(*g, bindings).ok());
  const Value& probs = g->value(*g->FindValue("probs"));
  EXPECT_EQ(probs.type->dims, (std::vector<int64_t>{4, 2, 128, 128}));
  const Value& out = g->value(*g->FindValue("out"));
  EXPECT_EQ(out.type->dims, (std::vector<int64_t>{4, 128, 16}));
  EXPECT_EQ(out.role, Role::kOutput);
}

}  // namespace
}  // namespace memonger::graph
