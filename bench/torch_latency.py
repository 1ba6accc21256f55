#!/usr/bin/python3
"""PyTorch reference for tm-model-bench: ResNet-18 and MobileNetV2 latency.

Times torchvision's resnet18() and mobilenet_v2() (random init, eval mode,
no_grad, 1x3x224x224 float32) exactly as tm-model-bench times tmgraph: a
warm-up, then N timed runs, min and median in ms, one line per model in the
format tm-model-bench parses:

    <model> torch threads=<T> min=<ms> ms median=<ms> ms cpu=<ms> ms cpumin=<ms> ms

(cpu / cpumin: median / minimum process CPU time per run, all threads.)

With --dump DIR it instead writes ResNet-18's state_dict (one .npy per key,
batch-norm statistics randomised so they are not the identity), an input and
torch's output, for `tm-model-bench --weights DIR`.

Run with Debian's interpreter (/usr/bin/python3 + python3-torch).
"""
import argparse
import os
import time

import numpy as np
import torch
import torchvision


def randomize_bn(model):
    # Fresh torchvision models have mean 0 / var 1 / weight 1 / bias 0; the
    # cross-check should exercise every batch-norm term.
    g = torch.Generator().manual_seed(0)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            c = m.num_features
            m.weight.data = 1 + 0.1 * torch.randn(c, generator=g)
            m.bias.data = 0.1 * torch.randn(c, generator=g)
            m.running_mean = 0.1 * torch.randn(c, generator=g)
            m.running_var = 0.5 + 0.2 * torch.randn(c, generator=g).abs()


def time_model(model, x, warmup, repeat):
    with torch.no_grad():
        for _ in range(warmup):
            model(x)
        ms, cpu = [], []
        for _ in range(repeat):
            c0 = time.process_time()
            t0 = time.perf_counter()
            model(x)
            ms.append((time.perf_counter() - t0) * 1e3)
            cpu.append((time.process_time() - c0) * 1e3)
    ms.sort()
    cpu.sort()
    return ms[0], ms[len(ms) // 2], cpu[len(cpu) // 2], cpu[0]


def dump(out_dir):
    torch.manual_seed(0)
    model = torchvision.models.resnet18().eval()
    randomize_bn(model)
    os.makedirs(out_dir, exist_ok=True)
    for key, t in model.state_dict().items():
        if t.dtype == torch.float32:
            np.save(os.path.join(out_dir, key + ".npy"), t.numpy())
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        y = model(x)
    np.save(os.path.join(out_dir, "input.npy"), x.numpy())
    np.save(os.path.join(out_dir, "output.npy"), y.numpy())
    print(f"wrote resnet18 weights, input.npy and output.npy to {out_dir}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--dump", metavar="DIR")
    args = p.parse_args()
    if args.dump:
        dump(args.dump)
        return
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x = torch.randn(1, 3, 224, 224)
    for name, ctor in (("resnet18", torchvision.models.resnet18),
                       ("mobilenet_v2", torchvision.models.mobilenet_v2)):
        model = ctor().eval()
        lo, med, cpu, cpu_min = time_model(model, x, args.warmup, max(1, args.repeat))
        print(f"{name:<12} {'torch':<13} threads={args.threads} "
              f"min={lo:.2f} ms median={med:.2f} ms cpu={cpu:.2f} ms "
              f"cpumin={cpu_min:.2f} ms", flush=True)


if __name__ == "__main__":
    main()
