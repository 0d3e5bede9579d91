#include "graph/model_loader.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "graph/net_def.h"
#include "graph/onnx/onnx_import.h"
#include "graph/records.h"
#include "util/status_macros.h"

namespace memonger::graph {

absl::StatusOr<Graph> LoadModel(const std::string& path, const LoadOptions& options) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  }
  if (std::filesystem::is_directory(path, error)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, not a model file"));
  }
  const std::string ext =
      absl::AsciiStrToLower(std::filesystem::path(path).extension().string());
  if (ext == ".onnx") return ImportOnnxFile(path, options.bindings);
  if (ext == ".pb") {
    MG_ASSIGN_OR_RETURN(proto::NetDef net, ReadNetDef(path, NetFileFormat::kBinary));
    return GraphFromNetDef(net);
  }
  if (ext == ".pbtxt" || ext == ".prototxt") {
    MG_ASSIGN_OR_RETURN(proto::NetDef net, ReadNetDef(path, NetFileFormat::kText));
    return GraphFromNetDef(net);
  }
  if (ext == ".json" || ext == ".csv") {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read the file"));
    MG_ASSIGN_OR_RETURN(std::vector<UsageRecord> records,
                        ext == ".json" ? ParseRecordsJson(text.str(), path)
                                       : ParseMiniMallocCsv(text.str(), path));
    return GraphFromRecords(records, std::filesystem::path(path).stem().string());
  }
  return absl::UnimplementedError(absl::StrCat(
      path, ": unknown model extension '", ext,
      "' (expected .onnx, .pb, .pbtxt, .prototxt, .json usage records or .csv MiniMalloc trace)"));
}

}  // namespace memonger::graph
