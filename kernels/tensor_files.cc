#include "kernels/tensor_files.h"

#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "util/file_io.h"
#include "util/limits.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

using graph::DataType;

absl::StatusOr<DataType> DtypeOfDescr(absl::string_view descr, absl::string_view what) {
  if (descr.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": element type '", descr, "'"));
  }
  const char order = descr[0];
  const absl::string_view code = descr.substr(1);
  if (order == '>' && code != "i1" && code != "u1" && code != "b1") {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": big-endian data ('", descr, "') is not read; save it little-endian"));
  }
  if (order != '<' && order != '|' && order != '=' && order != '>') {
    return absl::InvalidArgumentError(absl::StrCat(what, ": element type '", descr, "'"));
  }
  if (code == "f4") return DataType::kFloat32;
  if (code == "f2") return DataType::kFloat16;
  if (code == "f8") return DataType::kFloat64;
  if (code == "i8") return DataType::kInt64;
  if (code == "i4") return DataType::kInt32;
  if (code == "i2") return DataType::kInt16;
  if (code == "i1") return DataType::kInt8;
  if (code == "u1") return DataType::kUInt8;
  if (code == "b1") return DataType::kBool;
  if (code == "u2") return DataType::kBFloat16;  // bit patterns (the header says why)
  return absl::InvalidArgumentError(absl::StrCat(
      what, ": element type '", descr,
      "' is not one a model value can have (float32/16/64, bfloat16 as '<u2', int8-64, uint8, "
      "bool)"));
}

// The value of `key` in the header's dict literal: the text after "'key':" up to the next
// top-level comma (a tuple's commas are inside parentheses).
std::optional<std::string> HeaderField(absl::string_view header, absl::string_view key) {
  const std::string quoted = absl::StrCat("'", key, "'");
  size_t at = header.find(quoted);
  if (at == absl::string_view::npos) return std::nullopt;
  at = header.find(':', at + quoted.size());
  if (at == absl::string_view::npos) return std::nullopt;
  int depth = 0;
  size_t end = at + 1;
  for (; end < header.size(); ++end) {
    const char c = header[end];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if ((c == ',' && depth == 0) || (c == '}' && depth == 0)) break;
  }
  return std::string(absl::StripAsciiWhitespace(header.substr(at + 1, end - at - 1)));
}

uint32_t Le32(const unsigned char* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}
uint16_t Le16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }

// A raw deflate stream of `size` bytes inflated to exactly `expected` bytes.
absl::StatusOr<std::string> Inflate(absl::string_view data, uint64_t expected,
                                    absl::string_view what) {
  std::string out(static_cast<size_t>(expected), '\0');
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) {
    return absl::InternalError(absl::StrCat(what, ": zlib failed to start"));
  }
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = inflate(&z, Z_FINISH);
  const uint64_t produced = z.total_out;
  inflateEnd(&z);
  if (rc != Z_STREAM_END || produced != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the compressed member does not inflate to its stated size"));
  }
  return out;
}

// The members of a ZIP archive as numpy.savez writes it: local file headers in order, each
// stored (method 0) or deflated (8), sizes in the local header or, for a streamed member, in the
// central directory (read from there whenever the local header says 0).
absl::StatusOr<std::map<std::string, TensorData>> ReadNpz(const std::string& bytes,
                                                          const std::string& path,
                                                          const util::InputLimits& limits) {
  const auto* base = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  // End of central directory: the last "PK\5\6".
  size_t eocd = std::string::npos;
  for (size_t i = n >= 22 ? n - 22 : 0; n >= 22; --i) {
    if (Le32(base + i) == 0x06054b50) {
      eocd = i;
      break;
    }
    if (i == 0 || n - i > 22 + 65535) break;
  }
  if (eocd == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not an .npz (ZIP) archive"));
  }
  const uint16_t entries = Le16(base + eocd + 10);
  size_t cd = Le32(base + eocd + 16);
  std::map<std::string, TensorData> out;
  for (uint16_t e = 0; e < entries; ++e) {
    if (cd + 46 > n || Le32(base + cd) != 0x02014b50) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": a damaged ZIP central directory"));
    }
    const uint16_t method = Le16(base + cd + 10);
    uint64_t compressed = Le32(base + cd + 20);
    uint64_t size = Le32(base + cd + 24);
    const uint16_t name_len = Le16(base + cd + 28);
    const uint16_t extra_len = Le16(base + cd + 30);
    const uint16_t comment_len = Le16(base + cd + 32);
    uint64_t local = Le32(base + cd + 42);
    if (cd + 46 + name_len + extra_len > n) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": a damaged ZIP central directory"));
    }
    const std::string name(bytes.data() + cd + 46, name_len);
    // ZIP64 sizes (numpy writes them for members of 4 GiB or more).
    for (size_t x = cd + 46 + name_len; x + 4 <= cd + 46 + name_len + extra_len;) {
      const uint16_t id = Le16(base + x);
      const uint16_t len = Le16(base + x + 2);
      if (id == 0x0001) {
        size_t f = x + 4;
        auto take = [&](uint64_t& field) {
          if (field == 0xffffffffu && f + 8 <= x + 4 + len) {
            uint64_t v = 0;
            std::memcpy(&v, base + f, 8);
            field = v;
            f += 8;
          }
        };
        take(size);
        take(compressed);
        take(local);
      }
      x += 4 + len;
    }
    cd += 46 + name_len + extra_len + comment_len;
    const std::string what = absl::StrCat(path, ": member '", util::Quote(name), "'");
    if (!absl::EndsWith(name, ".npy")) {
      return absl::InvalidArgumentError(absl::StrCat(what, " is not a .npy file"));
    }
    if (local + 30 > n || Le32(base + local) != 0x04034b50) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": a damaged local header"));
    }
    const size_t data_at = local + 30 + Le16(base + local + 26) + Le16(base + local + 28);
    if (data_at > n || compressed > n - data_at) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": the archive is truncated"));
    }
    if (static_cast<int64_t>(size) > limits.max_input_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(what, " holds ", size,
                                                     " bytes, over the input limit of ",
                                                     limits.max_input_bytes));
    }
    const absl::string_view stored(bytes.data() + data_at, static_cast<size_t>(compressed));
    std::string member;
    if (method == 0) {
      if (compressed != size) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": sizes disagree"));
      }
      member = std::string(stored);
    } else if (method == 8) {
      MG_ASSIGN_OR_RETURN(member, Inflate(stored, size, what));
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": compression method ", method, " (numpy writes stored or deflated members)"));
    }
    const std::string tensor = name.substr(0, name.size() - 4);
    MG_ASSIGN_OR_RETURN(TensorData data, ParseNpy(member, what));
    if (!out.emplace(tensor, std::move(data)).second) {
      return absl::InvalidArgumentError(absl::StrCat(what, " is in the archive twice"));
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<TensorData> ParseNpy(absl::string_view bytes, absl::string_view what) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < 10 || std::memcmp(p, "\x93NUMPY", 6) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": not a .npy file"));
  }
  const int major = p[6];
  size_t header_len = 0;
  size_t header_at = 0;
  if (major == 1) {
    header_len = Le16(p + 8);
    header_at = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return absl::InvalidArgumentError(absl::StrCat(what, ": truncated"));
    header_len = Le32(p + 8);
    header_at = 12;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(what, ": .npy format version ", major));
  }
  if (header_at + header_len > bytes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": the header is truncated"));
  }
  const absl::string_view header = bytes.substr(header_at, header_len);
  const std::optional<std::string> descr = HeaderField(header, "descr");
  const std::optional<std::string> fortran = HeaderField(header, "fortran_order");
  const std::optional<std::string> shape = HeaderField(header, "shape");
  if (!descr || !fortran || !shape || descr->size() < 2 || (*descr)[0] != '\'' ||
      descr->back() != '\'' || shape->empty() || shape->front() != '(' || shape->back() != ')') {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": the header is not a dict with 'descr', 'fortran_order' and 'shape'"));
  }
  if (*fortran != "False") {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": Fortran-ordered data is not read (save a C-contiguous array)"));
  }
  TensorData out;
  MG_ASSIGN_OR_RETURN(out.type.dtype,
                      DtypeOfDescr(absl::string_view(*descr).substr(1, descr->size() - 2), what));
  for (absl::string_view d : absl::StrSplit(
           absl::string_view(*shape).substr(1, shape->size() - 2), ',', absl::SkipWhitespace())) {
    int64_t size = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(d), &size) || size < 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": shape ", *shape));
    }
    out.type.dims.push_back(size);
  }
  MG_ASSIGN_OR_RETURN(const int64_t size, graph::ByteSize(out.type, what));
  const size_t data_at = header_at + header_len;
  if (bytes.size() - data_at != static_cast<size_t>(size)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": holds ", bytes.size() - data_at, " data bytes, but ",
        graph::TensorTypeToString(out.type), " has ", size));
  }
  out.bytes = std::string(bytes.substr(data_at));
  return out;
}

absl::StatusOr<std::map<std::string, TensorData>> ReadTensorFiles(
    const std::string& path, const util::InputLimits& limits) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (error || !std::filesystem::exists(status)) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file or directory"));
  }
  std::map<std::string, TensorData> out;
  if (std::filesystem::is_directory(status)) {
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(path, error)) {
      if (entry.path().extension() == ".npy") files.push_back(entry.path());
    }
    if (error) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": cannot list: ", error.message()));
    }
    std::sort(files.begin(), files.end());
    for (const std::filesystem::path& file : files) {
      MG_ASSIGN_OR_RETURN(const std::string bytes, util::ReadInputFile(file.string(), limits));
      MG_ASSIGN_OR_RETURN(TensorData data, ParseNpy(bytes, file.string()));
      out.emplace(file.stem().string(), std::move(data));
    }
    return out;
  }
  MG_ASSIGN_OR_RETURN(const std::string bytes, util::ReadInputFile(path, limits));
  if (bytes.size() >= 4 && bytes.compare(0, 4, "PK\x03\x04") == 0) {
    return ReadNpz(bytes, path, limits);
  }
  MG_ASSIGN_OR_RETURN(TensorData data, ParseNpy(bytes, path));
  out.emplace(std::filesystem::path(path).stem().string(), std::move(data));
  return out;
}

}  // namespace memonger::alloc
