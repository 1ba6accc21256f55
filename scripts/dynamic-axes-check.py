#!/usr/bin/python3
"""Checks models exported by PyTorch with dynamic axes end to end.

For a torchvision ResNet-18 (dynamic batch) and a small Transformer encoder
(dynamic batch and sequence), with random weights:
  1. tm-run runs the exported model at batch 1 and 4 (and two sequence
     lengths), and its symbolic .tmir at the same shapes, and matches
     PyTorch within --rtol;
  2. `tm-opt -p optimize in.onnx -o out.onnx` keeps the symbolic axes, the
     input and output names and the names of the initializers no pass
     changed, and out.onnx passes onnx.checker.check_model(full_check=True);
  3. tm-run runs out.onnx at batch 3 with PyTorch's results.

Needs Debian's python3-torch, python3-torchvision and python3-onnx (not
needed by the default test run). Usage:

    scripts/dynamic-axes-check.py [--build build] [--workdir DIR]

Prints one line per check and exits 1 when one fails.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torchvision

FAILURES = []


def check(what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what + (f": {detail}" if detail and not ok else ""))
    if not ok:
        FAILURES.append(what)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


class Block(torch.nn.Module):
    """A pre-norm Transformer encoder block written out, as models define
    theirs (x.shape read in forward: Shape/Gather in the export)."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.ff1, self.ff2 = torch.nn.Linear(d, 2 * d), torch.nn.Linear(2 * d, d)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(b, t, 3, self.heads, c // self.heads) \
            .permute(2, 0, 3, 1, 4)
        a = (q @ k.transpose(-2, -1) / (c // self.heads) ** 0.5).softmax(-1)
        x = x + self.proj((a @ v).transpose(1, 2).reshape(b, t, c))
        return x + self.ff2(torch.nn.functional.gelu(self.ff1(self.ln2(x))))


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(16, 32)
        self.body = torch.nn.Sequential(Block(), Block())
        self.head = torch.nn.Linear(32, 8)

    def forward(self, x):
        return self.head(self.body(self.embed(x)))


def export(net, example, path, axes):
    torch.onnx.export(net, example, path, input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": axes, "output": axes}, opset_version=17)


def dims(vi):
    return [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]


def compare(tools, model, x, want, rtol, tag, work):
    xin, yref = os.path.join(work, "x.npy"), os.path.join(work, "y.npy")
    np.save(xin, x)
    np.save(yref, want)
    rc, out = run([tools["run"], model, "-i", f"input={xin}", "--compare", f"output={yref}",
                   f"--rtol={rtol}", f"--atol={rtol}"])
    check(f"{tag}: tm-run matches PyTorch", rc == 0, out.strip()[-400:])


def case(tools, name, net, shapes, axes, rtol, work):
    torch.manual_seed(0)
    path = os.path.join(work, f"{name}.onnx")
    with torch.no_grad():
        export(net, torch.randn(*shapes[0]), path, axes)
    # The .tmir keeps the symbols: one graph runs at every shape (tm-run
    # imports an .onnx at the bound input's shape).
    tmir = os.path.join(work, f"{name}.tmir")
    rc, log = run([tools["opt"], path, "-o", tmir])
    check(f"{name}: imports with its symbolic dims", rc == 0, log)
    for s in shapes:
        x = torch.randn(*s)
        with torch.no_grad():
            want = net(x).numpy()
        compare(tools, path, x.numpy(), want, rtol, f"{name} {tuple(s)}", work)
        compare(tools, tmir, x.numpy(), want, rtol, f"{name} {tuple(s)} symbolic .tmir", work)
    out = os.path.join(work, f"{name}.opt.onnx")
    rc, log = run([tools["opt"], path, "-p", "optimize", "-o", out])
    check(f"{name}: tm-opt -p optimize writes ONNX", rc == 0, log)
    if rc != 0:
        return
    a, b = onnx.load(path), onnx.load(out)
    check(f"{name}: input and output names kept",
          [i.name for i in a.graph.input] == [i.name for i in b.graph.input] and
          [o.name for o in a.graph.output] == [o.name for o in b.graph.output])
    check(f"{name}: symbolic input dims kept",
          dims(a.graph.input[0]) == dims(b.graph.input[0]),
          f"{dims(a.graph.input[0])} -> {dims(b.graph.input[0])}")
    check(f"{name}: symbolic output dims kept",
          dims(a.graph.output[0]) == dims(b.graph.output[0]),
          f"{dims(a.graph.output[0])} -> {dims(b.graph.output[0])}")
    before = {t.name: t for t in a.graph.initializer}
    after = {t.name: t for t in b.graph.initializer}
    kept = [n for n in after if n in before and
            onnx.numpy_helper.to_array(after[n]).tobytes() ==
            onnx.numpy_helper.to_array(before[n]).tobytes()]
    check(f"{name}: untouched initializers keep their names ({len(kept)} of {len(after)})",
          len(kept) > 0)
    check(f"{name}: no weights as Constant nodes",
          not any(n.op_type == "Constant" and n.attribute and n.attribute[0].t.dims and
                  int(np.prod(n.attribute[0].t.dims)) > 16 for n in b.graph.node))
    try:
        onnx.checker.check_model(b, full_check=True)
        check(f"{name}: out.onnx passes the full ONNX check", True)
    except Exception as e:  # noqa: BLE001 - any checker failure is reported
        check(f"{name}: out.onnx passes the full ONNX check", False, str(e)[:400])
    s = list(shapes[0])
    s[0] = 3
    x = torch.randn(*s)
    with torch.no_grad():
        want = net(x).numpy()
    compare(tools, out, x.numpy(), want, rtol, f"{name} optimized, batch 3", work)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--workdir")
    ap.add_argument("--rtol", type=float, default=1e-4)
    a = ap.parse_args()
    tools = {"run": os.path.join(a.build, "tools/tm-run"),
             "opt": os.path.join(a.build, "tools/tm-opt")}
    work = a.workdir or tempfile.mkdtemp(prefix="tm-dynamic-axes-")
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    resnet = torchvision.models.resnet18(weights=None).eval()
    with torch.no_grad():
        for m in resnet.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    case(tools, "resnet18", resnet, [(1, 3, 224, 224), (4, 3, 224, 224)], {0: "batch"},
         a.rtol, work)
    enc = Encoder().eval()
    case(tools, "encoder", enc, [(1, 10, 16), (4, 10, 16), (2, 7, 16)],
         {0: "batch", 1: "seq"}, a.rtol, work)
    print(f"{len(FAILURES)} failure(s)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
