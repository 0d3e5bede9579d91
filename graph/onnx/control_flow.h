// Control flow in ONNX imports: If nodes whose branch the shapes decide.
//
// Exporters write `If` where Python code branches on a size: torchvision's batched_nms returns an
// empty index list when there are no boxes (`if boxes.numel() == 0`), its RoI pooler squeezes a
// dim when there is one image. At the sizes a plan is made for, such a condition is a constant:
// the shape folder (onnx_fold.h) evaluates it like any other shape arithmetic, and the If is then
// replaced by the nodes of the branch it takes (InlineBranch), so that the branch's values are
// planned with the rest of the net. An If whose condition depends on tensor values stays an If,
// and the importer refuses it by name: nested plans for data-dependent branches are not built.
// Loop and Scan (and any other node holding a graph) are refused before anything else.
//
// ONNX scoping, as the checker enforces it: a branch has no inputs, reads any name of an
// enclosing scope, and may not define a name an enclosing scope defines. Under that rule, the
// names a branch reads from outside (OuterReads) are the node's hidden inputs: the importer
// orders nodes by them, keeps their producers alive and renames them with the values they alias.
#ifndef MEMONGER_GRAPH_ONNX_CONTROL_FLOW_H_
#define MEMONGER_GRAPH_ONNX_CONTROL_FLOW_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "onnx/onnx_pb.h"

namespace memonger::graph::onnx_fold {

// True for an attribute that holds a graph (If's branches, Loop's body).
bool HoldsSubgraph(const onnx::AttributeProto& a);

// Unimplemented naming the first node that holds a graph and is not an If (at any depth), or
// an If whose branches are not both given as single graphs.
absl::Status CheckOnlyIfs(const onnx::GraphProto& graph);

// The names `node`'s subgraphs (at any depth) read without defining them, sorted: what the
// node reads from the enclosing scopes besides its inputs. Empty for a node without subgraphs.
std::vector<std::string> OuterReads(const onnx::NodeProto& node);

// Checks the scoping rules above for every If of `graph` at any depth: each branch has no
// inputs and as many outputs as the If, defines each name once and none that `defined` (the
// enclosing scopes' names) holds, and reads only names defined before the read in its own or an
// enclosing scope. InvalidArgument naming the If and the name. `defined` is the enclosing
// scope's names, the whole of `graph` included.
absl::Status CheckIfScopes(const onnx::GraphProto& graph,
                           const absl::flat_hash_set<std::string>& defined);

// Renames, inside `node`'s subgraphs at any depth, every read of a name in `renames` (which, by
// the scoping rules, is a read of the enclosing scope's value).
void RenameOuterReads(onnx::NodeProto& node,
                      const absl::flat_hash_map<std::string, std::string>& renames);

// The nodes that replace `if_node`: those of its then_branch (`condition` true) or else_branch,
// then one Identity per output from the branch's output to the If's. The branch's initializers
// and the value_info of its own values are appended to `graph`. A name the branch defines that
// `taken` holds already (another If's branch defined it too, in a scope of its own) is renamed
// "<name>/<if>/<branch>_<k>", and so are its reads; `taken` receives the branch's names. `note`
// receives a line saying what was done, for the import's notes. O(branch size).
// REQUIRES: CheckIfScopes passed; `taken` holds every name `graph` defines.
std::vector<onnx::NodeProto> InlineBranch(const onnx::NodeProto& if_node, bool condition,
                                          absl::flat_hash_set<std::string>& taken,
                                          onnx::GraphProto& graph, std::string& note);

}  // namespace memonger::graph::onnx_fold

#endif  // MEMONGER_GRAPH_ONNX_CONTROL_FLOW_H_
