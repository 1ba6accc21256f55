//===- index.cpp - ONNX mapping of indexing ops -----------------*- C++ -*-===//
//
// The ONNX importers and exporters of the index family: Slice (as
// __getitem__ with clamped bounds), Gather (take), GatherElements (gather)
// and the scatters.
//
//===----------------------------------------------------------------------===//
#include "Import.h"

#include "tm/runtime/Kernels.h"

namespace tmg::io::onnxdetail {
namespace {

/// Slice's bounds made a __getitem__ index of slices.
void emitSlice(NodeCx &c, const std::vector<int64_t> &starts, const std::vector<int64_t> &ends,
               std::vector<int64_t> axes, std::vector<int64_t> steps) {
  const Shape &s = c.shape(0);
  int64_t r = int64_t(s.size());
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(int64_t(i));
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    c.fail("starts, ends, axes and steps differ in length");
  std::vector<Arg> idx;
  for (int64_t i = 0; i < r; ++i)
    idx.push_back(Arg::slice(Arg::none(), Arg::none(), Arg::none()));
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t ax = c.axis(axes[i], r), dim = s[ax], st = steps[i];
    if (st == 0)
      c.fail("a step is 0");
    int64_t b0 = starts[i], e0 = ends[i];
    if (b0 < 0)
      b0 = std::max<int64_t>(b0, -dim - 1) + dim;
    if (e0 < 0)
      e0 = std::max<int64_t>(e0, -dim - 1) + dim;
    if (st > 0) {
      b0 = std::clamp<int64_t>(b0, 0, dim);
      e0 = std::clamp<int64_t>(e0, 0, dim);
      idx[ax] = Arg::slice(b0, e0, st);
    } else {
      b0 = std::clamp<int64_t>(b0, -1, dim - 1);
      e0 = std::clamp<int64_t>(e0, -1, dim - 1);
      if (b0 < 0)
        b0 = e0; // empty
      idx[ax] = Arg::slice(b0, e0 < 0 ? Arg::none() : Arg(e0), st);
    }
  }
  c.out(0, c.method(c.node(0), "__getitem__", {Arg::tuple(idx)}));
}

/// Slice before opset 10: bounds are attributes.
void importSliceAttrs(NodeCx &c) {
  c.shape(0);
  emitSlice(c, c.ais("starts").value_or(std::vector<int64_t>{}),
            c.ais("ends").value_or(std::vector<int64_t>{}),
            c.ais("axes").value_or(std::vector<int64_t>{}), {});
}

/// Slice from opset 10: bounds are inputs.
void importSliceInputs(NodeCx &c) {
  c.shape(0);
  std::vector<int64_t> starts = c.ints(1), ends = c.ints(2), axes, steps;
  if (c.has(3))
    axes = c.ints(3);
  if (c.has(4))
    steps = c.ints(4);
  emitSlice(c, starts, ends, axes, steps);
}

void importGather(NodeCx &c) {
  int64_t ax = c.axis(c.ai("axis", 0), c.rank(0));
  c.out(0, c.call("tensor.take", {c.node(0), c.node(1)}, {{"axis", ax}}));
}

void importGatherElements(NodeCx &c) {
  int64_t ax = c.axis(c.ai("axis", 0), c.rank(0));
  c.out(0, c.call("tensor.gather", {c.node(0), ax, c.node(1)}));
}

/// ScatterND, ScatterElements and Scatter.
void importScatter(NodeCx &c) {
  std::string red = c.as("reduction", "none");
  if (!rt::parseScatterReduce(red))
    c.fail(fmt::format("unknown reduction '{}'", red));
  if (c.n.op_type() == "ScatterND")
    return c.out(0, c.call("tensor.scatter_nd", {c.node(0), c.node(1), c.node(2)},
                           {{"reduction", red}}));
  int64_t ax = c.axis(c.ai("axis", 0), c.rank(0));
  c.out(0, c.call("tensor.scatter", {c.node(0), ax, c.node(1), c.node(2)},
                  {{"reduction", red}}));
}

} // namespace

void registerIndexOnnxImport(OnnxImportTable &t) {
  t.add("Slice", 1, 9, importSliceAttrs);
  t.add("Slice", 10, kMaxOpset, importSliceInputs);
  t.add("Gather", 1, kMaxOpset, importGather);
  t.add("GatherElements", 1, kMaxOpset, importGatherElements);
  for (const char *op : {"ScatterND", "ScatterElements", "Scatter"})
    t.add(op, 1, kMaxOpset, importScatter);
}

} // namespace tmg::io::onnxdetail
