//===- Dot.h - Graphviz output ----------------------------------*- C++ -*-===//
#pragma once

#include <string>

#include "tm/ir/TracedModule.h"

namespace tmg {

/// What printDot draws. The defaults draw everything.
struct DotOptions {
  /// Leave out getattrs of tensors (parameters, buffers) and tensor
  /// constants, with their edges.
  bool hideParams = false;
  /// Leave out every getattr (modules too), with their edges (from `self`).
  bool hideGetAttrs = false;
  /// Draw the graphs of modules at most this deep (the top module is at
  /// depth 0); calls into deeper modules stay single boxes. -1: all.
  int maxDepth = -1;
  /// Fill exprs with a colour per op family (convolution and linear,
  /// elementwise arithmetic, activations, normalisation, pooling, shape and
  /// indexing, module calls, reductions).
  bool colorByOp = false;
};

/// Graphviz DOT of the graphs of `m`: one cluster per module graph, exprs
/// as boxes labelled like the text format, graph inputs and outputs as
/// ellipses, edges labelled with tensor types; module calls point at the
/// cluster of the graph they run.
std::string printDot(const TracedModule &m, const DotOptions &opts = {});

} // namespace tmg
