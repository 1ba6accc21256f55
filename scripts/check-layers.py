#!/usr/bin/env python3
"""Lists includes and Meson dependencies that go up the layers.

Usage: check-layers.py ROOT

Each layer's sources (ROOT/<layer>/ and ROOT/include/tm/<layer>/) may
include the headers of the layers LAYERS allows it and of its own, and its
meson.build may name only those layers' dependency objects (tm_*_dep). A
layer sits below the layers that use it: the matcher below passes, passes
below the tools (DESIGN.md, "Layout and layers").

Exit status: 0 when no layer reaches up, 1 otherwise (one line per
offender: path:line: what it uses and what the layer may use), 2 on a usage
error.
"""
import os
import re
import sys

# layer -> the other layers it may use. trace/ is the tracer of the IR
# layer, transforms/ holds the builtin optimisation passes.
LAYERS = {
    "ir": set(),
    "runtime": {"ir"},
    "trace": {"ir", "runtime"},
    "matcher": {"ir"},
    "passes": {"ir", "matcher", "runtime"},
    "transforms": {"ir", "matcher", "runtime", "passes"},
    "io": {"ir", "runtime"},
}

# The Meson dependency object of each layer's library.
DEPS = {
    "tm_ir_dep": "ir", "tm_graphview_dep": "ir", "tm_rt_dep": "runtime",
    "tm_trace_dep": "trace", "tm_matcher_dep": "matcher",
    "tm_passes_dep": "passes", "tm_transforms_dep": "transforms",
    "tm_io_dep": "io",
}

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]')
# tm/InitAllPasses.h registers every layer's passes: for programs only.
TOP_HEADERS = {"tm/InitAllPasses.h": "tools", "tm/Context.h": "tools"}


def layer_of_include(path, src_dir, root):
    """The layer an include names, or None for a header of no layer."""
    if path in TOP_HEADERS:
        return TOP_HEADERS[path]
    m = re.match(r"tm/([a-z]+)/", path)
    if m:
        return m.group(1)
    # A relative include that leaves the folder: the folder it lands in.
    target = os.path.relpath(os.path.normpath(os.path.join(src_dir, path)), root)
    first = target.split(os.sep)[0]
    if first in LAYERS and not target.startswith(".."):
        return first
    return None


def check_sources(root, layer, offenders):
    allowed = LAYERS[layer] | {layer}
    for base in (os.path.join(root, layer), os.path.join(root, "include", "tm", layer)):
        for dirpath, _, files in os.walk(base):
            for f in sorted(files):
                if not f.endswith((".cpp", ".h", ".inc", ".def")):
                    continue
                path = os.path.join(dirpath, f)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    for n, line in enumerate(fh, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        used = layer_of_include(m.group(1), dirpath, root)
                        if used is not None and used not in allowed:
                            offenders.append(
                                f"{os.path.relpath(path, root)}:{n}: {layer} includes "
                                f"'{m.group(1)}' (layer {used}); {layer} may use "
                                f"{', '.join(sorted(LAYERS[layer])) or 'no other layer'}")


def check_meson(root, layer, offenders):
    allowed = LAYERS[layer] | {layer}
    path = os.path.join(root, layer, "meson.build")
    if not os.path.exists(path):
        return
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            code = line.split("#", 1)[0]
            for dep in re.findall(r"\btm_[a-z]+_dep\b", code):
                used = DEPS.get(dep)
                # `tm_x_dep = declare_dependency(` defines the layer's own.
                if used is not None and used not in allowed:
                    offenders.append(
                        f"{os.path.relpath(path, root)}:{n}: {layer} depends on {dep} "
                        f"(layer {used}); {layer} may use "
                        f"{', '.join(sorted(LAYERS[layer])) or 'no other layer'}")


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[1]
    offenders = []
    for layer in LAYERS:
        check_sources(root, layer, offenders)
        check_meson(root, layer, offenders)
    for o in offenders:
        print(o)
    return 1 if offenders else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
