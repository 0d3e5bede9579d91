// Control flow in ONNX imports: If nodes whose branch the shapes decide, and Loops whose trip
// count they decide.
//
// Exporters write `If` where Python code branches on a size: torchvision's batched_nms returns an
// empty index list when there are no boxes (`if boxes.numel() == 0`), its RoI pooler squeezes a
// dim when there is one image. At the sizes a plan is made for, such a condition is a constant:
// the shape folder (onnx_fold.h) evaluates it like any other shape arithmetic, and the If is then
// replaced by the nodes of the branch it takes (InlineBranch), so that the branch's values are
// planned with the rest of the net. An If whose condition depends on tensor values stays an If,
// and the importer refuses it by name: nested plans for data-dependent branches are not built.
//
// Scripted code writes `Loop` for `for i in range(x.size(0))`: the trip count is a size, the
// condition a constant true that the body passes on. Such a Loop becomes that many copies of its
// body (UnrollLoop), iteration k reading the values iteration k - 1 carried out, its scan outputs
// stacked along a new axis 0. Planned flat, iterations share memory as any ops do, and a carried
// value may change its shape from one iteration to the next (a `torch.cat` that grows), which a
// nested plan of one iteration could not hold. Refused by name: a Loop whose trip count depends on
// tensor values (Mask R-CNN's loop over its detections), one whose body computes its condition
// (`while`, `break`), one of no iterations with scan outputs (their element shape is unknown), and
// one of more than util::kMaxUnrolledNodes nodes unrolled. A Scan (opset 9+) always runs once per
// slice of its scan inputs, a shape: it is unrolled alike (UnrollScan). Any other node holding a
// graph is refused before anything else.
//
// ONNX scoping, as the checker enforces it: a subgraph reads any name of an enclosing scope and
// may not define a name an enclosing scope defines; an If's branches have no inputs, a Loop's
// body has its iteration number, condition and carried values. Under that rule, the names a
// subgraph reads from outside (OuterReads) are the node's hidden inputs: the importer orders
// nodes by them, keeps their producers alive and renames them with the values they alias.
#ifndef MEMONGER_GRAPH_ONNX_CONTROL_FLOW_H_
#define MEMONGER_GRAPH_ONNX_CONTROL_FLOW_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"

namespace memonger::graph::onnx_fold {

// True for an attribute that holds a graph (If's branches, Loop's body).
bool HoldsSubgraph(const onnx::AttributeProto& a);

// Unimplemented naming the first node that holds a graph and is not an If, Loop or Scan (at any
// depth); InvalidArgument for an If whose branches are not both given as single graphs, a Loop
// without its trip count and condition inputs (empty names allowed), a Loop or Scan without one
// body graph. `opset` is the model's default-domain opset: a Scan before opset 9 (a batch axis,
// sequence lengths) is Unimplemented.
absl::Status CheckControlFlowOps(const onnx::GraphProto& graph, int opset);

// The names `node`'s subgraphs (at any depth) read without defining them, sorted: what the
// node reads from the enclosing scopes besides its inputs. Empty for a node without subgraphs.
std::vector<std::string> OuterReads(const onnx::NodeProto& node);

// Checks the scoping rules above for every If, Loop and Scan of `graph` at any depth: each
// branch has no inputs and as many outputs as the If; a Loop's body as many inputs as the Loop
// and one output more, a Scan's as many inputs and outputs as the Scan; each subgraph defines each name once and none that `defined` (the enclosing
// scopes' names) holds, and reads only names defined before the read in its own or an enclosing
// scope. InvalidArgument naming the node and the name. `defined` is the enclosing scope's names,
// the whole of `graph` included.
absl::Status CheckSubgraphScopes(const onnx::GraphProto& graph,
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

// Whether `loop`'s body passes its condition on unchanged: its condition output is its
// condition input, a constant true, or an outer name `outer_true` holds, through any chain of
// Identity nodes. A body that computes its condition may stop early (`while`, `break`).
bool BodyKeepsCondition(const onnx::NodeProto& loop,
                        const std::function<bool(const std::string&)>& outer_true);

// The nodes that replace `loop` (its condition true and kept, BodyKeepsCondition), run
// `trip_count` times: per iteration, a Constant for the iteration number (if read), a copy of
// the body with every name it defines renamed "<name>/<loop>/<k>" (a fresh name if that one is
// taken) and its carried inputs reading the previous iteration's carried outputs (the first,
// the Loop's inputs); then an Identity per carried output, and per scan output an Unsqueeze of
// each iteration's value along axis 0 (axes an input from opset 13: `opset`) and one Concat.
// The body's initializers are appended to `graph` once, renamed; the body's value_info is
// dropped (a carried value may change shape from one iteration to the next; inference types
// the copies). `taken` receives every new name; `note` a line saying what was done.
// Unimplemented for a trip count of 0 with scan outputs present. O(trip_count x body size).
// REQUIRES: CheckSubgraphScopes passed; `taken` holds every name `graph` defines; trip_count
// >= 0 and trip_count x body nodes <= util::kMaxUnrolledNodes.
absl::StatusOr<std::vector<onnx::NodeProto>> UnrollLoop(const onnx::NodeProto& loop,
                                                        int64_t trip_count, int opset,
                                                        absl::flat_hash_set<std::string>& taken,
                                                        onnx::GraphProto& graph,
                                                        std::string& note);

// The static dims of a value, nullopt when unknown.
using ScanRanks = std::function<std::optional<std::vector<int64_t>>(const std::string&)>;

// How many slices `scan` (opset 9+) iterates over: its scan inputs' dims along their
// `scan_input_axes`, which must agree; -1 while one of them has no static shape.
// InvalidArgument for a bad num_scan_inputs or axis, or scan inputs of other lengths.
absl::StatusOr<int64_t> ScanLength(const onnx::NodeProto& scan, const ScanRanks& dims_of);

// The nodes that replace `scan` (opset 9+, its ScanLength known): per slice k, a Gather of each
// scan input's slice (from the end for `scan_input_directions` 1) and a copy of the body as
// UnrollLoop makes them, the states chained; then an Identity per final state, and per scan
// output the slices stacked along its `scan_output_axes` axis (reversed for direction 1).
// Unimplemented for no slices with scan outputs present.
absl::StatusOr<std::vector<onnx::NodeProto>> UnrollScan(const onnx::NodeProto& scan,
                                                        const ScanRanks& dims_of, int opset,
                                                        absl::flat_hash_set<std::string>& taken,
                                                        onnx::GraphProto& graph,
                                                        std::string& note);

// Control flow decided at run time, as regions (graph/control_regions.h): the markers are
// nodes of domain graph::kControlDomain.
bool IsRegionMarker(const onnx::NodeProto& node);

// The nodes that replace an If whose condition depends on tensor values: IfThen, the
// then_branch's nodes (InlineBranch, its outputs renamed "<out>/then"), IfElse, the
// else_branch's, IfEnd writing the If's outputs. `note` says what was done. O(branch sizes).
// REQUIRES: as InlineBranch.
std::vector<onnx::NodeProto> LowerIfToRegion(const onnx::NodeProto& if_node,
                                             absl::flat_hash_set<std::string>& taken,
                                             onnx::GraphProto& graph, std::string& note);

// The nodes that replace a Loop whose trip count or condition depends on tensor values:
// LoopBegin, one copy of the body (as UnrollLoop makes them, reading LoopBegin's outputs),
// LoopEnd reading what graph/control_regions.h lists, the body's outer reads included.
// Unimplemented for a Loop with scan outputs (their length would need a bound). A carried
// value whose shape changes between iterations is refused when LoopEnd is typed
// (shape_rules.h). REQUIRES: as UnrollLoop.
absl::StatusOr<std::vector<onnx::NodeProto>> LowerLoopToRegion(
    const onnx::NodeProto& loop, int opset, absl::flat_hash_set<std::string>& taken,
    onnx::GraphProto& graph, std::string& note);

}  // namespace memonger::graph::onnx_fold

#endif  // MEMONGER_GRAPH_ONNX_CONTROL_FLOW_H_
