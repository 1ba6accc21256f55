#!/bin/sh
# One command from a fresh Debian 12 machine: install the packages, configure
# and build (release), then run the bundled example.
set -eu
cd "$(dirname "$0")/.."
sh scripts/install-deps.sh
[ -f build/build.ninja ] || meson setup build --wrap-mode=nodownload
ninja -C build
./build/examples/tm-example
