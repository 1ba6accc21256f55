#!/bin/sh
# One command from a fresh Debian 12 machine: install the packages, configure
# and build (release), then run the bundled example: build the small CNN,
# print and save it, and run tm-opt on it (flatten, DOT).
set -eu
cd "$(dirname "$0")/.."
sh scripts/install-deps.sh
[ -f build/build.ninja ] || meson setup build --wrap-mode=nodownload
ninja -C build
./build/examples/tm-example -o build/small_cnn.tmir
./build/tools/tm-opt build/small_cnn.tmir --pipeline flatten,compile --time-passes -o build/small_cnn_flat.tmir
./build/tools/tm-run build/small_cnn_flat.tmir --random-inputs --seed=1 --repeat 10
./build/tools/tm-opt build/small_cnn_flat.tmir -o build/small_cnn.dot
echo "wrote build/small_cnn.tmir, build/small_cnn_flat.tmir (+ .safetensors) and build/small_cnn.dot"
