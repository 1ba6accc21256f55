//===- ThrowingPlugin.cpp - A pass plugin with a bug ----------------------===//
//
// Its registration throws a C++ exception that is no tmg::Error: to the
// tools, a bug (exit code 3), not a user error.
//
//===----------------------------------------------------------------------===//
#include <stdexcept>

#include "tm/passes/Pass.h"

TMG_PASS_PLUGIN_ENTRY { throw std::logic_error("plugin bug: the registry was not expected"); }
