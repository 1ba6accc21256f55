#!/bin/sh
# Installs the Debian packages listed in scripts/packages.txt (needs root or
# sudo). Used by bootstrap.sh and by CI.
set -eu
here=$(dirname "$0")
pkgs=$(grep -v '^#' "$here/packages.txt" | tr '\n' ' ')
if [ "$(id -u)" -eq 0 ]; then SUDO=; else SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
# shellcheck disable=SC2086
$SUDO apt-get install -y --no-install-recommends $pkgs
