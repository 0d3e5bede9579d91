#include "util/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "util/bytes.h"
#include "util/check.h"

namespace memonger::util {
namespace {

constexpr size_t kChunkBytes = size_t{1} << 20;

absl::Status OpenError(const std::string& path, int error) {
  switch (error) {
    case ENOENT:
      return absl::NotFoundError(absl::StrCat(Quote(path), ": no such file"));
    case ENOTDIR:
      return absl::NotFoundError(
          absl::StrCat(Quote(path), ": no such file (a part of the path is not a directory)"));
    case ELOOP:
      return absl::InvalidArgumentError(
          absl::StrCat(Quote(path), ": a loop of symbolic links, not a file"));
    case EACCES:
    case EPERM:
      return absl::InvalidArgumentError(absl::StrCat(Quote(path), ": permission denied"));
    case ENAMETOOLONG:
      return absl::InvalidArgumentError(absl::StrCat(Quote(path), ": the path is too long"));
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(Quote(path), ": cannot open the file (", std::strerror(error), ")"));
  }
}

absl::Status TooLarge(const std::string& path, const std::string& size, int64_t limit) {
  return absl::InvalidArgumentError(
      absl::StrCat(Quote(path), ": ", size, ", more than the input limit of ", FormatBytes(limit),
                   " (raise it with --max-input-bytes)"));
}

// Closes a descriptor on every path out.
class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string DirectoryOf(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

}  // namespace

absl::StatusOr<std::string> ReadInputFile(const std::string& path, const InputLimits& limits,
                                          FileContent content) {
  if (path.empty()) return absl::InvalidArgumentError("an empty file name");
  Descriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return OpenError(path, errno);
  struct stat info;
  if (::fstat(fd.get(), &info) != 0) return OpenError(path, errno);
  if (S_ISDIR(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(Quote(path), ": is a directory, not a file"));
  }
  std::string bytes;
  if (S_ISREG(info.st_mode)) {
    if (info.st_size > limits.max_input_bytes) {
      return TooLarge(path, FormatBytes(info.st_size), limits.max_input_bytes);
    }
    bytes.reserve(static_cast<size_t>(info.st_size));
  }
  // Read until the end, whatever the size said (a file may grow or shrink under us), never past the
  // limit.
  std::string chunk(kChunkBytes, '\0');
  while (true) {
    const ssize_t n = ::read(fd.get(), chunk.data(), chunk.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::DataLossError(
          absl::StrCat(Quote(path), ": read error (", std::strerror(errno), ")"));
    }
    if (n == 0) break;
    if (static_cast<int64_t>(bytes.size()) + n > limits.max_input_bytes) {
      return TooLarge(path, "the data goes on", limits.max_input_bytes);
    }
    if (content == FileContent::kText) {
      const void* nul = std::memchr(chunk.data(), '\0', static_cast<size_t>(n));
      if (nul != nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat(Quote(path), ": binary data (a NUL byte at byte ",
                         bytes.size() + (static_cast<const char*>(nul) - chunk.data()),
                         ") where a text file is expected"));
      }
    }
    bytes.append(chunk.data(), static_cast<size_t>(n));
  }
  return bytes;
}

namespace {

// Whether two paths name one file: the same inode where both exist (links, ./, ..), else the
// same path once links in its directories are resolved (an output not created yet).
bool SameFile(const std::string& a, const std::string& b) {
  struct stat x;
  struct stat y;
  const bool a_exists = ::stat(a.c_str(), &x) == 0;
  const bool b_exists = ::stat(b.c_str(), &y) == 0;
  if (a_exists && b_exists) return x.st_dev == y.st_dev && x.st_ino == y.st_ino;
  if (a_exists != b_exists) return false;
  // Neither exists yet: the same path once links in its directories are resolved.
  std::error_code error;
  const std::filesystem::path pa = std::filesystem::weakly_canonical(a, error);
  if (error) return a == b;
  const std::filesystem::path pb = std::filesystem::weakly_canonical(b, error);
  if (error) return a == b;
  return pa == pb;
}

}  // namespace

void OutputFiles::AddInput(absl::string_view what, const std::string& path) {
  if (!path.empty()) inputs_.emplace_back(std::string(what), path);
}

absl::Status OutputFiles::Add(absl::string_view flag, const std::string& path) {
  auto error = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", Quote(path), ": ", what));
  };
  if (path.empty()) return error("an empty file name");
  for (const auto& [what, input] : inputs_) {
    if (SameFile(input, path)) {
      return error(absl::StrCat("is the ", what, " file this run reads: writing there would "
                                "replace it; choose another path"));
    }
  }
  for (const Output& o : outputs_) {
    if (SameFile(o.path, path)) return error(absl::StrCat("already the file of ", o.flag));
  }
  struct stat info;
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    return error("is a directory");
  }
  const std::string dir = DirectoryOf(path);
  if (::stat(dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    return error(absl::StrCat("the directory ", Quote(dir), " does not exist"));
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return error(absl::StrCat("the directory ", Quote(dir), " is not writable"));
  }
  outputs_.push_back({std::string(flag), path, "", false});
  return absl::OkStatus();
}

void OutputFiles::Set(const std::string& path, std::string contents) {
  for (Output& o : outputs_) {
    if (o.path == path) {
      o.contents = std::move(contents);
      o.has_contents = true;
      return;
    }
  }
  MG_CHECK(false && "OutputFiles::Set: the path was not declared with Add");
}

absl::Status OutputFiles::Commit() {
  std::vector<std::string> temporaries;
  auto remove_temporaries = [&] {
    for (const std::string& t : temporaries) ::unlink(t.c_str());
  };
  for (const Output& o : outputs_) {
    if (!o.has_contents) {
      temporaries.emplace_back();
      continue;
    }
    // A new name beside the destination (same file system, so the rename is atomic), created with
    // O_EXCL so that it is ours; the mode 0666 is narrowed by the user's umask, as for any file the
    // user creates.
    std::string name;
    int fd = -1;
    int open_error = 0;
    for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
      name =
          absl::StrCat(DirectoryOf(o.path), "/.", std::filesystem::path(o.path).filename().string(),
                       ".tmp-", ::getpid(), "-", attempt);
      fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      open_error = fd < 0 ? errno : 0;
      if (fd < 0 && open_error != EEXIST) break;
    }
    if (fd < 0) {
      remove_temporaries();
      return absl::InvalidArgumentError(absl::StrCat(
          o.flag, " ", Quote(o.path), ": cannot write the file (", std::strerror(open_error), ")"));
    }
    temporaries.push_back(name);
    const char* data = o.contents.data();
    size_t left = o.contents.size();
    int error = 0;
    while (left > 0) {
      const ssize_t n = ::write(fd, data, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        error = errno;
        break;
      }
      data += n;
      left -= static_cast<size_t>(n);
    }
    if (::close(fd) != 0 && error == 0) error = errno;
    if (error != 0) {
      remove_temporaries();
      return absl::InvalidArgumentError(absl::StrCat(
          o.flag, " ", Quote(o.path), ": cannot write the file (", std::strerror(error), ")"));
    }
  }
  for (size_t i = 0; i < outputs_.size(); ++i) {
    if (temporaries[i].empty()) continue;
    if (::rename(temporaries[i].c_str(), outputs_[i].path.c_str()) != 0) {
      const int e = errno;
      for (size_t j = i; j < temporaries.size(); ++j) {
        if (!temporaries[j].empty()) ::unlink(temporaries[j].c_str());
      }
      return absl::InvalidArgumentError(absl::StrCat(outputs_[i].flag, " ", Quote(outputs_[i].path),
                                                     ": cannot write the file (", std::strerror(e),
                                                     ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace memonger::util
