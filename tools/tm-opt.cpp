//===- tm-opt.cpp - Load, transform and write models ----------------------===//
//
// tm-opt MODEL [-o OUT] [options]
//
// Reads a model (.tmir with its weights), optionally flattens and compiles
// it, verifies it, and writes it as .tmir + .safetensors, as Graphviz DOT,
// or as text on stdout. Pipelines of passes come with the pass manager.
//
//===----------------------------------------------------------------------===//
#include <cstdio>
#include <cstring>
#include <string>

#include "tm/io/Dot.h"
#include "tm/io/Tmir.h"
#include "tm/ir/IR.h"

using namespace tmg;

static const char *Usage = R"(usage: tm-opt MODEL [-o OUT] [options]

Loads MODEL (.tmir and the .safetensors it names), applies the requested
transformations, verifies the result and writes it.

Output (-o OUT):
  OUT.tmir            write OUT.tmir and OUT.safetensors beside it
  OUT.dot             write Graphviz DOT (render: dot -Tpng OUT.dot -o OUT.png)
  - or no -o          print the .tmir text to stdout

Options:
  -o, --output OUT    where to write (see above)
  --flatten           inline every traced submodule call into the top graph
  --compile           merge getattrs and remove dead exprs in the top graph
  --no-verify         do not verify the module after loading and transforming
  --inline-weights N  on stdout, write tensors of at most N elements inline
  --print             also print the result's top graph in the reference format
  -h, --help          show this help
  --version           show the version
)";

static int fail(const Diagnostic &d) {
  std::fprintf(stderr, "tm-opt: %s\n", d.str().c_str());
  return 1;
}

static int usageError(const std::string &msg) {
  std::fprintf(stderr, "tm-opt: error: %s\nRun 'tm-opt --help' for usage.\n", msg.c_str());
  return 2;
}

int main(int argc, char **argv) {
  std::string model, out;
  bool flatten = false, compile = false, verifyIt = true, print = false;
  int64_t inlineMax = -1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char *name) -> std::string {
      if (i + 1 >= argc) {
        usageError(std::string(name) + " needs a value");
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::fputs(Usage, stdout);
      return 0;
    } else if (a == "--version") {
      std::puts("tm-opt (tmgraph) 0.1.0");
      return 0;
    } else if (a == "-o" || a == "--output") {
      out = value("-o");
    } else if (a == "--flatten") {
      flatten = true;
    } else if (a == "--compile") {
      compile = true;
    } else if (a == "--no-verify") {
      verifyIt = false;
    } else if (a == "--print") {
      print = true;
    } else if (a == "--inline-weights") {
      std::string v = value("--inline-weights");
      char *end = nullptr;
      inlineMax = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end || inlineMax < 0)
        return usageError("--inline-weights needs a non-negative integer, got '" + v + "'");
    } else if (!a.empty() && a[0] == '-' && a != "-") {
      return usageError("unknown option '" + a + "'");
    } else if (model.empty()) {
      model = a;
    } else {
      return usageError("more than one model given ('" + model + "' and '" + a + "')");
    }
  }
  if (model.empty())
    return usageError("no model given");
  if (!llvm::StringRef(model).endswith(".tmir"))
    return usageError("cannot read '" + model + "': expected a .tmir file");

  auto loaded = loadTmir(model);
  if (loaded.failed())
    return fail(loaded.diagnostic());
  std::unique_ptr<TracedModule> m = std::move(*loaded);
  try {
    if (flatten)
      m = m->flatten();
    if (compile)
      m->graph().compile();
  } catch (const Error &e) {
    return fail(e.diagnostic());
  }
  if (verifyIt) {
    Diagnostic d;
    if (failed(verifyOrReport(*m, &d)))
      return fail(d);
  }
  if (print)
    std::printf("%s\n", m->str().c_str());
  if (out.empty() || out == "-") {
    TmirWriteOptions o;
    o.inlineMaxElements = inlineMax;
    std::fputs(printTmir(*m, o).c_str(), stdout);
    return 0;
  }
  if (llvm::StringRef(out).endswith(".dot")) {
    Diagnostic d;
    if (failed(writeFileBytes(out, printDot(*m), &d)))
      return fail(d);
    return 0;
  }
  if (!llvm::StringRef(out).endswith(".tmir"))
    return usageError("cannot write '" + out + "': expected .tmir, .dot or -");
  Diagnostic d;
  if (failed(saveTmir(*m, out, &d)))
    return fail(d);
  return 0;
}
