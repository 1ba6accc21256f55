//===- embed.cpp - tmgraph embedded in another program --------------------===//
//
// A program built outside tmgraph, against an installed copy (pkg-config)
// or with tmgraph as a Meson subproject: it declares its own pass, runs it
// with tmgraph's passes in one pipeline, then runs the model.
//
//   embed MODEL.tmir 'count-exprs,optimize,count-exprs'
//
//===----------------------------------------------------------------------===//
#include <cstdio>

#include <tm/Context.h>

namespace {

/// Counts the exprs of every graph (--stats style): a pass of this program.
struct CountExprs : tmg::PassWrapper<CountExprs> {
  static constexpr const char *Name = "count-exprs";
  static constexpr const char *Description = "counts the exprs of every graph";
  tmg::FailureOr<bool> run(tmg::TracedModule &m, tmg::PassContext &ctx) override {
    for (tmg::InternalGraph *g : tmg::graphsOf(m))
      ctx.count("exprs", int64_t(g->size()));
    return false;
  }
};

} // namespace

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: embed MODEL.tmir PIPELINE\n");
    return 2;
  }
  tmg::Context ctx; // every pass of tmgraph, and this program's
  ctx.passes().add<CountExprs>();
  auto pipeline = ctx.parsePipeline(argv[2]);
  auto module = ctx.loadTmir(argv[1]);
  for (const tmg::Diagnostic *d :
       {pipeline.failed() ? &pipeline.diagnostic() : nullptr,
        module.failed() ? &module.diagnostic() : nullptr})
    if (d) {
      std::fprintf(stderr, "embed: %s\n", d->str().c_str());
      return 2;
    }
  tmg::PipelineOptions opts;
  opts.stats = true;
  tmg::PassManager pm(std::move(*pipeline), opts);
  if (auto r = pm.run(**module); r.failed()) {
    std::fprintf(stderr, "embed: %s\n", r.diagnostic().str().c_str());
    return 2;
  }
  tmg::InternalGraph &g = (*module)->graph();
  std::vector<tmg::Tensor> inputs;
  for (tmg::Node *n : g.inputs().drop_front())
    inputs.push_back(tmg::Tensor::randn(*llvm::cast<tmg::TensorNode>(n)->shape(), 1));
  tmg::rt::Interpreter interp(**module, ctx.interpreter);
  tmg::rt::RunResult r = interp.run(inputs);
  std::printf("ran %s: %zu output(s), the first %s\n", g.name().c_str(), r.outputs.size(),
              tmg::shapeStr(r.outputs.at(0).shape()).c_str());
  return 0;
}
