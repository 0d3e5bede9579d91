// Free ops for a caching allocator: Caffe2 memonger's release_blobs_when_used. After the last
// reader of each releasable blob the net gets `Free(b) -> b`, so that a runtime whose allocator
// caches freed memory (Caffe2 with the CUB allocator) reuses it for the blobs written later.
//
//   proto::NetDef freed = InsertFrees(rewritten.net, {"keep_me"});
//
// Releasable (memonger's rule, on names): a blob some op writes before any op reads it, that
// some op reads, that is not an external output, not named in `dont_free`, and not the input of
// an `Alias` op (an alias shares its memory). Walking the ops once, then backwards: O(ops +
// edges) time. Each blob is freed once, after its last reader; a blob written again after
// that (a shared name reused for the next blob) is allocated again by its writer.
#ifndef MEMONGER_REPORT_NET_FREE_H_
#define MEMONGER_REPORT_NET_FREE_H_

#include <set>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "proto/memonger.pb.h"

namespace memonger {

inline constexpr char kFreeOpType[] = "Free";

proto::NetDef InsertFrees(const proto::NetDef& net, const std::set<std::string>& dont_free);

// An op as the name-level analyses see it: its type and blob names (views of strings the
// caller keeps), so that a plan is accounted without writing it out as a NetDef.
struct BlobOp {
  absl::string_view type;
  std::vector<absl::string_view> inputs;
  std::vector<absl::string_view> outputs;
};
std::vector<BlobOp> BlobOpsOf(const proto::NetDef& net);

// InsertFrees' rule: for each op, the blobs freed right after it.
std::vector<std::vector<absl::string_view>> FreesAfter(
    const std::vector<BlobOp>& ops, const std::vector<absl::string_view>& external_outputs,
    const std::set<std::string>& dont_free);

}  // namespace memonger

#endif  // MEMONGER_REPORT_NET_FREE_H_
