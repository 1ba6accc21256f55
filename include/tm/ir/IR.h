//===- IR.h - Umbrella header of the IR layer -------------------*- C++ -*-===//
#pragma once

#include "tm/ir/Builder.h"
#include "tm/ir/Diagnostic.h"
#include "tm/ir/Expr.h"
#include "tm/ir/Filter.h"
#include "tm/ir/Format.h"
#include "tm/ir/InternalGraph.h"
#include "tm/ir/Module.h"
#include "tm/ir/NameSpace.h"
#include "tm/ir/Node.h"
#include "tm/ir/OpSchema.h"
#include "tm/ir/Tensor.h"
#include "tm/ir/TracedModule.h"
#include "tm/ir/TreeDef.h"
#include "tm/ir/Verifier.h"
