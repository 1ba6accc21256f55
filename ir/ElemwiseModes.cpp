//===- ElemwiseModes.cpp - Modes of the Elemwise builtin module -----------===//
#include "tm/ir/ElemwiseModes.h"

#include <iterator>

namespace tmg {

namespace {
// dnn/scripts/opr_param_defs.py `Elemwise` (MegEngine), grouped by arity.
// P: predicate (bool result); F: float result for integer inputs.
constexpr bool P = true, F = true, N = false;
constexpr ElemwiseMode Modes[] = {
    {"RELU", 1, N, N},       {"ABS", 1, N, N},         {"ACOS", 1, N, F},
    {"ASIN", 1, N, F},       {"CEIL", 1, N, N},        {"COS", 1, N, F},
    {"EXP", 1, N, F},        {"EXPM1", 1, N, F},       {"FLOOR", 1, N, N},
    {"LOG", 1, N, F},        {"LOG1P", 1, N, F},       {"NEGATE", 1, N, N},
    {"SIGMOID", 1, N, F},    {"SIN", 1, N, F},         {"TANH", 1, N, F},
    {"FAST_TANH", 1, N, F},  {"ROUND", 1, N, N},       {"ERF", 1, N, F},
    {"ERFINV", 1, N, F},     {"ERFC", 1, N, F},        {"ERFCINV", 1, N, F},
    {"H_SWISH", 1, N, F},    {"NOT", 1, P, N},         {"SILU", 1, N, F},
    {"GELU", 1, N, F},       {"ISNAN", 1, P, N},       {"ISINF", 1, P, N},
    {"SINH", 1, N, F},       {"COSH", 1, N, F},        {"ASINH", 1, N, F},
    {"ACOSH", 1, N, F},      {"ATANH", 1, N, F},       {"TAN", 1, N, F},
    {"SOFTPLUS", 1, N, F},   {"RELU6", 1, N, N},       {"HSIGMOID", 1, N, F},
    {"LOGSIGMOID", 1, N, F}, {"SQRT", 1, N, F},        {"SQUARE", 1, N, N},
    {"SIGN", 1, N, N},
    {"ABS_GRAD", 2, N, N},   {"ADD", 2, N, N},         {"FLOOR_DIV", 2, N, N},
    {"MAX", 2, N, N},        {"MIN", 2, N, N},         {"MOD", 2, N, N},
    {"MUL", 2, N, N},        {"POW", 2, N, N},         {"SIGMOID_GRAD", 2, N, F},
    {"SUB", 2, N, N},        {"SWITCH_GT0", 2, N, N},  {"TANH_GRAD", 2, N, F},
    {"TRUE_DIV", 2, N, F},   {"LOG_SUM_EXP", 2, N, F}, {"LT", 2, P, N},
    {"LEQ", 2, P, N},        {"EQ", 2, P, N},          {"SHL", 2, N, N},
    {"SHR", 2, N, N},        {"FUSE_ADD_RELU", 2, N, N}, {"FUSE_ADD_SIGMOID", 2, N, F},
    {"FUSE_ADD_TANH", 2, N, F}, {"FAST_TANH_GRAD", 2, N, F}, {"RMULH", 2, N, N},
    {"ATAN2", 2, N, F},      {"H_SWISH_GRAD", 2, N, F}, {"FUSE_ADD_H_SWISH", 2, N, F},
    {"AND", 2, P, N},        {"OR", 2, P, N},          {"XOR", 2, P, N},
    {"SILU_GRAD", 2, N, F},  {"GELU_GRAD", 2, N, F},   {"NEQ", 2, P, N},
    {"ASINH_GRAD", 2, N, F}, {"ACOSH_GRAD", 2, N, F},  {"ATANH_GRAD", 2, N, F},
    {"PRELU", 2, N, N},      {"SOFTPLUS_GRAD", 2, N, F}, {"RELU6_GRAD", 2, N, N},
    {"HSIGMOID_GRAD", 2, N, F},
    {"COND_LEQ_MOV", 3, N, N}, {"FUSE_MUL_ADD3", 3, N, N}, {"COND_LT_MOV", 3, N, N},
    {"CLIP", 3, N, N},       {"PRELU_GRAD", 3, N, N},
    {"FUSE_MUL_ADD4", 4, N, N},
};
} // namespace

const ElemwiseMode *lookupElemwiseMode(llvm::StringRef name) {
  for (const ElemwiseMode &m : Modes)
    if (name.equals_insensitive(m.name))
      return &m;
  return nullptr;
}

} // namespace tmg
