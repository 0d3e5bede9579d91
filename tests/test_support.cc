#include "tests/test_support.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "graph/net_def.h"
#include "onnx/onnx_pb.h"
#include "gtest/gtest.h"
#include "util/status_macros.h"

namespace memonger::testing {

std::string SourcePath(const std::string& relative) {
  const char* dir = std::getenv("MEMONGER_SOURCE_DIR");
  return std::string(dir != nullptr ? dir : MEMONGER_SOURCE_DIR_DEFAULT) + "/" + relative;
}

std::string TempDir() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info != nullptr ? std::string(info->test_suite_name()) + "." + info->name()
                                     : "memonger";
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("memonger_test_" + std::to_string(getpid())) / name;
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

std::string WriteTempFile(const std::string& name, const std::string& contents) {
  const std::string path = TempDir() + "/" + name;
  std::ofstream out(path, std::ios::binary);
  out << contents;
  return path;
}

absl::StatusOr<graph::Graph> GraphFromText(const std::string& pbtxt) {
  MG_ASSIGN_OR_RETURN(proto::NetDef net,
                      graph::ParseNetDef(pbtxt, graph::NetFileFormat::kText, "<test net>"));
  return graph::GraphFromNetDef(net);
}

std::string OptimizeNetPath() {
  const char* tool = std::getenv("OPTIMIZE_NET");
  return tool != nullptr ? tool : OPTIMIZE_NET_DEFAULT;
}

CommandResult RunOptimizeNet(const std::string& args) {
  const char* tool = std::getenv("OPTIMIZE_NET");
  if (tool == nullptr) tool = OPTIMIZE_NET_DEFAULT;
  CommandResult result;
  const std::string dir = TempDir();
  const std::string out_path = dir + "/stdout.txt";
  const std::string err_path = dir + "/stderr.txt";
  const std::string command = std::string(tool) + " " + args +
                              " >" + out_path + " 2>" + err_path + " </dev/null";
  const int status = std::system(command.c_str());
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
    // The shell reports a child killed by a signal as 128 + signal.
    if (result.exit_code > 128) result.signal = result.exit_code - 128;
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  auto slurp = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  result.out = slurp(out_path);
  result.err = slurp(err_path);
  return result;
}

absl::StatusOr<std::string> Conv2dWithSymbolicBatch() {
  std::ifstream in("/usr/share/libonnx-testdata/data/pytorch-converted/test_Conv2d/model.onnx",
                   std::ios::binary);
  if (!in) return absl::NotFoundError("libonnx-testdata is not installed");
  onnx::ModelProto model;
  if (!model.ParseFromIstream(&in)) {
    return absl::InvalidArgumentError("libonnx-testdata's test_Conv2d does not parse");
  }
  model.mutable_graph()->clear_value_info();
  for (auto* list :
       {model.mutable_graph()->mutable_input(), model.mutable_graph()->mutable_output()}) {
    list->Mutable(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)
        ->set_dim_param("batch");
  }
  return model.SerializeAsString();
}

}  // namespace memonger::testing
