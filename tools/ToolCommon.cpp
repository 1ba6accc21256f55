//===- ToolCommon.cpp - What tm-opt and tm-run share ----------------------===//
#include "ToolCommon.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <new>

#include <llvm/Support/Path.h>
#include <llvm/Support/raw_ostream.h>

#include "tm/io/MappedFile.h"
#include "tm/io/Safetensors.h"
#include "tm/ir/HugePages.h"
#include "tm/ir/StateDict.h"
#ifdef TM_HAVE_ONNX
#include "tm/io/Onnx.h"
#endif

namespace cl = llvm::cl;

namespace tmg::tools {

cl::OptionCategory &generalCategory() {
  static cl::OptionCategory c("General options");
  return c;
}

CommandLine::CommandLine(const char *argv0) {
  // LLVM registers some of its options lazily, on the first parse; parse
  // nothing once so they exist, then drop them all.
  const char *args[] = {argv0};
  cl::ParseCommandLineOptions(1, args);
  cl::ResetCommandLineParser();
  help_ = std::make_unique<cl::opt<bool>>(
      "help", cl::desc("Display the options and exit"), cl::cat(generalCategory()));
  helpShort_ = std::make_unique<cl::alias>("h", cl::desc("Alias for --help"),
                                           cl::aliasopt(*help_), cl::NotHidden,
                                           cl::cat(generalCategory()));
  helpHidden_ = std::make_unique<cl::opt<bool>>(
      "help-hidden", cl::desc("Display all options, hidden ones included, and exit"),
      cl::Hidden, cl::cat(generalCategory()));
  version_ = std::make_unique<cl::opt<bool>>(
      "version", cl::desc("Display the version of tmgraph and exit"),
      cl::cat(generalCategory()));
}

int CommandLine::parse(int argc, char **argv, llvm::StringRef overview) {
  if (!cl::ParseCommandLineOptions(argc, argv, overview, &llvm::errs()))
    return ExitInputError;
  if (*help_ || *helpHidden_) {
    cl::PrintHelpMessage(/*Hidden=*/*helpHidden_, /*Categorized=*/true);
    return ExitOk;
  }
  if (*version_) {
    llvm::outs() << llvm::sys::path::filename(argv[0]) << " (tmgraph) " << TM_VERSION << "\n";
    return ExitOk;
  }
  return -1;
}

void Tool::addSource(std::string file, std::string text) {
  sources_[std::move(file)] = std::move(text);
}

/// Line `n` (1-based) of `text`, or "" when it has fewer lines.
static llvm::StringRef lineOf(llvm::StringRef text, int64_t n) {
  for (int64_t i = 1; i < n && !text.empty(); ++i)
    text = text.split('\n').second;
  return text.split('\n').first;
}

std::string Tool::render(const Diagnostic &d) const {
  std::string out = d.str();
  const Location &l = d.loc;
  if (l.file.empty() || l.line <= 0)
    return out;
  std::string fromFile;
  llvm::StringRef line;
  if (auto it = sources_.find(l.file); it != sources_.end()) {
    line = lineOf(it->second, l.line);
  } else {
    // A file is read again for the message, up to the line it names.
    std::ifstream f(l.file, std::ios::binary);
    for (int64_t i = 0; i < l.line && f; ++i)
      std::getline(f, fromFile);
    if (!f && !f.eof())
      return out;
    line = fromFile;
  }
  line = line.rtrim('\r');
  if (line.empty() || line.size() > 4096 || line.contains('\0'))
    return out;
  // The caret line copies the tabs of the source line so it lines up.
  std::string caret;
  for (int64_t c = 1; c < l.column && size_t(c - 1) < line.size(); ++c)
    caret += line[size_t(c - 1)] == '\t' ? '\t' : ' ';
  size_t nl = out.find('\n');
  std::string head = out.substr(0, nl), notes = nl == std::string::npos ? "" : out.substr(nl);
  return head + "\n" + line.str() + "\n" + caret + "^" + notes;
}

int Tool::fail(const Diagnostic &d, int code) const {
  std::fprintf(stderr, "%s: %s\n", name_, render(d).c_str());
  return code;
}

void Tool::warn(const Diagnostic &d) const {
  Diagnostic w = d;
  w.severity = Diagnostic::Severity::Warning;
  std::fprintf(stderr, "%s: %s\n", name_, render(w).c_str());
}

int Tool::usageError(const std::string &msg) const {
  std::fprintf(stderr, "%s: error: %s\nRun '%s --help' for usage.\n", name_, msg.c_str(),
               name_);
  return ExitInputError;
}

int Tool::guard(const std::function<int()> &body) const {
  try {
    return body();
  } catch (const Error &e) {
    return fail(e.diagnostic());
  } catch (const std::bad_alloc &) {
    return fail(Diagnostic(Location(), "out of memory"));
  } catch (const std::exception &e) {
    return fail(Diagnostic(Location(), std::string("internal error: ") + e.what()),
                ExitInternalError);
  }
}

FailureOr<std::string> readInput(const std::string &path) {
  if (path != "-")
    return readFileBytes(path);
  auto bytes = readFileBytes("/dev/stdin");
  if (bytes.failed()) {
    Diagnostic d = bytes.diagnostic();
    d.loc = Location::inFile("<stdin>");
    return d;
  }
  return bytes;
}

FailureOr<void> writeOutput(const std::string &path, llvm::StringRef bytes) {
  if (path != "-")
    return writeFileBytes(path, bytes);
  if (std::fwrite(bytes.data(), 1, bytes.size(), stdout) != bytes.size() ||
      std::fflush(stdout) != 0)
    return Diagnostic(Location::inFile("<stdout>"),
                      std::string("write error: ") + std::strerror(errno));
  return {};
}

ModelFormat detectFormat(llvm::StringRef path, llvm::StringRef bytes) {
  if (path.endswith(".onnx"))
    return ModelFormat::Onnx;
  if (path.endswith(".tmir"))
    return ModelFormat::Tmir;
  // A .tmir file starts with its `tmir N` line, after comments; an ONNX
  // model is a binary protobuf.
  llvm::StringRef t = bytes.ltrim();
  while (t.startswith("#") || t.startswith("//"))
    t = t.split('\n').second.ltrim();
  return t.startswith("tmir") ? ModelFormat::Tmir : ModelFormat::Onnx;
}

std::string parseInputShape(llvm::StringRef v, std::map<std::string, Shape> &shapes) {
  auto [name, dims] = v.split('=');
  if (name.empty() || !v.contains('='))
    return "--input-shape expects NAME=DIMxDIM... (e.g. input=1x3x224x224), got '" + v.str() +
           "'";
  Shape s;
  while (!dims.empty()) {
    auto [d, rest] = dims.split('x');
    int64_t n;
    if (d.getAsInteger(10, n) || n < 0)
      return "--input-shape: '" + d.str() + "' in '" + v.str() +
             "' is not a non-negative integer";
    s.push_back(n);
    dims = rest;
  }
  shapes[name.str()] = s;
  return "";
}

static std::string dirOf(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

int loadModel(Tool &tool, const std::string &path, LoadedModel &out,
              const std::map<std::string, Shape> &inputShapes, const SizeLimits &limits) {
  std::string name = path == "-" ? "<stdin>" : path;
  llvm::StringRef p(path);
  bool bySuffix = p.endswith(".onnx") || p.endswith(".tmir");
  // An ONNX file is read by the importer itself (it may need the file's
  // directory); everything else is read here first. A regular file is
  // mapped, not copied: its pages are the page cache's, where reading it
  // would fill as much fresh memory.
  FileBytes file;
  if (!bySuffix || p.endswith(".tmir")) {
    if (path == "-") {
      auto r = readInput(path);
      if (r.failed())
        return tool.fail(r.diagnostic());
      file = FileBytes(std::move(*r));
    } else {
      auto f = FileBytes::open(path);
      if (f.failed())
        return tool.fail(f.diagnostic());
      file = std::move(*f);
    }
  }
  llvm::StringRef bytes = file.bytes();
  if (detectFormat(bySuffix ? p : llvm::StringRef(), bytes) == ModelFormat::Onnx) {
#ifdef TM_HAVE_ONNX
    io::OnnxImportOptions opts;
    opts.inputShapes = inputShapes;
    opts.limits = limits;
    opts.reserveHeap = true;
    auto imported = bySuffix || file.mapping()
                        ? io::importOnnx(path, opts)
                        : io::importOnnxBytes(file.take(), name, opts);
    if (imported.failed())
      return tool.fail(imported.diagnostic());
    out.module = std::move(imported->module);
    out.onnxInputs = imported->names.inputs;
    out.onnxOutputs = imported->names.outputs;
    return -1;
#else
    return tool.usageError("'" + name +
                           "' is an ONNX model, and this tmgraph was built without ONNX "
                           "support (meson -Donnx=enabled)");
#endif
  }
  if (!inputShapes.empty())
    return tool.usageError("--input-shape applies to ONNX models (a .tmir file's input shapes "
                           "are part of its graph)");
  // A .tmir file's IR takes about five times the memory of its text.
  reserveHugePageHeap(std::min<size_t>(bytes.size(), size_t(512) << 20) * 5);
  TmirReadOptions o;
  o.baseDir = path == "-" ? "." : dirOf(path);
  o.limits = limits;
  auto loaded = parseTmir(bytes, name, o);
  if (loaded.failed()) {
    if (path == "-")
      tool.addSource(name, file.take());
    return tool.fail(loaded.diagnostic());
  }
  out.module = std::move(*loaded);
  return -1;
}

int loadWeights(Tool &tool, const std::string &path, TracedModule &m) {
  auto w = readSafetensors(path);
  if (w.failed())
    return tool.fail(w.diagnostic());
  auto r = loadStateDict(m, StateDict(w->tensors.begin(), w->tensors.end()), true);
  if (r.failed()) {
    Diagnostic d = r.diagnostic();
    d.loc = Location::inFile(path);
    return tool.fail(d);
  }
  return -1;
}

} // namespace tmg::tools
