#!/usr/bin/python3
"""Writes the small ONNX models of tests/onnx/idioms/ with PyTorch's exporter:
each one spells, the way torch.onnx.export does, idioms that canonicalize-onnx
turns back into tmgraph ops (Clip for relu6, x * HardSigmoid(x) for
hardswish, x * Sigmoid(x) for silu, the Erf and Tanh forms of GELU, the
decomposed LayerNorm, MatMul + Add for Linear on 3-D inputs, Gemm).

Random weights from a fixed seed; next to each NAME.onnx, NAME_x.npy (input)
and NAME_y.npy (PyTorch's output) for the tests to compare against.
Needs Debian's python3-torch and python3-onnx. Usage:

    /usr/bin/python3 scripts/make-idiom-models.py [OUTDIR]   # default tests/onnx/idioms

With `--golden BUILD_DIR` it writes instead the inputs of the golden tests,
tests/files/transforms/onnx-*.tmir: small graphs written with onnx.helper
(each idiom in several spellings, and near misses that must stay), imported
by BUILD_DIR's tm-opt.

Opset 13 (below 14 PyTorch writes hardswish as x * HardSigmoid(x) and below
17 LayerNorm as its decomposition).
"""
import math
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

OPSET = 13


def conv_bn(cin, cout, k, stride=1, groups=1, act=None):
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
              nn.BatchNorm2d(cout)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


class ConvBnRelu6(nn.Module):
    """MobileNetV2's inverted residual: 1x1 expand, 3x3 depthwise (both
    conv + bn + relu6), 1x1 linear projection, residual add; then a
    classifier (flatten + Linear, exported as Gemm) and a scale by a
    constant."""

    def __init__(self):
        super().__init__()
        self.stem = conv_bn(3, 8, 3, act=nn.ReLU6)
        self.expand = conv_bn(8, 16, 1, act=nn.ReLU6)
        self.dw = conv_bn(16, 16, 3, groups=16, act=nn.ReLU6)
        self.project = conv_bn(16, 8, 1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        x = self.stem(x)
        x = x + self.project(self.dw(self.expand(x)))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x) * 2.0


class InvertedResidualHardswish(nn.Module):
    """MobileNetV3's block: expand + hardswish, depthwise + hardswish,
    squeeze-excitation (relu, hardsigmoid), projection, residual."""

    def __init__(self):
        super().__init__()
        self.expand = conv_bn(8, 24, 1, act=nn.Hardswish)
        self.dw = conv_bn(24, 24, 3, groups=24, act=nn.Hardswish)
        self.se1 = nn.Conv2d(24, 8, 1)
        self.se2 = nn.Conv2d(8, 24, 1)
        self.project = conv_bn(24, 8, 1)

    def forward(self, x):
        y = self.dw(self.expand(x))
        s = F.adaptive_avg_pool2d(y, 1)
        s = F.hardsigmoid(self.se2(F.relu(self.se1(s))))
        return x + self.project(y * s)


class SiluBlock(nn.Module):
    """EfficientNet's MBConv: expand + silu, depthwise + silu,
    squeeze-excitation (silu, sigmoid), projection."""

    def __init__(self):
        super().__init__()
        self.expand = conv_bn(8, 32, 1, act=nn.SiLU)
        self.dw = conv_bn(32, 32, 3, groups=32, act=nn.SiLU)
        self.se1 = nn.Conv2d(32, 8, 1)
        self.se2 = nn.Conv2d(8, 32, 1)
        self.project = conv_bn(32, 8, 1)

    def forward(self, x):
        y = self.dw(self.expand(x))
        s = F.adaptive_avg_pool2d(y, 1)
        s = torch.sigmoid(self.se2(F.silu(self.se1(s))))
        return x + self.project(y * s)


class EncoderLayer(nn.Module):
    """A pre-norm transformer encoder layer (ViT's): LayerNorm, multi-head
    self-attention from Linear layers (MatMul + Add on 3-D inputs),
    LayerNorm, MLP with GELU (Erf form)."""

    def __init__(self, d=16, heads=2, hidden=32):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d, eps=1e-6)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d, eps=1e-6)
        self.fc1 = nn.Linear(d, hidden)
        self.fc2 = nn.Linear(hidden, d)

    def forward(self, x):
        b, n, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).reshape(b, n, 3, h, d // h).permute(2, 0, 3, 1, 4)
        a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // h), dim=-1)
        x = x + self.proj((a @ v).transpose(1, 2).reshape(b, n, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GeluForms(nn.Module):
    """GELU as PyTorch's exporter writes F.gelu (both approximations) and
    as models write it by hand (BERT's x * 0.5 * (1 + erf(x / sqrt 2)),
    GPT-2's tanh form with pow)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        x = self.fc(x)
        a = F.gelu(x)
        b = F.gelu(x, approximate="tanh")
        c = x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))
        d = 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
        return a + 2 * b + 3 * c + 4 * d


MODELS = {
    "conv_bn_relu6": (ConvBnRelu6, (1, 3, 16, 16)),
    "inverted_residual_hardswish": (InvertedResidualHardswish, (1, 8, 12, 12)),
    "silu_block": (SiluBlock, (1, 8, 12, 12)),
    "encoder_layer_gelu": (EncoderLayer, (1, 10, 16)),
    "gelu_forms": (GeluForms, (2, 3, 16)),
}


def randomize(net):
    """Non-trivial batch-norm statistics and affine parameters (the defaults
    are 0 and 1, which would hide a wrong fold)."""
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, (nn.BatchNorm2d, nn.LayerNorm)):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)


# -- Hand-written graphs for the golden tests -------------------------------------------
# Each graph holds the idioms in the exact ONNX spellings (several operand
# orders) and near misses that must stay, written with onnx.helper since
# PyTorch picks one spelling.


def golden_graphs():
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.RandomState(7)
    graphs = {}

    def model(name, nodes, inputs, outputs, inits):
        g = helper.make_graph(
            nodes, name,
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
            [numpy_helper.from_array(np.asarray(v, dtype=np.float32), k) for k, v in inits.items()])
        graphs[name] = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])

    N = helper.make_node
    inf = float("inf")
    model("onnx_activations", [
        N("Clip", ["x", "zero", "six"], ["relu6"]),
        N("Clip", ["x", "zero"], ["relu_min_only"]),
        N("Clip", ["x", "zero", "inf"], ["relu_inf"]),
        N("Clip", ["x", "zero", "five"], ["clip_0_5_stays"]),
        N("HardSigmoid", ["x"], ["hsig"], alpha=1.0 / 6),
        N("Mul", ["x", "hsig"], ["hardswish"]),
        N("Add", ["x", "three"], ["x3"]),
        N("Clip", ["x3", "zero", "six"], ["r63"]),
        N("Mul", ["x", "r63"], ["xr63"]),
        N("Div", ["xr63", "six"], ["hardswish_decomposed"]),
        N("HardSigmoid", ["x"], ["hardsigmoid_alone_stays"], alpha=1.0 / 6),
        N("HardSigmoid", ["x"], ["hsig02"]),
        N("Mul", ["x", "hsig02"], ["slope_0_2_stays"]),
        N("Sigmoid", ["x"], ["sig"]),
        N("Mul", ["sig", "x"], ["silu"]),
        N("Sigmoid", ["relu6"], ["sig6"]),
        N("Mul", ["x", "sig6"], ["other_operand_stays"]),
    ], [("x", [2, 3, 4])],
        ["relu6", "relu_min_only", "relu_inf", "clip_0_5_stays", "hardswish",
         "hardswish_decomposed", "hardsigmoid_alone_stays", "slope_0_2_stays", "silu", "other_operand_stays"],
        {"zero": 0.0, "six": 6.0, "five": 5.0, "inf": inf, "three": 3.0})
    model("onnx_scalars", [
        N("Mul", ["x", "one"], ["times_one"]),
        N("Add", ["half", "x"], ["plus_half"]),
        N("Sub", ["x", "two_11"], ["minus_two"]),
        N("Div", ["x", "four"], ["over_four"]),
        N("Sub", ["three", "x"], ["three_minus"]),
        N("Mul", ["x", "vec3"], ["vector_stays"]),
        N("Mul", ["x", "one_111"], ["broadcast_stays"]),
    ], [("x", [2, 3])],
        ["times_one", "plus_half", "minus_two", "over_four", "three_minus", "vector_stays",
         "broadcast_stays"],
        {"one": [1.0], "half": 0.5, "two_11": [[2.0]], "four": [4.0], "three": 3.0,
         "vec3": [1.0, 2.0, 3.0], "one_111": [[[1.0]]]})
    w = rng.randn(8, 6).round(2)
    model("onnx_linear", [
        N("MatMul", ["x", "w"], ["mm"]),
        N("Add", ["mm", "b"], ["matmul_add"]),
        N("MatMul", ["x", "w"], ["mm2"]),
        N("Add", ["b", "mm2"], ["bias_first"]),
        N("MatMul", ["x2", "w"], ["matmul_alone"]),
        N("Gemm", ["x2", "w", "b"], ["gemm_no_trans"]),
        N("Gemm", ["x2", "wt", "b"], ["gemm_trans_b"], transB=1),
        N("Gemm", ["x2", "wt", "b16"], ["gemm_row_bias"], transB=1),
        N("MatMul", ["x", "z"], ["dynamic_weight_stays"]),
        N("MatMul", ["x", "w"], ["mm3"]),
        N("Add", ["mm3", "b56"], ["full_bias_stays_an_add"]),
    ], [("x", [2, 5, 8]), ("x2", [4, 8]), ("z", [8, 6])],
        ["matmul_add", "bias_first", "matmul_alone", "gemm_no_trans", "gemm_trans_b",
         "gemm_row_bias", "dynamic_weight_stays", "full_bias_stays_an_add"],
        {"w": w, "wt": w.T, "b": rng.randn(6).round(2), "b56": rng.randn(5, 6).round(2),
         "b16": rng.randn(1, 6).round(2)})
    sqrt2, half_sqrt2 = math.sqrt(2.0), math.sqrt(0.5)
    model("onnx_gelu", [
        # PyTorch: (x * (erf(x / sqrt 2) + 1)) * 0.5
        N("Div", ["x", "sqrt2"], ["a1"]), N("Erf", ["a1"], ["a2"]), N("Add", ["a2", "one"], ["a3"]),
        N("Mul", ["x", "a3"], ["a4"]), N("Mul", ["a4", "half"], ["gelu_torch"]),
        # BERT: (x * 0.5) * (1 + erf(x * (1 / sqrt 2)))
        N("Mul", ["x", "half"], ["b1"]), N("Mul", ["x", "half_sqrt2"], ["b2"]),
        N("Erf", ["b2"], ["b3"]), N("Add", ["one", "b3"], ["b4"]),
        N("Mul", ["b1", "b4"], ["gelu_bert"]),
        # x * (0.5 * (1 + erf(x / sqrt 2)))
        N("Div", ["x", "sqrt2"], ["c1"]), N("Erf", ["c1"], ["c2"]), N("Add", ["c2", "one"], ["c3"]),
        N("Mul", ["half", "c3"], ["c4"]), N("Mul", ["x", "c4"], ["gelu_inner_half"]),
        # (x * (1 + erf(x / sqrt 2))) / 2
        N("Div", ["x", "sqrt2"], ["d1"]), N("Erf", ["d1"], ["d2"]), N("Add", ["d2", "one"], ["d3"]),
        N("Mul", ["d3", "x"], ["d4"]), N("Div", ["d4", "two"], ["gelu_div_two"]),
        # PyTorch's tanh approximation: 0.5 * (x * (1 + tanh(b * (x + k * (x * (x * x))))))
        N("Mul", ["x", "x"], ["t1"]), N("Mul", ["x", "t1"], ["t2"]), N("Mul", ["kappa", "t2"], ["t3"]),
        N("Add", ["x", "t3"], ["t4"]), N("Mul", ["beta", "t4"], ["t5"]), N("Tanh", ["t5"], ["t6"]),
        N("Add", ["one", "t6"], ["t7"]), N("Mul", ["x", "t7"], ["t8"]),
        N("Mul", ["half", "t8"], ["gelu_tanh"]),
        # A wrong constant: 0.5 * x * (1 + erf(x / 2)) stays
        N("Div", ["x", "two"], ["e1"]), N("Erf", ["e1"], ["e2"]), N("Add", ["e2", "one"], ["e3"]),
        N("Mul", ["x", "e3"], ["e4"]), N("Mul", ["e4", "half"], ["erf_over_two_stays"]),
    ], [("x", [2, 8])],
        ["gelu_torch", "gelu_bert", "gelu_inner_half", "gelu_div_two", "gelu_tanh",
         "erf_over_two_stays"],
        {"sqrt2": sqrt2, "half_sqrt2": half_sqrt2, "one": 1.0, "half": 0.5, "two": 2.0,
         "kappa": 0.044715, "beta": math.sqrt(2.0 / math.pi)})

    def norm_core(p, axes, square_with_pow=True, sqrt=True):
        nodes = [N("ReduceMean", ["x"], [p + "m"], axes=axes),
                 N("Sub", ["x", p + "m"], [p + "d"])]
        nodes.append(N("Pow", [p + "d", "two"], [p + "s"]) if square_with_pow
                     else N("Mul", [p + "d", p + "d"], [p + "s"]))
        nodes += [N("ReduceMean", [p + "s"], [p + "v"], axes=axes),
                  N("Add", [p + "v", "eps"], [p + "ve"]),
                  N("Sqrt", [p + "ve"], [p + "sd"]),
                  N("Div", [p + "d", p + "sd"], [p + "n"])]
        return nodes

    model("onnx_layernorm",
          norm_core("a", [-1]) + [N("Mul", ["an", "w"], ["aw"]), N("Add", ["aw", "b"], ["layer_norm"])]
          + norm_core("c", [2], square_with_pow=False) + [N("Identity", ["cn"], ["no_affine"])]
          + norm_core("e", [1]) + [N("Identity", ["en"], ["middle_axis_stays"])],
          [("x", [2, 4, 8])], ["layer_norm", "no_affine", "middle_axis_stays"],
          {"two": 2.0, "eps": 1e-5, "w": rng.rand(8).round(2) + 0.5, "b": rng.randn(8).round(2)})
    return graphs


def write_golden(build, outdir):
    """Writes each golden graph as .tmir (weights inline) through tm-opt."""
    import subprocess
    import tempfile

    import onnx

    tm_opt = os.path.join(build, "tools", "tm-opt")
    with tempfile.TemporaryDirectory() as tmp:
        for name, m in golden_graphs().items():
            src = os.path.join(tmp, name + ".onnx")
            onnx.save(m, src)
            dst = os.path.join(outdir, name.replace("_", "-") + ".tmir")
            with open(dst, "w") as f:
                subprocess.run([tm_opt, src, "--inline-weights", "4096"], stdout=f, check=True)
            print("wrote", dst)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    if len(sys.argv) > 2 and sys.argv[1] == "--golden":
        write_golden(sys.argv[2], os.path.join(here, "..", "tests", "files", "transforms"))
        return
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "tests", "onnx", "idioms")
    os.makedirs(out, exist_ok=True)
    # The tracer's notes on shape arithmetic in forward() (static here).
    warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
    for i, (name, (cls, shape)) in enumerate(MODELS.items()):
        torch.manual_seed(100 + i)
        net = cls().eval()
        randomize(net)
        x = torch.randn(*shape)
        with torch.no_grad():
            y = net(x)
        path = os.path.join(out, name + ".onnx")
        torch.onnx.export(net, x, path, input_names=["x"], output_names=["y"],
                          opset_version=OPSET)
        np.save(os.path.join(out, name + "_x.npy"), x.numpy())
        np.save(os.path.join(out, name + "_y.npy"), y.numpy())
        print(f"wrote {path} ({os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    main()
