// libFuzzer harness: text NetDef (.pbtxt, .prototxt) -> ParseNetDef ->
// GraphFromNetDef (and back through GraphToNetDef) -> InferShapes -> a cheap plan, checked by
// the verifier (fuzz/fuzz_support.h: LoadNetDefAndCheck).
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_support.h"
#include "google/protobuf/stubs/logging.h"
#include "graph/net_def.h"

// protobuf logs every malformed string field it parses (invalid UTF-8): silence, not findings.
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  memonger::fuzz::LoadNetDefAndCheck(memonger::fuzz::Bytes(data, size),
                                     memonger::graph::NetFileFormat::kText);
  return 0;
}
