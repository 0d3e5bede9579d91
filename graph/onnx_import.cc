#include "graph/onnx_import.h"

#include "absl/strings/str_cat.h"

namespace memonger::graph {

absl::StatusOr<Graph> ImportOnnxFile(const std::string& path, const ShapeBindings&) {
  return absl::UnimplementedError(absl::StrCat(path, ": ONNX import is being written"));
}

absl::StatusOr<Graph> ImportOnnxBytes(const std::string&, const ShapeBindings&,
                                      const std::string& source_name) {
  return absl::UnimplementedError(absl::StrCat(source_name, ": ONNX import is being written"));
}

}  // namespace memonger::graph
