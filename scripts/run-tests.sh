#!/bin/sh
# Configures `build` when needed and runs every test suite with meson.
set -eu
cd "$(dirname "$0")/.."
[ -f build/build.ninja ] || meson setup build --wrap-mode=nodownload
meson test -C build --print-errorlogs "$@"
