// Tensor data a model file carries for its static values (ONNX initializers, Constant nodes and
// the values the importer folded), read once by the loader and handed on with the graph: the
// executor, a rewritten graph and a model that arrived as bytes all see the same data, and no
// later stage opens the model file again.
//
//   const graph::StaticData* data = graph.static_data();     // null: the format has none
//   if (data) if (auto it = data->find("W"); it != data->end()) use(it->second.bytes);
#ifndef MEMONGER_GRAPH_TENSOR_DATA_H_
#define MEMONGER_GRAPH_TENSOR_DATA_H_

#include <string>

#include "absl/container/flat_hash_map.h"
#include "graph/tensor_type.h"

namespace memonger::graph {

struct TensorData {
  TensorType type;
  std::string bytes;  // ByteSize(type) bytes, little-endian, C order
};

// By value name. A value the model declares static but whose data the file does not hold (an
// external-data file that could not be read is an error before this exists) is absent.
using StaticData = absl::flat_hash_map<std::string, TensorData>;

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_TENSOR_DATA_H_
