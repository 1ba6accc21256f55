#!/usr/bin/python3
"""Mutation campaign: hostile variants of real files through tm-opt and tm-run.

Takes seed files of every format tmgraph reads (.onnx models of tests/ and of
the ONNX suite in /usr/share/libonnx-testdata, .tmir files of tests/, the
.safetensors weights tm-opt writes for them, .npy arrays and ONNX TensorProto
.pb inputs), mutates each many times and runs every mutant through

    tm-opt MUTANT -o OUT.tmir
    tm-opt -p optimize MUTANT -o OUT.tmir
    tm-run MUTANT --random-inputs --max-tensor-bytes=N --max-model-bytes=M

(for .safetensors the .tmir that names them is run; for .npy and .pb the
mutant is a bound input or a --compare reference of tm-run). Each run is

    ok      exit 0
    error   exit 2 with "error" on stderr (a clean refusal), or exit 1
            (outputs differ from a --compare reference)
    crash   anything else: a signal, exit 3 ("internal error"), another exit
            code, a sanitizer report, a timeout, an exit 2 without message

Crashes are grouped by a signature (kind + first project frame of the
sanitizer stack, or the message) and one reproducer per signature, the
smallest seen, is written to OUT/crashes/<signature>/ with the command and
its stderr. A summary (per format: mutants, runs, outcomes) is printed and
written to OUT/summary.json.

Mutations: bit flips, interesting bytes, truncation, insertion, duplication,
splicing with another seed of the same format; structure-aware: protobuf
fields (huge and negative varints in any field, deleted, duplicated,
truncated or grown fields, at any depth), .tmir numbers (INT64 extremes,
huge dims, ids), lines and tokens, .npy headers (shape, descr, order,
header length), .safetensors headers (length prefix, dtype, shape,
data_offsets) and data.

Only the standard library is needed. Build the tools with ASan+UBSan first
(docs/testing.md); a run of 2 jobs for an hour:

    /usr/bin/python3 scripts/mutate-campaign.py --build build-fuzz --jobs 2 --time 3600

A single mutant is reproduced with --only FORMAT --first I --count 1.
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ONNX_SUITE = "/usr/share/libonnx-testdata/data"

INT_EXTREMES = [0, 1, -1, 2, 255, 256, 65535, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**32 + 1,
                2**40, 2**53, 2**61, 2**62, 2**62 - 1, 2**63 - 1, -2**63, -2**31,
                -2**62, 3000000000]
TEXT_NUMBERS = [str(v) for v in INT_EXTREMES] + [
    "9223372036854775808", "-9223372036854775809", "18446744073709551616",
    "99999999999999999999999", "1e308", "-1e308", "1e-320", "nan", "inf", "-inf",
    "0x7fffffffffffffff", "0.5", "-0"]


# --- protobuf wire format --------------------------------------------------

def read_varint(buf, pos):
    shift = result = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("bad varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def pb_parse(buf):
    """[(field, wiretype, value)] or None when buf is not a whole message."""
    fields = []
    pos = 0
    try:
        while pos < len(buf):
            key, pos = read_varint(buf, pos)
            field, wt = key >> 3, key & 7
            if field == 0:
                return None
            if wt == 0:
                v, pos = read_varint(buf, pos)
            elif wt == 1:
                v = buf[pos:pos + 8]
                pos += 8
            elif wt == 2:
                n, pos = read_varint(buf, pos)
                v = buf[pos:pos + n]
                pos += n
            elif wt == 5:
                v = buf[pos:pos + 4]
                pos += 4
            else:
                return None
            if pos > len(buf):
                return None
            fields.append([field, wt, v])
    except ValueError:
        return None
    return fields


def pb_write(fields):
    out = bytearray()
    for field, wt, v in fields:
        out += varint((field << 3) | wt)
        if wt == 0:
            out += varint(v)
        elif wt == 2:
            out += varint(len(v)) + v
        else:
            out += v
    return bytes(out)


def packed_varints(buf):
    vals, pos = [], 0
    try:
        while pos < len(buf):
            v, pos = read_varint(buf, pos)
            vals.append(v)
    except ValueError:
        return None
    return vals


def pb_mutate_field(rng, fields):
    i = rng.randrange(len(fields))
    field, wt, v = fields[i]
    r = rng.random()
    if r < 0.08:
        del fields[i]
        return
    if r < 0.14:
        fields.insert(i, list(fields[i]))
        return
    if wt == 0:
        fields[i][2] = rng.choice(INT_EXTREMES) & ((1 << 64) - 1)
    elif wt in (1, 5):
        n = len(v)
        choices = [b"\xff" * n, b"\x00" * n, b"\x7f" + b"\xff" * (n - 1),
                   (struct.pack("<d", float("nan")) if n == 8 else struct.pack("<f", float("inf"))),
                   bytes(rng.randrange(256) for _ in range(n))]
        fields[i][2] = rng.choice(choices)
    else:
        vals = packed_varints(v) if v else None
        if vals and rng.random() < 0.4:
            vals[rng.randrange(len(vals))] = rng.choice(INT_EXTREMES) & ((1 << 64) - 1)
            fields[i][2] = b"".join(varint(x) for x in vals)
        elif rng.random() < 0.5 and v:
            fields[i][2] = v[:rng.randrange(len(v))]
        elif rng.random() < 0.5:
            fields[i][2] = v + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 16)))
        else:
            fields[i][2] = b"".join(varint(rng.choice(INT_EXTREMES) & ((1 << 64) - 1))
                                    for _ in range(rng.randrange(1, 5)))


def pb_mutate(rng, buf, depth=0):
    fields = pb_parse(buf)
    if not fields:
        return None
    # Descend into a nested message most of the time: dims, types and
    # attributes live several levels down.
    nested = [i for i, f in enumerate(fields) if f[1] == 2 and len(f[2]) > 1]
    rng.shuffle(nested)
    if depth < 8 and nested and rng.random() < 0.8:
        for i in nested[:4]:
            sub = pb_mutate(rng, fields[i][2], depth + 1)
            if sub is not None:
                fields[i][2] = sub
                return pb_write(fields)
    pb_mutate_field(rng, fields)
    return pb_write(fields)


# --- byte-level -------------------------------------------------------------

def byte_mutate(rng, data, others):
    data = bytearray(data)
    r = rng.random()
    if not data:
        return bytes(rng.randrange(256) for _ in range(8))
    if r < 0.30:
        for _ in range(rng.randrange(1, 9)):
            p = rng.randrange(len(data))
            data[p] ^= 1 << rng.randrange(8)
    elif r < 0.45:
        for _ in range(rng.randrange(1, 4)):
            data[rng.randrange(len(data))] = rng.choice([0, 0xFF, 0x7F, 0x80, 0x01, 0xFE])
    elif r < 0.60:
        del data[rng.randrange(len(data)):]
    elif r < 0.70:
        p = rng.randrange(len(data) + 1)
        data[p:p] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 32)))
    elif r < 0.80:
        a = rng.randrange(len(data))
        b = min(len(data), a + rng.randrange(1, 64))
        p = rng.randrange(len(data) + 1)
        data[p:p] = data[a:b]
    elif r < 0.88:
        a = rng.randrange(len(data))
        b = min(len(data), a + rng.randrange(1, 64))
        del data[a:b]
    else:
        other = rng.choice(others) if others else bytes(data)
        p = rng.randrange(len(data) + 1)
        q = rng.randrange(len(other) + 1)
        data = data[:p] + other[q:]
    return bytes(data)


# --- text (.tmir) -----------------------------------------------------------

NUM_RE = re.compile(rb"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
DTYPES = [b"float32", b"float16", b"float64", b"int8", b"uint8", b"int32", b"int64",
          b"bool", b"bfloat16", b"complex64", b"str"]
TOKENS = [b"(", b")", b"[", b"]", b"{", b"}", b",", b"=", b"%", b"'", b"\"", b"#", b";;",
          b"\n", b"\t", b"None", b"True", b"param(", b"buffer(", b"builtin", b"module",
          b"graph", b"return", b"getattr", b"@'x'", b"..."]


def tmir_mutate(rng, data, others):
    r = rng.random()
    if r < 0.40:
        nums = list(NUM_RE.finditer(data))
        if nums:
            m = rng.choice(nums)
            new = rng.choice(TEXT_NUMBERS).encode()
            return data[:m.start()] + new + data[m.end():]
    if r < 0.50:
        ids = list(re.finditer(rb"%(\d+)|#(\d+)", data))
        if ids:
            m = rng.choice(ids)
            g = 1 if m.group(1) is not None else 2
            new = rng.choice([b"9223372036854775807", b"9223372036854775806", b"-1",
                              b"4611686018427387904", b"0", str(rng.randrange(64)).encode()])
            return data[:m.start(g)] + new + data[m.end(g):]
    if r < 0.58:
        shapes = list(re.finditer(rb"\(([\d, ]*)\)", data))
        if shapes:
            m = rng.choice(shapes)
            dims = b", ".join(rng.choice(TEXT_NUMBERS[:22]).encode()
                              for _ in range(rng.randrange(0, 5)))
            return data[:m.start(1)] + dims + data[m.end(1):]
    if r < 0.63:
        dts = [m for d in DTYPES for m in re.finditer(re.escape(d), data)]
        if dts:
            m = rng.choice(dts)
            return data[:m.start()] + rng.choice(DTYPES) + data[m.end():]
    lines = data.split(b"\n")
    if r < 0.75 and len(lines) > 1:
        i = rng.randrange(len(lines))
        op = rng.random()
        if op < 0.5:
            del lines[i]
        elif op < 0.75:
            lines.insert(i, lines[rng.randrange(len(lines))])
        else:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        return b"\n".join(lines)
    if r < 0.85 and data:
        p = rng.randrange(len(data))
        if rng.random() < 0.5:
            return data[:p] + rng.choice(TOKENS) + data[p:]
        return data[:p] + data[p + rng.randrange(1, 8):]
    return byte_mutate(rng, data, others)


# --- .npy -------------------------------------------------------------------

NPY_DESCR = ["<f4", "<f8", ">f4", "<f2", "<i8", "<i4", "|u1", "|i1", "|b1", "<u8", "<c8",
             "O", "<U3", "|S0", "V4", "<M8[s]", "<f16", "f4", ""]


def npy_mutate(rng, data, others):
    if data[:6] != b"\x93NUMPY" or len(data) < 10 or rng.random() < 0.3:
        return byte_mutate(rng, data, others)
    major = data[6]
    if major == 1:
        hlen = struct.unpack("<H", data[8:10])[0]
        start = 10
    else:
        hlen = struct.unpack("<I", data[8:12])[0]
        start = 12
    header = data[start:start + hlen]
    body = data[start + hlen:]
    r = rng.random()
    if r < 0.45:
        dims = [rng.choice(INT_EXTREMES + [0, 1, 2, 3, 4]) for _ in range(rng.randrange(0, 5))]
        shape = "(" + ", ".join(str(d) for d in dims) + ("," if len(dims) == 1 else "") + ")"
        header = re.sub(rb"'shape': \([^)]*\)", b"'shape': " + shape.encode(), header)
    elif r < 0.65:
        header = re.sub(rb"'descr': '[^']*'",
                        b"'descr': '" + rng.choice(NPY_DESCR).encode() + b"'", header)
    elif r < 0.72:
        header = header.replace(b"False", b"True") if b"False" in header else \
            header.replace(b"True", b"False")
    elif r < 0.82:
        return data[:8] + struct.pack("<H", rng.choice([0, 1, 0xFFFF, hlen + 1, hlen - 1]) & 0xFFFF) + data[10:]
    elif r < 0.90:
        body = body[:rng.randrange(len(body) + 1)]
    else:
        header = tmir_mutate(rng, header, [])
    pad = (-(start + len(header)) % 64) if rng.random() < 0.8 else 0
    header = header.rstrip(b"\n ") + b" " * max(0, pad - 1) + b"\n"
    if major == 1:
        return data[:8] + struct.pack("<H", len(header) & 0xFFFF) + header + body
    return data[:8] + struct.pack("<I", len(header)) + header + body


# --- .safetensors -------------------------------------------------------------

ST_DTYPES = ["F32", "F16", "BF16", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL", "U64",
             "F8_E4M3", "XX", ""]


def safetensors_mutate(rng, data, others):
    if len(data) < 8 or rng.random() < 0.3:
        return byte_mutate(rng, data, others)
    n = struct.unpack("<Q", data[:8])[0]
    header, body = data[8:8 + n], data[8 + n:]
    r = rng.random()
    if r < 0.15:
        v = rng.choice([0, 1, 2, n + 1, n - 1, len(data), 2**32, 2**63 - 1, 2**64 - 1,
                        2**63]) & ((1 << 64) - 1)
        return struct.pack("<Q", v) + data[8:]
    try:
        meta = json.loads(header)
    except ValueError:
        return byte_mutate(rng, data, others)
    if not isinstance(meta, dict):
        return byte_mutate(rng, data, others)
    keys = [k for k in meta if k != "__metadata__" and isinstance(meta[k], dict)]
    if not keys:
        return byte_mutate(rng, data, others)
    k = rng.choice(keys)
    e = meta[k]
    if r < 0.40:
        e["shape"] = [rng.choice(INT_EXTREMES[:14] + [0, 1, 2, 4, 2**62, 2**63 - 1])
                      for _ in range(rng.randrange(0, 5))]
    elif r < 0.55:
        e["dtype"] = rng.choice(ST_DTYPES)
    elif r < 0.72:
        offs = e.get("data_offsets")
        if not isinstance(offs, list) or len(offs) != 2:
            offs = [0, 0]
        j = rng.randrange(2)
        offs[j] = rng.choice([0, 1, 3, len(body), len(body) + 1, 2**32, 2**63 - 1, 2**64 - 1,
                              -1, offs[1 - j]])
        e["data_offsets"] = offs
    elif r < 0.80 and e:
        del e[rng.choice(list(e))]
    elif r < 0.86:
        del meta[k]
    elif r < 0.92:
        meta[k] = rng.choice([None, 1, "x", [], {"dtype": "F32"}])
    else:
        body = body[:rng.randrange(len(body) + 1)]
    h = json.dumps(meta).encode()
    return struct.pack("<Q", len(h)) + h + body


# --- seeds and runs ---------------------------------------------------------

def onnx_suite_models(n):
    """n small ONNX suite models, evenly spread over the sorted list."""
    found = []
    for dirpath, _, files in os.walk(ONNX_SUITE):
        if "model.onnx" in files:
            p = os.path.join(dirpath, "model.onnx")
            if os.path.getsize(p) < 256 * 1024:
                found.append(p)
    found.sort()
    if len(found) <= n:
        return found
    step = len(found) / n
    return [found[int(i * step)] for i in range(n)]


def tests_files(ext, exclude=("hostile",)):
    out = []
    for sub in ("tests", "examples", "fuzz/corpus"):
        for dirpath, dirs, files in os.walk(os.path.join(ROOT, sub)):
            dirs[:] = sorted(d for d in dirs if d not in exclude)
            out += [os.path.join(dirpath, f) for f in sorted(files) if f.endswith(ext)]
    return out


class Campaign:
    def __init__(self, args):
        self.args = args
        self.opt = os.path.abspath(os.path.join(args.build, "tools", "tm-opt"))
        self.run = os.path.abspath(os.path.join(args.build, "tools", "tm-run"))
        self.out = os.path.abspath(args.out)
        os.makedirs(os.path.join(self.out, "crashes"), exist_ok=True)
        self.work = tempfile.mkdtemp(prefix="tm-campaign-")
        self.lock = threading.Lock()
        self.env = dict(os.environ)
        self.env["ASAN_OPTIONS"] = ("detect_leaks=1:abort_on_error=1:allocator_may_return_null=1:"
                                    "max_allocation_size_mb=2048:hard_rss_limit_mb=3072:"
                                    "handle_abort=1:symbolize=1")
        self.env["UBSAN_OPTIONS"] = "halt_on_error=1:abort_on_error=1:print_stacktrace=1"
        self.env["OMP_NUM_THREADS"] = "1"
        self.limits = ["--max-tensor-bytes=%d" % args.max_tensor_bytes,
                       "--max-model-bytes=%d" % (4 * args.max_tensor_bytes)]

    def seeds(self):
        s = {}
        tmir = [p for p in tests_files(".tmir")]
        s["tmir"] = tmir
        onnx = tests_files(".onnx") + onnx_suite_models(self.args.suite_models)
        s["onnx"] = onnx
        # Weights: tm-opt writes a .safetensors beside every .tmir with params.
        st = []
        seeddir = os.path.join(self.work, "seeds")
        os.makedirs(seeddir)
        for i, p in enumerate(tmir):
            dst = os.path.join(seeddir, "w%d.tmir" % i)
            if subprocess.run([self.opt, p, "-o", dst], env=self.env,
                              capture_output=True).returncode != 0:
                continue
            w = dst[:-5] + ".safetensors"
            if os.path.exists(w):
                st.append((w, dst))
        s["safetensors"] = st
        # .npy: inputs (x) and references (y) of the ONNX models beside them.
        npy = []
        for p in tests_files(".npy"):
            m = re.match(r"(.*)_([xy])\.npy$", p)
            if m and os.path.exists(m.group(1) + ".onnx"):
                npy.append((p, m.group(1) + ".onnx", m.group(2), m.group(1) + "_x.npy"))
        s["npy"] = npy
        # ONNX TensorProto inputs of the suite models.
        pb = []
        for model in onnx_suite_models(self.args.suite_models):
            d = os.path.join(os.path.dirname(model), "test_data_set_0")
            x = os.path.join(d, "input_0.pb")
            for f in ("input_0.pb", "output_0.pb"):
                if os.path.exists(os.path.join(d, f)):
                    pb.append((os.path.join(d, f), model, "x" if f.startswith("in") else "y", x))
        s["pb"] = pb
        return s

    def mutate(self, fmt, rng, data, others):
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            try:
                data = self.mutate_once(fmt, rng, data, others)
            except (ValueError, TypeError, KeyError, IndexError, struct.error):
                data = byte_mutate(rng, data, others)
        return data

    @staticmethod
    def mutate_once(fmt, rng, data, others):
        if fmt in ("onnx", "pb") and rng.random() < 0.7:
            m = pb_mutate(rng, data)
            return m if m is not None else byte_mutate(rng, data, others)
        if fmt == "tmir":
            return tmir_mutate(rng, data, others)
        if fmt == "npy":
            return npy_mutate(rng, data, others)
        if fmt == "safetensors":
            return safetensors_mutate(rng, data, others)
        return byte_mutate(rng, data, others)

    def commands(self, fmt, seed, path, d):
        """[(label, argv)] for one mutant written at path."""
        run_opts = ["--random-inputs", "--seed=1"] + self.limits
        out = os.path.join(d, "out.tmir")
        if fmt in ("tmir", "onnx", "safetensors"):
            model = path
            if fmt == "safetensors":
                model = os.path.join(d, "m.tmir")
            return [("tm-opt", [self.opt, model, "-o", out] + self.limits),
                    ("tm-opt -p optimize", [self.opt, "-p", "optimize", model, "-o", out]
                     + self.limits),
                    ("tm-run", [self.run, model] + run_opts)]
        _, model, role, x = seed
        if role == "x":
            return [("tm-run", [self.run, model, "-i", "0=" + path] + run_opts)]
        return [("tm-run", [self.run, model, "-i", "0=" + x, "--compare", "0=" + path]
                 + run_opts)]

    def one(self, fmt, seed, index, data):
        d = os.path.join(self.work, "m%d" % index)
        os.makedirs(d)
        ext = {"safetensors": ".safetensors"}.get(fmt, "." + fmt)
        if fmt == "safetensors":
            w, tm = seed
            path = os.path.join(d, "m.safetensors")
            with open(tm, "rb") as f:
                text = f.read()
            text = re.sub(rb"weights '[^']*'", b"weights 'm.safetensors'", text)
            with open(os.path.join(d, "m.tmir"), "wb") as f:
                f.write(text)
        else:
            path = os.path.join(d, "m" + ext)
        with open(path, "wb") as f:
            f.write(data)
        results = []
        skip_optimize = False
        for label, argv in self.commands(fmt, seed, path, d):
            if label == "tm-opt -p optimize" and skip_optimize:
                results.append((label, "skipped", "", argv))
                continue
            kind, err = self.execute(argv, d)
            if label == "tm-opt" and kind == "error":
                # The same reader refuses the file before any pass runs.
                skip_optimize = True
            results.append((label, kind, err, argv))
        crashes = [r for r in results if r[1] not in ("ok", "error", "skipped")]
        with self.lock:
            for label, kind, err, argv in crashes:
                self.save_crash(fmt, kind, err, argv, path, d)
        shutil.rmtree(d, ignore_errors=True)
        return results

    def execute(self, argv, cwd):
        for attempt in range(3):
            try:
                p = subprocess.run(argv, cwd=cwd, env=self.env, capture_output=True,
                                   timeout=self.args.timeout, start_new_session=True)
                break
            except subprocess.TimeoutExpired as e:
                return "timeout", (e.stderr or b"").decode("utf-8", "replace")
            except OSError:
                # The tool is being relinked: try again.
                if attempt == 2:
                    raise
                time.sleep(5)
        err = p.stderr.decode("utf-8", "replace")
        rc = p.returncode
        if "ERROR: AddressSanitizer" in err or "ERROR: LeakSanitizer" in err:
            return "asan", err
        if "runtime error:" in err:
            return "ubsan", err
        if rc < 0:
            return "signal-%s" % signal.Signals(-rc).name, err
        if rc == 0:
            return "ok", err
        if rc == 1:
            # Outputs differ (--compare): the report is on stdout.
            return "error", err
        if rc == 2:
            return ("error", err) if "error" in err else ("no-message", err)
        if rc == 3:
            return "internal-error", err
        return "exit-%d" % rc, err

    def signature(self, kind, err):
        frames = re.findall(r"#\d+ 0x[0-9a-f]+ in (\S+) (\S*?)(?:/work/[^/]+/)?([a-z][\w/]*\.(?:cpp|h)):(\d+)", err)
        own = [f for f in frames if not f[2].startswith(("llvm/", "c++/", "bits/"))]
        if own:
            key = "%s %s:%s" % (own[0][0][:60], own[0][2], own[0][3])
        else:
            m = re.search(r"(runtime error: .*|internal error: .*|ERROR: \w+Sanitizer: [\w-]+)", err)
            key = m.group(1)[:120] if m else err.strip().splitlines()[-1][:120] if err.strip() else ""
            key = re.sub(r"\d+", "N", key)
        return kind, key

    def save_crash(self, fmt, kind, err, argv, path, d):
        kind, key = self.signature(kind, err)
        h = hashlib.sha1((kind + key).encode()).hexdigest()[:10]
        cd = os.path.join(self.out, "crashes", "%s-%s-%s" % (fmt, kind, h))
        size = os.path.getsize(path)
        old = os.path.join(cd, "size")
        if os.path.exists(old):
            with open(old) as f:
                if int(f.read()) <= size:
                    with open(os.path.join(cd, "count"), "a") as c:
                        c.write("x")
                    return
        os.makedirs(cd, exist_ok=True)
        for f in os.listdir(d):
            if f.startswith("m."):
                shutil.copy(os.path.join(d, f), cd)
        with open(old, "w") as f:
            f.write(str(size))
        with open(os.path.join(cd, "count"), "a") as c:
            c.write("x")
        with open(os.path.join(cd, "cmd.txt"), "w") as f:
            f.write("%s\n%s\n" % (key, " ".join(argv)))
        with open(os.path.join(cd, "stderr.txt"), "w") as f:
            f.write(err[-20000:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build-fuzz", help="build dir with tools/tm-opt, tm-run")
    ap.add_argument("--out", default="build-fuzz/campaign", help="crashes and summary go here")
    ap.add_argument("--count", type=int, default=20000, help="mutants in all")
    ap.add_argument("--time", type=float, default=0, help="stop after SECONDS (0: no limit)")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--first", type=int, default=0, help="index of the first mutant")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per run")
    ap.add_argument("--max-tensor-bytes", type=int, default=64 << 20)
    ap.add_argument("--suite-models", type=int, default=50, help="ONNX suite models as seeds")
    ap.add_argument("--only", action="append", help="only these formats (repeatable)")
    ap.add_argument("--weights", default="onnx=5,tmir=4,safetensors=2,npy=2,pb=2",
                    help="share of mutants per format")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    args.out = os.path.abspath(args.out)
    os.chdir(ROOT)
    c = Campaign(args)
    seeds = c.seeds()
    weights = dict((k, int(v)) for k, v in (w.split("=") for w in args.weights.split(",")))
    formats = [f for f in weights if seeds.get(f) and (not args.only or f in args.only)]
    plan = [f for f in formats for _ in range(weights[f])]
    blobs = {}
    for f in formats:
        blobs[f] = []
        for s in seeds[f]:
            p = s[0] if isinstance(s, tuple) else s
            with open(p, "rb") as fh:
                blobs[f].append(fh.read())
    print("seeds: " + ", ".join("%s %d" % (f, len(seeds[f])) for f in formats), flush=True)

    stats = {f: {"mutants": 0, "runs": 0} for f in formats}
    start = time.time()

    def job(i):
        rng = random.Random(args.seed * 1000003 + i)
        fmt = plan[i % len(plan)]
        k = rng.randrange(len(seeds[fmt]))
        data = c.mutate(fmt, rng, blobs[fmt][k], blobs[fmt])
        return fmt, c.one(fmt, seeds[fmt][k], i, data)

    done = 0
    stop = []
    # SIGTERM and ^C stop handing out mutants; the summary is still written.
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    try:
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
            pending = set()
            i = args.first
            while True:
                while len(pending) < 2 * args.jobs and i < args.first + args.count and \
                        not stop and not (args.time and time.time() - start > args.time):
                    pending.add(ex.submit(job, i))
                    i += 1
                if not pending:
                    break
                finished, pending = concurrent.futures.wait(
                    pending, return_when=concurrent.futures.FIRST_COMPLETED)
                for fu in finished:
                    fmt, results = fu.result()
                    st = stats[fmt]
                    st["mutants"] += 1
                    for label, kind, _, _ in results:
                        if kind != "skipped":
                            st["runs"] += 1
                        bucket = kind if kind in ("ok", "error", "skipped") else "crash"
                        st[bucket] = st.get(bucket, 0) + 1
                        if bucket == "crash":
                            st.setdefault("crash_kinds", {})
                            st["crash_kinds"][kind] = st["crash_kinds"].get(kind, 0) + 1
                    done += 1
                    if done % 200 == 0:
                        print("%d mutants, %.0f s" % (done, time.time() - start), flush=True)
    finally:
        shutil.rmtree(c.work, ignore_errors=True)
    elapsed = time.time() - start
    summary = {"mutants": done, "seconds": round(elapsed), "first": args.first,
               "seed": args.seed, "per_format": stats,
               "crash_dirs": sorted(os.listdir(os.path.join(c.out, "crashes")))}
    with open(os.path.join(c.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print("%d mutants in %.0f s" % (done, elapsed))
    for f, st in stats.items():
        print("  %-12s %6d mutants %6d runs: ok %d, error %d, skipped %d, crash %d %s" % (
            f, st["mutants"], st["runs"], st.get("ok", 0), st.get("error", 0),
            st.get("skipped", 0), st.get("crash", 0), st.get("crash_kinds", "")))
    crashes = summary["crash_dirs"]
    print("crash signatures: %d" % len(crashes))
    for cdir in crashes:
        print("  " + cdir)
    return 1 if any(st.get("crash") for st in stats.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
