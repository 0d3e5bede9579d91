// Regression tests for what the libFuzzer harnesses of fuzz/ found (docs/fuzzing.md). Every file
// under tests/fuzz_regressions/NAME/ is an input that once crashed harness NAME; here it goes to
// the same entry point through the library, in the normal (unsanitized) build, and must get an
// answer: a graph, a plan that verifies, or an error status, never an internal error or a crash.
// (build-asan/ also runs each harness itself on these files: the ctest FuzzCorpus.NAME.)
//
// tests/fuzz_regressions/NAME/open/ holds findings not fixed yet. Each needs an entry in
// OpenFindings() saying where the bug is; its test is skipped with that note until the fix moves
// the file up to NAME/ and removes the entry.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <ostream>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "graph/net_def.h"
#include "graph/onnx/onnx_import.h"
#include "graph/records.h"
#include "graph/shape_inference.h"
#include "graph/dim_expr.h"
#include "gtest/gtest.h"
#include "memonger/planner.h"
#include "memonger/verify_plan.h"
#include "report/plan_import.h"
#include "tests/test_support.h"
#include "tools/cli_flags.h"
#include "workloads/workload_spec.h"
#include "workloads/workloads.h"

namespace memonger {
namespace {

// Reproducer ("NAME/open/FILE") -> the bug, where it is, and what is left to do.
const std::map<std::string, std::string>& OpenFindings() {
  static const auto* open = new std::map<std::string, std::string>{
  };
  return *open;
}

struct Reproducer {
  std::string harness;  // fuzz/NAME_fuzzer.cc
  std::string relative;  // "NAME/FILE" or "NAME/open/FILE" under tests/fuzz_regressions/
};

void PrintTo(const Reproducer& r, std::ostream* os) { *os << r.relative; }

std::vector<Reproducer> AllReproducers() {
  namespace fs = std::filesystem;
  std::vector<Reproducer> all;
  const fs::path root = testing::SourcePath("tests/fuzz_regressions");
  if (!fs::is_directory(root)) return all;
  for (const fs::directory_entry& harness : fs::directory_iterator(root)) {
    if (!harness.is_directory()) continue;
    for (const fs::directory_entry& file : fs::recursive_directory_iterator(harness.path())) {
      if (!file.is_regular_file()) continue;
      all.push_back({harness.path().filename().string(),
                     fs::relative(file.path(), root).generic_string()});
    }
  }
  std::sort(all.begin(), all.end(),
            [](const Reproducer& a, const Reproducer& b) { return a.relative < b.relative; });
  return all;
}

// An answer, not a crash: ok, or an error status other than an internal error.
void ExpectAnAnswer(const absl::Status& status, const std::string& step) {
  EXPECT_NE(status.code(), absl::StatusCode::kInternal) << step << ": " << status;
}

// The pipeline after a loader, as fuzz/fuzz_support.cc runs it: shape inference (declared
// symbols bound to 5), a greedy-by-size plan, the verifier.
void InferAndPlan(graph::Graph& graph) {
  graph::ShapeBindings bindings;
  for (const graph::Value& v : graph.values()) {
    if (!v.declared.dims) continue;
    for (const graph::DeclaredDim& d : *v.declared.dims) {
      if (!d.symbol.empty()) bindings.dims[d.symbol] = 5;
    }
  }
  const absl::Status inferred = graph::InferShapes(graph, bindings);
  ExpectAnAnswer(inferred, "InferShapes");
  if (!inferred.ok()) return;
  PlanOptions options;
  options.planner = PlannerKind::kGreedyBySize;
  absl::StatusOr<Plan> plan = PlanMemory(graph, options);
  ExpectAnAnswer(plan.status(), "PlanMemory");
  if (plan.ok()) {
    EXPECT_TRUE(VerifyPlan(graph, *plan).ok()) << VerifyPlan(graph, *plan);
  }
}

void FeedNetDef(const std::string& bytes, graph::NetFileFormat format) {
  absl::StatusOr<proto::NetDef> net = graph::ParseNetDef(bytes, format, "reproducer");
  ExpectAnAnswer(net.status(), "ParseNetDef");
  if (!net.ok()) return;
  absl::StatusOr<graph::Graph> g = graph::GraphFromNetDef(*net);
  ExpectAnAnswer(g.status(), "GraphFromNetDef");
  if (!g.ok()) return;
  absl::StatusOr<graph::Graph> again = graph::GraphFromNetDef(graph::GraphToNetDef(*g));
  ASSERT_TRUE(again.ok()) << "GraphFromNetDef(GraphToNetDef(g)): " << again.status();
  EXPECT_EQ(again->num_ops(), g->num_ops());
  EXPECT_EQ(again->num_values(), g->num_values());
  InferAndPlan(*g);
}

void FeedRecords(const absl::StatusOr<std::vector<graph::UsageRecord>>& records) {
  ExpectAnAnswer(records.status(), "parsing the records");
  if (!records.ok()) return;
  absl::StatusOr<graph::Graph> g = graph::GraphFromRecords(*records, "reproducer");
  ExpectAnAnswer(g.status(), "GraphFromRecords");
  if (g.ok()) InferAndPlan(*g);
}

void FeedPlanJson(const std::string& text) {
  // The fixed graph of fuzz/plan_json_fuzzer.cc.
  absl::StatusOr<graph::WorkloadSpec> spec =
      graph::ParseWorkloadSpec("mlp:layers=2,batch=2,dim=4,classes=3,mode=training");
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<graph::Graph> g = graph::BuildWorkload(*spec);
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<Plan> plan = PlanFromJson(*g, text, "reproducer");
  ExpectAnAnswer(plan.status(), "PlanFromJson");
  if (plan.ok()) ExpectAnAnswer(VerifyPlan(*g, *plan), "VerifyPlan");
}

// As fuzz/cli_args_fuzzer.cc: the bytes split at NUL into optimize-net's argument vector; the
// answer is the flags, or exit 0 (--help, --version) or 2 with a one-line usage error.
void FeedCommandLine(const std::string& bytes) {
  std::vector<std::string> args = absl::StrSplit(bytes, '\0');
  if (!args.empty() && args.back().empty()) args.pop_back();
  args.insert(args.begin(), "optimize-net");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out;
  std::ostringstream err;
  const std::variant<tools::Flags, int> parsed =
      tools::ParseCommandLine(static_cast<int>(argv.size()), argv.data(), out, err);
  if (const int* code = std::get_if<int>(&parsed)) {
    EXPECT_TRUE(*code == tools::kExitOk || *code == tools::kExitUsage) << *code;
    if (*code == tools::kExitUsage) {
      const std::string message = err.str();
      EXPECT_EQ(message.find('\n'), message.size() - 1) << message;
    }
  }
}

void FeedWorkloadSpec(const std::string& text) {
  absl::StatusOr<graph::WorkloadSpec> spec = graph::ParseWorkloadSpec(text);
  ExpectAnAnswer(spec.status(), "ParseWorkloadSpec");
  if (!spec.ok()) return;
  absl::StatusOr<graph::Graph> g = graph::BuildWorkload(*spec);
  ExpectAnAnswer(g.status(), "BuildWorkload");
  if (g.ok()) InferAndPlan(*g);
}

class FuzzRegressionTest : public ::testing::TestWithParam<Reproducer> {};

TEST_P(FuzzRegressionTest, EntryPointAnswers) {
  const Reproducer& r = GetParam();
  if (r.relative.find("/open/") != std::string::npos) {
    auto note = OpenFindings().find(r.relative);
    ASSERT_NE(note, OpenFindings().end())
        << r.relative << " is an open finding without an entry in OpenFindings()";
    GTEST_SKIP() << note->second;
  }
  const std::string bytes =
      testing::ReadFile(testing::SourcePath("tests/fuzz_regressions/" + r.relative));
  if (r.harness == "netdef_binary") {
    FeedNetDef(bytes, graph::NetFileFormat::kBinary);
  } else if (r.harness == "netdef_text") {
    FeedNetDef(bytes, graph::NetFileFormat::kText);
  } else if (r.harness == "onnx") {
    absl::StatusOr<graph::Graph> g = graph::ImportOnnxBytes(bytes, {}, "reproducer");
    ExpectAnAnswer(g.status(), "ImportOnnxBytes");
    if (g.ok()) InferAndPlan(*g);
  } else if (r.harness == "records_json") {
    FeedRecords(graph::ParseRecordsJson(bytes, "reproducer"));
  } else if (r.harness == "records_csv") {
    FeedRecords(graph::ParseMiniMallocCsv(bytes, "reproducer"));
  } else if (r.harness == "plan_json") {
    FeedPlanJson(bytes);
  } else if (r.harness == "workload_spec") {
    FeedWorkloadSpec(bytes);
  } else if (r.harness == "cli_args") {
    FeedCommandLine(bytes);
  } else if (r.harness == "dim_expr") {
    // The harness's property: what ToString writes parses back to the same expression.
    absl::StatusOr<graph::DimExpr> e = graph::ParseDimExpr(bytes);
    if (e.ok()) {
      absl::StatusOr<graph::DimExpr> again = graph::ParseDimExpr(e->ToString());
      ASSERT_TRUE(again.ok()) << e->ToString() << ": " << again.status();
      EXPECT_EQ(again->ToString(), e->ToString());
    }
  } else {
    FAIL() << "no entry point for harness '" << r.harness
           << "' (a planners finding gets a test that builds its problem by hand)";
  }
}

std::string TestName(const ::testing::TestParamInfo<Reproducer>& info) {
  std::string name = info.param.relative;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Reproducers, FuzzRegressionTest, ::testing::ValuesIn(AllReproducers()),
                         TestName);
// No reproducers is fine (nothing found, or everything folded into hand-written tests).
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(FuzzRegressionTest);

// Every open finding named in the table is still there (a fixed one leaves the table).
TEST(FuzzRegressionsTest, OpenFindingsExist) {
  for (const auto& [relative, note] : OpenFindings()) {
    EXPECT_TRUE(std::filesystem::is_regular_file(
        testing::SourcePath("tests/fuzz_regressions/" + relative)))
        << relative << " is in OpenFindings() but not under tests/fuzz_regressions/";
  }
}

}  // namespace
}  // namespace memonger
