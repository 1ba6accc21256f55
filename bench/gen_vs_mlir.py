#!/usr/bin/env python3
"""Writes one program of about N exprs as .tmir and as MLIR text.

Used by bench/vs-mlir-opt.sh. The program is a chain of blocks of ten
exprs over a module of P parameters (float32 1x16x16, all zeros):

    w  = getattr(self, "p{i % P}")        # MLIR: memref.get_global + to_tensor
    mm = math.matmul(x, w)                # tosa.matmul
    b  = getattr(self, "p{(i+1) % P}")
    s  = elemwise.add(mm, b)              # arith.addf
    r  = nn.relu(s)                       # arith.maxf with a zero constant
    w2 = getattr(self, "p{i % P}")        # the same attribute again
    y  = elemwise.mul(r, w2)              # arith.mulf; the next block's x
    d1 = elemwise.sub(y, b)               # d1..d3: dead
    d2 = nn.relu(d1)
    d3 = elemwise.mul(d2, r)

so a pass that merges repeated reads of an attribute and removes dead code
(tmgraph's `compile`; mlir-opt's `--canonicalize --cse`) leaves seven exprs
per block and P getattrs. Python 3 standard library only.

usage: gen_vs_mlir.py N OUT_PREFIX [--params P]
writes OUT_PREFIX.tmir and OUT_PREFIX.mlir
"""
import argparse

SHAPE_TM = "float32(1, 16, 16)"
SHAPE_ML = "tensor<1x16x16xf32>"
MEM_ML = "memref<1x16x16xf32>"


def write_tmir(path, blocks, params):
    nid = 2  # %0 self, %1 x
    with open(path, "w") as f:
        w = f.write
        n_exprs = blocks * 10
        w("tmir 3\n")
        w(f"ids {n_exprs + 2} {n_exprs + 2}\n")
        w("module Net traced top {\n")
        for p in range(params):
            w(f"  p{p} = param({SHAPE_TM}, zeros)\n")
        w("graph name='Net' qualname='Net' argdef=((Module, Tensor), {}) outdef=Tensor "
          f"inputs=[%0 'self' module<Module> 'Net' #0 'self', %1 'x' {SHAPE_TM} 'Net.[x]' #1 'x'] "
          "reserved=[]\n")
        w("Net.Graph (self, x) {\n")
        x_name, x_id = "x", 1
        lines = []

        def getattr_(name, attr):
            nonlocal nid
            i = nid
            nid += 1
            lines.append(
                f"\t%{i}:\t{name} = getattr(self, \"{attr}\") -> (Tensor)\t;; getattr='{attr}' "
                f"base=%0 outs=[%{i} '{name}' {SHAPE_TM} 'Net.{attr}']\n")
            return name, i

        def fn(name, op, qual, args, extra="", extra_ann=""):
            nonlocal nid
            i = nid
            nid += 1
            printed = ", ".join(a[0] for a in args) + ", " + extra
            ann = ", ".join(f"%{a[1]}" for a in args) + extra_ann
            if len(args) == 1 and not extra_ann:
                ann += ","
            lines.append(
                f"\t%{i}:\t{name} = {op}({printed})\t;; fn={op} args=(({ann}), {{}}) "
                f"outs=[%{i} '{name}' {SHAPE_TM} 'Net.[{qual}]'] outdef=Tensor\n")
            return name, i

        for b in range(blocks):
            p, q = b % params, (b + 1) % params
            wv = getattr_(f"w_{b}", f"p{p}")
            mm = fn(f"mm_{b}", "math.matmul", "func_matmul", [(x_name, x_id), wv],
                    "False, False, default, ", ", False, False, 'default'")
            bv = getattr_(f"b_{b}", f"p{q}")
            s = fn(f"s_{b}", "elemwise.add", "func_add", [mm, bv])
            r = fn(f"r_{b}", "nn.relu", "func_relu", [s])
            w2 = getattr_(f"w2_{b}", f"p{p}")
            y = fn(f"y_{b}", "elemwise.mul", "func_mul", [r, w2])
            d1 = fn(f"d1_{b}", "elemwise.sub", "func_sub", [y, bv])
            d2 = fn(f"d2_{b}", "nn.relu", "func_relu", [d1])
            fn(f"d3_{b}", "elemwise.mul", "func_mul", [d2, r])
            x_name, x_id = y
            if len(lines) >= 4096:
                f.writelines(lines)
                lines.clear()
        f.writelines(lines)
        w(f"\treturn {x_name}\t;; outs=[%{x_id}]\n")
        w("}\n}\n")


def write_mlir(path, blocks, params):
    with open(path, "w") as f:
        w = f.write
        w("module {\n")
        for p in range(params):
            w(f"  memref.global \"private\" constant @p{p} : {MEM_ML} = dense<0.0>\n")
        w(f"  func @forward(%x: {SHAPE_ML}) -> {SHAPE_ML} {{\n")
        w(f"    %zero = arith.constant dense<0.0> : {SHAPE_ML}\n")
        x = "%x"
        lines = []

        def getattr_(name, attr):
            lines.append(f"    %{name}_m = memref.get_global @{attr} : {MEM_ML}\n"
                         f"    %{name} = bufferization.to_tensor %{name}_m : {MEM_ML}\n")
            return f"%{name}"

        def arith(name, op, a, b):
            lines.append(f"    %{name} = arith.{op} {a}, {b} : {SHAPE_ML}\n")
            return f"%{name}"

        for b in range(blocks):
            p, q = b % params, (b + 1) % params
            wv = getattr_(f"w_{b}", f"p{p}")
            lines.append(f"    %mm_{b} = \"tosa.matmul\"({x}, {wv}) : "
                         f"({SHAPE_ML}, {SHAPE_ML}) -> {SHAPE_ML}\n")
            bv = getattr_(f"b_{b}", f"p{q}")
            s = arith(f"s_{b}", "addf", f"%mm_{b}", bv)
            r = arith(f"r_{b}", "maxf", s, "%zero")
            w2 = getattr_(f"w2_{b}", f"p{p}")
            y = arith(f"y_{b}", "mulf", r, w2)
            d1 = arith(f"d1_{b}", "subf", y, bv)
            d2 = arith(f"d2_{b}", "maxf", d1, "%zero")
            arith(f"d3_{b}", "mulf", d2, r)
            x = y
            if len(lines) >= 4096:
                f.writelines(lines)
                lines.clear()
        f.writelines(lines)
        w(f"    return {x} : {SHAPE_ML}\n  }}\n}}\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("n", type=int, help="exprs (rounded down to a multiple of 10)")
    ap.add_argument("out")
    ap.add_argument("--params", type=int, default=1000)
    a = ap.parse_args()
    blocks = max(1, a.n // 10)
    params = max(2, min(a.params, blocks))
    write_tmir(a.out + ".tmir", blocks, params)
    write_mlir(a.out + ".mlir", blocks, params)


if __name__ == "__main__":
    main()
