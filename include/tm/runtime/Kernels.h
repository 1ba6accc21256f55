//===- Kernels.h - The CPU kernel library -----------------------*- C++ -*-===//
//
// All kernels of tmgraph's OpenMP CPU runtime (namespace tmg::rt). Include
// this header, or one family header, and link `tm_rt_dep`
// (libtmgraph-runtime). Conventions shared by every kernel (inputs, outputs,
// errors, determinism) are described in Common.h.
//
//   Elementwise.h  unary/binary ops with broadcasting, compare, where, cast
//   Linalg.h       matmul, linear, gemm
//   Conv.h         conv2d, conv1d, conv_transpose2d
//   Pool.h         max/avg/adaptive/global pooling
//   Norm.h         batch_norm, layer_norm, softmax, log_softmax
//   Reduce.h       sum, mean, max, min, prod, argmax, argmin
//   Shape.h        views, transpose, concat/split/stack, slicing, getitem,
//                  gather, pad, resize, creation
//   Quant.h        fake_quantize per tensor and per channel
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tm/runtime/Common.h"
#include "tm/runtime/Conv.h"
#include "tm/runtime/Elementwise.h"
#include "tm/runtime/Extra.h"
#include "tm/runtime/Linalg.h"
#include "tm/runtime/Norm.h"
#include "tm/runtime/Pool.h"
#include "tm/runtime/Quant.h"
#include "tm/runtime/Reduce.h"
#include "tm/runtime/Shape.h"
