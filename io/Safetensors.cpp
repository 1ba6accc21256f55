//===- Safetensors.cpp - The safetensors weight format --------------------===//
#include "tm/io/Safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <fstream>
#include <unordered_map>

#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/SmallString.h>
#include <llvm/Support/FileSystem.h>
#include <nlohmann/json.hpp>

#include "tm/io/MappedFile.h"
#include "tm/ir/CheckedSize.h"
#include "tm/ir/HugePages.h"

namespace tmg {

const Tensor *WeightFile::find(llvm::StringRef name) const {
  for (const auto &[n, t] : tensors)
    if (n == name)
      return &t;
  return nullptr;
}

llvm::StringRef safetensorsDType(DType t) {
  switch (t) {
  case DType::Float32: return "F32";
  case DType::Float64: return "F64";
  case DType::Float16: return "F16";
  case DType::BFloat16: return "BF16";
  case DType::Int8: return "I8";
  case DType::Int16: return "I16";
  case DType::Int32: return "I32";
  case DType::Int64: return "I64";
  case DType::UInt8: return "U8";
  case DType::UInt16: return "U16";
  case DType::UInt32: return "U32";
  case DType::UInt64: return "U64";
  case DType::Bool: return "BOOL";
  case DType::String: return "?"; // safetensors has no string dtype
  }
  return "?";
}

static std::optional<DType> parseSafetensorsDType(llvm::StringRef s) {
  for (DType t : allDTypes())
    if (!isString(t) && safetensorsDType(t) == s)
      return t;
  return std::nullopt;
}

static Diagnostic at(llvm::StringRef file, int64_t byte, std::string msg) {
  Location l;
  l.file = file.str();
  l.byteOffset = byte;
  return Diagnostic(l, std::move(msg));
}

/// Parses `bytes`; the tensors are views of `map` (which holds `bytes`)
/// where aligned, else copies.
static FailureOr<WeightFile> parse(llvm::StringRef bytes, llvm::StringRef file,
                                   const std::shared_ptr<MappedFile> &map) {
  if (bytes.size() < 8)
    return at(file, 0, fmt::format("truncated safetensors file: {} bytes, "
                                   "the header length alone needs 8",
                                   bytes.size()));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | uint8_t(bytes[i]);
  if (n > bytes.size() - 8)
    return at(file, 0, fmt::format("header length {} exceeds the file "
                                    "({} bytes after the length)",
                                    n, bytes.size() - 8));
  llvm::StringRef header = bytes.substr(8, n);
  size_t dataStart = 8 + n;
  uint64_t dataSize = bytes.size() - dataStart;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header.begin(), header.end());
  } catch (const nlohmann::json::parse_error &e) {
    return at(file, int64_t(8 + e.byte - (e.byte ? 1 : 0)),
              fmt::format("malformed JSON header: {}", e.what()));
  } catch (const nlohmann::json::exception &e) {
    // e.g. out_of_range for a number literal that overflows a double.
    return at(file, 8, fmt::format("malformed JSON header: {}", e.what()));
  }
  if (!j.is_object())
    return at(file, 8, "the JSON header must be an object");
  WeightFile w;
  struct Span {
    uint64_t begin, end;
    std::string name;
  };
  std::vector<Span> spans;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string &name = it.key();
    const auto &v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object())
        return at(file, 8, "__metadata__ must be an object of strings");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          return at(file, 8, fmt::format("__metadata__ entry '{}' is not a string", m.key()));
        w.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    auto bad = [&](const std::string &what) {
      return at(file, 8, fmt::format("tensor '{}': {}", name, what));
    };
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets"))
      return bad("needs dtype, shape and data_offsets");
    if (!v["dtype"].is_string())
      return bad("dtype must be a string");
    auto dt = parseSafetensorsDType(v["dtype"].get<std::string>());
    if (!dt)
      return bad(fmt::format("unsupported dtype '{}'", v["dtype"].get<std::string>()));
    const auto &shp = v["shape"];
    if (!shp.is_array())
      return bad("shape must be an array");
    Shape shape;
    for (const auto &d : shp) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        return bad("shape entries must be non-negative integers");
      shape.push_back(d.get<int64_t>());
    }
    const auto &off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      return bad("data_offsets must be two non-negative integers");
    uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    if (b > e || e > dataSize)
      return at(file, int64_t(dataStart + std::min(b, dataSize)),
                fmt::format("tensor '{}': data offsets [{}, {}) are out of "
                            "range (the data section has {} bytes)",
                            name, b, e, dataSize));
    std::optional<int64_t> bytesOf = checkedByteSize(shape, *dt);
    if (!bytesOf)
      return bad(fmt::format("{} {} has a byte size that does not fit in 64 bits",
                             dtypeName(*dt).str(), shapeStr(shape)));
    uint64_t want = uint64_t(*bytesOf);
    if (e - b != want)
      return at(file, int64_t(dataStart + b),
                fmt::format("tensor '{}': {} {} needs {} bytes but its data "
                            "offsets span {}",
                            name, dtypeName(*dt).str(), shapeStr(shape), want,
                            e - b));
    Tensor t;
    if (map) {
      t = MappedFile::tensor(map, dataStart + b, shape, *dt);
    } else {
      t = Tensor::empty(shape, *dt);
      if (want)
        std::memcpy(t.rawData(), bytes.data() + dataStart + b, want);
    }
    spans.push_back({b, e, name});
    w.tensors.emplace_back(name, std::move(t));
  }
  // Tensors may not overlap (the format requires a dense, disjoint layout).
  std::sort(spans.begin(), spans.end(),
            [](const Span &a, const Span &b) { return a.begin < b.begin; });
  for (size_t i = 1; i < spans.size(); ++i)
    if (spans[i].begin < spans[i - 1].end)
      return at(file, int64_t(dataStart + spans[i].begin),
                fmt::format("tensors '{}' and '{}' overlap", spans[i - 1].name,
                            spans[i].name));
  // JSON objects are unordered; keep the data order, which writers follow.
  std::unordered_map<std::string, uint64_t> begins;
  for (const auto &sp : spans)
    begins[sp.name] = sp.begin;
  std::stable_sort(w.tensors.begin(), w.tensors.end(),
                   [&](const auto &x, const auto &y) {
                     return begins[x.first] < begins[y.first];
                   });
  return w;
}

FailureOr<WeightFile> parseSafetensors(llvm::StringRef bytes, llvm::StringRef file) {
  return parse(bytes, file, nullptr);
}

FailureOr<std::string> readFileBytes(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Diagnostic(Location::inFile(path),
                      fmt::format("cannot open file: {}", std::strerror(errno)));
  auto fail = [&](const char *what) {
    int err = errno;
    ::close(fd);
    return Diagnostic(Location::inFile(path), fmt::format("{}: {}", what, std::strerror(err)));
  };
  // A regular file is read at its size in one buffer (no growth copies);
  // a pipe or device in chunks until end of file.
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return fail("cannot read file");
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return Diagnostic(Location::inFile(path), "cannot read file: is a directory");
  }
  std::string bytes;
  size_t used = 0;
  if (S_ISREG(st.st_mode) && st.st_size > 0) {
    bytes.reserve(static_cast<size_t>(st.st_size));
    adviseHugePages(bytes.data(), bytes.capacity());
    bytes.resize(static_cast<size_t>(st.st_size));
  }
  char chunk[1 << 16];
  for (;;) {
    // Into the buffer while it has room, then in chunks (a file that grew,
    // or a pipe): a file read at its size takes no copy.
    bool room = used < bytes.size();
    ssize_t n = room ? ::read(fd, bytes.data() + used, bytes.size() - used)
                     : ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return fail("read error");
    if (n == 0)
      break;
    if (!room)
      bytes.append(chunk, static_cast<size_t>(n));
    used += static_cast<size_t>(n);
  }
  ::close(fd);
  bytes.resize(used);
  return bytes;
}

bool isSpecialFile(const std::string &path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) &&
         !S_ISDIR(st.st_mode);
}

/// Writes `path` through `path.tmp`, renamed over it at the end, so a
/// failed write leaves the old file (and a model may be written back over
/// the files it was mapped from). A special file (/dev/null, a FIFO) is
/// written in place: renaming over it would replace the device.
FailureOr<void> writeFileWith(const std::string &path,
                              llvm::function_ref<void(std::ostream &)> write) {
  if (llvm::sys::fs::is_directory(path))
    return Diagnostic(Location::inFile(path),
                      "cannot write file: is a directory");
  bool special = isSpecialFile(path);
  // The file a symbolic link names is replaced, not the link (an existing
  // path resolves; a new one is written as named).
  std::string target = path;
  llvm::SmallString<256> real;
  if (!special && !llvm::sys::fs::real_path(path, real))
    target = std::string(real);
  std::string tmp = special ? target : target + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      return Diagnostic(Location::inFile(path),
                        fmt::format("cannot write file: {}", std::strerror(errno)));
    auto discard = [&] {
      out.close();
      if (!special)
        std::remove(tmp.c_str());
    };
    try {
      write(out);
    } catch (const Error &e) {
      discard();
      return e.diagnostic();
    }
    if (!out.flush()) {
      discard();
      return Diagnostic(Location::inFile(path), "write error");
    }
  }
  if (!special && std::rename(tmp.c_str(), target.c_str()) != 0) {
    Diagnostic d(Location::inFile(path),
                 fmt::format("cannot rename {}: {}", tmp, std::strerror(errno)));
    std::remove(tmp.c_str());
    return d;
  }
  return {};
}

FailureOr<void> writeFileBytes(const std::string &path, llvm::StringRef bytes) {
  return writeFileWith(path, [&](std::ostream &out) {
    out.write(bytes.data(), std::streamsize(bytes.size()));
  });
}

FailureOr<WeightFile> readSafetensors(const std::string &path) {
  // Mapped, not read: the tensors are views of the file's pages.
  auto map = MappedFile::open(path);
  if (map.failed())
    return map.diagnostic();
  return parse((*map)->bytes(), path, *map);
}

/// The 8-byte length and the JSON header (padded with spaces so that the
/// data starts 8-byte aligned); `dataBytes` gets the data section's size.
static FailureOr<std::string> headerOf(const WeightFile &w, uint64_t &dataBytes) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!w.metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto &[k, v] : w.metadata)
      m[k] = v;
    h["__metadata__"] = m;
  }
  uint64_t off = 0;
  for (const auto &[name, t] : w.tensors) {
    if (name == "__metadata__" || h.contains(name))
      return Diagnostic(Location(), fmt::format("duplicate or reserved tensor name '{}'", name));
    if (!t.defined())
      return Diagnostic(Location(), fmt::format("tensor '{}' is undefined", name));
    if (isString(t.dtype()))
      return Diagnostic(Location(), fmt::format("tensor '{}' has dtype string, which "
                                                "safetensors cannot hold (write .npy or ONNX)",
                                                name));
    nlohmann::ordered_json e;
    e["dtype"] = safetensorsDType(t.dtype()).str();
    e["shape"] = std::vector<int64_t>(t.shape().begin(), t.shape().end());
    e["data_offsets"] = {off, off + t.nbytes()};
    off += t.nbytes();
    h[name] = e;
  }
  std::string header = h.dump();
  // Pad the header with spaces so the data starts 8-byte aligned.
  while ((8 + header.size()) % 8)
    header += ' ';
  std::string out;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    out += char((n >> (8 * i)) & 0xff);
  out += header;
  dataBytes = off;
  return out;
}

FailureOr<std::string> serializeSafetensors(const WeightFile &w) {
  uint64_t dataBytes = 0;
  auto header = headerOf(w, dataBytes);
  if (header.failed())
    return header.diagnostic();
  std::string out = std::move(*header);
  out.reserve(out.size() + dataBytes);
  for (const auto &[name, t] : w.tensors) {
    Tensor dense = t.contiguous(); // views are written dense
    out.append(static_cast<const char *>(dense.rawData()), dense.nbytes());
  }
  return out;
}

FailureOr<void> writeSafetensors(const std::string &path, const WeightFile &w) {
  // Written tensor by tensor: the weights are not serialized to memory
  // first.
  uint64_t dataBytes = 0;
  auto header = headerOf(w, dataBytes);
  if (header.failed()) {
    Diagnostic d = header.diagnostic();
    d.loc.file = path;
    return d;
  }
  return writeFileWith(path, [&](std::ostream &out) {
    out.write(header->data(), std::streamsize(header->size()));
    for (const auto &[name, t] : w.tensors) {
      Tensor dense = t.contiguous(); // views are written dense
      out.write(static_cast<const char *>(dense.rawData()), std::streamsize(dense.nbytes()));
    }
  });
}

} // namespace tmg
