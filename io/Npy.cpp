//===- Npy.cpp - NumPy .npy files -----------------------------------------===//
#include "tm/io/Npy.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "tm/io/Safetensors.h"
#include "tm/ir/CheckedSize.h"
#include "tm/ir/Strings.h"

namespace tmg {

static const char Magic[] = "\x93NUMPY";

/// NumPy's descr of a dtype; "" for bfloat16, which NumPy does not have.
static llvm::StringRef descrOf(DType t) {
  switch (t) {
  case DType::Float32: return "<f4";
  case DType::Float64: return "<f8";
  case DType::Float16: return "<f2";
  case DType::BFloat16: return "";
  case DType::Int8: return "|i1";
  case DType::Int16: return "<i2";
  case DType::Int32: return "<i4";
  case DType::Int64: return "<i8";
  case DType::UInt8: return "|u1";
  case DType::UInt16: return "<u2";
  case DType::UInt32: return "<u4";
  case DType::UInt64: return "<u8";
  case DType::Bool: return "|b1";
  case DType::String: return ""; // fixed-width '<U{n}', by the longest string
  }
  return "";
}

static Diagnostic at(llvm::StringRef file, int64_t byte, std::string msg) {
  Location l;
  l.file = file.str();
  l.byteOffset = byte;
  return Diagnostic(l, std::move(msg));
}

/// The value of `'key': value` in the header dict, as text.
static bool field(llvm::StringRef dict, llvm::StringRef key, llvm::StringRef &value) {
  size_t k = dict.find("'" + key.str() + "'");
  if (k == llvm::StringRef::npos)
    return false;
  llvm::StringRef rest = dict.drop_front(k + key.size() + 2).ltrim();
  if (!rest.consume_front(":"))
    return false;
  rest = rest.ltrim();
  size_t end;
  if (rest.startswith("(")) {
    end = rest.find(')');
    if (end == llvm::StringRef::npos)
      return false;
    ++end;
  } else if (rest.startswith("'")) {
    end = rest.find('\'', 1);
    if (end == llvm::StringRef::npos)
      return false;
    ++end;
  } else {
    end = rest.find_first_of(",}");
  }
  value = rest.take_front(end).trim();
  return true;
}

/// The dims of a .npy shape tuple; nullopt for a malformed one.
static std::optional<Shape> parseShape(llvm::StringRef shapeText) {
  if (!shapeText.startswith("(") || !shapeText.endswith(")"))
    return std::nullopt;
  Shape shape;
  llvm::StringRef dims = shapeText.drop_front().drop_back();
  while (!dims.trim().empty()) {
    auto [d, rest] = dims.split(',');
    d = d.trim();
    if (!d.empty()) {
      int64_t v;
      if (d.getAsInteger(10, v) || v < 0)
        return std::nullopt;
      shape.push_back(v);
    }
    dims = rest;
  }
  return shape;
}

/// Appends code point `c` as UTF-8; U+DC80..U+DCFF are the bytes
/// 0x80..0xFF that utf32Of could not decode (Python's surrogateescape).
static void appendUtf8(std::string &out, uint32_t c) {
  if (c >= 0xdc80 && c <= 0xdcff) {
    out += char(c - 0xdc00);
  } else if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xc0 | (c >> 6));
    out += char(0x80 | (c & 0x3f));
  } else if (c < 0x10000) {
    out += char(0xe0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3f));
    out += char(0x80 | (c & 0x3f));
  } else {
    out += char(0xf0 | (c >> 18));
    out += char(0x80 | ((c >> 12) & 0x3f));
    out += char(0x80 | ((c >> 6) & 0x3f));
    out += char(0x80 | (c & 0x3f));
  }
}

/// The code points of UTF-8 text `s`; a byte that starts no valid sequence
/// becomes U+DC00 + the byte (Python's surrogateescape), so any bytes
/// round-trip through '<U'.
static std::vector<uint32_t> utf32Of(llvm::StringRef s) {
  std::vector<uint32_t> out;
  const auto *p = reinterpret_cast<const unsigned char *>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    unsigned char b = p[i];
    int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    bool ok = len > 0 && i + size_t(len) <= n;
    for (int k = 1; ok && k < len; ++k)
      ok = (p[i + k] & 0xc0) == 0x80;
    if (!ok || len == 1) {
      out.push_back(b < 0x80 ? b : 0xdc00 + b);
      ++i;
      continue;
    }
    uint32_t c = b & (0x7f >> len);
    for (int k = 1; k < len; ++k)
      c = (c << 6) | (p[i + k] & 0x3f);
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    uint32_t least = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    if (c < least || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) {
      out.push_back(0xdc00 + b);
      ++i;
      continue;
    }
    out.push_back(c);
    i += size_t(len);
  }
  return out;
}

/// A NumPy fixed-width string array: '<U{n}' (n UTF-32LE code units per
/// element) or '|S{n}' (n bytes), each padded with NULs, which are dropped.
static FailureOr<Tensor> parseStrings(llvm::StringRef bytes, llvm::StringRef file,
                                      llvm::StringRef descr, llvm::StringRef shapeText,
                                      size_t start, size_t data) {
  bool unicode = descr.contains('U');
  llvm::StringRef width = descr.drop_front(descr.find_first_of("US") + 1);
  uint64_t n;
  if (width.getAsInteger(10, n) || n > (uint64_t(1) << 40))
    return at(file, int64_t(start), fmt::format("bad string dtype '{}'", descr.str()));
  std::optional<Shape> shape = parseShape(shapeText);
  if (!shape)
    return at(file, int64_t(start), fmt::format("bad shape {} (expected a tuple of sizes)", shapeText.str()));
  uint64_t unit = unicode ? 4 : 1;
  std::optional<int64_t> count = checkedNumel(*shape);
  if (!count || (n && uint64_t(*count) > (uint64_t(1) << 62) / (n * unit)))
    return at(file, int64_t(start), fmt::format("shape {} is too large", shapeText.str()));
  uint64_t need = uint64_t(*count) * n * unit;
  if (bytes.size() - data != need)
    return at(file, int64_t(data),
              fmt::format("{} {} needs {} bytes of data, the file has {}", descr.str(),
                          shapeStr(*shape), need, bytes.size() - data));
  Tensor t;
  try {
    t = Tensor::empty(*shape, DType::String);
  } catch (const Error &e) {
    return at(file, int64_t(start), e.diagnostic().message);
  }
  int64_t *ids = t.data<int64_t>();
  const char *p = bytes.data() + data;
  std::string text;
  for (int64_t i = 0; i < *count; ++i, p += n * unit) {
    text.clear();
    if (unicode) {
      size_t len = n;
      auto code = [&](size_t k) {
        const auto *u = reinterpret_cast<const unsigned char *>(p + 4 * k);
        return uint32_t(u[0]) | uint32_t(u[1]) << 8 | uint32_t(u[2]) << 16 | uint32_t(u[3]) << 24;
      };
      while (len && code(len - 1) == 0)
        --len;
      for (size_t k = 0; k < len; ++k) {
        uint32_t c = code(k);
        if (c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff && !(c >= 0xdc80 && c <= 0xdcff)))
          return at(file, int64_t(p - bytes.data()),
                    fmt::format("invalid code point {:#x} in a '{}' string", c, descr.str()));
        appendUtf8(text, c);
      }
    } else {
      size_t len = n;
      while (len && p[len - 1] == 0)
        --len;
      text.assign(p, len);
    }
    ids[i] = intern(text);
  }
  return t;
}

FailureOr<Tensor> parseNpy(llvm::StringRef bytes, llvm::StringRef file) {
  if (bytes.size() < 10 || !bytes.startswith(llvm::StringRef(Magic, 6)))
    return at(file, 0, "not a .npy file (bad magic)");
  uint8_t major = uint8_t(bytes[6]);
  size_t lenBytes = major == 1 ? 2 : (major == 2 || major == 3) ? 4 : 0;
  if (!lenBytes)
    return at(file, 6, fmt::format("unsupported .npy version {}.{}", major, uint8_t(bytes[7])));
  if (bytes.size() < 8 + lenBytes)
    return at(file, 8, "truncated .npy header");
  uint64_t hlen = 0;
  for (size_t i = 0; i < lenBytes; ++i)
    hlen |= uint64_t(uint8_t(bytes[8 + i])) << (8 * i);
  size_t start = 8 + lenBytes;
  if (hlen > bytes.size() - start)
    return at(file, 8, fmt::format("header length {} exceeds the file", hlen));
  llvm::StringRef dict = bytes.substr(start, hlen).trim();
  if (!dict.startswith("{") || !dict.endswith("}"))
    return at(file, int64_t(start), "the header is not a Python dict");
  llvm::StringRef descr, fortran, shapeText;
  if (!field(dict, "descr", descr) || !field(dict, "fortran_order", fortran) ||
      !field(dict, "shape", shapeText))
    return at(file, int64_t(start), "the header needs descr, fortran_order and shape");
  if (fortran != "False")
    return at(file, int64_t(start), "Fortran-order arrays are not supported; save "
                                    "with np.ascontiguousarray");
  descr = descr.trim("'");
  if (descr.startswith("<U") || descr.startswith("|S") || descr.startswith("S") ||
      descr.startswith("|U") || descr.startswith("U"))
    return parseStrings(bytes, file, descr, shapeText, start, start + hlen);
  std::optional<DType> dtype;
  for (DType t : allDTypes())
    if (descrOf(t).empty())
      continue;
    else if (descrOf(t) == descr || (descr.size() == 3 && descrOf(t).drop_front() == descr.drop_front() &&
                                (descr[0] == '|' || descr[0] == '<')))
      dtype = t;
  if (!dtype)
    return at(file, int64_t(start),
              fmt::format("unsupported dtype '{}' (expected a little-endian float, "
                          "signed or unsigned integer, or bool)",
                          descr.str()));
  std::optional<Shape> parsed = parseShape(shapeText);
  if (!parsed)
    return at(file, int64_t(start),
              fmt::format("bad shape {} (expected a tuple of sizes)", shapeText.str()));
  Shape shape = std::move(*parsed);
  // The bytes the header promises, checked before anything is allocated:
  // the data must be in the file, so a huge shape is an error, not an
  // allocation.
  std::optional<int64_t> want = checkedByteSize(shape, *dtype);
  if (!want)
    return at(file, int64_t(start),
              fmt::format("shape {} of {} has a byte size that does not fit in 64 bits",
                          shapeText.str(), dtypeName(*dtype).str()));
  uint64_t need = uint64_t(*want);
  size_t data = start + hlen;
  if (bytes.size() - data != need)
    return at(file, int64_t(data),
              fmt::format("{} {} needs {} bytes of data, the file has {}",
                          dtypeName(*dtype).str(), shapeStr(shape), need,
                          bytes.size() - data));
  Tensor t;
  try {
    t = Tensor::empty(shape, *dtype);
  } catch (const Error &e) {
    return at(file, int64_t(start), e.diagnostic().message);
  }
  if (t.nbytes())
    std::memcpy(t.rawData(), bytes.data() + data, t.nbytes());
  return t;
}

FailureOr<Tensor> readNpy(const std::string &path) {
  auto bytes = readFileBytes(path);
  if (bytes.failed())
    return bytes.diagnostic();
  return parseNpy(*bytes, path);
}

/// A string tensor as '<U{n}': n the most code points of an element (at
/// least 1), each element UTF-32LE padded with NULs.
static std::string stringPayload(const Tensor &t, std::string &descr) {
  Tensor dense = t.contiguous();
  const int64_t *ids = dense.data<int64_t>();
  std::vector<std::vector<uint32_t>> codes;
  size_t n = 1;
  for (int64_t i = 0; i < dense.numel(); ++i) {
    codes.push_back(utf32Of(text(ids[i])));
    n = std::max(n, codes.back().size());
  }
  descr = "<U" + std::to_string(n);
  std::string out(codes.size() * n * 4, '\0');
  for (size_t i = 0; i < codes.size(); ++i)
    for (size_t k = 0; k < codes[i].size(); ++k)
      for (int b = 0; b < 4; ++b)
        out[(i * n + k) * 4 + size_t(b)] = char((codes[i][k] >> (8 * b)) & 0xff);
  return out;
}

std::string serializeNpy(const Tensor &t) {
  if (descrOf(t.dtype()).empty() && !isString(t.dtype()))
    raise("{} has no NumPy dtype: .npy cannot hold it (cast it, or write safetensors)",
          dtypeName(t.dtype()).str());
  std::string shape = "(";
  for (size_t i = 0; i < t.rank(); ++i)
    shape += std::to_string(t.dim(i)) + (t.rank() == 1 ? "," : i + 1 < t.rank() ? ", " : "");
  shape += ")";
  std::string descr = descrOf(t.dtype()).str(), strings;
  if (isString(t.dtype()))
    strings = stringPayload(t, descr);
  std::string dict = "{'descr': '" + descr +
                     "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad so the data starts on a 64-byte boundary; the header ends in '\n'.
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string out(Magic, 6);
  out += char(1);
  out += char(0);
  out += char(dict.size() & 0xff);
  out += char((dict.size() >> 8) & 0xff);
  out += dict;
  if (isString(t.dtype()))
    return out + strings;
  Tensor dense = t.contiguous(); // views (transposed, sliced) are written dense
  out.append(static_cast<const char *>(dense.rawData()), dense.nbytes());
  return out;
}

FailureOr<void> writeNpy(const std::string &path, const Tensor &t) {
  if (descrOf(t.dtype()).empty() && !isString(t.dtype()))
    return Diagnostic(Location::inFile(path),
                      fmt::format("{} has no NumPy dtype: .npy cannot hold it (cast it, "
                                  "or write safetensors)",
                                  dtypeName(t.dtype()).str()));
  return writeFileBytes(path, serializeNpy(t));
}

} // namespace tmg
