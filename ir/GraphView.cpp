//===- GraphView.cpp - Boost.Graph view of an InternalGraph ---------------===//
#include "tm/ir/GraphView.h"

namespace tmg {

GraphView::GraphView(const InternalGraph &graph)
    : graph_(&graph), version_(graph.version()) {
  order_.reserve(graph.inputs().size() + graph.size());
  index_.reserve(graph.inputs().size() + graph.size());
  auto add = [&](const Expr *e) {
    // A broken graph may list an input twice or one without a producer;
    // each expr is still one vertex.
    if (e && index_.try_emplace(e, uint32_t(order_.size())).second)
      order_.push_back(e);
  };
  for (const Node *in : graph.inputs())
    add(in->expr());
  for (const Expr *e : graph)
    add(e);
}

DepOutEdgeIterator::DepOutEdgeIterator(const GraphView &view, const Expr *v,
                                       bool atEnd)
    : view_(&view), v_(v), output_(v->numOutputs()) {
  if (atEnd || v->numOutputs() == 0)
    return;
  output_ = 0;
  use_ = v->output(0)->firstUse();
  settle();
}

void DepOutEdgeIterator::settle() {
  while (true) {
    for (; use_; use_ = use_->nextUse())
      if (view_->contains(use_->user()))
        return;
    if (++output_ >= v_->numOutputs()) {
      output_ = v_->numOutputs();
      return;
    }
    use_ = v_->output(output_)->firstUse();
  }
}

DepInEdgeIterator::DepInEdgeIterator(const GraphView &view, const Expr *v,
                                     bool atEnd)
    : view_(&view), v_(v), slot_(atEnd ? uint32_t(v->numInputs()) : 0) {
  settle();
}

void DepInEdgeIterator::settle() {
  while (slot_ < v_->numInputs() && !view_->contains(v_->input(slot_)->expr()))
    ++slot_;
}

} // namespace tmg
