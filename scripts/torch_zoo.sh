#!/bin/sh
# Real-model check (optional; needs Debian's python3-torch and
# python3-torchvision): exports torchvision models with random weights to
# ONNX, runs each with tm-run against PyTorch's output, then again after
# `tm-opt -p optimize` (through .tmir), and once more after exporting the
# optimised model to ONNX; prints one line per model.
#
#   sh scripts/torch_zoo.sh [BUILD_DIR] [OUT_DIR] [MODEL[:SIZE]...]
#
# Tolerances: rtol 1e-3, atol 1e-4 (random weights give outputs up to ~1e2;
# the deep models accumulate float32 rounding in a different order than
# PyTorch's kernels).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
out=${2:-/tmp/tmgraph-zoo}
[ $# -gt 2 ] && shift 2 || set --
models=${*:-"resnet18:224 resnet50:96 resnext50_32x4d:96 densenet121:64 squeezenet1_1:96
  shufflenet_v2_x1_0:96 mobilenet_v2:96 mobilenet_v3_small:96 mobilenet_v3_large:96
  mnasnet0_5:96 efficientnet_b0:96 regnet_y_400mf:96 convnext_tiny:96 googlenet:96
  inception_v3:299 swin_t:96 vit_b_16:224 fcn_resnet50:96
  deeplabv3_mobilenet_v3_large:96 lraspp_mobilenet_v3_large:96"}
mkdir -p "$out"
fails=0
for m in $models; do
  name=${m%%:*}; size=${m##*:}; [ "$size" = "$m" ] && size=224
  d=$out/$name
  if ! /usr/bin/python3 "$here/scripts/torch_resnet_onnx.py" "$d" --model "$name" \
       --size "$size" > "$d.export.log" 2>&1; then
    echo "$name: export failed (see $d.export.log)"; fails=$((fails + 1)); continue
  fi
  cmp=$("$build/tools/tm-run" "$d/$name.onnx" -i input="$d/input.npy" \
        --compare output="$d/output.npy" --rtol 1e-3 --atol 1e-4 2>&1 | tail -1)
  opt=$("$build/tools/tm-opt" "$d/$name.onnx" -p optimize -o "$d/opt.tmir" 2>&1 &&
        "$build/tools/tm-run" "$d/opt.tmir" -i 0="$d/input.npy" \
        --compare 0="$d/output.npy" --rtol 1e-3 --atol 1e-4 2>&1 | tail -1)
  rt=$("$build/tools/tm-opt" "$d/opt.tmir" -o "$d/opt.onnx" 2>&1 &&
       "$build/tools/tm-run" "$d/opt.onnx" -i 0="$d/input.npy" \
       --compare 0="$d/output.npy" --rtol 1e-3 --atol 1e-4 2>&1 | tail -1)
  for r in "$cmp" "$opt" "$rt"; do
    case "$r" in *": ok") ;; *) fails=$((fails + 1)) ;; esac
  done
  echo "$name ($size): onnx: ${cmp#compare } | optimized: ${opt#compare } | optimized, exported to ONNX: ${rt#compare }"
done
echo "$fails check(s) failed"
[ $fails -eq 0 ]
