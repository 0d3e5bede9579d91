#include "graph/onnx/onnx_fold.h"

#include <exception>

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "graph/onnx/fold_internal.h"
#include "onnx/defs/schema.h"
#include "onnx/shape_inference/implementation.h"

namespace memonger::graph::onnx_fold {

namespace {

absl::Status InferInProcess(onnx::ModelProto& model, bool strict) {
  const onnx::ShapeInferenceOptions options(/*check_type_val=*/false,
                                            /*strict_mode_val=*/strict ? 1 : 0,
                                            /*data_prop_val=*/true);
  std::unordered_map<std::string, onnx::TensorShapeProto> generated_shape_data;
  try {
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), options,
                                       &generated_shape_data);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("ONNX shape inference failed: ", e.what()));
  } catch (...) {
    return absl::InvalidArgumentError("ONNX shape inference failed (unknown exception)");
  }
  return absl::OkStatus();
}

bool WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::string ReadAll(int fd) {
  std::string data;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    data.append(buffer, static_cast<size_t>(n));
  }
  return data;
}

}  // namespace

absl::Status InferShapesInProcess(onnx::ModelProto& model, bool strict) {
  return InferInProcess(model, strict);
}

absl::StatusOr<std::string> RunInChild(const std::function<ChildReply()>& work) {
  // Initialised here, so that the child never runs (or waits on) the registry's set-up.
  onnx::OpSchemaRegistry::Instance();
  auto in_process = [&]() -> absl::StatusOr<std::string> {
    ChildReply reply = work();
    if (!reply.status.ok()) return reply.status;
    return std::move(reply.bytes);
  };
  int fds[2];
  if (pipe(fds) != 0) return in_process();
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return in_process();
  }
  if (pid == 0) {
    // The child: 'O' + the reply's bytes or 'E' + the error's code and message, then leave
    // without running destructors.
    close(fds[0]);
    const ChildReply reply = work();
    const std::string message =
        reply.status.ok() ? absl::StrCat("O", reply.bytes)
                          : absl::StrCat("E", std::string(1, static_cast<char>(reply.status.code())),
                                         reply.status.message());
    _exit(WriteAll(fds[1], message) ? 0 : 1);
  }
  close(fds[1]);
  std::string reply = ReadAll(fds[0]);
  close(fds[0]);
  int wait_status = 0;
  while (waitpid(pid, &wait_status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError("waitpid failed for libonnx's shape inference");
  }
  if (WIFSIGNALED(wait_status)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ONNX shape inference crashed (signal ", WTERMSIG(wait_status),
        "): the model is malformed in a way libonnx does not check (a rank, axis or equation "
        "that its shape functions take on trust)"));
  }
  if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0 || reply.empty()) {
    return absl::InternalError("libonnx's shape inference process failed to report");
  }
  if (reply[0] == 'E' && reply.size() >= 2) {
    return absl::Status(static_cast<absl::StatusCode>(reply[1]), reply.substr(2));
  }
  if (reply[0] != 'O') {
    return absl::InternalError("libonnx's shape inference process sent an unreadable reply");
  }
  reply.erase(0, 1);
  return reply;
}

absl::Status RunOnnxShapeInference(onnx::ModelProto& model, bool strict) {
  // The child sends back the inferred types: graph.value_info and graph.output, all libonnx
  // writes.
  absl::StatusOr<std::string> reply = RunInChild([&]() -> ChildReply {
    ChildReply r;
    r.status = InferInProcess(model, strict);
    if (r.status.ok()) {
      onnx::GraphProto types;
      *types.mutable_value_info() = model.graph().value_info();
      *types.mutable_output() = model.graph().output();
      r.bytes = types.SerializeAsString();
    }
    return r;
  });
  if (!reply.ok()) return reply.status();
  onnx::GraphProto types;
  if (!types.ParseFromString(*reply)) {
    return absl::InternalError("libonnx's shape inference process sent an unreadable reply");
  }
  model.mutable_graph()->mutable_value_info()->Swap(types.mutable_value_info());
  model.mutable_graph()->mutable_output()->Swap(types.mutable_output());
  return absl::OkStatus();
}

}  // namespace memonger::graph::onnx_fold
