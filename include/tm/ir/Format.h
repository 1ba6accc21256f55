//===- Format.h - fmt support for IR objects --------------------*- C++ -*-===//
//
// `fmt::format("{}", graph)` prints the reference's text; the format specs of
// the reference's `__format__` work too: `{:i}` (ids), `{:p}` (graph-prefixed
// names), `{:ip}`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <fmt/format.h>

#include "tm/ir/Expr.h"
#include "tm/ir/InternalGraph.h"
#include "tm/ir/Node.h"
#include "tm/ir/TracedModule.h"
#include "tm/ir/TreeDef.h"

namespace tmg::detail {
struct NodeFormatSpec {
  NodeFormat fmt;
  constexpr auto parse(fmt::format_parse_context &ctx) {
    auto it = ctx.begin();
    while (it != ctx.end() && *it != '}') {
      if (*it == 'i')
        fmt.withId = true;
      else if (*it == 'p')
        fmt.withGraph = true;
      else
        throw fmt::format_error("tmgraph: format spec must be '', 'i', 'p' or 'ip'");
      ++it;
    }
    return it;
  }
};
} // namespace tmg::detail

template <> struct fmt::formatter<tmg::InternalGraph> : tmg::detail::NodeFormatSpec {
  template <typename Ctx> auto format(const tmg::InternalGraph &g, Ctx &ctx) const {
    return fmt::format_to(ctx.out(), "{}", g.str(fmt));
  }
};
template <> struct fmt::formatter<tmg::Expr> : tmg::detail::NodeFormatSpec {
  template <typename Ctx> auto format(const tmg::Expr &e, Ctx &ctx) const {
    return fmt::format_to(ctx.out(), "{}", e.str(fmt));
  }
};
template <> struct fmt::formatter<tmg::Node> : tmg::detail::NodeFormatSpec {
  template <typename Ctx> auto format(const tmg::Node &n, Ctx &ctx) const {
    return fmt::format_to(ctx.out(), "{}", n.str(fmt));
  }
};
template <> struct fmt::formatter<tmg::TracedModule> : fmt::formatter<fmt::string_view> {
  template <typename Ctx> auto format(const tmg::TracedModule &m, Ctx &ctx) const {
    return fmt::format_to(ctx.out(), "{}", m.str());
  }
};
template <> struct fmt::formatter<tmg::TreeDef> : fmt::formatter<fmt::string_view> {
  template <typename Ctx> auto format(const tmg::TreeDef &t, Ctx &ctx) const {
    return fmt::format_to(ctx.out(), "{}", t.str());
  }
};
