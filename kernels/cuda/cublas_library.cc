#include "kernels/cuda/cublas_library.h"

#include <dlfcn.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace memonger::alloc {
namespace {

template <class Fn>
bool Find(void* library, const char* name, Fn& fn, std::string& missing) {
  fn = reinterpret_cast<Fn>(::dlsym(library, name));
  if (fn == nullptr) missing = name;
  return fn != nullptr;
}

absl::StatusOr<CublasLibrary> Load() {
  const std::string soname = absl::StrCat("libcublas.so.", CUBLAS_VER_MAJOR);
  std::vector<std::string> candidates = {soname};
#ifdef MEMONGER_CUBLAS_DIR
  candidates.push_back(absl::StrCat(MEMONGER_CUBLAS_DIR, "/", soname));
#endif
  void* library = nullptr;
  std::string errors;
  for (const std::string& name : candidates) {
    library = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library != nullptr) break;
    const char* e = ::dlerror();
    absl::StrAppend(&errors, errors.empty() ? "" : "; ", e != nullptr ? e : name);
  }
  if (library == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot load cuBLAS (", soname, "): ", errors));
  }
  // The library stays loaded for the life of the process (handles may outlive any caller).
  CublasLibrary api;
  std::string missing;
  if (!Find(library, "cublasCreate_v2", api.create, missing) ||
      !Find(library, "cublasDestroy_v2", api.destroy, missing) ||
      !Find(library, "cublasSetStream_v2", api.set_stream, missing) ||
      !Find(library, "cublasSetWorkspace_v2", api.set_workspace, missing) ||
      !Find(library, "cublasGemmStridedBatchedEx", api.gemm_strided_batched_ex, missing) ||
      !Find(library, "cublasGetStatusString", api.status_string, missing)) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuBLAS (", soname, ") has no entry point ", missing));
  }
  return api;
}

}  // namespace

absl::StatusOr<const CublasLibrary*> OpenCublas() {
  // Loaded once; a failure is remembered too (the same message every time).
  static const absl::StatusOr<CublasLibrary>* const loaded =
      new absl::StatusOr<CublasLibrary>(Load());
  if (!loaded->ok()) return loaded->status();
  return &**loaded;
}

}  // namespace memonger::alloc
