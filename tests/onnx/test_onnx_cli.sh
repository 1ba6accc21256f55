#!/bin/sh
# tm-opt and tm-run with ONNX models: a hierarchical .tmir model exported to
# ONNX computes what the original computes; ONNX names and node names both
# select inputs and outputs; unsupported or corrupt models fail cleanly.
# usage: test_onnx_cli.sh TM_EXAMPLE TM_OPT TM_RUN WORKDIR TESTDATA
set -u
abspath() { (cd "$(dirname "$1")" && echo "$(pwd)/$(basename "$1")"); }
srcdir=$(cd "$(dirname "$0")" && pwd)
example=$(abspath "$1") opt=$(abspath "$2") run=$(abspath "$3") dir=$4 data=$5
rm -rf "$dir" && mkdir -p "$dir/ref" "$dir/out" && cd "$dir" || exit 1
failures=0
check() { # description, command...
  desc=$1; shift
  if "$@"; then echo "ok   - $desc"; else echo "FAIL - $desc"; failures=$((failures + 1)); fi
}
contains() { grep -q -- "$2" "$1"; }

"$example" -o cnn.tmir > /dev/null
check "tm-opt exports a hierarchical model to ONNX" "$opt" cnn.tmir -o cnn.onnx
check "the .onnx exists" test -s cnn.onnx
check "tm-run runs the .tmir" "$run" cnn.tmir --random-inputs --seed=3 -o ref
check "tm-run runs the exported .onnx to the same outputs" \
  "$run" cnn.onnx --random-inputs --seed=3 --compare fc_out=ref/fc_out.npy --rtol 1e-5 --atol 1e-6
check "tm-opt reads the .onnx back to .tmir" "$opt" cnn.onnx -o back.tmir
check "initializers keep their module paths (sanitised)" contains back.tmir 'block1_conv_weight = param'
check "flattened before export (--pipeline flatten) works too" \
  "$opt" cnn.tmir --pipeline flatten,compile -o flat.onnx

if [ -d "$data/node/test_cast_FLOAT_to_FLOAT16" ]; then
  m=$data/node/test_cast_FLOAT_to_FLOAT16/model.onnx
  "$opt" "$m" > cast.txt
  check "the ONNX input 'input' becomes the node input_1" contains cast.txt "input_1"
fi
if [ -d "$data/node/test_if" ]; then
  "$opt" "$data/node/test_if/model.onnx" 2> if.txt; s=$?
  check "an unsupported op exits 2" test $s -eq 2
  check "an unsupported op is named with its node" contains if.txt "unsupported ONNX ops: If (node"
fi
# A dynamic batch (input x: (N, 3)): kept as the symbol N, fixed by -i or
# --input-shape.
dyn=$srcdir/dyn_batch
check "tm-run takes a symbolic batch from the bound input's shape" \
  "$run" "$dyn.onnx" -i x="${dyn}_x.npy" --compare y="${dyn}_y.npy" --rtol 0 --atol 0
check "tm-run --input-shape fixes a symbolic batch" \
  "$run" "$dyn.onnx" --input-shape x=4x3 --random-inputs --seed=1
check "tm-opt keeps a symbolic batch" "$opt" "$dyn.onnx" -o dynsym.tmir
check "the symbolic graph has N" contains dynsym.tmir "float32(N, 3)"
check "the symbolic .tmir runs at the bound batch" \
  "$run" dynsym.tmir -i x="${dyn}_x.npy" --compare y="${dyn}_y.npy" --rtol 0 --atol 0
"$run" dynsym.tmir --random-inputs 2> dyn.txt; s=$?
check "random inputs for a symbolic batch exit 2" test $s -eq 2
check "random inputs for a symbolic batch name the shape" contains dyn.txt "has shape (N, 3)"
check "tm-opt --input-shape writes a static graph" "$opt" "$dyn.onnx" --input-shape x=5x3 -o dyn.tmir
check "the static graph has the given shape" contains dyn.tmir "float32(5, 3)"
"$opt" "$dyn.onnx" --input-shape x=5xa 2> dynbad.txt; s=$?
check "a malformed --input-shape exits 2" test $s -eq 2
head -c 200 cnn.onnx > trunc.onnx
"$opt" trunc.onnx 2> trunc.txt; s=$?
check "a truncated model exits 2" test $s -eq 2
check "a truncated model is reported" contains trunc.txt "truncated or corrupt"

echo "$failures failure(s)"
test "$failures" -eq 0
