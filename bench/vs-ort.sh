#!/bin/sh
# Model latency of tm-run next to ONNX Runtime, measured in the same run.
#
#   sh bench/vs-ort.sh BUILD_DIR ORT_DIR MODEL_DIR...
#
# Each MODEL_DIR holds NAME.onnx and input.npy, as scripts/torch_resnet_onnx.py
# writes them (PyTorch exports of torchvision models). ORT_DIR holds
# node_modules/onnxruntime-node (`npm install --ignore-scripts
# onnxruntime-node@1.20.1`). Both engines run with THREADS threads
# (default 2) and REPEAT timed runs after one warm-up; ROUNDS rounds
# (default 3) alternate them, and each figure is the minimum over the
# rounds of the per-round minimum, so background load hits both alike.
# TM_ARGS adds tm-run options (e.g. TM_ARGS="-p optimize": the graph
# optimisations, as ORT applies its own).
# Prints one line per model: tmgraph ms, ORT ms, their ratio.
set -eu
build=$1 ortdir=$2
shift 2
threads=${THREADS:-2} repeat=${REPEAT:-20} rounds=${ROUNDS:-3} tmargs=${TM_ARGS:-}
here=$(cd "$(dirname "$0")" && pwd)
printf '%-22s %10s %10s %8s\n' model "tmgraph ms" "ORT ms" ratio
for d in "$@"; do
  name=$(basename "$d")
  tm=1e9 ort=1e9
  r=0
  while [ $r -lt "$rounds" ]; do
    # shellcheck disable=SC2086 # TM_ARGS is a list of options
    t=$("$build/tools/tm-run" "$d/$name.onnx" $tmargs -i "0=$d/input.npy" --threads="$threads" \
         --repeat="$repeat" | sed -n 's/^latency.*min \([0-9.]*\) ms.*/\1/p')
    o=$(NODE_PATH="$ortdir/node_modules" node "$here/ort_latency.cjs" "$d/$name.onnx" \
         "$d/input.npy" --threads "$threads" --repeat "$repeat" |
        sed -n 's/.*min=\([0-9.]*\) ms.*/\1/p')
    tm=$(awk -v a="$tm" -v b="$t" 'BEGIN { print (b < a ? b : a) }')
    ort=$(awk -v a="$ort" -v b="$o" 'BEGIN { print (b < a ? b : a) }')
    r=$((r + 1))
  done
  awk -v n="$name" -v t="$tm" -v o="$ort" \
    'BEGIN { printf "%-22s %10.2f %10.2f %7.2fx\n", n, t, o, t / o }'
done
