#!/usr/bin/python3
"""Exports a torchvision ResNet (random weights) to ONNX with PyTorch and
writes an input and PyTorch's output as .npy, for tm-run to compare.

Needs Debian's python3-torch and python3-torchvision (not needed by the
default test run). Usage:

    scripts/torch_resnet_onnx.py OUTDIR [--model resnet18] [--opset 13] [--batch 1]
    tm-run OUTDIR/resnet18.onnx -i input=OUTDIR/input.npy \
        --compare output=OUTDIR/output.npy --rtol 1e-4 --atol 1e-5
"""
import argparse
import os

import numpy as np
import torch
import torchvision


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--opset", type=int, default=13)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--size", type=int, default=224)
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    torch.manual_seed(0)
    net = getattr(torchvision.models, a.model)(weights=None).eval()
    # Random, non-trivial batch-norm statistics (the defaults are 0 and 1).
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    x = torch.randn(a.batch, 3, a.size, a.size)
    with torch.no_grad():
        y = net(x)
    path = os.path.join(a.outdir, a.model + ".onnx")
    torch.onnx.export(net, x, path, input_names=["input"], output_names=["output"],
                      opset_version=a.opset)
    np.save(os.path.join(a.outdir, "input.npy"), x.numpy())
    np.save(os.path.join(a.outdir, "output.npy"), y.numpy())
    print("wrote", path)


if __name__ == "__main__":
    main()
