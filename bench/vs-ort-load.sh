#!/bin/sh
# Model loading: time and peak memory of tm-run next to ONNX Runtime,
# measured in the same run, and tm-opt's conversions next to copying the file.
#
#   sh bench/vs-ort-load.sh BUILD_DIR ORT_DIR MODEL_DIR...
#
# Each MODEL_DIR holds NAME.onnx (a PyTorch export: weights inline) and
# input.npy; ORT_DIR holds node_modules/onnxruntime-node (see vs-ort.sh).
# Per model, ROUNDS rounds (default 3) alternate the engines; each figure
# is the minimum over the rounds. The page cache is warm (the files are
# read once first), as for a model loaded again.
#   load:  `tm-run --load-only` (import and plan, nothing run) and ORT's
#          InferenceSession.create (all graph optimisations, THREADS threads)
#   RSS:   tm-run's peak resident memory over the model's weight bytes, for
#          the model as it is and with its weights as external data (written
#          by `tm-opt --onnx-external-data` into a temporary directory);
#          ORT's peak RSS includes Node's own (~50 MiB)
#   tm-opt: onnx->tmir and tmir->tmir (.tmir + .safetensors) next to `cp` of
#          the .onnx file
set -eu
build=$1 ortdir=$2
shift 2
threads=${THREADS:-2} rounds=${ROUNDS:-3}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
min() { awk -v a="$1" -v b="$2" 'BEGIN { print (b < a ? b : a) }'; }
# Wall seconds of a command (its output discarded).
secs() {
  s=$(date +%s.%N)
  "$@" > /dev/null
  e=$(date +%s.%N)
  awk -v s="$s" -v e="$e" 'BEGIN { print e - s }'
}
printf '%-12s %9s %9s %7s %8s %8s %8s %9s %9s %9s %7s %7s\n' model "load ms" "ORT ms" ratio \
  "weights" "RSS/w" "RSS/w" "cp s" "onnx>tmir" "tmir>tmir" ratio ratio
printf '%-12s %9s %9s %7s %8s %8s %8s %9s %9s %9s %7s %7s\n' "" tm-run "" "" MiB inline \
  external "" "s" "s" "/cp" "/cp"
for d in "$@"; do
  name=$(basename "$d")
  model=$d/$name.onnx
  ext=$tmp/ext/$name.onnx
  mkdir -p "$tmp/ext" "$tmp/tmir"
  "$build/tools/tm-opt" "$model" -o "$ext" --onnx-external-data
  cat "$model" "$ext.data" > /dev/null
  tm=1e9 ort=1e9 rss=1e9 rssx=1e9 cp=1e9 o2t=1e9 t2t=1e9
  weights=0
  r=0
  while [ $r -lt "$rounds" ]; do
    line=$("$build/tools/tm-run" "$model" -i "0=$d/input.npy" --load-only)
    weights=$(echo "$line" | sed -n 's/.*weights \([0-9.]*\) MiB.*/\1/p')
    tm=$(min "$tm" "$(echo "$line" | sed -n 's/^load: \([0-9.]*\) ms.*/\1/p')")
    rss=$(min "$rss" "$(echo "$line" | sed -n 's/.*peak RSS \([0-9.]*\) MiB.*/\1/p')")
    line=$("$build/tools/tm-run" "$ext" -i "0=$d/input.npy" --load-only)
    rssx=$(min "$rssx" "$(echo "$line" | sed -n 's/.*peak RSS \([0-9.]*\) MiB.*/\1/p')")
    o=$(NODE_PATH="$ortdir/node_modules" node "$here/ort_latency.cjs" "$model" "$d/input.npy" \
         --threads "$threads" --repeat 0 | sed -n 's/.*load=\([0-9.]*\) ms.*/\1/p')
    ort=$(min "$ort" "$o")
    cp=$(min "$cp" "$(secs cp "$model" "$tmp/copy.onnx")")
    rm -f "$tmp/copy.onnx"
    o2t=$(min "$o2t" "$(secs "$build/tools/tm-opt" "$model" -o "$tmp/tmir/a.tmir")")
    t2t=$(min "$t2t" "$(secs "$build/tools/tm-opt" "$tmp/tmir/a.tmir" -o "$tmp/tmir/b.tmir")")
    r=$((r + 1))
  done
  awk -v n="$name" -v t="$tm" -v o="$ort" -v w="$weights" -v r="$rss" -v x="$rssx" \
      -v c="$cp" -v a="$o2t" -v b="$t2t" \
    'BEGIN { printf "%-12s %9.1f %9.1f %6.2fx %8.1f %7.2fx %7.2fx %9.3f %9.2f %9.2f %6.1fx %6.1fx\n",
             n, t, o, t / o, w, r / w, x / w, c, a, b, a / c, b / c }'
  rm -rf "$tmp/ext" "$tmp/tmir"
done
