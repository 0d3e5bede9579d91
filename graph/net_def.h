// The memonger net format (proto/memonger.proto, Caffe2's NetDef plus our fields) in and out of
// the graph model. Binary (.pb) and text (.pbtxt) files.
#ifndef MEMONGER_GRAPH_NET_DEF_H_
#define MEMONGER_GRAPH_NET_DEF_H_

#include <string>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "proto/memonger.pb.h"
#include "util/limits.h"

namespace memonger::graph {

enum class NetFileFormat { kBinary, kText };

// Reads a NetDef. InvalidArgument naming the file for an empty file, a file over
// limits.max_input_bytes, a parse error (text: line and column), nesting deeper than
// limits.max_nesting_depth, or bytes that are not a NetDef (fields a NetDef does not have,
// invalid UTF-8 in names, no ops).
absl::StatusOr<proto::NetDef> ReadNetDef(const std::string& path, NetFileFormat format,
                                         const util::InputLimits& limits = {});
absl::StatusOr<proto::NetDef> ParseNetDef(const std::string& bytes, NetFileFormat format,
                                          const std::string& source_name,
                                          const util::InputLimits& limits = {});
// The bytes of a binary or text NetDef file.
absl::StatusOr<std::string> SerializeNetDef(const proto::NetDef& net, NetFileFormat format);
// Writes the file atomically (util::OutputFiles).
absl::Status WriteNetDef(const proto::NetDef& net, const std::string& path, NetFileFormat format);

// Builds the graph a NetDef describes (GraphBuilder does the validation).
absl::StatusOr<Graph> GraphFromNetDef(const proto::NetDef& net);

// The net of a graph: ops in program order under their blob names, declarations, roles that
// differ from the derived ones, losses, parameter gradients. GraphFromNetDef(GraphToNetDef(g))
// rebuilds g (types from inference excepted: only declarations are written).
proto::NetDef GraphToNetDef(const Graph& graph);

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_NET_DEF_H_
