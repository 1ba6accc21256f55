//===- Npy.cpp - NumPy .npy files -----------------------------------------===//
#include "tm/io/Npy.h"

#include <cstring>

#include "tm/io/Safetensors.h"
#include "tm/ir/CheckedSize.h"

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
  if (!shapeText.startswith("(") || !shapeText.endswith(")"))
    return at(file, int64_t(start),
              fmt::format("bad shape {} (expected a tuple)", shapeText.str()));
  Shape shape;
  llvm::StringRef dims = shapeText.drop_front().drop_back();
  while (!dims.trim().empty()) {
    auto [d, rest] = dims.split(',');
    d = d.trim();
    if (!d.empty()) {
      int64_t v;
      if (d.getAsInteger(10, v) || v < 0)
        return at(file, int64_t(start), fmt::format("bad shape {}", shapeText.str()));
      shape.push_back(v);
    }
    dims = rest;
  }
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

std::string serializeNpy(const Tensor &t) {
  if (descrOf(t.dtype()).empty())
    raise("{} has no NumPy dtype: .npy cannot hold it (cast it, or write safetensors)",
          dtypeName(t.dtype()).str());
  std::string shape = "(";
  for (size_t i = 0; i < t.rank(); ++i)
    shape += std::to_string(t.dim(i)) + (t.rank() == 1 ? "," : i + 1 < t.rank() ? ", " : "");
  shape += ")";
  std::string dict = "{'descr': '" + descrOf(t.dtype()).str() +
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
  Tensor dense = t.contiguous(); // views (transposed, sliced) are written dense
  out.append(static_cast<const char *>(dense.rawData()), dense.nbytes());
  return out;
}

FailureOr<void> writeNpy(const std::string &path, const Tensor &t) {
  if (descrOf(t.dtype()).empty())
    return Diagnostic(Location::inFile(path),
                      fmt::format("{} has no NumPy dtype: .npy cannot hold it (cast it, "
                                  "or write safetensors)",
                                  dtypeName(t.dtype()).str()));
  return writeFileBytes(path, serializeNpy(t));
}

} // namespace tmg
