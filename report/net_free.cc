#include "report/net_free.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"

namespace memonger {

std::vector<BlobOp> BlobOpsOf(const proto::NetDef& net) {
  std::vector<BlobOp> ops(net.op_size());
  for (int i = 0; i < net.op_size(); ++i) {
    const proto::OperatorDef& op = net.op(i);
    ops[i].type = op.type();
    ops[i].inputs.assign(op.input().begin(), op.input().end());
    ops[i].outputs.assign(op.output().begin(), op.output().end());
  }
  return ops;
}

std::vector<std::vector<absl::string_view>> FreesAfter(
    const std::vector<BlobOp>& ops, const std::vector<absl::string_view>& external_outputs,
    const std::set<std::string>& dont_free) {
  // Hash sets of views: a net of a hundred thousand ops made ordered sets of copied names the
  // slowest part of a report.
  absl::flat_hash_set<absl::string_view> read;
  absl::flat_hash_set<absl::string_view> candidates;
  absl::flat_hash_set<absl::string_view> aliased;
  for (const BlobOp& op : ops) {
    if (op.type == "Alias") {
      if (!op.inputs.empty()) aliased.insert(op.inputs[0]);
      continue;
    }
    read.insert(op.inputs.begin(), op.inputs.end());
    for (absl::string_view out : op.outputs) {
      if (!read.contains(out)) candidates.insert(out);
    }
  }
  absl::flat_hash_set<absl::string_view> releasable;
  for (absl::string_view b : candidates) {
    if (read.contains(b) && dont_free.count(std::string(b)) == 0 && !aliased.contains(b)) {
      releasable.insert(b);
    }
  }
  for (absl::string_view out : external_outputs) releasable.erase(out);

  // Backwards: the first reader met is the last one; its Free follows it.
  std::vector<std::vector<absl::string_view>> frees_after(ops.size());
  absl::flat_hash_set<absl::string_view> freed;
  for (size_t i = ops.size(); i-- > 0;) {
    if (ops[i].type == "Alias") continue;
    for (absl::string_view in : ops[i].inputs) {
      if (releasable.contains(in) && freed.insert(in).second) frees_after[i].push_back(in);
    }
  }
  return frees_after;
}

proto::NetDef InsertFrees(const proto::NetDef& net, const std::set<std::string>& dont_free) {
  const std::vector<absl::string_view> external_outputs(net.external_output().begin(),
                                                        net.external_output().end());
  const std::vector<std::vector<absl::string_view>> frees_after =
      FreesAfter(BlobOpsOf(net), external_outputs, dont_free);
  proto::NetDef result = net;
  // The copied ops are moved back one by one (Swap, no deep copy), Frees between them.
  google::protobuf::RepeatedPtrField<proto::OperatorDef> ops;
  ops.Swap(result.mutable_op());
  result.mutable_op()->Reserve(net.op_size());
  for (int i = 0; i < net.op_size(); ++i) {
    result.add_op()->Swap(ops.Mutable(i));
    for (absl::string_view b : frees_after[i]) {
      proto::OperatorDef* free_op = result.add_op();
      free_op->set_type(kFreeOpType);
      free_op->add_input(std::string(b));
      free_op->add_output(std::string(b));
      if (net.op(i).has_device_option()) {
        *free_op->mutable_device_option() = net.op(i).device_option();
      }
    }
  }
  return result;
}

}  // namespace memonger
