// The ONNX backend node tests as an outside reference for the CPU kernels (and, in a second
// test, the pytorch-converted and pytorch-operator suites, which have the same layout). For
// every case directory of Debian's libonnx-testdata (data/node/<case>/) whose nodes all have a
// kernel in
// MakeCpuKernelTable(): load model.onnx with the input shapes of test_data_set_0/input_K.pb
// bound, plan it (default planner), run it in one host arena with those inputs (constants from
// the model), and compare every graph output with output_K.pb.
//
// Tolerances, |actual - expected| <= atol + rtol * |expected| (NaN matches NaN):
//   float32, float64: ONNX's defaults, rtol 1e-3, atol 1e-7;
//   float16: rtol 2e-3, atol 1e-4 (the kernels compute in float32 and round once, the
//            references were computed in float32 or float64 and rounded: one float16 ulp, 9.8e-4
//            relative, can separate them);
//   bfloat16: rtol 1.6e-2, atol 1e-3 (one bfloat16 ulp is 7.8e-3 relative);
//   integers and bool: exact.
// A case is skipped, with its reason counted, when: a node has no kernel; the model does not
// load (e.g. control flow, unsupported element types); a kernel reports Unimplemented (an
// element type or attribute combination it does not support); or a static value of the model
// has no data (the run would use seeded values). Everything else that does not match is a
// failure, listed with the first mismatching element.
//
// Prints passed / failed / skipped by reason, and asserts the floors below (measured counts
// minus a small margin).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "allocator/host_run.h"
#include "graph/model_loader.h"
#include "graph/shape_inference.h"
#include "gtest/gtest.h"
#include "util/status_macros.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/float16.h"
#include "kernels/onnx_tensor_data.h"
#include "memonger/planner.h"
#include "memonger/verify_plan.h"
#include "onnx/onnx_pb.h"
#include "tests/kernel_test_support.h"

namespace memonger::alloc {
namespace {

namespace fs = std::filesystem;
using graph::DataType;

constexpr char kNodeDir[] = "/usr/share/libonnx-testdata/data/node";
constexpr char kPytorchConvertedDir[] = "/usr/share/libonnx-testdata/data/pytorch-converted";
constexpr char kPytorchOperatorDir[] = "/usr/share/libonnx-testdata/data/pytorch-operator";

// Measured with libonnx-testdata 1.12 (Debian 12): 932 cases, 725 passed, 0 failed, 207 skipped
// (164 an op without a kernel, mostly the ONNX losses; 23 input data of an element type outside
// graph::DataType; 8 a kernel's Unimplemented (random Dropout masks, MaxPool's indices and
// uint8, tf_crop_and_resize); 12 models that do not load: 6 a Range whose length is data, 6
// control flow decided by tensor values or a Scan of opset 8). Cases with data-dependent sizes
// (NonZero, NonMaxSuppression, Compress, Unique, TopK with a computed k) run measuring them
// (Executor::RunMeasuring); an If, Loop or Scan counts by the ops of its subgraphs, which the
// import puts in its place. The floor sits a little below.
constexpr int kMinPassed = 720;
constexpr int kMaxFailed = 0;
// The pytorch-converted (82 cases, all passed) and pytorch-operator (35 cases, all passed)
// suites, same format, older opsets.
constexpr int kMinPassedPytorch = 112;

struct Outcome {
  enum Kind { kPassed, kFailed, kSkipped } kind = kPassed;
  std::string reason;  // skipped: the reason key; failed: the details
};

absl::StatusOr<onnx::ModelProto> ParseModel(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes.str())) return absl::InvalidArgumentError("not a model");
  return model;
}

// numbered files prefix_0.pb, prefix_1.pb, ... in order.
std::vector<fs::path> NumberedFiles(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> files;
  for (int k = 0;; ++k) {
    const fs::path p = dir / absl::StrCat(prefix, "_", k, ".pb");
    if (!fs::exists(p)) break;
    files.push_back(p);
  }
  return files;
}

double Load(DataType dtype, const std::string& bytes, size_t i) {
  const char* p = bytes.data();
  switch (dtype) {
    case DataType::kFloat32: { float v; std::memcpy(&v, p + 4 * i, 4); return v; }
    case DataType::kFloat64: { double v; std::memcpy(&v, p + 8 * i, 8); return v; }
    case DataType::kFloat16: { uint16_t v; std::memcpy(&v, p + 2 * i, 2); return HalfBitsToFloat(v); }
    case DataType::kBFloat16: { uint16_t v; std::memcpy(&v, p + 2 * i, 2); return BFloat16BitsToFloat(v); }
    case DataType::kInt64: { int64_t v; std::memcpy(&v, p + 8 * i, 8); return static_cast<double>(v); }
    case DataType::kInt32: { int32_t v; std::memcpy(&v, p + 4 * i, 4); return v; }
    case DataType::kInt16: { int16_t v; std::memcpy(&v, p + 2 * i, 2); return v; }
    case DataType::kInt8: return static_cast<int8_t>(p[i]);
    case DataType::kUInt8: return static_cast<uint8_t>(p[i]);
    case DataType::kBool: return p[i] != 0 ? 1 : 0;
    default: return 0;
  }
}

// "" when `actual` matches `expected` within the dtype's tolerance.
std::string Compare(const HostRunOutput& actual, const TensorData& expected) {
  if (actual.type != expected.type) {
    return absl::StrCat("type ", graph::TensorTypeToString(actual.type), " vs reference ",
                        graph::TensorTypeToString(expected.type));
  }
  const DataType dtype = actual.type.dtype;
  const size_t n = expected.bytes.size() / static_cast<size_t>(graph::DataTypeSize(dtype));
  std::vector<double> a(n), e(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = Load(dtype, actual.bytes, i);
    e[i] = Load(dtype, expected.bytes, i);
  }
  double rtol = 0, atol = 0;
  if (dtype == DataType::kFloat32 || dtype == DataType::kFloat64) {
    rtol = 1e-3;
    atol = 1e-7;
  } else if (dtype == DataType::kFloat16) {
    rtol = 2e-3;
    atol = 1e-4;
  } else if (dtype == DataType::kBFloat16) {
    rtol = 1.6e-2;
    atol = 1e-3;
  }
  return testing::CompareClose(a, e, rtol, atol);
}

// Seconds spent loading, planning and running, over all cases (printed with the summary).
struct Timing {
  double load = 0, plan = 0, run = 0;
};

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The first op type of `graph` without a kernel, "" when every one has. The import replaces an
// If, Loop or Scan by the nodes of its subgraphs (graph/onnx/control_flow.h): theirs count.
std::string MissingKernel(const onnx::GraphProto& graph, const KernelTable& kernels) {
  for (const onnx::NodeProto& node : graph.node()) {
    if (node.op_type() == "Constant") continue;
    if (node.op_type() == "If" || node.op_type() == "Loop" || node.op_type() == "Scan") {
      for (const onnx::AttributeProto& a : node.attribute()) {
        if (!a.has_g()) continue;
        if (std::string missing = MissingKernel(a.g(), kernels); !missing.empty()) return missing;
      }
      continue;
    }
    if (kernels.Find(node.op_type()) == nullptr) return node.op_type();
  }
  return "";
}

Outcome RunCase(const fs::path& dir, const KernelTable& kernels, Timing& timing) {
  const fs::path model_path = dir / "model.onnx";
  absl::StatusOr<onnx::ModelProto> model = ParseModel(model_path);
  if (!model.ok()) return {Outcome::kSkipped, "model does not parse"};
  if (const std::string missing = MissingKernel(model->graph(), kernels); !missing.empty()) {
    if (std::getenv("MEMONGER_LIST_MISSING") != nullptr) {
      std::printf("  missing %s\n", missing.c_str());
    }
    return {Outcome::kSkipped, "no kernel for an op"};
  }
  const fs::path data_dir = dir / "test_data_set_0";
  // Graph inputs that are not initializers, in order: the input files follow it.
  std::vector<std::string> input_names;
  {
    std::vector<std::string> initializers;
    for (const onnx::TensorProto& t : model->graph().initializer()) initializers.push_back(t.name());
    for (const onnx::ValueInfoProto& vi : model->graph().input()) {
      if (std::find(initializers.begin(), initializers.end(), vi.name()) == initializers.end()) {
        input_names.push_back(vi.name());
      }
    }
  }
  HostRunOptions options;
  graph::LoadOptions load;
  load.keep_data = true;  // the initializers and constants travel with the graph
  const std::vector<fs::path> input_files = NumberedFiles(data_dir, "input");
  for (size_t k = 0; k < input_files.size(); ++k) {
    absl::StatusOr<TensorData> data = ReadTensorProtoFile(input_files[k].string());
    if (!data.ok()) return {Outcome::kSkipped, "input data of an unsupported type"};
    onnx::TensorProto proto;
    std::string name = k < input_names.size() ? input_names[k] : "";
    if (name.empty()) return {Outcome::kSkipped, "more input files than graph inputs"};
    load.bindings.inputs[name] = data->type.dims;
    options.data[name] = *std::move(data);
  }
  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<graph::Graph> g = graph::LoadModel(model_path.string(), load);
  timing.load += Since(start);
  if (!g.ok()) {
    if (std::getenv("MEMONGER_LIST_MISSING") != nullptr) {
      std::printf("  does not load %s: %s\n", dir.filename().c_str(),
                  std::string(g.status().message()).c_str());
    }
    return {Outcome::kSkipped, absl::StrCat("model does not load (",
                                            absl::StatusCodeToString(g.status().code()), ")")};
  }
  if (absl::Status s = graph::InferShapes(*g, load.bindings); !s.ok()) {
    return {Outcome::kSkipped, "shape inference fails"};
  }
  start = std::chrono::steady_clock::now();
  absl::StatusOr<Plan> plan = PlanMemory(*g, PlanOptions{});
  timing.plan += Since(start);
  if (!plan.ok()) return {Outcome::kFailed, absl::StrCat("planning: ", plan.status().message())};
  if (absl::Status s = VerifyPlan(*g, *plan); !s.ok()) {
    return {Outcome::kFailed, absl::StrCat("plan: ", s.message())};
  }
  // Data-dependent sizes (NonZero, NonMaxSuppression) are measured by the run, which retypes
  // the model with them.
  options.retype = [&](const absl::flat_hash_map<std::string, std::vector<int64_t>>& measured)
      -> absl::StatusOr<graph::Graph> {
    graph::LoadOptions at = load;
    at.measured_sizes = measured;
    MG_ASSIGN_OR_RETURN(graph::Graph typed, graph::LoadModel(model_path.string(), at));
    MG_RETURN_IF_ERROR(graph::InferShapes(typed, at.bindings));
    return typed;
  };
  start = std::chrono::steady_clock::now();
  absl::StatusOr<HostRunReport> report = RunOnHost(*g, *plan, options);
  timing.run += Since(start);
  if (!report.ok()) {
    if (report.status().code() == absl::StatusCode::kUnimplemented) {
      if (std::getenv("MEMONGER_LIST_MISSING") != nullptr) {
        std::printf("  unimplemented %s: %s\n", dir.filename().c_str(),
                    std::string(report.status().message()).c_str());
      }
      return {Outcome::kSkipped, "a kernel reports Unimplemented (element type or attribute)"};
    }
    return {Outcome::kFailed, std::string(report.status().message())};
  }
  if (!report->seeded_statics.empty()) {
    return {Outcome::kSkipped, "a constant of the model has no readable data"};
  }
  const std::vector<fs::path> output_files = NumberedFiles(data_dir, "output");
  if (output_files.size() != report->outputs.size()) {
    return {Outcome::kFailed, absl::StrCat(report->outputs.size(), " outputs, ",
                                           output_files.size(), " reference files")};
  }
  for (size_t k = 0; k < output_files.size(); ++k) {
    absl::StatusOr<TensorData> expected =
        ReadTensorProtoFile(output_files[k].string(), report->outputs[k].type.dtype);
    if (!expected.ok()) return {Outcome::kSkipped, "reference data of an unsupported type"};
    const std::string diff = Compare(report->outputs[k], *expected);
    if (!diff.empty()) {
      return {Outcome::kFailed, absl::StrCat("output '", report->outputs[k].name, "': ", diff)};
    }
  }
  return {Outcome::kPassed, ""};
}

struct SuiteResult {
  size_t cases = 0;
  int passed = 0, failed = 0, skipped = 0;
};

// Runs every case of `suite_dir`, prints the summary; empty when the directory is absent.
std::optional<SuiteResult> RunSuite(const std::string& suite_dir) {
  std::error_code error;
  if (!fs::is_directory(suite_dir, error)) return std::nullopt;
  std::vector<fs::path> cases;
  for (const fs::directory_entry& e : fs::directory_iterator(suite_dir, error)) {
    if (fs::exists(e.path() / "model.onnx")) cases.push_back(e.path());
  }
  std::sort(cases.begin(), cases.end());
  const KernelTable kernels = MakeCpuKernelTable();
  SuiteResult result;
  result.cases = cases.size();
  Timing timing;
  std::map<std::string, int> skip_reasons;
  std::vector<std::string> failures, passes;
  for (const fs::path& dir : cases) {
    const Outcome o = RunCase(dir, kernels, timing);
    const std::string name = dir.filename().string();
    switch (o.kind) {
      case Outcome::kPassed:
        ++result.passed;
        passes.push_back(name);
        break;
      case Outcome::kFailed:
        ++result.failed;
        failures.push_back(absl::StrCat(name, ": ", o.reason));
        break;
      case Outcome::kSkipped:
        ++result.skipped;
        ++skip_reasons[o.reason];
        break;
    }
  }
  std::printf("%s through the CPU kernels: %zu cases, %d passed, %d failed, %d skipped\n",
              suite_dir.c_str(), cases.size(), result.passed, result.failed, result.skipped);
  std::printf("  seconds: loading %.1f, planning %.1f, running (with reading constants) %.1f\n",
              timing.load, timing.plan, timing.run);
  for (const auto& [reason, count] : skip_reasons) std::printf("  skipped %4d  %s\n", count, reason.c_str());
  for (const std::string& f : failures) std::printf("  FAILED  %s\n", f.c_str());
  if (std::getenv("MEMONGER_LIST_PASSED") != nullptr) {
    for (const std::string& p : passes) std::printf("  passed  %s\n", p.c_str());
  }
  return result;
}

TEST(OnnxNodeKernelsTest, BackendNodeTestsMatchTheReferenceOutputs) {
  const std::optional<SuiteResult> r = RunSuite(kNodeDir);
  if (!r.has_value()) {
    GTEST_SKIP() << kNodeDir << " is absent (Debian package libonnx-testdata)";
  }
  EXPECT_GE(r->passed, kMinPassed);
  EXPECT_LE(r->failed, kMaxFailed);
}

TEST(OnnxNodeKernelsTest, PytorchSuitesMatchTheReferenceOutputs) {
  int suites = 0, passed = 0;
  for (const char* dir : {kPytorchConvertedDir, kPytorchOperatorDir}) {
    const std::optional<SuiteResult> r = RunSuite(dir);
    if (!r.has_value()) continue;
    ++suites;
    passed += r->passed;
    EXPECT_LE(r->failed, kMaxFailed) << dir;
  }
  if (suites == 0) GTEST_SKIP() << "the pytorch suites of libonnx-testdata are absent";
  EXPECT_GE(passed, kMinPassedPytorch);
}

}  // namespace
}  // namespace memonger::alloc
