//===- Context.h - What a program using tmgraph owns ------------*- C++ -*-===//
//
// The registries and options that decide what a program's pipelines, file
// readers and interpreters do, in one object the program owns (as an
// MLIRContext). Two contexts in one process do not see each other: a pass
// registered in one is unknown to the other.
//
//   tmg::Context ctx;                              // every pass of tmgraph
//   ctx.passes().add<MyPass>();                    // this context only
//   auto m = ctx.loadTmir("model.tmir");
//   auto p = ctx.parsePipeline("flatten,my-pass");
//   tmg::rt::Interpreter interp(**m, ctx.interpreter);
//
// Header-only, like tm/InitAllPasses.h: a program using it links the io,
// passes, matcher, transforms and runtime libraries (pkg-config `tmgraph`).
//
// The op, module-type and kernel registries stay process-wide: they are
// append-only tables keyed by name, and registering one name twice
// differently is an error, so what a name means never depends on a context.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>
#include <string>

#include "tm/InitAllPasses.h"
#include "tm/io/Tmir.h"
#include "tm/io/TmirLoaders.h"
#include "tm/passes/PassManager.h"
#include "tm/runtime/Interpreter.h"

namespace tmg {

class Context {
public:
  /// Every pass and preset of tmgraph and its builtin `.tmir` upgrades.
  Context() : loaders_(TmirLoaders::builtin()) { registerAllPasses(passes_); }
  Context(const Context &) = delete;
  Context &operator=(const Context &) = delete;

  PassRegistry &passes() { return passes_; }
  const PassRegistry &passes() const { return passes_; }
  TmirLoaders &loaders() { return loaders_; }
  const TmirLoaders &loaders() const { return loaders_; }

  /// What readers may allocate (`--max-tensor-bytes`, `--max-model-bytes`).
  SizeLimits limits;
  /// The options of the interpreters this program makes.
  rt::InterpreterOptions interpreter;

  /// Parses a pipeline against this context's passes and presets.
  FailureOr<Pipeline> parsePipeline(llvm::StringRef text,
                                    llvm::StringRef file = "<pipeline>") const {
    return Pipeline::parse(text, passes_, file);
  }
  /// Read options using this context's loaders and limits.
  TmirReadOptions tmirReadOptions() const {
    TmirReadOptions o;
    o.loaders = &loaders_;
    o.limits = limits;
    return o;
  }
  FailureOr<std::unique_ptr<TracedModule>> parseTmir(llvm::StringRef text,
                                                     llvm::StringRef file = "<string>") const {
    return tmg::parseTmir(text, file, tmirReadOptions());
  }
  FailureOr<std::unique_ptr<TracedModule>> loadTmir(const std::string &path) const {
    return tmg::loadTmir(path, tmirReadOptions());
  }

private:
  PassRegistry passes_;
  TmirLoaders loaders_;
};

} // namespace tmg
