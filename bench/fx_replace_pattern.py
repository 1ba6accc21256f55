#!/usr/bin/python3
"""torch.fx's replace_pattern on the graph tm-pattern-bench rewrites.

A chain of N/2 `relu(add(x, y))` pairs (N nodes besides placeholders and
output); the pattern relu(add(x, y)) is replaced by clamp(add(x, y), min=0).
Prints one JSON line: {"exprs": N, "seconds": ..., "replaced": ...}
(seconds of CPU time of the replace_pattern call).
Run with Debian's python3-torch: /usr/bin/python3 fx_replace_pattern.py 10000
"""
import json
import sys
import threading
import time

import torch
import torch.fx
from torch.fx import subgraph_rewriter


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
    pairs = n // 2

    class Chain(torch.nn.Module):
        def forward(self, x, y):
            for _ in range(pairs):
                x = torch.relu(torch.add(x, y))
            return x

    gm = torch.fx.symbolic_trace(Chain())

    def pattern(x, y):
        return torch.relu(torch.add(x, y))

    def replacement(x, y):
        return torch.clamp(torch.add(x, y), min=0.0)

    x, y = torch.randn(2, 3), torch.randn(2, 3)
    want = gm(x, y)
    # CPU time, as tm-pattern-bench measures (the machine may be shared).
    start = time.process_time()
    matches = subgraph_rewriter.replace_pattern(gm, pattern, replacement)
    seconds = time.process_time() - start
    got = gm(x, y)
    assert torch.allclose(want, got), "the rewrite changed the result"
    print(json.dumps({"exprs": 2 * pairs, "seconds": seconds, "replaced": len(matches)}))


if __name__ == "__main__":
    # torch.fx validates each match with a recursive walk over all later
    # nodes (which is what makes it quadratic on a chain): give it the
    # recursion depth and the stack that needs.
    sys.setrecursionlimit(1000000)
    threading.stack_size(1 << 29)
    t = threading.Thread(target=main)
    t.start()
    t.join()
