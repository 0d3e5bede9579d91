#include "report/net_free.h"

#include <string>
#include <vector>

namespace memonger {

proto::NetDef InsertFrees(const proto::NetDef& net, const std::set<std::string>& dont_free) {
  std::set<std::string> read;
  std::set<std::string> candidates;
  std::set<std::string> aliased;
  for (const proto::OperatorDef& op : net.op()) {
    if (op.type() == "Alias") {
      if (op.input_size() > 0) aliased.insert(op.input(0));
      continue;
    }
    read.insert(op.input().begin(), op.input().end());
    for (const std::string& out : op.output()) {
      if (read.count(out) == 0) candidates.insert(out);
    }
  }
  std::set<std::string> releasable;
  for (const std::string& b : candidates) {
    if (read.count(b) > 0 && dont_free.count(b) == 0 && aliased.count(b) == 0) {
      releasable.insert(b);
    }
  }
  for (const std::string& out : net.external_output()) releasable.erase(out);

  // Backwards: the first reader met is the last one; its Free follows it.
  std::vector<std::vector<std::string>> frees_after(net.op_size());
  std::set<std::string> freed;
  for (int i = net.op_size() - 1; i >= 0; --i) {
    const proto::OperatorDef& op = net.op(i);
    if (op.type() == "Alias") continue;
    for (const std::string& in : op.input()) {
      if (releasable.count(in) > 0 && freed.insert(in).second) frees_after[i].push_back(in);
    }
  }
  proto::NetDef result = net;
  result.clear_op();
  for (int i = 0; i < net.op_size(); ++i) {
    *result.add_op() = net.op(i);
    for (const std::string& b : frees_after[i]) {
      proto::OperatorDef* free_op = result.add_op();
      free_op->set_type(kFreeOpType);
      free_op->add_input(b);
      free_op->add_output(b);
      if (net.op(i).has_device_option()) {
        *free_op->mutable_device_option() = net.op(i).device_option();
      }
    }
  }
  return result;
}

}  // namespace memonger
