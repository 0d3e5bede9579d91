#include "report/net_free.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "graph/net_def.h"
#include "gtest/gtest.h"

namespace memonger {
namespace {

using ::testing::ElementsAre;

proto::NetDef Net(const std::string& text) {
  absl::StatusOr<proto::NetDef> net =
      graph::ParseNetDef(text, graph::NetFileFormat::kText, "<test>");
  EXPECT_TRUE(net.ok()) << net.status();
  return net.value_or(proto::NetDef());
}

std::vector<std::string> Ops(const proto::NetDef& net) {
  std::vector<std::string> ops;
  for (const proto::OperatorDef& op : net.op()) {
    ops.push_back(op.type() == kFreeOpType ? "Free " + op.input(0)
                                           : op.type() + " " + op.output(0));
  }
  return ops;
}

// No double free, and nothing read after its Free unless written again first.
void ExpectSafe(const proto::NetDef& net) {
  std::map<std::string, bool> freed;
  for (const proto::OperatorDef& op : net.op()) {
    if (op.type() == kFreeOpType) {
      EXPECT_FALSE(freed[op.input(0)]) << "double free of " << op.input(0);
      freed[op.input(0)] = true;
      continue;
    }
    for (const std::string& in : op.input()) EXPECT_FALSE(freed[in]) << in << " read after Free";
    for (const std::string& out : op.output()) freed[out] = false;
  }
}

// memonger_test.py's release_blobs_when_used: x, y, z freed after their last readers; u is
// aliased, out never read.
TEST(InsertFreesTest, MemongerTestNet) {
  const proto::NetDef net = Net(R"pb(
    op { type: "FC" input: "data" input: "w" input: "b" output: "x" }
    op { type: "FC" input: "x" input: "w" input: "b" output: "y" }
    op { type: "FC" input: "x" input: "w" input: "b" output: "z" }
    op { type: "FC" input: "y" input: "w" input: "b" output: "u" }
    op { type: "Alias" input: "u" output: "u_alias" }
    op { type: "Sum" input: "z" input: "u" output: "out" }
    external_input: "data"
    external_input: "w"
    external_input: "b"
  )pb");
  const proto::NetDef freed = InsertFrees(net, {});
  EXPECT_THAT(Ops(freed), ElementsAre("FC x", "FC y", "FC z", "Free x", "FC u", "Free y",
                                      "Alias u_alias", "Sum out", "Free z"));
  ExpectSafe(freed);
  // dont_free and external outputs are kept.
  proto::NetDef with_output = net;
  with_output.add_external_output("z");
  EXPECT_THAT(Ops(InsertFrees(with_output, {"x"})),
              ElementsAre("FC x", "FC y", "FC z", "FC u", "Free y", "Alias u_alias", "Sum out"));
}

// A shared name (a buffer renamed by a memonger baseline) is freed once, after its last reader.
TEST(InsertFreesTest, SharedNamesAreFreedOnceAtTheEnd) {
  const proto::NetDef net = Net(R"pb(
    op { type: "Relu" input: "data" output: "__m0_shared" }
    op { type: "Relu" input: "__m0_shared" output: "b" }
    op { type: "Relu" input: "b" output: "__m0_shared" }
    op { type: "Relu" input: "__m0_shared" output: "y" }
    external_input: "data"
    external_output: "y"
  )pb");
  const proto::NetDef freed = InsertFrees(net, {});
  EXPECT_THAT(Ops(freed), ElementsAre("Relu __m0_shared", "Relu b", "Relu __m0_shared", "Free b",
                                      "Relu y", "Free __m0_shared"));
  ExpectSafe(freed);
}

}  // namespace
}  // namespace memonger
