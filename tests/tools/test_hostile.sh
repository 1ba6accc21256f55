#!/bin/sh
# Hostile inputs (tests/files/hostile/, written by scripts/make-hostile-files.py):
# tm-opt and tm-run must refuse each with a clear error and the input-error
# exit code (2), never a signal, whatever the file claims.
# usage: test_hostile.sh TM_OPT TM_RUN HOSTILE_DIR NET_TMIR WORKDIR [HAVE_ONNX]
set -u
abspath() { (cd "$(dirname "$1")" && echo "$(pwd)/$(basename "$1")"); }
opt=$(abspath "$1") run=$(abspath "$2") files=$(abspath "$3")/ net=$(abspath "$4") dir=$5
have_onnx=${6:-yes}
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
failures=0
fail() { echo "FAIL - $1"; failures=$((failures + 1)); }

# refused DESCRIPTION EXPECTED-TEXT COMMAND...: exit 2, "error" and the
# expected text on stderr.
refused() {
  desc=$1 want=$2; shift 2
  "$@" > out.txt 2> err.txt; s=$?
  if [ $s -ne 2 ]; then
    fail "$desc: exit status $s"; sed 's/^/    /' err.txt | head -5; return
  fi
  if ! grep -q "error" err.txt; then fail "$desc: no error message"; return; fi
  if ! grep -q -- "$want" err.txt; then
    fail "$desc: message lacks '$want'"; sed 's/^/    /' err.txt | head -5; return
  fi
  echo "ok   - $desc"
}

# accepted DESCRIPTION COMMAND...: exit 0 (what a file claims sizes nothing).
accepted() {
  desc=$1; shift
  "$@" > out.txt 2> err.txt; s=$?
  if [ $s -ne 0 ]; then
    fail "$desc: exit status $s"; sed 's/^/    /' err.txt | head -5; return
  fi
  echo "ok   - $desc"
}

# both FILE EXPECTED-TEXT: tm-opt and tm-run --random-inputs refuse FILE.
both() {
  refused "tm-opt $1" "$2" "$opt" "$files$1" -o out.tmir
  refused "tm-run $1" "$2" "$run" "$files$1" --random-inputs --seed=1
}

both linear-no-weight.tmir "linear-no-weight.tmir:6:8: error: module 'fc' (Linear): has no 'weight' parameter"
both linear-weight-rank.tmir "module 'fc' (Linear): 'weight' must have rank 2, got shape (16,)"
both node-id-int64-max.tmir "node-id-int64-max.tmir:.*node id 9223372036854775807 is out of range"
both node-id-int64-max-1.tmir "node id 9223372036854775806 is out of range"
both node-id-negative.tmir "node id -1 is out of range"
both expr-id-int64-max.tmir "expr id 9223372036854775807 is out of range"
both node-shape-overflow.tmir "node-shape-overflow.tmir:.*does not fit in 64 bits"
both inline-data-short.tmir "inline-data-short.tmir:4:7: error: tensor of shape (3000000000,) needs 3000000000 values, got 4"
both zeros-terabytes.tmir "needs 4398046511104 bytes (4.0 TiB), more than"
accepted "tm-opt ids-counter-huge.tmir" "$opt" "${files}ids-counter-huge.tmir" -o out.tmir
accepted "tm-run ids-counter-huge.tmir" "$run" "${files}ids-counter-huge.tmir" --random-inputs --seed=1

refused "tm-run -i with an empty .npy of huge dims" "x" \
  "$run" "$net" -i "x=${files}npy-empty-huge-dims.npy"
refused "tm-run -i with a .npy whose byte size overflows" "does not fit in 64 bits" \
  "$run" "$net" -i "x=${files}npy-bytes-overflow.npy"

if [ "$have_onnx" = yes ]; then
  both input-bytes-overflow.onnx "graph input 'x': float32 tensor of shape (2305843009213693952, 2)"
  both input-bytes-overflow-square.onnx "shape (2147483648, 2147483648) has a byte size that does not fit"
  both reshape-short-raw-data.onnx "initializer 'shape': tensor 'shape' of shape (1,) (INT64) has 3 raw bytes, expected 8"
  both constant-short-raw-data.onnx "attribute 'value': tensor 'shape' of shape (1,) (INT64) has 3 raw bytes"
  both gather-huge-indices.onnx "graph input 'idx': int64 tensor of shape (4611686018427387904,)"
  both constant-of-shape-terabytes.onnx "needs 4398046511104 bytes (4.0 TiB), more than"
  both input-terabytes.onnx "needs 4398046511104 bytes (4.0 TiB), more than"
  both depth-to-space-blocksize.onnx "(DepthToSpace): blocksize 4294967296 does not fit input (1, 4, 2, 2)"
  both conv-strides-short.onnx "(Conv): kernel \\[2, 2\\], strides \\[1\\] and dilations \\[1, 1\\] must each have 2 values"
  both pool-dilation-overflow.onnx "(MaxPool): kernel \\[2, 2\\], strides \\[1, 1\\] and dilations \\[4611686018427387904, 1\\] do not fit"
  both convtranspose-weight-rank.onnx "(ConvTranspose): input (1, 1, 3) and weight (1, 3) do not fit"
fi

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
