#include "graph/model_loader.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "graph/net_def.h"
#include "graph/onnx/onnx_import.h"
#include "graph/records.h"
#include "util/bytes.h"
#include "util/file_io.h"
#include "util/status_macros.h"

namespace memonger::graph {

namespace {

std::string ExtensionOf(const std::string& path) {
  return absl::AsciiStrToLower(std::filesystem::path(path).extension().string());
}

bool IsKnownExtension(const std::string& ext) {
  return ext == ".onnx" || ext == ".pb" || ext == ".pbtxt" || ext == ".prototxt" ||
         ext == ".json" || ext == ".csv";
}

bool IsTextExtension(const std::string& ext) {
  return ext == ".pbtxt" || ext == ".prototxt" || ext == ".json" || ext == ".csv";
}

absl::Status UnknownExtension(const std::string& path, const std::string& ext) {
  return absl::UnimplementedError(absl::StrCat(
      util::Quote(path), ": unknown model extension '", util::Quote(ext),
      "' (expected .onnx, .pb, .pbtxt, .prototxt, .json usage records or .csv MiniMalloc "
      "trace)"));
}

// The model in `bytes`, of the format `path`'s known extension names.
absl::StatusOr<Graph> ParseModel(const std::string& bytes, const std::string& path,
                                 const LoadOptions& options) {
  const std::string ext = ExtensionOf(path);
  if (ext == ".onnx") {
    OnnxImportOptions onnx_options;
    onnx_options.limits = options.limits;
    onnx_options.keep_data = options.keep_data;
    onnx_options.keep_folded_data = options.keep_folded_data;
    onnx_options.fold_params = options.fold_params;
    onnx_options.notes = options.notes;
    onnx_options.measured_sizes = options.measured_sizes;
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    onnx_options.model_dir = parent.empty() ? std::string(".") : parent.string();
    return ImportOnnxBytes(bytes, options.bindings, path, onnx_options);
  }
  if (ext == ".pb" || ext == ".pbtxt" || ext == ".prototxt") {
    MG_ASSIGN_OR_RETURN(proto::NetDef net,
                        ParseNetDef(bytes, ext == ".pb" ? NetFileFormat::kBinary
                                                        : NetFileFormat::kText,
                                    path, options.limits));
    MG_ASSIGN_OR_RETURN(Graph graph, GraphFromNetDef(net));
    MG_RETURN_IF_ERROR(CheckDimsUsed(DeclaredSymbols(graph), options.bindings));
    return graph;
  }
  MG_ASSIGN_OR_RETURN(std::vector<UsageRecord> records,
                      ext == ".json" ? ParseRecordsJson(bytes, path, options.limits)
                                     : ParseMiniMallocCsv(bytes, path, options.limits));
  int64_t with_offset = 0;
  for (const UsageRecord& r : records) with_offset += r.offset >= 0 ? 1 : 0;
  if (with_offset > 0 && options.notes != nullptr) {
    options.notes->push_back(absl::StrCat(
        util::Quote(path), ": the offsets of ", with_offset,
        " records are not used: memonger plans its own (the file's solution is not checked)"));
  }
  // Records have sizes, not shapes: nothing to bind.
  MG_RETURN_IF_ERROR(CheckDimsUsed({}, options.bindings));
  if (!options.bindings.inputs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--input-shape ", options.bindings.inputs.begin()->first,
        ": usage records have sizes, not shapes: nothing to bind"));
  }
  return GraphFromRecords(records, std::filesystem::path(path).stem().string());
}

}  // namespace

absl::StatusOr<Graph> LoadModel(const std::string& path, const LoadOptions& options) {
  const std::string ext = ExtensionOf(path);
  if (!IsKnownExtension(ext)) {
    // A missing file is the likelier mistake; say so first.
    std::error_code error;
    if (!std::filesystem::exists(path, error) && !std::filesystem::is_symlink(path, error)) {
      return absl::NotFoundError(absl::StrCat(util::Quote(path), ": no such file"));
    }
    return UnknownExtension(path, ext);
  }
  MG_ASSIGN_OR_RETURN(const std::string bytes,
                      util::ReadInputFile(path, options.limits,
                                          IsTextExtension(ext) ? util::FileContent::kText
                                                               : util::FileContent::kBinary));
  return ParseModel(bytes, path, options);
}

absl::StatusOr<Graph> LoadModelBytes(const std::string& bytes, const std::string& name,
                                     const LoadOptions& options) {
  const std::string ext = ExtensionOf(name);
  if (!IsKnownExtension(ext)) return UnknownExtension(name, ext);
  // What ReadInputFile checks of a file's content.
  if (static_cast<int64_t>(bytes.size()) > options.limits.max_input_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        util::Quote(name), ": ", util::FormatBytes(static_cast<int64_t>(bytes.size())),
        ", more than the input limit of ", util::FormatBytes(options.limits.max_input_bytes)));
  }
  if (IsTextExtension(ext)) {
    if (const size_t nul = bytes.find('\0'); nul != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(util::Quote(name),
                                                     ": binary data (a NUL byte at byte ", nul,
                                                     ") where text is expected"));
    }
  }
  return ParseModel(bytes, name, options);
}

absl::StatusOr<std::string> PlanningBytes(const std::string& bytes, const std::string& name,
                                          const LoadOptions& options) {
  if (ExtensionOf(name) != ".onnx") return bytes;
  return WithoutLargeTensorData(bytes, name, options.limits);
}

bool SamePlanningGraph(const Graph& a, const Graph& b) {
  if (a.num_ops() != b.num_ops() || a.num_values() != b.num_values()) return false;
  for (OpId i = 0; i < a.num_ops(); ++i) {
    const Op& x = a.op(i);
    const Op& y = b.op(i);
    if (x.type != y.type || x.name != y.name || x.view != y.view || x.device != y.device ||
        !std::equal(x.inputs.begin(), x.inputs.end(), y.inputs.begin(), y.inputs.end()) ||
        !std::equal(x.outputs.begin(), x.outputs.end(), y.outputs.begin(), y.outputs.end())) {
      return false;
    }
  }
  for (ValueId i = 0; i < a.num_values(); ++i) {
    const Value& x = a.value(i);
    const Value& y = b.value(i);
    if (x.name != y.name || x.version != y.version || x.role != y.role ||
        x.producer != y.producer || x.inplace_of != y.inplace_of || x.type != y.type) {
      return false;
    }
  }
  return true;
}

}  // namespace memonger::graph
