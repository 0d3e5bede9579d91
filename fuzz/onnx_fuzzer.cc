// libFuzzer harness: ONNX model bytes -> ImportOnnxBytes (parse, libonnx shape inference, our
// folding of shape subgraphs, the graph) -> a cheap plan, checked by the verifier.
//
// libonnx's shape inference runs in a forked child (graph/onnx/onnx_shape_inference.cc): its
// shape functions take ranks and axes on trust and may crash on a malformed model, and the
// child's death by a signal is the importer's InvalidArgument. Under the fuzzer the child
// inherits the handlers of ASan and libFuzzer, which would turn that expected death into a
// report, a crash artifact of the parent's input written by the child, and an exit code the
// parent reads as an internal error. So the child dies as it does in production: default signal
// handlers, and a sanitizer's report (ASan sees libonnx's bad frees and interceptor-checked
// reads, which without it may crash or not) ends in SIGABRT. The child's stderr is closed: its
// reports are libonnx's bugs, contained by design, not findings, and they would bury the
// parent's. (tools/sanitize.sh gets the same death for the unit tests with abort_on_error=1.)
#include <fcntl.h>
#include <pthread.h>
#include <sanitizer/common_interface_defs.h>
#include <unistd.h>

#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "absl/status/statusor.h"
#include "fuzz/fuzz_support.h"
#include "graph/onnx/onnx_import.h"

namespace {

void AbortChild() {
  std::signal(SIGABRT, SIG_DFL);
  std::abort();
}

void DieAsInProduction() {
  for (int signal : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP}) {
    std::signal(signal, SIG_DFL);
  }
  __sanitizer_set_death_callback(AbortChild);
  const int null = open("/dev/null", O_WRONLY);
  if (null >= 0) dup2(null, STDERR_FILENO);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  pthread_atfork(/*prepare=*/nullptr, /*parent=*/nullptr, /*child=*/DieAsInProduction);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace memonger;
  absl::StatusOr<graph::Graph> graph =
      graph::ImportOnnxBytes(fuzz::Bytes(data, size), graph::ShapeBindings{}, "fuzz");
  if (!graph.ok()) {
    fuzz::FailOnInternal(graph.status(), "ImportOnnxBytes");
    return 0;
  }
  fuzz::InferPlanAndCheck(*graph, "ONNX");
  return 0;
}
