//===- Verifier.h - IR invariant checks -------------------------*- C++ -*-===//
//
// Checks every invariant of DESIGN.md ("IR invariants") and reports each
// violation as a Diagnostic naming the expr (%id) and graph:
//  * body exprs are in topological order, and every input is defined by an
//    Input of this graph or an earlier body expr of this graph;
//  * each node has exactly one producer, which lists it among its outputs;
//  * each node's users mirror the inputs of exprs exactly (multiplicity);
//  * input 0 of every graph is the `self` ModuleNode; outputs are nodes of
//    the graph;
//  * node names are unique in a graph and registered in its namespace;
//  * expr and node ids are unique within the top module, below `totalIds`;
//  * a call's arg TreeDef has as many node leaves as the expr has inputs;
//  * module calls to TracedModules have a graph for their signature.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <vector>

#include "tm/ir/Diagnostic.h"

namespace tmg {

class InternalGraph;
class TracedModule;

/// Verifies one graph (not its sub-graphs). Appends diagnostics.
void verifyGraph(const InternalGraph &g, std::vector<Diagnostic> &diags);
/// Verifies every graph of the hierarchy and module-wide id uniqueness.
std::vector<Diagnostic> verify(const TracedModule &m);
/// `verify` as a result: success, or the first diagnostic with the others
/// as notes.
FailureOr<void> verifyOrReport(const TracedModule &m);

} // namespace tmg
