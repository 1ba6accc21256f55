//===- Dot.h - Graphviz output ----------------------------------*- C++ -*-===//
#pragma once

#include <string>

#include "tm/ir/TracedModule.h"

namespace tmg {

/// Graphviz DOT of every graph of `m`: one cluster per module graph, exprs
/// as boxes labelled like the text format, graph inputs and outputs as
/// ellipses, edges labelled with tensor types; module calls point at the
/// cluster of the graph they run.
std::string printDot(const TracedModule &m);

} // namespace tmg
