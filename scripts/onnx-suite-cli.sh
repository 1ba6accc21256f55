#!/bin/sh
# The ONNX backend test suite (Debian's libonnx-testdata) through the tm-run
# command line, with the suite's own files: every input_N.pb bound by
# position, every output_N.pb compared with tm-run's default tolerances.
# Prints one line per test that does not pass (its first error line) and
# the totals.
#
#   sh scripts/onnx-suite-cli.sh [BUILD_DIR] [DATA_DIR]
set -u
build=${1:-build}
data=${2:-/usr/share/libonnx-testdata/data}
pass=0 fail=0
for model in "$data"/node/*/model.onnx "$data"/pytorch-converted/*/model.onnx \
             "$data"/pytorch-operator/*/model.onnx; do
  [ -f "$model" ] || continue
  dir=$(dirname "$model")
  set_dir=$dir/test_data_set_0
  args=""
  i=0
  while [ -f "$set_dir/input_$i.pb" ]; do args="$args -i $i=$set_dir/input_$i.pb"; i=$((i + 1)); done
  o=0
  while [ -f "$set_dir/output_$o.pb" ]; do args="$args --compare=$o=$set_dir/output_$o.pb"; o=$((o + 1)); done
  # shellcheck disable=SC2086
  if out=$(timeout 60 "$build/tools/tm-run" "$model" $args 2>&1); then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "$(basename "$(dirname "$dir")")/$(basename "$dir"): $(echo "$out" | grep -m1 -E 'error|OUTSIDE|MISMATCH' | cut -c1-160)"
  fi
done
echo "$pass passed, $fail failed of $((pass + fail))"
