#!/usr/bin/python3
"""Exports a torchvision model (random weights) to ONNX with PyTorch and
writes an input and PyTorch's output as .npy, for tm-run to compare.

Needs Debian's python3-torch and python3-torchvision (not needed by the
default test run). Usage:

    scripts/torch_resnet_onnx.py OUTDIR [--model resnet18] [--opset 13] [--batch 1] [--size 224]
    tm-run OUTDIR/resnet18.onnx -i input=OUTDIR/input.npy \
        --compare output=OUTDIR/output.npy --rtol 1e-4 --atol 1e-5

--model takes any classification model of torchvision.models (resnet50,
mobilenet_v3_large, efficientnet_b0, convnext_tiny, swin_t, vit_b_16, ...)
or a segmentation model of torchvision.models.segmentation (fcn_resnet50,
deeplabv3_mobilenet_v3_large, lraspp_mobilenet_v3_large); the output of a
segmentation model is its "out" map. scripts/torch_zoo.sh runs a list.
"""
import argparse
import os

import numpy as np
import torch
import torchvision


def build(name):
    kw = {"weights": None}
    ctor = getattr(torchvision.models, name, None)
    if ctor is None:
        ctor = getattr(torchvision.models.segmentation, name)
        kw["weights_backbone"] = None
    if name in ("googlenet", "inception_v3"):
        kw.update(aux_logits=False, init_weights=True)
    return ctor(**kw).eval()


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
    net = build(a.model)
    # Random, non-trivial batch-norm statistics (the defaults are 0 and 1),
    # and no all-zero parameters (ViT's head starts at zero: its output
    # would be 0 whatever the body computes).
    with torch.no_grad():
        for p in net.parameters():
            if p.numel() > 1 and not p.any():
                p.uniform_(-0.05, 0.05)
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    x = torch.randn(a.batch, 3, a.size, a.size)
    with torch.no_grad():
        y = net(x)
    if isinstance(y, dict):
        y = y["out"]
    path = os.path.join(a.outdir, a.model + ".onnx")
    torch.onnx.export(net, x, path, input_names=["input"], output_names=["output"],
                      opset_version=a.opset)
    np.save(os.path.join(a.outdir, "input.npy"), x.numpy())
    np.save(os.path.join(a.outdir, "output.npy"), y.numpy())
    print("wrote", path)


if __name__ == "__main__":
    main()
