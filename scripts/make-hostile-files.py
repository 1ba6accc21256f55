#!/usr/bin/python3
"""Writes the hostile regression inputs of tests/files/hostile/.

Each file is a small, otherwise well-formed model or array with one thing
wrong that used to crash tm-opt or tm-run (issue 28); tests/tools/
test_hostile.sh runs both tools on every one and expects a clear error.

    /usr/bin/python3 scripts/make-hostile-files.py   # needs python3-onnx
"""
import os
import struct
import sys

import onnx
from onnx import TensorProto, helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "files", "hostile")


def save_model(name, nodes, inputs, outputs, initializers=(), opset=13):
    graph = helper.make_graph(nodes, name.replace("-", "_"), inputs, outputs,
                              initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="make-hostile-files")
    with open(os.path.join(OUT, name + ".onnx"), "wb") as f:
        f.write(model.SerializeToString())


def float_io(name, dims):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def onnx_files():
    # Element counts that fit in 64 bits, byte sizes that do not.
    save_model("input-bytes-overflow", [helper.make_node("Relu", ["x"], ["y"])],
               [float_io("x", [2**61, 2])], [float_io("y", [2**61, 2])])
    save_model("input-bytes-overflow-square", [helper.make_node("Relu", ["x"], ["y"])],
               [float_io("x", [2**31, 2**31])], [float_io("y", [2**31, 2**31])])
    # A Reshape target whose raw_data (3 bytes) does not hold one INT64.
    shape = TensorProto()
    shape.name = "shape"
    shape.data_type = TensorProto.INT64
    shape.dims.append(1)
    shape.raw_data = b"\x06\x00\x00"
    save_model("reshape-short-raw-data",
               [helper.make_node("Reshape", ["x", "shape"], ["y"])],
               [float_io("x", [2, 3])], [float_io("y", [6])], [shape])
    # The same in a Constant node's value.
    const = helper.make_node("Constant", [], ["shape"], value=shape)
    save_model("constant-short-raw-data",
               [const, helper.make_node("Reshape", ["x", "shape"], ["y"])],
               [float_io("x", [2, 3])], [float_io("y", [6])])
    # Gather indices declaring 2^62 int64 elements.
    data = helper.make_tensor("data", TensorProto.FLOAT, [3, 4], [0.5] * 12)
    save_model("gather-huge-indices",
               [helper.make_node("Gather", ["data", "idx"], ["y"], axis=0)],
               [helper.make_tensor_value_info("idx", TensorProto.INT64, [2**62])],
               [float_io("y", [2**62, 4])], [data])
    # A file of a few hundred bytes asking for 4 TiB.
    size = helper.make_tensor("size", TensorProto.INT64, [2], [2**20, 2**20])
    save_model("constant-of-shape-terabytes",
               [helper.make_node("ConstantOfShape", ["size"], ["big"]),
                helper.make_node("Add", ["big", "x"], ["y"])],
               [float_io("x", [1])], [float_io("y", [2**20, 2**20])], [size])
    # A ConvTranspose weight of rank 2 for a rank-3 input: ONNX's shape
    # inference reads past the weight's dims (SIGSEGV inside libonnx).
    save_model("convtranspose-weight-rank",
               [helper.make_node("ConvTranspose", ["x", "w"], ["y"])],
               [float_io("x", [1, 1, 3]), float_io("w", [1, 3])], [float_io("y", [1, 2, 5])])
    # A DepthToSpace blocksize of 2^32: blocksize^2 wrapped to 0 (SIGFPE).
    save_model("depth-to-space-blocksize",
               [helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2**32)],
               [float_io("x", [1, 4, 2, 2])], [float_io("y", [1, 1, 4, 4])])
    # SAME padding of a Conv with one stride for two spatial axes: the
    # window arithmetic read strides[1] past the end of the vector.
    weight = helper.make_tensor("w", TensorProto.FLOAT, [1, 1, 2, 2], [0.5] * 4)
    save_model("conv-strides-short",
               [helper.make_node("Conv", ["x", "w"], ["y"], strides=[1], auto_pad="SAME_UPPER")],
               [float_io("x", [1, 1, 4, 4])], [float_io("y", [1, 1, 4, 4])], [weight])
    # A MaxPool dilation of 2^62: (kernel - 1) * dilation overflowed int64.
    save_model("pool-dilation-overflow",
               [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2],
                                 dilations=[2**62, 1], auto_pad="SAME_UPPER")],
               [float_io("x", [1, 1, 4, 4])], [float_io("y", [1, 1, 4, 4])])
    save_model("input-terabytes", [helper.make_node("Relu", ["x"], ["y"])],
               [float_io("x", [2**40])], [float_io("y", [2**40])])


def tmir_files():
    with open(os.path.join(ROOT, "tests", "files", "transforms", "net.tmir")) as f:
        net = f.read()
    weight = next(l for l in net.splitlines(True) if l.startswith("    weight = param(float32(4, 4)"))
    variants = {
        # A Linear module that lost its weight: the kernel reads it.
        "linear-no-weight": net.replace(weight, "", 1),
        # A Linear weight of the wrong rank.
        "linear-weight-rank": net.replace(weight, "    weight = param(float32(16,), zeros)\n", 1),
        # Node ids at llvm::DenseMap's reserved keys and below zero.
        "node-id-int64-max": net.replace("outs=[%2 'a'", "outs=[%9223372036854775807 'a'", 1),
        "node-id-int64-max-1": net.replace("outs=[%2 'a'", "outs=[%9223372036854775806 'a'", 1),
        "node-id-negative": net.replace("outs=[%2 'a'", "outs=[%-1 'a'", 1),
        "expr-id-int64-max": net.replace("\t%2:\ta = ", "\t%9223372036854775807:\ta = ", 1),
        # A node type whose byte size overflows, and a tensor of 4 TiB of zeros.
        "node-shape-overflow": net.replace("%1 'x' float32(2, 4)", "%1 'x' float32(2305843009213693952, 2)", 1),
        # Four inline values for a 12 GB shape: counted before allocating.
        "inline-data-short": net.replace("a = buffer(float32(4,), [1.0",
                                         "a = buffer(float32(3000000000,), [1.0", 1),
        "zeros-terabytes": net.replace("a = buffer(float32(4,), [1.0, 2.0, 3.0, 4.0])",
                                       "a = buffer(float32(1099511627776,), zeros)", 1),
        # A next-expr-id counter of 2^61: a counter, not a size (it is
        # accepted; nothing may be sized by it).
        "ids-counter-huge": net.replace("ids 22 22", "ids 22 2305843009213693952", 1),
    }
    for name, text in variants.items():
        assert text != net, name
        with open(os.path.join(OUT, name + ".tmir"), "w") as f:
            f.write(text)


def npy(name, shape_text, data=b""):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % shape_text
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(os.path.join(OUT, name + ".npy"), "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data)


def npy_files():
    # Empty, but the dense strides of these dims overflow int64.
    npy("npy-empty-huge-dims", "(0, 4611686018427387904, 4611686018427387904)")
    # 2^63 float32 elements: a byte size that does not fit in 64 bits.
    npy("npy-bytes-overflow", "(4611686018427387904, 2)", b"\0" * 8)


def main():
    os.makedirs(OUT, exist_ok=True)
    onnx_files()
    tmir_files()
    npy_files()
    print("wrote", len(os.listdir(OUT)), "files to", os.path.relpath(OUT, ROOT))


if __name__ == "__main__":
    sys.exit(main())
