#!/usr/bin/env python3
"""The ONNX backend test suite (Debian's libonnx-testdata) through tm-run.

Every test directory's model.onnx runs on the suite's own files: each
test_data_set_0/input_N.pb is bound by position, each output_N.pb compared
with tm-run's default tolerances. Nothing is cast or bound as a constant.

The tests that do not pass are listed in FAILURES, one per line as
`suite/test<TAB>reason` (the reason is tm-run's first error line). The run
fails when a test that is not listed fails (a regression) or when a listed
test passes (the list is stale: remove the line). --update rewrites the
list from this run.

  suite_cli.py TM_RUN FAILURES [--data DIR] [--jobs N] [--update]
"""
import argparse
import concurrent.futures
import os
import re
import subprocess
import sys

SUITES = ("node", "pytorch-converted", "pytorch-operator")


def tests(data):
    for suite in SUITES:
        root = os.path.join(data, suite)
        if not os.path.isdir(root):
            continue
        for name in sorted(os.listdir(root)):
            d = os.path.join(root, name)
            if os.path.isfile(os.path.join(d, "model.onnx")):
                yield f"{suite}/{name}", d


def command(tm_run, d):
    sets = os.path.join(d, "test_data_set_0")
    args = [tm_run, os.path.join(d, "model.onnx")]
    i = 0
    while os.path.isfile(os.path.join(sets, f"input_{i}.pb")):
        args += ["-i", f"{i}={os.path.join(sets, f'input_{i}.pb')}"]
        i += 1
    o = 0
    while os.path.isfile(os.path.join(sets, f"output_{o}.pb")):
        args.append(f"--compare={o}={os.path.join(sets, f'output_{o}.pb')}")
        o += 1
    return args


def reason(output, data):
    """The first error or mismatch line, without the suite's paths."""
    for line in output.splitlines():
        if re.search(r"error|MISMATCH|OUTSIDE", line):
            return line.replace(data + "/", "").strip()[:200]
    lines = [l for l in output.splitlines() if l.strip()]
    return (lines[-1] if lines else "no output").strip()[:200]


def run(tm_run, data, name, d):
    try:
        p = subprocess.run(command(tm_run, d), capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return name, "timed out after 60 s"
    if p.returncode == 0:
        return name, None
    why = reason(p.stdout + p.stderr, data)
    if p.returncode < 0:
        why = f"crashed with signal {-p.returncode}: {why}"
    return name, why


def read_list(path):
    listed = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.rstrip("\n")
                if line and not line.startswith("#"):
                    name, _, why = line.partition("\t")
                    listed[name] = why
    return listed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tm_run")
    ap.add_argument("failures")
    ap.add_argument("--data", default="/usr/share/libonnx-testdata/data")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--update", action="store_true")
    a = ap.parse_args()
    if not os.path.isdir(a.data):
        print(f"error: no ONNX backend test data at {a.data}", file=sys.stderr)
        return 2
    todo = list(tests(a.data))
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        results = dict(pool.map(lambda t: run(a.tm_run, a.data, *t), todo))
    failed = {n: why for n, why in results.items() if why is not None}
    crashed = {n: why for n, why in failed.items() if why.startswith(("crashed", "timed out"))}
    passed = len(results) - len(failed)
    if a.update:
        with open(a.failures, "w") as f:
            f.write("# ONNX backend tests that tm-run does not pass, with tm-run's error\n"
                    "# (tests/onnx/suite_cli.py checks this list; --update rewrites it).\n")
            for n in sorted(failed):
                f.write(f"{n}\t{failed[n]}\n")
    listed = read_list(a.failures)
    regressions = sorted(n for n in failed if n not in listed)
    stale = sorted(n for n in listed if n in results and n not in failed)
    for n in regressions:
        print(f"REGRESSION {n}: {failed[n]}")
    for n in stale:
        print(f"NOW PASSES {n} (remove it from {os.path.basename(a.failures)})")
    for n in sorted(crashed):
        print(f"CRASH {n}: {crashed[n]}")
    print(f"{passed} passed, {len(failed)} failed of {len(results)}")
    return 1 if regressions or stale or crashed else 0


if __name__ == "__main__":
    sys.exit(main())
